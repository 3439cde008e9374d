#!/usr/bin/env python
"""MCP tool-call latency and time to ready: ``reme-tui mcp`` over stdio, driven by the SDK's own client.

    python bench/bench_mcp.py [--runs 3] [--ready-runs 5] [--no-cache] [--quick]

On an indexed temp copy of knowledge-garden-zh (keyword + vectors; the embedding cache of ``bench_cli.py`` is
shared, label ``cli-vault``):

- **ready**: a fresh ``reme-tui mcp`` process per sample, from spawning it to the ``initialize`` reply (what a
  desktop client waits for), then ``tools/list``; plus the first ``search`` (keyword) of that process, which also
  waits for the engine to open. Interpreter start-up and the import cost of the SDK are reported for reference.
- **warm latency**: one long-lived server; a hybrid search first (loads the model), one discarded pass, then
  ``--runs`` × the queries below for ``search`` mode=keyword and mode=hybrid (limit 10, hop-2 neighbours
  included), and ``read_note`` of the hit files. Each sample is the client's ``call_tool`` wall time (JSON-RPC
  over the pipes, argument validation, the engine, serialisation); the engine's own ``took_ms`` is reported too,
  and the CPU time per call of the client and of the server (a loaded machine's wall times include waits for a
  core; CPU time does not).
- **start-up breakdown**: the largest imports of a server start (``-X importtime``) and its CPU seconds (a server
  started with stdin at EOF, which stops at once: imports, tool registration, engine open).

Targets: keyword search p50 ≤ 10 ms, hybrid ≤ 20 ms, ready ≤ 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (VAULT_ZH, bench_tmpdir, copy_tree, emit, index_with_cache, loadavg, loaded_embedder,  # noqa: E402
                     log, machine, stats, target)

#: Questions a person would ask of knowledge-garden-zh (Chinese and English).
QUERIES = [
    "读书笔记 认知", "永久笔记", "卡片盒笔记法", "双链笔记 anki", "数字花园", "注意力 流量", "PKM 原则",
    "肌肉恢复 训练频率", "Redis 持久化", "MySQL 索引", "消息队列 rocketMQ", "OKR 目标管理",
    "写作 输出", "学习方法 费曼", "情绪 心理", "时间管理", "Obsidian plugins", "progressive web apps",
    "spaced repetition", "knowledge management", "cloudflare", "productivity tools", "自上而下", "发展的眼光",
]


def server_argv(vault: Path, state: Path) -> list[str]:
    return ["-m", "reme_tui.cli", "mcp", "--vault", str(vault), "--state-dir", str(state)]


def server_env() -> dict[str, str]:
    keep = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "TZ", "PATH", "HOME")
    return {k: os.environ[k] for k in keep if k in os.environ}


async def one_ready(vault: Path, state: Path) -> dict:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=server_argv(vault, state), env=server_env())
    devnull = open(os.devnull, "w")
    t0 = time.perf_counter()
    async with stdio_client(params, errlog=devnull) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            t_ready = time.perf_counter() - t0
            await s.list_tools()
            t_list = time.perf_counter() - t0
            res = await s.call_tool("search", {"query": QUERIES[0], "mode": "keyword", "limit": 10})
            t_first = time.perf_counter() - t0
            assert not res.is_error, res.content[0].text
    devnull.close()
    return {"ready": t_ready, "tools_listed": t_list, "first_search": t_first}


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's live children (the server), from /proc."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in kids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


async def warm(vault: Path, state: Path, runs: int) -> dict:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=server_argv(vault, state), env=server_env())
    out: dict = {}
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            t = time.perf_counter()
            res = await s.call_tool("search", {"query": QUERIES[0], "mode": "hybrid"})
            out["first_hybrid_s"] = round(time.perf_counter() - t, 3)  # model + vector index load
            assert not res.is_error, res.content[0].text
            paths: list[str] = []
            for mode in ("keyword", "hybrid"):
                samples, took, sizes, vec = [], [], [], 0
                cpu0, srv0 = time.process_time(), children_cpu_s()
                for rnd in range(runs + 1):  # round 0 is the discarded warm-up
                    for q in QUERIES:
                        t = time.perf_counter()
                        res = await s.call_tool("search", {"query": q, "mode": mode, "limit": 10})
                        dt = (time.perf_counter() - t) * 1000
                        assert not res.is_error, res.content[0].text
                        if rnd == 0:
                            continue
                        data = json.loads(res.content[0].text)
                        samples.append(dt)
                        took.append(data["took_ms"])
                        sizes.append(len(res.content[0].text.encode()))
                        vec += sum(1 for h in data["hits"] if h["why"].get("vector_rank"))
                        if mode == "keyword" and rnd == 1:
                            paths += [h["path"] for h in data["hits"][:3]]
                calls = (runs + 1) * len(QUERIES)
                # CPU per call, client + server: what a call costs without waiting for a core (a loaded machine's
                # wall times include run-queue waits; ticks are 10 ms, so this is a mean over all calls)
                cpu = {"client_ms": round((time.process_time() - cpu0) * 1000 / calls, 2),
                       "server_ms": round((children_cpu_s() - srv0) * 1000 / calls, 2)}
                limit = 10.0 if mode == "keyword" else 20.0
                st = stats(samples)
                out[f"search_{mode}"] = {"call_ms": st, **target(st["p50"], limit), "cpu_per_call": cpu,
                                         "engine_took_ms": stats(took),
                                         "response_bytes": stats(sizes, 0), "hits_with_vector_rank": vec,
                                         "loadavg": loadavg()}
                log(f"search {mode}: p50 {st['p50']} ms p95 {st['p95']} ms")
            paths = list(dict.fromkeys(paths))
            samples, sizes = [], []
            cpu0, srv0 = time.process_time(), children_cpu_s()
            for rnd in range(runs + 1):
                for p in paths:
                    t = time.perf_counter()
                    res = await s.call_tool("read_note", {"path": p})
                    dt = (time.perf_counter() - t) * 1000
                    assert not res.is_error, res.content[0].text
                    if rnd:
                        samples.append(dt)
                        sizes.append(len(res.content[0].text.encode()))
            calls = (runs + 1) * len(paths)
            cpu = {"client_ms": round((time.process_time() - cpu0) * 1000 / calls, 2),
                   "server_ms": round((children_cpu_s() - srv0) * 1000 / calls, 2)}
            out["read_note"] = {"call_ms": stats(samples), "cpu_per_call": cpu, "notes": len(paths),
                                "response_bytes": stats(sizes, 0)}
            log(f"read_note: p50 {out['read_note']['call_ms']['p50']} ms")
    return out


def main() -> int:
    import anyio

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ready-runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1/8 of the vault")
    ap.add_argument("--no-cache", action="store_true", help="do not reuse/keep the vault's embedding cache")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    out: dict = {"bench": "mcp", "quick": args.quick, "runs": args.runs, "machine": machine(),
                 "queries": len(QUERIES)}
    with bench_tmpdir("mcp", keep=args.keep) as tmp:
        vault = tmp / "vault"
        if args.quick:
            from bench_index import copy_subset

            copy_subset(VAULT_ZH, vault, 8)
        else:
            copy_tree(VAULT_ZH, vault)
        emb, _ = loaded_embedder()
        state, info = index_with_cache(vault, tmp / "state", emb, not args.no_cache, "cli-vault")
        out["index"] = info
        env = server_env()
        base = []
        for _ in range(args.ready_runs):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
            base.append(time.perf_counter() - t)
        out["python_startup_s"] = stats(base)
        imp = []
        for _ in range(args.ready_runs):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import mcp.server.mcpserver"], env=env, check=True)
            imp.append(time.perf_counter() - t)
        out["python_plus_sdk_import_s"] = stats(imp)
        # what a start imports (the SDK dominates) and its CPU time: a server whose stdin is at EOF stops at once
        from bench_cli import import_top

        cpu = []
        for i in range(args.ready_runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            p = subprocess.run([sys.executable, "-X", "importtime", *server_argv(vault, state), "--no-watch"],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            if i == 0:
                out["server_imports"] = import_top(p.stderr)
        out["start_to_eof_cpu_s"] = stats(cpu)
        samples = []
        for i in range(args.ready_runs + 1):  # the first start is discarded (cold page cache)
            got = anyio.run(one_ready, vault, state)
            log(f"ready {i}: {got['ready']:.3f} s")
            if i:
                samples.append(got)
        ready = stats([x["ready"] for x in samples])
        out["ready"] = {"initialize_s": ready, **target(ready["p50"], 1.0),
                        "tools_listed_s": stats([x["tools_listed"] for x in samples]),
                        "first_keyword_search_s": stats([x["first_search"] for x in samples]),
                        "loadavg": loadavg()}
        out.update(anyio.run(warm, vault, state, args.runs))
    emit(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""MCP tool-call latency and time to ready: ``reme-tui mcp`` over stdio, driven by the SDK's own client.

    python bench/bench_mcp.py [--runs 3] [--ready-runs 5] [--no-cache] [--quick] [--no-ready] [--no-embed-part]

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
- **in process** (before the servers): the same searches through the SDK's own ``call_tool`` on an in-process
  server over the same index, after its title vectors are built (this also stores them in the embedding cache):
  what the engine, our wrapper and the SDK's dispatch cost without the transport. ``breakdown_p50_ms`` splits a
  stdio call into engine / wrapper / SDK dispatch / transport and client.
- **settled**: warm figures are taken only once the server's ``reme://status`` lists no background work (the
  first vector query builds the title vectors on a thread; searches meanwhile ran 2-3x slower);
  ``background_before_measuring`` says what ran and how long the wait was.
- **during a vector pass**: on a vault nobody embedded (every 8th note, keyword index only), keyword searches and
  ``read_note`` on a ``--no-embed`` server, then on a default server while its own vector pass runs.
- **start-up breakdown**: the largest imports of a server start (``-X importtime``) and its CPU seconds (a server
  started with stdin at EOF, which stops at once: imports, tool registration, engine open).

- **cold vault** (``--cold``: this part alone, ~1 min): a fresh state dir (never indexed), ``--embedder none``:
  a keyword ``search`` every 0.5 s from the ``initialize`` reply on, while the first index pass runs. Each call's
  wall time and ``partial`` (notes indexed so far); the answer must come at once (from the part indexed), never
  after a wait for the pass.

- **first search** (``--first-search [--other-checkout DIR]``: this part alone, ~3 min): fresh servers on the
  indexed copy (one discarded start); per start the ``initialize`` reply, then at once a default (hybrid)
  ``search``: its wall time from spawn and from ready, and whether it was answered from keywords while the model
  loaded (``degraded``); then the time until a hybrid search is hybrid. With ``--other-checkout`` the starts
  alternate with that checkout's server (``PYTHONPATH``, working directory outside both checkouts).

Targets: keyword search p50 ≤ 10 ms, hybrid ≤ 20 ms, ready ≤ 1 s; cold vault: every call ≤ 2.5 s (the first
waits for the engine to open, ~1 s, then ≤ 1 s for a small vault's first pass).
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


async def server_status(s) -> dict:
    """The server's ``reme://status`` resource (what it is doing: catch-up, title vectors, vector pass)."""
    res = await s.read_resource("reme://status")
    return json.loads(res.contents[0].text)


async def settle(s, timeout: float = 600.0) -> dict:
    """Wait until the server reports no background work (polled every 0.2 s): what ran, and for how long."""
    import anyio

    t = time.perf_counter()
    seen: list[str] = []
    while True:
        st = await server_status(s)
        seen += [w for w in st["background"] if w not in seen]
        if not st["background"]:
            return {"waited_s": round(time.perf_counter() - t, 3), "was_running": seen, "status": st}
        if time.perf_counter() - t > timeout:
            raise SystemExit(f"server still busy after {timeout} s: {st}")
        await anyio.sleep(0.2)


async def warm(vault: Path, state: Path, runs: int) -> dict:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=server_argv(vault, state), env=server_env())
    out: dict = {}
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            t = t_init = time.perf_counter()
            res = await s.call_tool("search", {"query": QUERIES[0], "mode": "hybrid"})
            # right after the handshake: waits for the engine to open and for the query model (the server loads
            # it in the background after its catch-up pass)
            out["first_hybrid_s"] = round(time.perf_counter() - t, 3)
            assert not res.is_error, res.content[0].text
            # the first vector query starts the title-vector build (from the embedding cache when it has them):
            # searches during it wait for cores and the GIL, so warm figures are taken once nothing runs
            out["background_before_measuring"] = await settle(s)
            out["background_before_measuring"]["settled_after_initialize_s"] = round(time.perf_counter() - t_init, 3)
            log(f"settled after {out['background_before_measuring']['waited_s']} s "
                f"({', '.join(out['background_before_measuring']['was_running']) or 'nothing running'})")
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
            st = await server_status(s)
            out["background_after_measuring"] = st["background"]  # [] : nothing started meanwhile
    return out


async def calls_while(s, until_idle: bool, seconds: float, paths: list[str]) -> dict:
    """Keyword searches and read_note calls, alternating, for ``seconds`` (or, with ``until_idle``, until the
    server reports no vector pass): call wall times and the server's CPU per call."""
    samples: dict[str, list[float]] = {"search_keyword": [], "read_note": []}
    t_end = time.perf_counter() + seconds
    srv0, wall0, i = children_cpu_s(), time.perf_counter(), 0
    while time.perf_counter() < t_end:
        if until_idle and i % 8 == 0 and "vector pass" not in (await server_status(s))["background"]:
            break
        q = QUERIES[i % len(QUERIES)]
        for key, tool, args in (("search_keyword", "search", {"query": q, "mode": "keyword", "limit": 10}),
                                ("read_note", "read_note", {"path": paths[i % len(paths)]})):
            t = time.perf_counter()
            res = await s.call_tool(tool, args)
            samples[key].append((time.perf_counter() - t) * 1000)
            assert not res.is_error, res.content[0].text
        i += 1
    n = sum(len(v) for v in samples.values())
    return {**{k: stats(v) for k, v in samples.items()}, "seconds": round(time.perf_counter() - wall0, 2),
            "server_cpu_ms_per_call": round((children_cpu_s() - srv0) * 1000 / max(n, 1), 2), "loadavg": loadavg()}


async def during_embedding(vault: Path, state: Path, seconds: float) -> dict:
    """Tool calls on a vault nobody embedded: first on a ``--no-embed`` server (the baseline), then on a default
    server while its vector pass runs (the offline model, encoding in its niced child process)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    out: dict = {}
    for label, extra in (("no_pass", ["--no-embed"]), ("during_pass", [])):
        params = StdioServerParameters(command=sys.executable, args=[*server_argv(vault, state), *extra],
                                       env=server_env())
        async with stdio_client(params, errlog=open(os.devnull, "w")) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                res = await s.call_tool("search", {"query": QUERIES[0], "mode": "keyword", "limit": 30})
                paths = list(dict.fromkeys(h["path"] for h in json.loads(res.content[0].text)["hits"]))[:10]
                if label == "during_pass":
                    t = time.perf_counter()
                    while "vector pass" not in (st := await server_status(s))["background"]:
                        if time.perf_counter() - t > 30:
                            raise SystemExit(f"no vector pass started: {st}")
                        await anyio_sleep(0.05)
                    out["pending_at_start"] = st["vectors_pending"]
                got = await calls_while(s, label == "during_pass", seconds, paths)
                if label == "during_pass":
                    st = await server_status(s)
                    got["pass_still_running"] = "vector pass" in st["background"]
                    got["embedded_meanwhile"] = out["pending_at_start"] - st["vectors_pending"]
                out[label] = got
                log(f"{label}: keyword p50 {got['search_keyword'].get('p50')} ms, read_note p50 "
                    f"{got['read_note'].get('p50')} ms, server CPU {got['server_cpu_ms_per_call']} ms/call")
    return out


async def anyio_sleep(t: float) -> None:
    import anyio

    await anyio.sleep(t)


def emb_rows(state: Path) -> int:
    import sqlite3

    c = sqlite3.connect(state / "embeddings.sqlite")
    try:
        return c.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    finally:
        c.close()


def in_process(vault: Path, state: Path, emb, runs: int) -> dict:
    """The server's side of a call without the transport: the SDK's own ``call_tool`` (argument validation, our
    wrapper, result conversion) on an in-process server over the same index, after its title vectors are built
    (which also puts them into the state's embedding cache, so the stdio server reads them from there).

    Per mode: the engine's ``took_ms``, the wrapper (job, reshaping, JSON text) and the SDK's dispatch, p50 ms."""
    import anyio

    from _common import settings_for
    from reme_tui.mcp_server import VaultServer, build_server

    vs = VaultServer(settings_for(vault, state), watch=False, embedder=emb)
    server = build_server(vs)
    vs.start()
    out: dict = {}
    try:
        eng = vs.engine
        vs._indexed.wait(600)  # the first index pass, if the state is fresh
        rows0 = emb_rows(state)
        t = time.perf_counter()
        eng.search(QUERIES[0], mode="hybrid", neighbors=False)  # opens the vector index
        built = eng.searcher.wait_titles(600)
        out["title_vectors"] = {"built": built, "seconds": round(time.perf_counter() - t, 3),
                                "embedded_now": emb_rows(state) - rows0}
        vs._thread.join()  # the catch-up pass
        spec = {s.name: s for s in __import__("reme_tui.mcp_tools", fromlist=["tool_specs"]).tool_specs()}["search"]

        async def measure(mode: str) -> dict:
            took, job, wrap, sdk_ms = [], [], [], []
            for rnd in range(runs + 1):
                for q in QUERIES:
                    args = {"query": q, "mode": mode, "limit": 10}
                    t0 = time.perf_counter()
                    res = vs.job("search", dict(args), eng)
                    t1 = time.perf_counter()
                    data = spec.run(vs, dict(args))
                    json.dumps(data, ensure_ascii=False, default=str)
                    t2 = time.perf_counter()
                    r = await server.call_tool("search", dict(args))
                    t3 = time.perf_counter()
                    assert not r.is_error
                    if rnd:
                        took.append(data["took_ms"])
                        job.append((t1 - t0) * 1000 - res["took_ms"])
                        wrap.append((t2 - t1) * 1000 - data["took_ms"])
                        sdk_ms.append((t3 - t2) * 1000 - json.loads(r.content[0].text)["took_ms"])
            return {"engine_took_ms": stats(took)["p50"], "job_beyond_engine_ms": stats(job)["p50"],
                    "wrapper_beyond_engine_ms": stats(wrap)["p50"],
                    "sdk_call_tool_beyond_engine_ms": stats(sdk_ms)["p50"]}

        for mode in ("keyword", "hybrid"):
            out[mode] = anyio.run(measure, mode)
            log(f"in-process {mode}: {out[mode]}")
    finally:
        vs.close()
    return out


def main() -> int:
    import anyio

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ready-runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1/8 of the vault")
    ap.add_argument("--no-cache", action="store_true", help="do not reuse/keep the vault's embedding cache")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-ready", action="store_true", help="skip the start-up part (warm tool calls only)")
    ap.add_argument("--no-embed-part", action="store_true", help="skip the calls during a vector pass")
    ap.add_argument("--embed-seconds", type=float, default=20.0,
                    help="seconds of calls on each server of the vector-pass part (default 20)")
    ap.add_argument("--cold", action="store_true", help="only the cold-vault part (a never-indexed state dir)")
    ap.add_argument("--first-search", action="store_true", help="only the first-search part")
    ap.add_argument("--other-checkout", type=Path, help="with --first-search: alternate with this checkout")
    args = ap.parse_args()
    out: dict = {"bench": "mcp", "quick": args.quick, "runs": args.runs, "machine": machine(),
                 "queries": len(QUERIES)}
    if args.cold:
        with bench_tmpdir("mcp-cold", keep=args.keep) as tmp:
            vault = tmp / "vault"
            copy_tree(VAULT_ZH, vault)
            out["cold_vault"] = anyio.run(cold, vault, tmp / "state")
        emit(out)
        return 0
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
        if args.first_search:
            out["first_search"] = first_search(vault, state, args.ready_runs, args.other_checkout)
            emit(out)
            return 0
        out["in_process"] = in_process(vault, state, emb, args.runs)
        if out["in_process"]["title_vectors"]["embedded_now"] and not args.no_cache:
            import hashlib

            from _common import _save_cache, cache_root, tree_digest

            # the cache index_with_cache used (same key): it predates title vectors, keep them for later runs
            key = hashlib.sha256(f"{tree_digest(vault)[0]}|{emb.space}".encode()).hexdigest()[:16]
            cdir = cache_root() / f"cli-vault-{key}"
            if (cdir / "meta.json").is_file():
                _save_cache(state, cdir, json.loads((cdir / "meta.json").read_text()))
                log(f"title vectors added to the embedding cache {cdir} (later runs start warm)")
        if not args.no_ready:
            out.update(startup(vault, state, args.ready_runs))
        out.update(anyio.run(warm, vault, state, args.runs))
        out["breakdown_p50_ms"] = breakdown(out)
        if not args.no_embed_part:
            # a vault nobody embedded (every 8th note, keyword index only): does the server's own vector pass
            # slow the tool calls?
            fresh = tmp / "fresh"
            from bench_index import copy_subset

            from _common import open_engine

            copy_subset(VAULT_ZH, fresh, 8)
            eng = open_engine(fresh, tmp / "fresh-state")
            eng.index(vectors=False)
            eng.close()
            out["during_vector_pass"] = anyio.run(during_embedding, fresh, tmp / "fresh-state", args.embed_seconds)
    emit(out)
    return 0


async def cold(vault: Path, state: Path, interval: float = 0.5, limit_s: float = 300.0) -> dict:
    """Keyword searches on a server whose state dir is new, from its ``initialize`` reply until an answer is
    whole (no ``partial``): per call the wall ms, the seconds since ready and the notes indexed then."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, env=server_env(), cwd=str(Path(__file__).parents[1]),
                                   args=[*server_argv(vault, state), "--embedder", "none", "--no-embed"])
    calls = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t_cpu = time.process_time()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < limit_s:
                t = time.perf_counter()
                res = await s.call_tool("search", {"query": QUERIES[len(calls) % len(QUERIES)], "mode": "keyword"})
                ms = (time.perf_counter() - t) * 1000
                body = json.loads(res.content[0].text) if not res.is_error else {}
                part = body.get("partial")
                calls.append({"at_s": round(t - t0, 2), "call_ms": round(ms, 1), "error": res.is_error,
                              "hits": len(body.get("hits", [])),
                              "files_indexed": part["files_indexed"] if part else None,
                              "files_total": part["files_total"] if part else None})
                if not part and not res.is_error:
                    break
                import anyio

                await anyio.sleep(interval)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    ms = [c["call_ms"] for c in calls]
    return {"calls": len(calls), "first_call_ms": ms[0], "max_call_ms": max(ms), "call_ms": stats(ms),
            "errors": sum(c["error"] for c in calls), "partial_answers": sum(c["files_indexed"] is not None
                                                                          for c in calls),
            "whole_after_s": calls[-1]["at_s"], "samples": calls[:3] + calls[-2:],
            "server_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "client_cpu_s": round(time.process_time() - t_cpu, 2), "loadavg": loadavg(),
            **target(max(ms), 2500.0)}


def breakdown(out: dict) -> dict:
    """Where a warm search call's time goes (p50s, ms): the stdio server's engine ``took_ms``, our wrapper and
    the SDK's dispatch (measured in process), and the rest: pipes, JSON-RPC framing, the client."""
    res = {}
    for mode in ("keyword", "hybrid"):
        e2e, ip = out[f"search_{mode}"], out["in_process"][mode]
        engine = e2e["engine_took_ms"]["p50"]
        wrapper = ip["wrapper_beyond_engine_ms"]
        sdk = max(0.0, ip["sdk_call_tool_beyond_engine_ms"] - wrapper)
        res[mode] = {"call": e2e["call_ms"]["p50"], "engine": engine, "wrapper": wrapper, "sdk_dispatch": round(sdk, 3),
                     "transport_and_client": round(e2e["call_ms"]["p50"] - engine - wrapper - sdk, 3)}
    return res


async def one_first_search(vault: Path, state: Path, pythonpath: str | None) -> dict:
    """One fresh server: spawn → ``initialize``; a default (hybrid) search at once; then hybrid searches every
    0.1 s until one is not answered from keywords (the model is in)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    import tempfile

    env = server_env()
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    params = StdioServerParameters(command=sys.executable, args=server_argv(vault, state), env=env,
                                   cwd=tempfile.gettempdir())
    devnull = open(os.devnull, "w")
    t0 = time.perf_counter()
    out: dict = {}
    async with stdio_client(params, errlog=devnull) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            out["ready_s"] = time.perf_counter() - t0
            t = time.perf_counter()
            res = await s.call_tool("search", {"query": QUERIES[0], "limit": 10})
            assert not res.is_error, res.content[0].text
            data = json.loads(res.content[0].text)
            out["first_search_s"] = time.perf_counter() - t0
            out["first_search_after_ready_s"] = time.perf_counter() - t
            out["first_from_keywords"] = "keyword results for now" in (data.get("degraded") or "")
            out["first_has_vector_ranks"] = any("vector_rank" in h["why"] for h in data["hits"])
            hybrid_at = out["first_search_s"] if not out["first_from_keywords"] else None
            while hybrid_at is None and time.perf_counter() - t0 < 120:
                await anyio_sleep(0.1)
                res = await s.call_tool("search", {"query": QUERIES[1], "limit": 10})
                data = json.loads(res.content[0].text)
                if "keyword results for now" not in (data.get("degraded") or ""):
                    hybrid_at = time.perf_counter() - t0
            out["first_hybrid_answer_s"] = hybrid_at
    devnull.close()
    return out


def first_search(vault: Path, state: Path, runs: int, other: Path | None) -> dict:
    import anyio

    from _common import REPO

    from reme_engine.index.embedder import OfflineEmbedder
    from reme_engine.index.usem3_cache import default_cache_root

    # this checkout's model cache, as a server that lived long enough leaves it (the SDK's client kills a server
    # 2 s after closing its stdin: a first start's background write of the cache would not finish)
    warm = OfflineEmbedder(cache_dir=default_cache_root())
    warm.load()
    warm.wait_cache_saved(600)
    sides = {"this": str(REPO)}
    if other is not None:
        sides["other"] = str(other.resolve())
    got: dict = {side: [] for side in sides}
    loads = []
    for i in range(runs + 1):  # the first round is discarded (cold page cache; this side writes its model cache)
        for side, root in sides.items():
            r = anyio.run(one_first_search, vault, state, root)
            log(f"first search {side} {i}: ready {r['ready_s']:.2f} s, first {r['first_search_s']:.2f} s")
            if i:
                got[side].append(r)
                loads.append(loadavg()[0])
    out: dict = {"runs": runs, "loadavg_during": stats(loads)}
    for side, rows in got.items():
        out[side] = {k: stats([x[k] for x in rows if x[k] is not None])
                     for k in ("ready_s", "first_search_s", "first_search_after_ready_s", "first_hybrid_answer_s")}
        out[side]["first_from_keywords"] = sum(x["first_from_keywords"] for x in rows)
        out[side]["first_has_vector_ranks"] = sum(x["first_has_vector_ranks"] for x in rows)
    if "other" in got:
        out["first_search_ratio_this_over_other"] = stats(
            [a["first_search_s"] / b["first_search_s"] for a, b in zip(got["this"], got["other"])])
    return out


def startup(vault: Path, state: Path, ready_runs: int) -> dict:
    """Time to ready (spawn → ``initialize`` reply), the SDK's import alone, and what a start imports."""
    import anyio

    out: dict = {}
    env = server_env()

    def wall(code: str) -> dict:
        runs = []
        for _ in range(ready_runs):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            runs.append(time.perf_counter() - t)
        return stats(runs)

    out["python_startup_s"] = wall("pass")
    out["python_plus_sdk_import_s"] = wall("import mcp.server.mcpserver")
    # what a start imports (the SDK dominates) and its CPU time: a server whose stdin is at EOF stops at once
    from bench_cli import import_top

    cpu = []
    for i in range(ready_runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run([sys.executable, "-X", "importtime", *server_argv(vault, state), "--no-watch"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        if i == 0:
            out["server_imports"] = import_top(p.stderr)
    out["start_to_eof_cpu_s"] = stats(cpu)
    samples = []
    for i in range(ready_runs + 1):  # the first start is discarded (cold page cache)
        got = anyio.run(one_ready, vault, state)
        log(f"ready {i}: {got['ready']:.3f} s")
        if i:
            samples.append(got)
    ready = stats([x["ready"] for x in samples])
    out["ready"] = {"initialize_s": ready, **target(ready["p50"], 1.0),
                    "tools_listed_s": stats([x["tools_listed"] for x in samples]),
                    "first_keyword_search_s": stats([x["first_search"] for x in samples]),
                    "loadavg": loadavg()}
    return out


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""CPU time of the cold keyword + graph pass on both real vaults, side by side with older code and with ReMe.

    python bench/bench_index_cpu.py [--runs 3] [--baseline REV] [--reme PYTHON] [--vaults kg,doocs]

Each run is a fresh process on a fresh state dir over a temp copy of the vault (knowledge-garden-zh and the 33 MB
doocs corpus), timing ``engine.indexer.sync()`` (sequential parse, the API default) as user+sys CPU of that
process (``sync_cpu_s``; ``disk_mb``: the index database afterwards, checkpointed) and, in a second fresh process,
parsing alone (``Indexer._parse_safe`` of every file: read, frontmatter, chunks, links, tokens; ``parse_cpu_s``),
which leaves out the store's writes. ``--steps app``: the same sync with the parse pool allowed, as the ``reme-tui``
entry points run it (``indexer.PARALLEL_ENABLED``): CPU of the process and its pool workers (waited-for children).
``--steps phases``: the sync with each stage's CPU seconds (``stages_cpu_s``, outermost call of each; stages nest:
``chunk.markdown_it`` is inside ``chunk``, ``apply.deflate`` inside ``apply``). ``--steps patho``: issue 12's generated notes (5 MB single line, 200,000 links, 5 MB unclosed fence, a 20 MB file over
the size limit), each parsed alone (``cpu_s_per_mb``: linear time means a flat figure) and then synced together.

``--baseline REV``: the same runs on the whole engine (``reme_engine/``) of git revision ``REV`` (or of a folder ``REV``
holding a ``reme_engine/``: e.g. the current engine with some files as they were), interleaved run
by run with the current code (who goes first alternates), so both see the same load; ratios are of medians.
``--reme PYTHON``: in the same rotation, ReMe's cold index of the vault (``bench/reme_cold_index.py`` run by
``PYTHON``, a venv with ``reme-ai==0.4.1.8``: ``python3 -m venv <venv> && <venv>/bin/pip install
reme-ai==0.4.1.8 agentscope``), CPU of its ``reindex`` job; ``reme_over_current`` is ReMe's median CPU over ours
(our throughput by CPU in multiples of ReMe's). Prints one JSON object (medians, samples, load averages, CPU).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    CORPUS,
    REPO,
    VAULT_ZH,
    bench_tmpdir,
    copy_tree,
    loadavg,
    log,
    machine,
)

HERE = Path(__file__).resolve()
VAULTS = {"kg": VAULT_ZH, "doocs": CORPUS}


def worker(args) -> None:
    """One measured step in this fresh process (``--src`` first on sys.path: the engine under test)."""
    sys.path.insert(0, args.src)
    import reme_engine

    assert reme_engine.__file__.startswith(args.src), reme_engine.__file__
    from _common import cpu_seconds, open_engine

    from reme_engine.index import indexer as ix_mod

    stages = _time_stages() if args.what == "phases" else None
    ix_mod.PARALLEL_ENABLED = args.what == "app"  # what the reme-tui entry points switch on
    eng = open_engine(Path(args.vault), Path(args.state), embed=False)
    ix = eng.indexer
    if args.what in ("sync", "app", "phases"):
        c0 = cpu_seconds()
        rep = ix.sync()
        out = {"cpu_s": round(cpu_seconds() - c0, 3), "chunks": rep.chunks_total, "links": rep.links_total}
        if stages is not None:
            out["stages_cpu_s"] = {k: round(v, 3) for k, v in sorted(stages.items(), key=lambda kv: -kv[1])}
            out["stages_share"] = {k: round(v / out["cpu_s"], 3) for k, v in out["stages_cpu_s"].items()}
        eng.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        out["disk_mb"] = round(eng.store.db_path.stat().st_size / 1e6, 2)
    elif args.what == "patho":
        # each pathological note parsed alone (CPU seconds per MB), then a sync of all of them
        entries, _ = ix.scan()
        out = {"notes": {}}
        for rel in sorted(entries):
            c0 = time.process_time()
            pf, reason = ix._parse_safe(entries[rel])
            cpu = time.process_time() - c0
            mb = entries[rel].size / 1e6
            out["notes"][rel] = {"mb": round(mb, 2), "parse_cpu_s": round(cpu, 3), "cpu_s_per_mb": round(cpu / mb, 3),
                                 "chunks": len(pf.chunks) if pf else 0, "links": len(pf.links) if pf else 0,
                                 **({"skipped": reason} if pf is None else {})}
        c0 = cpu_seconds()
        rep = ix.sync()
        out["cpu_s"] = round(cpu_seconds() - c0, 3)
        out["sync_chunks"] = rep.chunks_total
    else:
        entries, _ = ix.scan()
        c0 = time.process_time()
        ok = sum(ix._parse_safe(entries[r])[0] is not None for r in sorted(entries))
        out = {"cpu_s": round(time.process_time() - c0, 3), "files": ok}
    eng.close()
    out["load"] = loadavg()[0]
    print(json.dumps(out))


def _time_stages() -> dict:
    """Wrap the sync's stages (outermost call only) to add their CPU seconds into the returned dict: read,
    frontmatter, opaque-data rule, chunking (and markdown-it's parse within it), links, description, tokenising,
    the store's writes per file (``apply``) and FTS5's flush, link resolution, compaction, the scan."""
    import functools

    import markdown_it.main as md_main

    from reme_engine.index import indexer as ix, links_step, parse as ps, store, tokenizer
    from reme_engine.markdown import chunker, frontmatter, links

    acc: dict = {}
    active: set = set()

    def wrap(owner, name: str, label: str) -> None:
        f = getattr(owner, name)

        @functools.wraps(f)
        def timed(*a, **k):
            if label in active:
                return f(*a, **k)
            active.add(label)
            t = time.process_time()
            try:
                return f(*a, **k)
            finally:
                acc[label] = acc.get(label, 0.0) + time.process_time() - t
                active.discard(label)

        setattr(owner, name, timed)

    for owner, name, label in [(ps, "read_text", "read"), (frontmatter, "parse_frontmatter", "frontmatter"),
                               (ps, "searchable_body", "opaque"), (chunker, "chunk_markdown", "chunk"),
                               (md_main.MarkdownIt, "parse", "chunk.markdown_it"), (links, "parse_links", "links"),
                               (ps, "_first_line_summary", "description"),
                               (tokenizer.MixedTokenizer, "tokenize", "tokenize"), (ix.Indexer, "_apply", "apply"),
                               (store, "pack_text", "apply.deflate"), (store, "flush_postings", "fts5_flush"),
                               (links_step.LinksStep, "resolve_links", "resolve_links"),
                               (store.Store, "compact", "compact"), (ix.Indexer, "scan", "scan")]:
        wrap(owner, name, label)
    return acc


def baseline_tree(rev: str, dst: Path) -> Path:
    """The engine (``reme_engine/``) as of git revision ``rev``, exported into ``dst``."""
    dst.mkdir(parents=True, exist_ok=True)
    arch = subprocess.run(["git", "-C", str(REPO), "archive", rev, "reme_engine"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dst)], input=arch.stdout, check=True)
    return dst


def run(src, vault: Path, state: Path, what: str) -> dict:
    if isinstance(src, tuple):  # ("reme", its python)
        # ReMe writes a logs/ folder into its working directory: run it beside its state (a temp dir), not in
        # the checkout (its script recreates the state dir itself)
        p = subprocess.run([src[1], str(HERE.parent / "reme_cold_index.py"), str(vault), str(state)],
                           capture_output=True, text=True, check=False, cwd=str(state.parent))
        if p.returncode != 0:
            raise RuntimeError(p.stderr[-3000:])
        shutil.rmtree(state, ignore_errors=True)
        out = json.loads(p.stdout.strip().splitlines()[-1])
        out["load"] = loadavg()[0]
        return out
    cmd = [sys.executable, str(HERE), "--worker", "--src", str(src), "--vault", str(vault), "--state", str(state),
           "--what", what]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=str(src), check=False)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-3000:])
    shutil.rmtree(state, ignore_errors=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline", help="git revision (or folder with a reme_engine/) measured side by side")
    ap.add_argument("--reme", help="python of a venv with reme-ai 0.4.1.8: its cold index in the rotation")
    ap.add_argument("--vaults", default="kg,doocs")
    ap.add_argument("--steps", default="sync,parse", help="comma-separated: sync, app, parse, patho, phases")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    ap.add_argument("--vault", help=argparse.SUPPRESS)
    ap.add_argument("--state", help=argparse.SUPPRESS)
    ap.add_argument("--what", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return 0
    out: dict = {"bench": "index_cpu", "machine": machine(), "runs": args.runs, "baseline": args.baseline,
                 "git_head": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                            capture_output=True, text=True, check=False).stdout.strip()}
    with bench_tmpdir("index_cpu") as tmp:
        # the current engine copied once: edits made in the checkout while the runs go on do not leak in
        shutil.copytree(REPO / "reme_engine", tmp / "current" / "reme_engine",
                        ignore=shutil.ignore_patterns("__pycache__"))
        srcs = {"current": tmp / "current"}
        if args.baseline and (Path(args.baseline) / "reme_engine").is_dir():  # an exported tree (files reverted)
            srcs["baseline"] = Path(args.baseline).resolve()
        elif args.baseline:
            srcs["baseline"] = baseline_tree(args.baseline, tmp / "baseline")
        res: dict = {}
        if "patho" in args.steps.split(","):
            from bench_firstrun import make_pathological  # the generated notes of issue 12

            patho = tmp / "vault-patho"
            make_pathological(patho / "zz-pathological")
            for label, src in srcs.items():
                log(f"pathological notes: {label}")
                out.setdefault("pathological", {})[label] = run(src, patho, Path(tempfile.mkdtemp(dir=tmp)), "patho")
        steps = [w for w in args.steps.split(",") if w != "patho"]
        for name in args.vaults.split(",") if steps else []:
            vault = copy_tree(VAULTS[name], tmp / f"vault-{name}")
            for i in range(args.runs):
                for what in steps:
                    labels = list(srcs) + (["reme"] if args.reme and what == "sync" else [])
                    order = labels if i % 2 == 0 else list(reversed(labels))  # alternate who goes first
                    for label in order:
                        if label == "reme":
                            log(f"{name} {what} run {i + 1}/{args.runs}: reme")
                            r = run(("reme", args.reme), vault, Path(tempfile.mkdtemp(dir=tmp)), what)
                            res.setdefault(name, {}).setdefault(what, {}).setdefault(label, []).append(r)
                            continue
                        log(f"{name} {what} run {i + 1}/{args.runs}: {label}")
                        r = run(srcs[label], vault, Path(tempfile.mkdtemp(dir=tmp)), what)
                        res.setdefault(name, {}).setdefault(what, {}).setdefault(label, []).append(r)
        summary: dict = {}
        for name, by_what in res.items():
            for what, by_label in by_what.items():
                s = {label: {"median_cpu_s": statistics.median(r["cpu_s"] for r in rs),
                             "samples_cpu_s": [r["cpu_s"] for r in rs], "load": [r["load"] for r in rs],
                             **({"disk_mb": rs[-1]["disk_mb"]} if "disk_mb" in rs[-1] else {}),
                             **({"stages_share": rs[-1]["stages_share"]} if "stages_share" in rs[-1] else {})}
                     for label, rs in by_label.items()}
                for other in ("baseline", "reme"):
                    if other in s:
                        s[f"{other}_over_current"] = round(s[other]["median_cpu_s"] / s["current"]["median_cpu_s"], 2)
                summary[f"{name}.{what}"] = s
        out["results"] = summary
        out["loadavg_end"] = loadavg()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

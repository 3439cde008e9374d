#!/usr/bin/env python
"""What reading deflated chunk text costs a search (issue 12, schema 6), on a temp copy of a real vault.

    python bench/bench_chunk_text.py [--vault kg|doocs] [--rounds 300]

Indexes the vault (keyword + graph pass, fresh state dir), then, interleaved round by round on the same
connection: the shown hits' row query of ``HybridSearcher._rows`` for 10 random chunk ids with ``c.text`` and the
same query without it (the difference is the inflate of 10 texts), and ``store.chunk_text`` alone per stored body.
Prints one JSON object (µs medians, sizes, load, CPU model).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CORPUS, VAULT_ZH, bench_tmpdir, copy_tree, loadavg, machine, open_engine  # noqa: E402

ROWS = ("SELECT c.id, f.path, f.name, f.aliases, {text}c.start_line, c.end_line, c.headings, f.description"
        " FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id IN ({marks})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vault", default="kg", choices=("kg", "doocs"))
    ap.add_argument("--rounds", type=int, default=300)
    args = ap.parse_args()
    from reme_engine.index.store import chunk_text

    out: dict = {"bench": "chunk_text", "machine": machine(), "vault": args.vault, "load_start": loadavg()}
    with bench_tmpdir("chunk_text") as tmp:
        vault = copy_tree({"kg": VAULT_ZH, "doocs": CORPUS}[args.vault], tmp / "vault")
        eng = open_engine(vault, tmp / "state", embed=False)
        eng.indexer.sync()
        c = eng.store.conn
        ids = [r[0] for r in c.execute("SELECT id FROM chunks")]
        bodies = [b for (b,) in c.execute("SELECT body FROM chunks")]
        packed = [b for b in bodies if isinstance(b, bytes)]
        out["chunks"], out["deflated"] = len(bodies), len(packed)
        out["text_mb"] = round(sum(len(t.encode()) for (t,) in c.execute("SELECT text FROM chunks")) / 1e6, 2)
        out["body_mb"] = round(sum(len(b) if isinstance(b, bytes) else len(b.encode()) for b in bodies) / 1e6, 2)
        rng = random.Random(7)
        marks = ",".join("?" * 10)
        with_text, without = ROWS.format(text="c.text, ", marks=marks), ROWS.format(text="", marks=marks)
        t_with: list[float] = []
        t_without: list[float] = []
        for i in range(args.rounds):
            pick = rng.sample(ids, 10)
            pair = ((with_text, t_with), (without, t_without))
            for sql, acc in pair if i % 2 else pair[::-1]:
                t = time.perf_counter()
                c.execute(sql, pick).fetchall()
                acc.append(time.perf_counter() - t)
        per: list[float] = []
        for b in rng.sample(packed, min(len(packed), 3000)):
            t = time.perf_counter()
            chunk_text(b)
            per.append(time.perf_counter() - t)
        eng.close()
    out["rows10_with_text_us_p50"] = round(statistics.median(t_with) * 1e6, 1)
    out["rows10_without_text_us_p50"] = round(statistics.median(t_without) * 1e6, 1)
    out["chunk_text_us_p50"] = round(statistics.median(per) * 1e6, 2)
    out["load_end"] = loadavg()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

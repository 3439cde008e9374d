"""Cost of one checked write (``atomic_write`` with the read's hash: temp, fsync, rename exchange, displaced check)
and one checked delete (``remove_if_unchanged``), for this checkout and, side by side, another one (``--other``,
e.g. a worktree of an older commit). Rounds alternate between the two checkouts so a change of machine load hits
both; each round is a fresh subprocess timing ``--writes`` writes of a ``--size``-byte note in a temp dir.

Prints one JSON object: per checkout, the median (and min/max over rounds) of the per-write median in
microseconds. Run: ``python bench/bench_checked_write.py --other <worktree> --rounds 7``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, machine  # noqa: E402

CHILD = r"""
import json, os, statistics, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from reme_engine.vault import io
n, size, quiet = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
with tempfile.TemporaryDirectory() as td:
    note = Path(td) / "note.md"
    body = ("x" * 79 + "\n") * (size // 80)
    note.write_text(body)
    sha = io.content_hash(note.read_bytes())
    writes = []
    for i in range(n):
        text = body + f"edit {i}\n"
        time.sleep(quiet)  # (untimed) a note quiet past the 50 ms settle time is not waited on by the check
        t0 = time.perf_counter()
        sha = io.atomic_write(note, text, expected_sha=sha)
        writes.append(time.perf_counter() - t0)
    deletes = []
    for i in range(max(1, n // 4)):
        p = Path(td) / f"d{i}.md"
        p.write_text(body)
        s = io.content_hash(p.read_bytes())
        time.sleep(0.06)  # past the settle time, as a note someone reads and then deletes
        t0 = time.perf_counter()
        io.remove_if_unchanged(p, s)
        deletes.append(time.perf_counter() - t0)
    left = sorted(os.listdir(td))
print(json.dumps({"write_us": statistics.median(writes) * 1e6, "delete_us": statistics.median(deletes) * 1e6,
                  "left": left, "engine_at": io.__file__}))
"""


def run(src: Path, n: int, size: int, quiet: float) -> dict:
    out = subprocess.run([sys.executable, "-S", "-c", CHILD, str(src), str(n), str(size), str(quiet)],
                         capture_output=True,
                         text=True, timeout=600, cwd="/")
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--other", help="another checkout to time side by side (e.g. a worktree of the previous commit)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--quiet-ms", type=float, default=0.0,
                    help="untimed pause before each write: 60 lets the note settle, so only the primitive is timed "
                         "(0: back-to-back writes, each waiting for the previous one to settle, as a burst does)")
    args = ap.parse_args()
    srcs = {"this": REPO}
    if args.other:
        srcs["other"] = Path(args.other).resolve()
    per: dict[str, list[dict]] = {k: [] for k in srcs}
    for _ in range(args.rounds):
        for k, src in srcs.items():
            per[k].append(run(src, args.writes, args.size, args.quiet_ms / 1000))
    result = {"bench": "checked_write", "machine": machine(), "writes": args.writes, "size_bytes": args.size,
              "quiet_ms": args.quiet_ms,
              "rounds": args.rounds, "results": {}}
    for k, rs in per.items():
        w, d = [r["write_us"] for r in rs], [r["delete_us"] for r in rs]
        result["results"][k] = {"write_us_median": round(statistics.median(w), 1), "write_us_min": round(min(w), 1),
                                "write_us_max": round(max(w), 1), "delete_us_median": round(statistics.median(d), 1),
                                "files_left": rs[-1]["left"],
                                "engine_at": "<repo>" if k == "this" else "<other>"}
    print(json.dumps(result, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()

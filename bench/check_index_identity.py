#!/usr/bin/env python
"""Whether two engines build the same keyword + graph index of a vault: chunks, files rows, keyword rows, stored
title tokens, every FTS5 posting (term, row, column, position) and resolved links.

    python bench/check_index_identity.py --baseline REV [--vaults kg,doocs]

Each engine (the current ``reme_engine/`` and that of git revision ``REV``, or of a folder holding a
``reme_engine/``) runs ``indexer.sync()`` in a fresh process on a fresh state dir over a temp copy of the vault;
each table is hashed in a fixed order. Prints one JSON object: row counts and hashes per engine and vault, and
``identical`` per vault. A speed-up of the store, tokenizer or parse steps must leave it ``true``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, bench_tmpdir, copy_tree, log  # noqa: E402

HERE = Path(__file__).resolve()
QUERIES = {
    "chunks": "SELECT k.id, f.path, k.ord, k.start_line, k.end_line, k.headings, k.text, k.text_hash, k.has_vec"
              " FROM chunks k JOIN files f ON f.id = k.file_id ORDER BY k.id",
    "files": "SELECT path, sha, kind, name, description, date, frontmatter, aliases, warning FROM files ORDER BY path",
    "fts_rows": "SELECT fts_id, chunk_id, body_hash FROM fts_rows ORDER BY fts_id",
    "fts_titles": "SELECT file_id, tokens FROM fts_titles ORDER BY file_id",
    "postings": "SELECT term, doc, col, offset FROM temp.vocab ORDER BY term, doc, col, offset",
    "links": "SELECT f.path, l.target, l.resolved, l.virtual, l.anchor, l.alias, l.line, l.ambiguous FROM links l"
             " JOIN files f ON f.id = l.src_id ORDER BY f.path, l.line, l.target, l.id",
}


def worker(src: str, vault: str, state: str) -> None:
    """Index ``vault`` with the engine under ``src`` and print the table hashes."""
    sys.path.insert(0, src)
    import reme_engine

    assert reme_engine.__file__.startswith(src), reme_engine.__file__
    from _common import open_engine

    eng = open_engine(Path(vault), Path(state), embed=False)
    eng.indexer.sync()
    c = eng.store.conn
    c.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, chunks_fts, instance)")
    out = {}
    for name, q in QUERIES.items():
        h, n = hashlib.sha256(), 0
        for row in c.execute(q):
            h.update(repr(row).encode("utf-8", "surrogatepass"))
            n += 1
        out[name] = [n, h.hexdigest()[:16]]
    eng.close()
    print(json.dumps(out))


def main() -> int:
    from bench_index_cpu import VAULTS, baseline_tree

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, help="git revision (or folder with a reme_engine/)")
    ap.add_argument("--vaults", default="kg,doocs")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker)
        return 0
    res: dict = {}
    with bench_tmpdir("index_identity") as tmp:
        shutil.copytree(REPO / "reme_engine", tmp / "current" / "reme_engine",
                        ignore=shutil.ignore_patterns("__pycache__"))
        base = Path(args.baseline)
        srcs = {"current": tmp / "current",
                "baseline": base.resolve() if (base / "reme_engine").is_dir()
                else baseline_tree(args.baseline, tmp / "baseline")}
        for name in args.vaults.split(","):
            vault = copy_tree(VAULTS[name], tmp / f"vault-{name}")
            for label, src in srcs.items():
                log(f"{name}: {label}")
                state = Path(tempfile.mkdtemp(dir=tmp))
                p = subprocess.run([sys.executable, str(HERE), "--baseline", "-", "--worker", str(src), str(vault),
                                    str(state)], capture_output=True, text=True, cwd=str(src), check=False)
                if p.returncode != 0:
                    raise RuntimeError(p.stderr[-3000:])
                res.setdefault(name, {})[label] = json.loads(p.stdout.strip().splitlines()[-1])
                shutil.rmtree(state, ignore_errors=True)
            res[name]["identical"] = res[name]["current"] == res[name]["baseline"]
    print(json.dumps({"bench": "index_identity", "baseline": args.baseline if not (base / "reme_engine").is_dir()
                      else "<folder>", "results": res}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

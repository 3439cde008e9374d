#!/usr/bin/env python
"""Parse-output identity check: what the keyword + graph pass extracts from every file, before vs after a change.

    python bench/check_parse_identity.py --out before.json [ROOT ...]      # record (default roots: both vaults)
    python bench/check_parse_identity.py --compare before.json [ROOT ...]  # exit 1 and list files that differ

For each file the engine would index (scan rules, read-only: nothing is written to the roots) it records a digest of
each part of ``Indexer.parse``: chunks (lines, text, headings), links (every field), meta + warning, name /
description / aliases, title tokens and chunk tokens. ``--compare`` names the part that changed for each file, so a
parser speed-up can be shown to keep chunks and links identical on every note of the real vaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CORPUS, VAULT_ZH

PARTS = ("chunks", "links", "meta", "names", "title_tokens", "chunk_tokens")


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, ensure_ascii=False, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def parse_digests(root: Path) -> dict[str, dict[str, str]]:
    """``{rel path: {part: digest}}`` for every file the engine's scan would index under ``root`` (a skip reason
    instead when the parser skips it). Opens an engine on a temp state dir and only scans and parses: the root
    is never written."""
    from _common import open_engine

    eng = open_engine(root, Path(tempfile.mkdtemp(prefix="parse-identity-")), embed=False)
    ix = eng.indexer
    out: dict[str, dict[str, str]] = {}
    try:
        entries, _ = ix.scan()
        for rel in sorted(entries):
            pf, reason = ix._parse_safe(entries[rel])
            if pf is None:
                out[rel] = {"skip": str(reason)}
                continue
            out[rel] = {
                "chunks": _digest([(c.start_line, c.end_line, c.text, list(c.headings)) for c in pf.chunks]),
                "links": _digest([dataclasses.astuple(lk) for lk in pf.links]),
                "meta": _digest([pf.meta, pf.warning, pf.kind]),
                "names": _digest([pf.name, pf.description, pf.aliases, pf.date]),
                "title_tokens": _digest(pf.title_tokens),
                "chunk_tokens": _digest(pf.chunk_tokens),
            }
    finally:
        eng.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("roots", nargs="*", type=Path, help="folders to check (default: knowledge-garden-zh and doocs)")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--out", type=Path, help="write the digests here")
    g.add_argument("--compare", type=Path, help="compare with digests written earlier")
    args = ap.parse_args()
    roots = args.roots or [VAULT_ZH, CORPUS]
    t = time.perf_counter()
    now = {str(r): parse_digests(r.resolve()) for r in roots}
    secs = time.perf_counter() - t
    if args.out:
        args.out.write_text(json.dumps(now, ensure_ascii=False, indent=0, sort_keys=True))
        print(json.dumps({"files": {k: len(v) for k, v in now.items()}, "seconds": round(secs, 1)}))
        return 0
    before = json.loads(args.compare.read_text())
    diffs: list[str] = []
    counts = {}
    for root, files in now.items():
        old = before.get(root, {})
        counts[root] = len(files)
        for rel in sorted(set(files) | set(old)):
            a, b = old.get(rel), files.get(rel)
            if a != b:
                parts = sorted(k for k in set(a or {}) | set(b or {}) if (a or {}).get(k) != (b or {}).get(k))
                diffs.append(f"{root}:{rel}: {','.join(parts)}")
    print(json.dumps({"files": counts, "differing": len(diffs), "seconds": round(secs, 1)}))
    for d in diffs[:50]:
        print(d)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())

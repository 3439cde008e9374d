#!/usr/bin/env python
"""Parse-output identity check: what the keyword + graph pass extracts from every file, before vs after a change.

    python bench/check_parse_identity.py --out before.json [ROOT ...]      # record (default roots: both vaults)
    python bench/check_parse_identity.py --compare before.json [ROOT ...]  # exit 1 and list files that differ
    python bench/check_parse_identity.py --opaque [ROOT ...]               # what the opaque-data rule leaves out
    python bench/check_parse_identity.py --patho --out before.json ROOT ...  # also issue 12's pathological notes

For each file the engine would index (scan rules, read-only: nothing is written to the roots) it records a digest of
each part of ``Indexer.parse``: chunks (lines, text, headings), links (every field), meta + warning, name /
description / aliases, title tokens and chunk tokens. ``--compare`` names the part that changed for each file, so a
parser speed-up can be shown to keep chunks and links identical on every note of the real vaults. ``--patho`` adds
the generated notes of ``bench_index_cpu.py --steps patho`` (written to a temp dir, recorded under ``<patho>``).
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


def opaque_report(root: Path) -> dict:
    """What :func:`reme_engine.markdown.opaque.searchable_body` leaves out of ``root``'s Markdown notes (read-only):
    the notes it changes, and their vector texts (chunks that get an embedding), vector characters and keyword
    tokens with the rule (``after``) and without it (``before``)."""
    from reme_engine.index.parse import wants_vector
    from reme_engine.index.tokenizer import default_tokenizer
    from reme_engine.markdown.chunker import chunk_markdown
    from reme_engine.markdown.frontmatter import parse_frontmatter
    from reme_engine.markdown.opaque import searchable_body

    tok = default_tokenizer()
    out: dict = {"files": [], "vector_texts": [0, 0], "vector_chars": [0, 0], "tokens": [0, 0]}
    for p in sorted(root.rglob("*.md")):
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        fm = parse_frontmatter(text)
        body = text[fm.body_offset:]
        sb = searchable_body(body, rel=rel.as_posix(), meta=fm.meta)
        if not sb.removed:
            continue
        out["files"].append(rel.as_posix())
        for k, chunks in enumerate((chunk_markdown(body), chunk_markdown(sb.text))):
            vec = [c.embed_text() for c in chunks if wants_vector(c.text)]
            out["vector_texts"][k] += len(vec)
            out["vector_chars"][k] += sum(map(len, vec))
            out["tokens"][k] += sum(len(tok.tokenize(c.embed_text())) for c in chunks)
    for key in ("vector_texts", "vector_chars", "tokens"):
        out[key] = dict(zip(("before", "after"), out[key]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("roots", nargs="*", type=Path, help="folders to check (default: knowledge-garden-zh and doocs)")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--out", type=Path, help="write the digests here")
    g.add_argument("--compare", type=Path, help="compare with digests written earlier")
    g.add_argument("--opaque", action="store_true", help="report what the opaque-data rule leaves out")
    ap.add_argument("--patho", action="store_true", help="also the generated pathological notes of issue 12")
    args = ap.parse_args()
    roots = args.roots or [VAULT_ZH, CORPUS]
    if args.opaque:
        print(json.dumps({r.name: opaque_report(r.resolve()) for r in roots}, ensure_ascii=False, indent=1))
        return 0
    t = time.perf_counter()
    now = {str(r): parse_digests(r.resolve()) for r in roots}
    if args.patho:
        from bench_firstrun import make_pathological

        with tempfile.TemporaryDirectory(prefix="parse-identity-patho-") as d:
            make_pathological(Path(d) / "zz-pathological")
            now["<patho>"] = parse_digests(Path(d))
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

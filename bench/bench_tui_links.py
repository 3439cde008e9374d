"""Following a link in the TUI on knowledge-garden-zh (3,176 notes): the resolution the note pane and the link
picker ask the engine for, per link.

``rebuilt_ms``: what the TUI did before (``engine.indexer.build_resolver().resolve(…)``: a resolver over every file
of the vault built per link followed); ``kept_ms``: ``Engine.resolve_link`` (the resolver kept until the vault's
names or aliases change; one small alias query per call); ``first_kept_ms``: its first call (builds the resolver).
``note_missing_ms``: ``loaders.note_document`` for the notes' own links, which now also marks missing targets
(what opening a note costs with the marks, vs ``note_plain_ms`` without). Links: 300 wikilink targets taken
from the vault's notes (with their source note), the same list for every variant.

Usage: ``python bench/bench_tui_links.py`` — prints one JSON object.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import VAULT_ZH, bench_tmpdir, copy_tree, emit, log, machine, open_engine, stats  # noqa: E402


def main() -> None:
    from reme_tui.loaders import note_document
    from reme_tui.messages import OpenNote

    out = {"machine": machine()}
    with bench_tmpdir("tuilinks") as tmp:
        vault = copy_tree(VAULT_ZH, tmp / "vault")
        eng = open_engine(vault, tmp / "state", embed=False)
        try:
            t = time.perf_counter()
            eng.index(vectors=False)
            out["keyword_index_s"] = round(time.perf_counter() - t, 2)
            rows = eng.store.conn.execute("SELECT f.path, l.target FROM links l JOIN files f ON f.id = l.src_id "
                                          "WHERE l.target != ''").fetchall()
            rng = random.Random(3)
            links = rng.sample(rows, min(300, len(rows)))
            log(f"{len(rows)} links, timing {len(links)}")
            rebuilt, kept = [], []
            for src, target in links[:60]:  # the old way is slow: 60 are enough for a median
                t = time.perf_counter()
                eng.indexer.build_resolver().resolve(target, src)
                rebuilt.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            eng.resolve_link(links[0][1], links[0][0])
            out["first_kept_ms"] = round((time.perf_counter() - t) * 1000, 2)
            for src, target in links:
                t = time.perf_counter()
                eng.resolve_link(target, src)
                kept.append((time.perf_counter() - t) * 1000)
            same = sum(eng.resolve_link(tg, s).path == eng.indexer.build_resolver().resolve(tg, s).path
                       for s, tg in links[:30])
            out["rebuilt_ms"] = stats(rebuilt)
            out["kept_ms"] = stats(kept)
            out["same_answer_of_30"] = same
            notes = sorted({s for s, _t in links})[:40]
            plain, marked = [], []
            for path in notes:
                for flag, acc in ((False, plain), (True, marked)):
                    t = time.perf_counter()
                    note_document(eng, OpenNote(path), resolve_links=flag)
                    acc.append((time.perf_counter() - t) * 1000)
            out["note_plain_ms"] = stats(plain)
            out["note_missing_ms"] = stats(marked)
        finally:
            eng.close()
    emit(out)


if __name__ == "__main__":
    main()

"""Apply step of a sync: one parsed file's rows (file, chunks, FTS postings, links) inside the caller's
transaction, a removed file's rows, a skip. The SQL lives next to the schema in :mod:`.store`.

A mixin of :class:`reme_engine.index.indexer.Indexer`.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from ..vault.io import text_hash
from . import store as db
from .parse import NO_VECTOR, ParsedFile, chunk_vid, wants_vector
from .scan import ScanEntry

if TYPE_CHECKING:
    from .indexer import IndexReport


class ApplyStep:
    """Writes of a sync (``c``: the open write connection of the caller's transaction)."""

    def _apply(self, c, pf: ParsedFile, old_id: int | None, report: IndexReport) -> int:
        """Write one parsed file's rows (inside the caller's transaction); returns the file id."""
        row = (pf.rel, pf.mtime, pf.size, pf.sha, pf.kind, json.dumps(pf.meta, ensure_ascii=False, default=str),
               pf.name, pf.description, pf.date, json.dumps(pf.aliases, ensure_ascii=False), pf.warning, time.time())
        if old_id is None:
            fid = db.insert_file(c, row)
            old_chunks: dict[int, str] = {}  # id -> text_hash
        else:
            fid = old_id
            db.update_file(c, fid, row)
            old_chunks = db.chunk_hashes(c, fid)
            db.delete_postings(c, list(old_chunks))
        seen: dict[str, int] = {}
        new_ids: list[int] = []
        chunk_rows = []
        fts_rows = []
        tokenize = self.tokenizer.tokenize
        for ordn, ch in enumerate(pf.chunks):
            occ = seen.get(ch.text, 0)
            seen[ch.text] = occ + 1
            vid = chunk_vid(pf.rel, ch.text, occ)
            new_ids.append(vid)
            etext = ch.embed_text()
            fts_rows.append((vid, pf.chunk_tokens[ordn] if ordn < len(pf.chunk_tokens)
                             else " ".join(tokenize(etext)), pf.title_tokens))
            if vid in old_chunks:
                th = text_hash(etext)
                if th == old_chunks[vid]:
                    db.move_chunk(c, vid, ordn, ch.start_line, ch.end_line)
                else:  # same text under renamed headings: new heading trail, and a new vector (embed text)
                    db.retrail_chunk(c, vid, ordn, ch.start_line, ch.end_line,
                                     json.dumps(list(ch.headings), ensure_ascii=False), th,
                                     0 if wants_vector(ch.text) else NO_VECTOR)
            else:
                chunk_rows.append((vid, fid, ordn, ch.start_line, ch.end_line,
                                   json.dumps(list(ch.headings), ensure_ascii=False), ch.text, text_hash(etext)))
        db.insert_chunks(c, [(*row, 0 if wants_vector(row[6]) else NO_VECTOR) for row in chunk_rows])
        db.insert_postings(c, fts_rows)
        kept = set(new_ids)
        gone = [i for i in old_chunks if i not in kept]
        if gone:
            db.delete_chunks(c, gone)
            db.tombstone(c, gone)
        report.chunks_added += len(chunk_rows)
        report.chunks_removed += len(gone)
        db.replace_links(c, fid, [(lk.target, lk.anchor, lk.alias, lk.predicate, int(lk.embed), lk.kind, lk.line,
                                   lk.original) for lk in pf.links])
        db.forget_skip(c, pf.rel)
        return fid

    def _remove(self, c, rel: str, fid: int) -> list[int]:
        return db.remove_file(c, fid)

    def _record_skip(self, c, rel: str, reason: str, entry: ScanEntry | None, report: IndexReport) -> None:
        report.skipped.append({"path": rel, "reason": reason})
        db.record_skip(c, rel, reason, entry.size if entry else None, entry.mtime if entry else None)

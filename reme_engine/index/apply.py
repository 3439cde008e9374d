"""Apply step of a sync: one parsed file's rows (file, chunks, FTS postings, links) inside the caller's
transaction, a removed file's rows, a skip. The SQL lives next to the schema in :mod:`.store`.

A mixin of :class:`reme_engine.index.indexer.Indexer`.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from ..vault.io import text_hash
from .parse import NO_VECTOR, ParsedFile, chunk_vid, wants_vector
from .scan import ScanEntry

if TYPE_CHECKING:
    from .indexer import IndexReport


class ApplyStep:
    """Writes of a sync (``c``: the open write connection of the caller's transaction)."""

    def _apply(self, c, pf: ParsedFile, old_id: int | None, report: IndexReport) -> int:
        """Write one parsed file's rows (inside the caller's transaction); returns the file id."""
        now = time.time()
        fm_json = json.dumps(pf.meta, ensure_ascii=False, default=str)
        if old_id is None:
            cur = c.execute(
                "INSERT INTO files(path, mtime, size, sha, kind, frontmatter, name, description, date, aliases,"
                " warning, indexed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (pf.rel, pf.mtime, pf.size, pf.sha, pf.kind, fm_json, pf.name, pf.description, pf.date,
                 json.dumps(pf.aliases, ensure_ascii=False), pf.warning, now),
            )
            fid = cur.lastrowid
            old_chunks: dict[int, str] = {}  # id -> text_hash
        else:
            fid = old_id
            c.execute(
                "UPDATE files SET path=?, mtime=?, size=?, sha=?, kind=?, frontmatter=?, name=?, description=?,"
                " date=?, aliases=?, warning=?, indexed_at=? WHERE id=?",
                (pf.rel, pf.mtime, pf.size, pf.sha, pf.kind, fm_json, pf.name, pf.description, pf.date,
                 json.dumps(pf.aliases, ensure_ascii=False), pf.warning, now, fid),
            )
            old_chunks = {r[0]: r[1] for r in c.execute("SELECT id, text_hash FROM chunks WHERE file_id=?", (fid,))}
            c.execute("DELETE FROM links WHERE src_id=?", (fid,))
            if old_chunks:
                ids = list(old_chunks)
                for i in range(0, len(ids), 500):
                    part = ids[i : i + 500]
                    c.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({','.join('?' * len(part))})", part)
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
                    c.execute("UPDATE chunks SET ord=?, start_line=?, end_line=? WHERE id=?",
                              (ordn, ch.start_line, ch.end_line, vid))
                else:  # same text under renamed headings: new heading trail, and a new vector (embed text)
                    c.execute("UPDATE chunks SET ord=?, start_line=?, end_line=?, headings=?, text_hash=?, has_vec=?"
                              " WHERE id=?", (ordn, ch.start_line, ch.end_line,
                                              json.dumps(list(ch.headings), ensure_ascii=False), th,
                                              0 if wants_vector(ch.text) else NO_VECTOR, vid))
            else:
                chunk_rows.append((vid, fid, ordn, ch.start_line, ch.end_line,
                                   json.dumps(list(ch.headings), ensure_ascii=False), ch.text, text_hash(etext)))
        # A chunk id already used by another file (hash collision or a file copied while its twin is indexed
        # under the same path) is replaced: ids must stay unique.
        c.executemany(
            "INSERT OR REPLACE INTO chunks(id, file_id, ord, start_line, end_line, headings, text, text_hash, has_vec)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            [(*row, 0 if wants_vector(row[6]) else NO_VECTOR) for row in chunk_rows],
        )
        c.executemany("INSERT INTO chunks_fts(rowid, body, title) VALUES (?,?,?)", fts_rows)
        gone = [i for i in old_chunks if i not in set(new_ids)]
        if gone:
            for i in range(0, len(gone), 500):
                part = gone[i : i + 500]
                c.execute(f"DELETE FROM chunks WHERE id IN ({','.join('?' * len(part))})", part)
            c.executemany("INSERT OR IGNORE INTO vec_tombstones(id) VALUES (?)", [(g,) for g in gone])
        report.chunks_added += len(chunk_rows)
        report.chunks_removed += len(gone)
        c.executemany(
            "INSERT INTO links(src_id, target, resolved, virtual, anchor, alias, predicate, embed, kind, line,"
            " ambiguous, original) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [(fid, lk.target, None, lk.target, lk.anchor, lk.alias, lk.predicate, int(lk.embed), lk.kind,
              lk.line, 0, lk.original) for lk in pf.links],
        )
        c.execute("DELETE FROM skipped WHERE path=?", (pf.rel,))
        return fid

    def _remove(self, c, rel: str, fid: int) -> list[int]:
        ids = [r[0] for r in c.execute("SELECT id FROM chunks WHERE file_id=?", (fid,))]
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            c.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({','.join('?' * len(part))})", part)
        c.execute("DELETE FROM files WHERE id=?", (fid,))  # cascades to chunks and links
        c.executemany("INSERT OR IGNORE INTO vec_tombstones(id) VALUES (?)", [(i,) for i in ids])
        return ids

    def _record_skip(self, c, rel: str, reason: str, entry: ScanEntry | None, report: IndexReport) -> None:
        report.skipped.append({"path": rel, "reason": reason})
        c.execute(
            "INSERT OR REPLACE INTO skipped(path, reason, size, mtime, at) VALUES (?,?,?,?,?)",
            (rel, reason, entry.size if entry else None, entry.mtime if entry else None, time.time()),
        )

"""The SQLite store of the index (ARCHITECTURE §5): files, chunks, links, the FTS5 keyword table, skips, catalogs.

One database file in the state dir, WAL mode. Each thread gets its own connection (``sqlite3`` connections are
not shared across threads); writers are serialised by the engine. A sync's changes (rows, links, path list) land
in one transaction, or — for a sync bigger than one batch — per batch under an interrupted-sync marker that the
last transaction removes (``Indexer.sync``), so a crash leaves the previous consistent state or a marked one the
next open repairs.

Damage is derived-data damage: the vault is the truth. A file that is not a database, or fails ``PRAGMA
quick_check`` (run after an unclean shutdown — a leftover WAL, or a size/mtime differing from the stamp the last
clean close wrote — and daily for files up to 256 MB), is moved aside as ``<name>.corrupt-<time>`` and recreated
empty; :meth:`Store.recover_corrupt` does the same when a query fails with a corruption error later.

The embedding cache is a second database (``embeddings.sqlite``) so that deleting the index keeps it.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from ..vault.io import fsync_path

log = logging.getLogger("reme.engine")

#: 4: contentless keyword table over small dense row ids (``fts_rows``), titles' tokens once per file (issue 12);
#: 5: those title tokens NULL when re-derived from the files row; 6: chunk text stored deflated (``chunks.body``)
SCHEMA_VERSION = 6

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    mtime REAL NOT NULL,
    size INTEGER NOT NULL,
    sha TEXT NOT NULL,
    kind TEXT NOT NULL,              -- 'markdown' | 'text'
    frontmatter TEXT NOT NULL,       -- JSON object
    name TEXT NOT NULL,              -- frontmatter name/title, else file stem
    description TEXT NOT NULL,
    date TEXT,                       -- YYYY-MM-DD from a daily/<date> or resource/<date> segment
    aliases TEXT NOT NULL,           -- JSON list
    warning TEXT,
    indexed_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,          -- stable: 63 bits of the chunk hash; also the faiss id and the FTS rowid
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    ord INTEGER NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    headings TEXT NOT NULL,          -- JSON list (breadcrumb)
    body BLOB NOT NULL,              -- the chunk text: zlib of its UTF-8 (a BLOB) when that is smaller, else the TEXT
    -- what every reader selects: the text itself, inflated by chunk_text() (register_functions; issue 12: the
    -- doocs corpus's 32 MB of chunk text took 44 MB of pages, 13 MB deflated)
    text TEXT GENERATED ALWAYS AS (chunk_text(body)) VIRTUAL,
    text_hash TEXT NOT NULL,         -- hash of the embedding text (cache key)
    has_vec INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS chunks_file ON chunks(file_id);
CREATE INDEX IF NOT EXISTS chunks_novec ON chunks(has_vec) WHERE has_vec = 0;
-- The keyword index stores postings only (content=''): no second copy of the tokenised text. Its rowids are small
-- dense ids (fts_rows), not the 63-bit chunk ids: FTS5 delta-encodes rowids in every posting list, and random
-- 63-bit ids cost 8-9 bytes per posting (kg-zh: 11.5 MB of postings vs 5.5 MB dense). AUTOINCREMENT: an id is
-- never reused, so a posting that could not be deleted can never point at another chunk.
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(body, title, content = '',
    tokenize = 'unicode61 remove_diacritics 0');
CREATE TABLE IF NOT EXISTS fts_rows (
    fts_id INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id INTEGER NOT NULL UNIQUE,
    file_id INTEGER NOT NULL,
    body_hash INTEGER NOT NULL       -- 64 bits of blake2b of the body and title tokens inserted: proves a re-derivation
);
-- The title-column tokens of a file's rows, once per file: what deleting its rows needs (the body tokens are
-- re-derived from chunks.text, the tokenizer being deterministic and in the fingerprint). NULL when they are
-- re-derived from the files row (path, name, frontmatter: checked when inserted), else zlib of UTF-8.
CREATE TABLE IF NOT EXISTS fts_titles (file_id INTEGER PRIMARY KEY, tokens BLOB);
CREATE TABLE IF NOT EXISTS links (
    id INTEGER PRIMARY KEY,
    src_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    target TEXT NOT NULL,
    resolved TEXT,                   -- vault-relative path or NULL (dangling)
    virtual TEXT NOT NULL,           -- virtual node id for dangling targets
    anchor TEXT,
    alias TEXT,
    predicate TEXT,
    embed INTEGER NOT NULL,
    kind TEXT NOT NULL,
    line INTEGER NOT NULL,
    ambiguous INTEGER NOT NULL DEFAULT 0,
    original TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS links_src ON links(src_id);
CREATE INDEX IF NOT EXISTS links_resolved ON links(resolved);
CREATE INDEX IF NOT EXISTS links_virtual ON links(virtual);
CREATE TABLE IF NOT EXISTS skipped (
    path TEXT PRIMARY KEY, reason TEXT NOT NULL, size INTEGER, mtime REAL, at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS vec_tombstones (id INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS catalog (
    name TEXT NOT NULL, path TEXT NOT NULL, sha TEXT NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (name, path)
);
"""

EMB_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    space TEXT NOT NULL, text_hash TEXT NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY (space, text_hash)
) WITHOUT ROWID;
"""


#: Seconds between scheduled ``PRAGMA quick_check`` runs at open (an unclean shutdown always checks).
QUICK_CHECK_EVERY_S = 24 * 3600
#: Databases bigger than this are not checked at open on schedule (~1.5 ms per MB here); health_check does.
QUICK_CHECK_MAX_BYTES = 256 * 1024 * 1024


# -- chunk text, stored deflated -----------------------------------------------------------------------------
#: Texts shorter than this (UTF-8 bytes) are stored as they are: deflating them saves next to nothing.
PACK_MIN_BYTES = 96
#: zlib level of stored chunk text: on the doocs corpus's 35 MB of chunk text level 1 took 0.64 s of CPU against
#: level 6's 0.79 s, for 16.1 MB against 15.4 MB (database 39.1 MB against 38.2 MB; session 22 C). Any level reads
#: back the same.
PACK_LEVEL = 1
#: ``{stored blob: text}`` of the rows :func:`insert_chunks` is writing: SQLite computes the generated ``text``
#: column of every row it writes, and the text is at hand then (a dict lookup instead of an inflate).
_FRESH: dict[bytes, str] = {}


def pack_text(text: str) -> str | bytes:
    """A chunk text as ``chunks.body`` stores it: ``zlib`` (:data:`PACK_LEVEL`) of its UTF-8 when at least
    :data:`PACK_MIN_BYTES` long and smaller so, else ``text`` unchanged. :func:`chunk_text` gives it back."""
    import zlib

    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) < PACK_MIN_BYTES:
        return text
    z = zlib.compress(raw, PACK_LEVEL)
    return z if len(z) < len(raw) else text


def chunk_text(body: str | bytes | None) -> str | None:
    """``chunks.body`` back to the chunk text (the SQL function behind the ``chunks.text`` column). Raises
    ``zlib.error`` / ``UnicodeDecodeError`` on a damaged value (SQLite reports it as a failed query)."""
    if body is None or body.__class__ is str:
        return body
    got = _FRESH.get(body)
    if got is not None:
        return got
    import zlib

    return zlib.decompress(body).decode("utf-8", "surrogatepass")


def register_functions(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Give ``conn`` the SQL functions the index's schema uses (``chunk_text``, behind ``chunks.text``): every
    connection that reads ``chunks.text``, writes ``chunks`` rows or runs ``PRAGMA quick_check`` needs them (the
    store's own connections have them). Returns ``conn``."""
    conn.create_function("chunk_text", 1, chunk_text, deterministic=True)
    return conn


# -- the sync's writes (``c``: a connection inside the caller's write transaction) ------------------------------
_FILE_COLS = "path, mtime, size, sha, kind, frontmatter, name, description, date, aliases, warning, indexed_at"


def insert_file(c: sqlite3.Connection, row: tuple) -> int:
    """Insert a ``files`` row (values in :data:`_FILE_COLS` order); returns its id."""
    return c.execute(f"INSERT INTO files({_FILE_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", row).lastrowid


def update_file(c: sqlite3.Connection, fid: int, row: tuple) -> None:
    """Overwrite file ``fid``'s row (values in :data:`_FILE_COLS` order; the path may change: a rename). Title
    tokens its keyword rows re-derive from this row are kept first (deleting those rows needs them)."""
    t = c.execute("SELECT tokens FROM fts_titles WHERE file_id = ?", (fid,)).fetchone()
    if t is not None and t[0] is None:
        title = _derived_title(c, fid, _postings_tokenizer(c))
        if title is not None:
            c.execute("UPDATE fts_titles SET tokens = ? WHERE file_id = ?", (_zip(title), fid))
    sets = ", ".join(f"{col.strip()}=?" for col in _FILE_COLS.split(","))
    c.execute(f"UPDATE files SET {sets} WHERE id=?", (*row, fid))


def chunk_hashes(c: sqlite3.Connection, fid: int) -> dict[int, str]:
    """``{chunk id: text_hash}`` of one file."""
    return {r[0]: r[1] for r in c.execute("SELECT id, text_hash FROM chunks WHERE file_id=?", (fid,))}


def _in_parts(c: sqlite3.Connection, sql: str, ids: list[int]) -> None:
    for i in range(0, len(ids), 500):  # SQLite's bound-parameter limit
        part = ids[i : i + 500]
        c.execute(sql.format(",".join("?" * len(part))), part)


def _tokens_hash(body: str, title: str) -> int:
    import hashlib

    h = hashlib.blake2b(body.encode("utf-8"), digest_size=8)
    h.update(b"\0" + title.encode("utf-8"))
    return int.from_bytes(h.digest(), "big", signed=True)


def body_tokens(tokenize, text: str, headings_json: str) -> str:
    """The body-column tokens of a chunk row (space-joined ``tokenize`` of its embed text: breadcrumb + text), the
    way the parse step makes them; deleting a row re-derives them with this."""
    from ..markdown.chunker import Chunk

    return " ".join(tokenize(Chunk(0, 0, text, tuple(json.loads(headings_json))).embed_text()))


def _zip(text: str) -> bytes:
    import zlib

    return zlib.compress(text.encode("utf-8"), 6)


def _derived_title(c: sqlite3.Connection, fid: int, tok) -> str | None:
    """The title-column tokens of file ``fid`` made from its files row the way the parse step makes them (file stem,
    name, frontmatter string values); None without a row."""
    r = c.execute("SELECT path, name, frontmatter FROM files WHERE id = ?", (fid,)).fetchone()
    if r is None:
        return None
    from ..markdown.frontmatter import frontmatter_text_values

    stem = r[0].rsplit("/", 1)[-1].rsplit(".", 1)[0]
    try:
        meta = json.loads(r[2])
    except ValueError:
        return None
    text = (" ".join([stem, r[1], *frontmatter_text_values(meta)]) if meta else f"{stem} {r[1]}")[:20000]
    got = _TITLES.get(text)
    return got if got is not None else " ".join(tok.tokenize(text))


#: ``{title text: its tokens}`` the parse step just made in this process (:func:`remember_title`), so checking
#: that a files row gives the title tokens back needs no second tokenisation (2.8 s of a 37 s cold-pass profile).
_TITLES: dict[str, str] = {}


def remember_title(text: str, tokens: str) -> None:
    """Record that ``tokens`` is the space-joined default tokenisation of title text ``text`` (at most 20,000
    characters, as the parse step cuts it); bounded: cleared at 4,096 entries."""
    if len(_TITLES) >= 4096:
        _TITLES.clear()
    _TITLES[text] = tokens


def _postings_tokenizer(c: sqlite3.Connection):
    """The tokenizer the postings are made with (the process default, as the parse step's); when the stored
    postings were made by another one (its fingerprint changed: the indexer re-reads every file), they are
    dropped first, since they could not be deleted row by row."""
    from .tokenizer import default_tokenizer

    tok = default_tokenizer()
    row = c.execute("SELECT value FROM meta WHERE key = 'fts_tokenizer'").fetchone()
    if row is None or row[0] != tok.fingerprint:
        if row is not None or c.execute("SELECT 1 FROM fts_rows LIMIT 1").fetchone():
            clear_postings(c)
        c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('fts_tokenizer', ?)", (tok.fingerprint,))
    return tok


def _bump_postings(c: sqlite3.Connection) -> None:
    """Count a change of the postings (readers' caches of them compare this generation)."""
    c.execute("INSERT INTO meta(key, value) VALUES ('postings_gen', '1') ON CONFLICT(key) DO UPDATE SET"
              " value = CAST(value AS INTEGER) + 1")


def postings_gen(c: sqlite3.Connection) -> int:
    """The postings' change counter (:func:`_bump_postings`); 0 before any write."""
    row = c.execute("SELECT value FROM meta WHERE key = 'postings_gen'").fetchone()
    return int(row[0]) if row else 0


def clear_postings(c: sqlite3.Connection) -> None:
    """Drop every posting (a contentless FTS5 table cannot be emptied with DELETE)."""
    drop_pending_postings(c)
    c.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')")
    c.execute("DELETE FROM fts_rows")
    c.execute("DELETE FROM fts_titles")
    _bump_postings(c)


def delete_postings(c: sqlite3.Connection, ids: list[int]) -> None:
    """Drop the keyword rows of these chunk ids (ids without one are ignored). Call it while their ``chunks`` rows
    still hold the text the rows were made from: FTS5's contentless ``'delete'`` needs the same tokens, re-derived
    here (:func:`body_tokens`; the title tokens are stored per file). A row whose tokens cannot be re-derived
    exactly (its chunk row gone, or a hash mismatch) is deleted with empty values: its postings stay behind under
    an id never reused, invisible to searches (they join ``fts_rows``), and are counted in meta
    ``fts_stale_rows``."""
    ids = list(ids)
    if not ids:
        return
    flush_postings(c)  # a row queued in this transaction must be in FTS5 before its 'delete'
    tok = _postings_tokenizer(c)
    rows: list[tuple] = []
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        rows += c.execute("SELECT r.fts_id, r.file_id, r.body_hash, k.text, k.headings FROM fts_rows r"
                          f" LEFT JOIN chunks k ON k.id = r.chunk_id WHERE r.chunk_id IN ({','.join('?' * len(part))})",
                          part).fetchall()
    if not rows:
        return
    import zlib

    titles: dict[int, str | None] = {}
    stale = 0
    for fts_id, fid, bhash, text, headings in rows:
        if fid not in titles:
            t = c.execute("SELECT tokens FROM fts_titles WHERE file_id = ?", (fid,)).fetchone()
            if t is None:
                titles[fid] = None
            elif t[0] is None:
                titles[fid] = _derived_title(c, fid, tok)
            else:
                titles[fid] = zlib.decompress(t[0]).decode("utf-8")
        title = titles[fid]
        body = body_tokens(tok.tokenize, text, headings) if text is not None else None
        if body is None or title is None or _tokens_hash(body, title) != bhash:
            body, title = "", ""
            stale += 1
        c.execute("INSERT INTO chunks_fts(chunks_fts, rowid, body, title) VALUES ('delete', ?, ?, ?)",
                  (fts_id, body, title))
    _in_parts(c, "DELETE FROM fts_rows WHERE fts_id IN ({})", [r[0] for r in rows])
    if stale:
        c.execute("INSERT INTO meta(key, value) VALUES ('fts_stale_rows', ?) ON CONFLICT(key) DO UPDATE SET"
                  " value = CAST(value AS INTEGER) + excluded.value", (str(stale),))
    _bump_postings(c)


def delete_chunks(c: sqlite3.Connection, ids: list[int]) -> None:
    """Drop these chunk rows (their vectors: :func:`tombstone`)."""
    _in_parts(c, "DELETE FROM chunks WHERE id IN ({})", list(ids))


def tombstone(c: sqlite3.Connection, ids: list[int]) -> None:
    """Record chunk ids whose vectors must leave the faiss index at its next load or save."""
    c.executemany("INSERT OR IGNORE INTO vec_tombstones(id) VALUES (?)", [(i,) for i in ids])


def move_chunk(c: sqlite3.Connection, vid: int, ordn: int, start: int, end: int) -> None:
    """Same chunk text and trail at a new place in its file."""
    c.execute("UPDATE chunks SET ord=?, start_line=?, end_line=? WHERE id=?", (ordn, start, end, vid))


def retrail_chunk(c: sqlite3.Connection, vid: int, ordn: int, start: int, end: int, headings_json: str,
                  text_hash: str, has_vec: int) -> None:
    """Same chunk text under new headings: new trail, embed-text hash and vector state."""
    c.execute("UPDATE chunks SET ord=?, start_line=?, end_line=?, headings=?, text_hash=?, has_vec=? WHERE id=?",
              (ordn, start, end, headings_json, text_hash, has_vec, vid))


def insert_chunks(c: sqlite3.Connection, rows: list[tuple]) -> None:
    """``(id, file_id, ord, start_line, end_line, headings, text, text_hash, has_vec)`` rows; an id already used by
    another file (hash collision, a copy indexed under the same path) is replaced: ids stay unique. The text is
    stored deflated (:func:`pack_text`); ``chunks.text`` reads it back."""
    packed = []
    for r in rows:
        body = pack_text(r[6])
        if body.__class__ is bytes:
            _FRESH[body] = r[6]
        packed.append((*r[:6], body, *r[7:]))
    try:
        c.executemany("INSERT OR REPLACE INTO chunks(id, file_id, ord, start_line, end_line, headings, body,"
                      " text_hash, has_vec) VALUES (?,?,?,?,?,?,?,?,?)", packed)
    finally:
        _FRESH.clear()


#: ``{id(connection): (connection, [(fts_id, body tokens, title tokens), …])}``: keyword rows of the open write
#: transaction not yet handed to FTS5. FTS5 flushes its pending terms into a new segment whenever another statement
#: of the transaction opens a statement journal (the ``fts_rows`` insert between two rows did, and every file's
#: chunk and link writes), so inserting row by row wrote one tiny segment per chunk and merged them again: 60 % of
#: a cold pass's SQLite time on knowledge-garden-zh. Queued rows go in together (:func:`flush_postings`) before
#: the transaction commits (``Store.write``), before any delete of postings and outside a transaction at once.
_PENDING_FTS: dict[int, tuple[sqlite3.Connection, list[tuple]]] = {}
#: Queued keyword rows per connection at which they are handed to FTS5 anyway (bounded memory).
PENDING_FTS_MAX = 50_000


def flush_postings(c: sqlite3.Connection) -> None:
    """Hand the keyword rows :func:`insert_postings` queued on ``c`` to FTS5 (one ``executemany``). Called by
    ``Store.write`` before its COMMIT; call it yourself before COMMIT when writing postings without it."""
    got = _PENDING_FTS.pop(id(c), None)
    if got is not None and got[0] is c and got[1]:
        c.executemany("INSERT INTO chunks_fts(rowid, body, title) VALUES (?,?,?)", got[1])


def drop_pending_postings(c: sqlite3.Connection) -> None:
    """Forget rows queued on ``c`` (its transaction rolled back, or a new one begins)."""
    _PENDING_FTS.pop(id(c), None)


def insert_postings(c: sqlite3.Connection, rows: list[tuple]) -> None:
    """``(chunk id, body tokens, title tokens)`` rows of the keyword index (space-joined tokens; the chunk rows
    already written). Body tokens must be :func:`body_tokens` of the chunk row (what deleting re-derives); the
    title tokens are those of the chunk's file, the same for all its rows (stored once per file). A chunk that
    has a keyword row already gets a new one."""
    if not rows:
        return
    tok = _postings_tokenizer(c)
    cids = [r[0] for r in rows]
    fids: dict[int, int] = {}
    for i in range(0, len(cids), 500):
        part = cids[i : i + 500]
        fids.update(c.execute(f"SELECT id, file_id FROM chunks WHERE id IN ({','.join('?' * len(part))})", part))
    have: set[int] = set()
    for i in range(0, len(cids), 500):
        part = cids[i : i + 500]
        have.update(r[0] for r in c.execute(
            f"SELECT chunk_id FROM fts_rows WHERE chunk_id IN ({','.join('?' * len(part))})", part))
    if have:
        delete_postings(c, list(have))
    got = _PENDING_FTS.get(id(c))
    if got is None or got[0] is not c:
        got = _PENDING_FTS[id(c)] = (c, [])
    queue = got[1]
    titles: dict[int, str] = {}
    # the ids AUTOINCREMENT would give row by row (above every id ever used), written in one executemany
    fts_id = c.execute("SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'fts_rows'), 0),"
                       " coalesce((SELECT max(fts_id) FROM fts_rows), 0))").fetchone()[0]
    id_rows = []
    for cid, body, title in rows:
        fid = fids.get(cid)
        if fid is None:
            continue  # no chunk row: nothing a search could show
        if titles.get(fid) != title:
            titles[fid] = title
            # stored only when the files row does not give them back (e.g. a date-typed frontmatter value)
            c.execute("INSERT OR REPLACE INTO fts_titles(file_id, tokens) VALUES (?, ?)",
                      (fid, None if _derived_title(c, fid, tok) == title else _zip(title)))
        fts_id += 1
        id_rows.append((fts_id, cid, fid, _tokens_hash(body, title)))
        queue.append((fts_id, body, title))
    c.executemany("INSERT INTO fts_rows(fts_id, chunk_id, file_id, body_hash) VALUES (?,?,?,?)", id_rows)
    _bump_postings(c)
    if not c.in_transaction or len(queue) >= PENDING_FTS_MAX:
        flush_postings(c)


def replace_links(c: sqlite3.Connection, fid: int, rows: list[tuple]) -> None:
    """A file's links, unresolved (``resolve_links`` fills them in): ``(target, anchor, alias, predicate, embed,
    kind, line, original)`` rows replace the old ones."""
    c.execute("DELETE FROM links WHERE src_id=?", (fid,))
    c.executemany("INSERT INTO links(src_id, target, resolved, virtual, anchor, alias, predicate, embed, kind, line,"
                  " ambiguous, original) VALUES (?,?,NULL,?,?,?,?,?,?,?,0,?)",
                  [(fid, r[0], r[0], *r[1:]) for r in rows])


def remove_file(c: sqlite3.Connection, fid: int) -> list[int]:
    """Drop a file with its chunks, postings and links (vectors tombstoned); returns its chunk ids."""
    ids = [r[0] for r in c.execute("SELECT id FROM chunks WHERE file_id=?", (fid,))]
    delete_postings(c, ids)
    c.execute("DELETE FROM fts_titles WHERE file_id=?", (fid,))
    c.execute("DELETE FROM files WHERE id=?", (fid,))  # cascades to chunks and links
    tombstone(c, ids)
    return ids


def record_skip(c: sqlite3.Connection, path: str, reason: str, size: int | None, mtime: float | None) -> None:
    c.execute("INSERT OR REPLACE INTO skipped(path, reason, size, mtime, at) VALUES (?,?,?,?,?)",
              (path, reason, size, mtime, time.time()))


def forget_skip(c: sqlite3.Connection, path: str) -> None:
    c.execute("DELETE FROM skipped WHERE path=?", (path,))




def is_corruption(exc: BaseException) -> bool:
    """True for SQLite errors that mean a damaged file (malformed image, not a database), not a busy lock."""
    if not isinstance(exc, sqlite3.DatabaseError) or isinstance(exc, sqlite3.OperationalError) and \
            "locked" in str(exc):
        return False
    text = str(exc).lower()
    return any(k in text for k in ("malformed", "not a database", "corrupt", "integrity check failed",
                                   "file is encrypted", "disk image", "could not decode"))


def brief(exc: BaseException | str, limit: int = 100) -> str:
    """An error as one short line (a decode error quotes the whole damaged value)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def time_stamp() -> str:
    import time as _t

    return _t.strftime("%Y%m%dT%H%M%S")


class Store:
    """Thread-aware access to the index database.

    ``conn`` is this thread's connection (at most one per live thread). ``write()`` is a context manager around one transaction
    (``BEGIN IMMEDIATE`` … ``COMMIT``/``ROLLBACK``).
    """

    def __init__(self, db_path: Path, emb_path: Path) -> None:
        self.db_path = Path(db_path)
        self.emb_path = Path(emb_path)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        # thread -> connection; connections of finished threads are handed to new threads (Textual starts a
        # thread per worker, so per-thread connections would otherwise pile up).
        self._owned: dict[threading.Thread, sqlite3.Connection] = {}
        self._all_lock = threading.Lock()
        self.recovered: list[str] = []  # files moved aside because they were corrupt
        #: True when the last process to use the index did not close it (killed, crashed); see _claim_open()
        self.unclean = False
        #: what the open-time integrity check did: "skipped", "ok" or the problem found (then repaired)
        self.integrity: str = "skipped"
        self._open_fd: int | None = None
        self._claim_open()
        self._open_checked()
        if self.get_meta("schema_version") not in (None, str(SCHEMA_VERSION)):
            # Older schema: the index is derived data, rebuild it from scratch.
            self._close_conns()
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.db_path) + suffix).unlink(missing_ok=True)
        with self.write():
            self.set_meta("schema_version", str(SCHEMA_VERSION))
        self._inode = self._db_inode()

    def _claim_open(self) -> None:
        """Hold a shared flock on ``<db>.open`` while this store is open. Whoever gets it exclusively first is the
        only user; a non-empty ``-wal`` file then means the previous last user never closed the database (SQLite
        checkpoints and deletes the WAL on the last clean close): an unclean shutdown."""
        try:
            import fcntl

            fd = os.open(f"{self.db_path}.open", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except (ImportError, OSError):
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass  # another process has the index open: its WAL is live, not left over
        else:
            wal = Path(f"{self.db_path}-wal")
            try:
                if self.db_path.exists():
                    # killed (WAL left over), or the file changed since the last clean close (another program
                    # wrote into it, a restored backup): worth a quick_check
                    self.unclean = (wal.exists() and wal.stat().st_size > 0) or self._stamp() != self._read_stamp()
            except OSError:
                self.unclean = False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:
            pass
        self._open_fd = fd

    def _db_inode(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.db_path)
            return st.st_dev, st.st_ino
        except OSError:
            return None

    def _open_checked(self) -> sqlite3.Connection:
        """This thread's connection, after proving both databases readable. A corrupt file (not a database,
        malformed) is derived data: it is moved aside as ``<name>.corrupt-<time>`` and recreated empty.

        ``PRAGMA quick_check`` runs too after an unclean shutdown, and otherwise every ``QUICK_CHECK_EVERY_S``
        (when the file is at most ``QUICK_CHECK_MAX_BYTES``; bigger ones are checked by ``health_check``)."""
        for attempt in range(3):
            try:
                conn = self.conn
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                conn.execute("SELECT count(*) FROM emb.sqlite_master").fetchone()
                conn.execute("SELECT count(*) FROM files").fetchone()
                if attempt == 0 and self._check_due():
                    problem = self.quick_check()
                    self.integrity = problem or "ok"
                    if problem:
                        raise sqlite3.DatabaseError(f"integrity check failed: {problem}")
                    with self.write():
                        self.set_meta("quick_check_at", str(int(time.time())))
                return conn
            except sqlite3.DatabaseError as exc:
                if attempt == 2:
                    raise
                self._move_aside(str(exc))
        raise AssertionError("unreachable")

    def _check_due(self) -> bool:
        try:
            size = self.db_path.stat().st_size
        except OSError:
            return False
        if self.unclean:
            return True
        last = self.get_meta("quick_check_at")
        due = last is None or time.time() - float(last) > QUICK_CHECK_EVERY_S
        return due and size <= QUICK_CHECK_MAX_BYTES

    def quick_check(self) -> str | None:
        """``PRAGMA quick_check`` of both databases: None when fine, else the first problem (text)."""
        for schema in ("main", "emb"):
            try:
                rows = self.conn.execute(f"PRAGMA {schema}.quick_check(5)").fetchall()
            except sqlite3.DatabaseError as exc:
                return f"{schema}: {exc}"
            if [r[0] for r in rows] != ["ok"]:
                return f"{'index.sqlite' if schema == 'main' else 'embeddings.sqlite'}: " + "; ".join(
                    str(r[0]) for r in rows[:3])
        return None

    def _move_aside(self, reason: str) -> None:
        """Move the corrupt database file(s) aside as ``<name>.corrupt-<time>``; the next connection recreates them."""
        self._close_conns()
        bad = self._which_corrupt()
        stamp = time_stamp()
        for path in bad:
            for suffix in ("", "-wal", "-shm"):
                p = Path(str(path) + suffix)
                if p.exists():
                    p.rename(Path(f"{p}.corrupt-{stamp}"))
            self.recovered.append(f"{path.name}: {brief(reason)}")

    def recover_corrupt(self, exc: BaseException) -> None:
        """After a query failed with a corruption error (see :func:`is_corruption`): move the bad file aside and
        start an empty index (schema, version) in its place. The caller re-indexes from the vault."""
        self._move_aside(str(exc))
        with self.write():
            self.set_meta("schema_version", str(SCHEMA_VERSION))
        self._inode = self._db_inode()

    def sole_user(self) -> bool:
        """True when no other process has this index open (the ``.open`` flock can be taken exclusively; it is
        given back at once). Without flock support: True (single-process use)."""
        if self._open_fd is None:
            return True
        taken = self._take_exclusive()
        if taken:
            self._share_again()
        return taken is not False

    def _take_exclusive(self) -> bool | None:
        """Convert the ``.open`` flock to exclusive without waiting: True when taken (the caller shares it again),
        False when another process holds it, None without flock support."""
        try:
            import fcntl

            fcntl.flock(self._open_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:
            return None
        except OSError:
            self._share_again()  # a failed conversion may have dropped the shared lock (flock(2))
            return False
        return True

    def _share_again(self) -> None:
        try:
            import fcntl

            fcntl.flock(self._open_fd, fcntl.LOCK_SH)
        except (ImportError, OSError):
            pass

    def fresh_file(self, drop_meta: Iterable[str] = ()) -> bool:
        """Replace the index database by a new one holding only the catalogs and the meta keys not in
        ``drop_meta`` (an index rebuild: as fast as a cold index, unlike DELETEs of every row and posting). The new
        file is built beside the old one and renamed over it, so a crash leaves one or the other whole. Done only
        while this process is the index's only user (the ``.open`` flock taken exclusively, which also keeps other
        processes from opening it meanwhile): another process's live WAL must never meet a new file. Returns False
        (nothing changed) otherwise; the embedding cache (a second file) is untouched."""
        if self._open_fd is None or not self._take_exclusive():
            return False
        try:
            c = self.conn
            drop = set(drop_meta)
            meta = [(k, v) for k, v in c.execute("SELECT key, value FROM meta") if k not in drop]
            catalog = c.execute("SELECT name, path, sha, at FROM catalog").fetchall()
            tmp = Path(f"{self.db_path}.fresh")
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{tmp}{suffix}").unlink(missing_ok=True)
            n = register_functions(sqlite3.connect(tmp, isolation_level=None))
            try:
                n.executescript(SCHEMA)
                n.execute("BEGIN")
                n.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?,?)", meta)
                n.executemany("INSERT INTO catalog(name, path, sha, at) VALUES (?,?,?,?)", catalog)
                n.execute("COMMIT")
            finally:
                n.close()
            fsync_path(tmp)
            self._close_conns()  # the last connection checkpoints and removes the old WAL
            os.replace(tmp, self.db_path)
            for suffix in ("-wal", "-shm"):  # anything left belongs to the old file
                Path(f"{self.db_path}{suffix}").unlink(missing_ok=True)
            self._inode = self._db_inode()
            return True
        finally:
            self._share_again()

    def gone(self) -> bool:
        """True when the database file was deleted or replaced since it was opened (e.g. the state dir removed
        while the app runs: writes would go on into an unlinked file, invisible to everyone)."""
        return self._db_inode() != self._inode

    def reopen(self) -> None:
        """Recreate the state dir and an empty index after :meth:`gone` (the caller re-indexes)."""
        self.close()
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        for path in (self.db_path, self.emb_path):
            if not path.exists():  # a leftover -wal of the deleted file must not be replayed into a new one
                for suffix in ("-wal", "-shm"):
                    Path(str(path) + suffix).unlink(missing_ok=True)
        self._claim_open()
        self.recovered.append(f"{self.db_path.parent}: state folder was deleted")
        with self.write():
            self.set_meta("schema_version", str(SCHEMA_VERSION))
        self._inode = self._db_inode()

    def _which_corrupt(self) -> list[Path]:
        out = []
        for path in (self.db_path, self.emb_path):
            if not path.exists():
                continue
            try:
                c = register_functions(sqlite3.connect(path))
                try:
                    c.execute("SELECT count(*) FROM sqlite_master").fetchone()
                    c.execute("PRAGMA quick_check(1)").fetchone()
                finally:
                    c.close()
            except sqlite3.DatabaseError:
                out.append(path)
        return out or [self.db_path]

    def _connect(self) -> sqlite3.Connection:
        conn = register_functions(
            sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None, check_same_thread=False))
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA cache_size=-65536")
        conn.executescript(SCHEMA)
        conn.execute("ATTACH DATABASE ? AS emb", (str(self.emb_path),))
        conn.executescript(EMB_SCHEMA.replace("EXISTS embeddings", "EXISTS emb.embeddings"))
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection (reusing one left by a finished thread when possible)."""
        me = threading.current_thread()
        c = self._owned.get(me)
        if c is not None:
            return c
        with self._all_lock:
            for t, old in list(self._owned.items()):
                if not t.is_alive():
                    del self._owned[t]
                    if old.in_transaction:  # a thread died mid-transaction: its work is void
                        old.rollback()
                    c = old
                    break
            if c is None:
                c = self._connect()
            self._owned[me] = c
        return c

    def compact(self) -> bool:
        """Merge FTS5's postings into one segment (its ``'optimize'`` command) and rewrite the database file without
        free pages (``VACUUM main``; the attached embedding cache is left alone). Run after a first index, where
        many batch commits leave half-filled pages and segments: knowledge-garden-zh 16.0 → 14.8 MB for ~0.5 s
        (``bench/RESULTS.md``). Waits at most 0.2 s for the database lock; False (nothing changed) when another
        connection is busy with the file."""
        c = self.conn
        try:
            c.execute("PRAGMA busy_timeout = 200")
            with self.write():
                c.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('optimize')")
            c.execute("VACUUM main")
            return True
        except sqlite3.OperationalError as exc:  # busy or locked: the index is as good, just larger
            log.info("index not compacted: %s", exc)
            return False
        finally:
            c.execute("PRAGMA busy_timeout = 30000")

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on this thread's connection; rolls back on any exception."""
        c = self.conn
        if c.in_transaction:  # nested use joins the outer transaction
            yield c
            return
        c.execute("BEGIN IMMEDIATE")
        drop_pending_postings(c)  # left by a transaction that never reached its end
        try:
            yield c
            flush_postings(c)
        except BaseException:
            drop_pending_postings(c)
            try:
                c.execute("ROLLBACK")
            except sqlite3.Error:  # a corrupt file may refuse even that; the caller's error says why
                pass
            raise
        else:
            c.execute("COMMIT")

    def close(self) -> None:
        """Close every connection and give up the ``.open`` flock. The last user to close records the files'
        size and mtime (``<db>.clean``): a mismatch at the next open means an unclean shutdown or an outside write."""
        self._close_conns()
        if self._open_fd is not None:
            try:
                import fcntl

                fcntl.flock(self._open_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                last = True
            except (ImportError, OSError):
                last = False
            if last and self.db_path.exists():
                try:
                    tmp = Path(f"{self.db_path}.clean.tmp")
                    tmp.write_text(json.dumps(self._stamp()), encoding="utf-8")
                    os.replace(tmp, f"{self.db_path}.clean")
                except OSError:
                    pass
            os.close(self._open_fd)
            self._open_fd = None

    def _stamp(self) -> list:
        out = []
        for path in (self.db_path, self.emb_path):
            try:
                st = os.stat(path)
                out.append([st.st_size, st.st_mtime_ns])
            except OSError:
                out.append(None)
        return out

    def _read_stamp(self):
        try:
            return json.loads(Path(f"{self.db_path}.clean").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def _close_conns(self) -> None:
        with self._all_lock:
            conns, self._owned = list(self._owned.values()), {}
        for c in conns:
            try:
                c.close()
            except sqlite3.Error:
                pass

    # -- meta -------------------------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # -- files ------------------------------------------------------------------------------------------
    def file_rows(self, paths=None) -> dict[str, tuple[int, float, int, str]]:
        """``{path: (id, mtime, size, sha)}`` of every indexed file, or of those among ``paths`` (an iterable)."""
        q = "SELECT path, id, mtime, size, sha FROM files"
        if paths is None:
            return {r[0]: (r[1], r[2], r[3], r[4]) for r in self.conn.execute(q)}
        paths = list(paths)
        out: dict[str, tuple[int, float, int, str]] = {}
        for i in range(0, len(paths), 500):
            part = paths[i : i + 500]
            out.update((r[0], (r[1], r[2], r[3], r[4]))
                       for r in self.conn.execute(f"{q} WHERE path IN ({','.join('?' * len(part))})", part))
        return out

    def file_info(self, path: str) -> dict | None:
        """The files row of ``path`` as a dict (frontmatter/aliases decoded), or None."""
        r = self.conn.execute(
            "SELECT id, path, mtime, size, sha, kind, frontmatter, name, description, date, aliases, warning "
            "FROM files WHERE path = ?",
            (path,),
        ).fetchone()
        if r is None:
            return None
        return {
            "id": r[0], "path": r[1], "mtime": r[2], "size": r[3], "sha": r[4], "kind": r[5],
            "frontmatter": json.loads(r[6]), "name": r[7], "description": r[8], "date": r[9],
            "aliases": json.loads(r[10]), "warning": r[11],
        }

    def names(self, paths: list[str]) -> dict[str, tuple[str, str]]:
        """``{path: (name, description)}`` for the indexed paths among ``paths``."""
        out: dict[str, tuple[str, str]] = {}
        for i in range(0, len(paths), 500):
            part = paths[i : i + 500]
            q = f"SELECT path, name, description FROM files WHERE path IN ({','.join('?' * len(part))})"
            for p, n, d in self.conn.execute(q, part):
                out[p] = (n, d)
        return out

    def counts(self) -> dict[str, int]:
        c = self.conn
        return {
            "files": c.execute("SELECT count(*) FROM files").fetchone()[0],
            "chunks": c.execute("SELECT count(*) FROM chunks").fetchone()[0],
            "links": c.execute("SELECT count(*) FROM links").fetchone()[0],
            "dangling_links": c.execute("SELECT count(*) FROM links WHERE resolved IS NULL").fetchone()[0],
            "chunks_without_vectors": c.execute("SELECT count(*) FROM chunks WHERE has_vec = 0").fetchone()[0],
            # has_vec 2: a chunk that gets no vector (the status line counts only those that have one)
            "chunks_with_vectors": c.execute("SELECT count(*) FROM chunks WHERE has_vec = 1").fetchone()[0],
            "skipped": c.execute("SELECT count(*) FROM skipped").fetchone()[0],
        }

    def index_state(self) -> dict:
        """What a search can rely on right now, cheap enough to ask per query (two indexed counts, one meta read):
        ``{"syncing": bool`` (a multi-batch sync is under way or was killed: the notes committed so far are
        searchable, the rest are not yet), ``"files": int, "vectors_pending": int`` (chunks waiting for a vector:
        keyword-only for them), ``"keyword_ready": bool}`` (files indexed and no sync under way)."""
        c = self.conn
        syncing = c.execute("SELECT 1 FROM meta WHERE key = 'sync_interrupted'").fetchone() is not None
        files = c.execute("SELECT count(*) FROM files").fetchone()[0]
        pending = c.execute("SELECT count(*) FROM chunks WHERE has_vec = 0").fetchone()[0]
        return {"syncing": syncing, "files": files, "vectors_pending": pending, "keyword_ready": files > 0 and not syncing}

    def skipped(self) -> list[dict]:
        return [
            {"path": p, "reason": r}
            for p, r in self.conn.execute("SELECT path, reason FROM skipped ORDER BY path")
        ]

    # -- catalogs (pipeline checkpoints: which file content a pipeline has already consumed) -----------------
    def catalog_get(self, name: str) -> dict[str, str]:
        """``{path: sha}`` checkpointed by pipeline ``name`` (e.g. "dream", "proactive", "resource")."""
        return {p: s for p, s in self.conn.execute("SELECT path, sha FROM catalog WHERE name=?", (name,))}

    def catalog_set(self, name: str, items: dict[str, str]) -> None:
        """Checkpoint ``{path: sha}`` for pipeline ``name`` (upsert)."""
        import time as _time

        now = _time.time()
        with self.write() as c:
            c.executemany("INSERT OR REPLACE INTO catalog(name, path, sha, at) VALUES (?,?,?,?)",
                          [(name, p, s, now) for p, s in items.items()])

    def catalog_delete(self, name: str, paths) -> None:
        with self.write() as c:
            c.executemany("DELETE FROM catalog WHERE name=? AND path=?", [(name, p) for p in paths])

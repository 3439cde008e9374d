"""The SQLite store of the index (DESIGN §5): files, chunks, links, the FTS5 keyword table, skips, catalogs.

One database file in the state dir, WAL mode. Each thread gets its own connection (``sqlite3`` connections are
not shared across threads); writers are serialised by the engine. All changes to one file happen in one
transaction, so a crash leaves the previous consistent state.

The embedding cache is a second database (``embeddings.sqlite``) so that deleting the index keeps it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

SCHEMA_VERSION = 3

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
    text TEXT NOT NULL,
    text_hash TEXT NOT NULL,         -- hash of the embedding text (cache key)
    has_vec INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS chunks_file ON chunks(file_id);
CREATE INDEX IF NOT EXISTS chunks_novec ON chunks(has_vec) WHERE has_vec = 0;
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(body, title, tokenize = 'unicode61 remove_diacritics 0');
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
        self._open_checked()
        if self.get_meta("schema_version") not in (None, str(SCHEMA_VERSION)):
            # Older schema: the index is derived data, rebuild it from scratch.
            self.close()
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.db_path) + suffix).unlink(missing_ok=True)
        with self.write():
            self.set_meta("schema_version", str(SCHEMA_VERSION))

    def _open_checked(self) -> sqlite3.Connection:
        """This thread's connection, after proving both databases readable. A corrupt file (not a database,
        malformed) is derived data: it is moved aside as ``<name>.corrupt-<time>`` and recreated empty."""
        for attempt in range(3):
            try:
                conn = self.conn
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                conn.execute("SELECT count(*) FROM emb.sqlite_master").fetchone()
                conn.execute("SELECT count(*) FROM files").fetchone()
                return conn
            except sqlite3.DatabaseError as exc:
                if attempt == 2:
                    raise
                self.close()
                bad = self._which_corrupt()
                for path in bad:
                    stamp = time_stamp()
                    for suffix in ("", "-wal", "-shm"):
                        p = Path(str(path) + suffix)
                        if p.exists():
                            p.rename(Path(f"{p}.corrupt-{stamp}"))
                    self.recovered.append(f"{path.name}: {exc}")
        raise AssertionError("unreachable")

    def _which_corrupt(self) -> list[Path]:
        out = []
        for path in (self.db_path, self.emb_path):
            if not path.exists():
                continue
            try:
                c = sqlite3.connect(path)
                try:
                    c.execute("SELECT count(*) FROM sqlite_master").fetchone()
                    c.execute("PRAGMA quick_check(1)").fetchone()
                finally:
                    c.close()
            except sqlite3.DatabaseError:
                out.append(path)
        return out or [self.db_path]

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None, check_same_thread=False)
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

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on this thread's connection; rolls back on any exception."""
        c = self.conn
        if c.in_transaction:  # nested use joins the outer transaction
            yield c
            return
        c.execute("BEGIN IMMEDIATE")
        try:
            yield c
        except BaseException:
            c.execute("ROLLBACK")
            raise
        else:
            c.execute("COMMIT")

    def close(self) -> None:
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
            "skipped": c.execute("SELECT count(*) FROM skipped").fetchone()[0],
        }

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

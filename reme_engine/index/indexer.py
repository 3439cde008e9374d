"""Incremental indexing of a vault: scan → diff by content hash → parse/chunk/tokenize → store; then vectors.

Two passes (ARCHITECTURE §9: the embedder, not the keyword pass, bounds a cold index):

1. :meth:`Indexer.sync` — the keyword + graph pass. Walks the vault, classifies files as added / modified /
   removed / renamed / unchanged (mtime+size as a fast path, the content hash decides), and applies each file's
   new rows (file, chunks, FTS postings, links) in a transaction. Keyword search and the graph are complete
   when it returns.
2. :meth:`Indexer.embed_pending` — the vector pass. Embeds chunks that have no vector yet, reusing the
   embedding cache (keyed by embedding space + text hash) so moved or re-indexed text is never re-embedded.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat as stat_mod
import threading
import logging
import sqlite3
import time
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ..config import Settings
from ..crashpoints import crash_point
from ..vault.io import SkipFile, read_text, text_hash
from ..vault.paths import is_hidden, is_valid_name
from .store import Store

log = logging.getLogger("reme.indexer")

#: Progress callback: ``(stage, done, total, detail)``; stage is "scan", "index", "links" or "embed".
Progress = Callable[[str, int, int, str], None]

MARKDOWN_EXTS = (".md", ".markdown")
TEXT_EXTS = (".txt", ".json", ".jsonl", ".csv", ".yaml", ".yml", ".html", ".htm")
#: Files inside the layers' folders with these extensions are indexed; elsewhere only Markdown is.
_DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
#: Files committed per transaction during a big sync (each file's rows are still applied atomically). A sync with
#: more files than this commits batch by batch (search sees the first notes early) under the ``sync_interrupted``
#: marker; the links, removals and the path list land with the marker's removal, in the last transaction.
BATCH_FILES = 256
#: Meta key set while a multi-transaction sync is under way; found at open with no sync running, it means a sync
#: was killed: :meth:`Indexer.repair_interrupted` re-resolves every link against the vault's files.
SYNC_MARKER = "sync_interrupted"


#: Crash points of a sync and a vector pass (``REME_CRASH_AT=<name>``, see :mod:`reme_engine.crashpoints`; tests and
#: ``bench/bench_chaos.py`` only): after the marker of a multi-batch sync, after its first batch, after the keyword
#: pass, inside the link update, before the last commit, after a vector batch's commit, before the vector save.
CRASH_POINTS = ("sync.after_marker", "sync.after_batch", "sync.after_keyword", "sync.in_links", "sync.after_links",
                "embed.after_commit", "embed.before_save")
EMBED_BATCH = 64
#: Links kept per file: every link costs a row, a resolution and graph work, so one note with 200,000 links (a
#: generated index) must not cost minutes. Beyond it the file's warning says where its graph stops.
MAX_LINKS_PER_FILE = 20_000


@dataclass
class ScanEntry:
    rel: str
    abs: Path
    mtime: float
    size: int


@dataclass
class IndexReport:
    """What a sync did. Counts are files unless named otherwise; ``skipped`` lists ``{path, reason}``."""

    scanned: int = 0
    added: int = 0
    modified: int = 0
    removed: int = 0
    renamed: int = 0
    unchanged: int = 0
    skipped: list[dict] = field(default_factory=list)
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_total: int = 0
    links_total: int = 0
    embedded: int = 0
    embed_cached: int = 0
    embed_error: str | None = None
    seconds_keyword: float = 0.0
    seconds_vector: float = 0.0
    changed_paths: list[str] = field(default_factory=list)
    removed_paths: list[str] = field(default_factory=list)
    #: what this sync repaired first, one user-facing line (interrupted sync, corrupt or deleted index), or None
    repaired: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ParsedFile:
    rel: str
    sha: str
    size: int
    mtime: float
    kind: str
    meta: dict
    name: str
    description: str
    date: str | None
    aliases: list[str]
    warning: str | None
    chunks: list  # list[Chunk]
    links: list  # list[Link]
    title_tokens: str
    chunk_tokens: list[str] = field(default_factory=list)  # space-joined BM25 tokens of each chunk's embed text


#: A sync with at least this many files to parse uses a process pool (parsing is CPU-bound pure Python:
#: markdown-it, YAML, tokenising). Below it, worker start-up (~0.3 s of imports) costs more than it saves.
PARALLEL_MIN_FILES = 600
#: ... and at least this many bytes: on 2 cores the pool lost on the 4 MB vault (4.3 s vs 3.8 s sequential)
#: and won on the 33 MB corpus (14.8 s vs 16.8 s) — bench/RESULTS.md.
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
#: Opt-in: spawned workers re-import the caller's ``__main__``, which breaks scripts without a
#: ``if __name__ == "__main__"`` guard. The ``reme-tui`` entry points switch it on.
PARALLEL_ENABLED = False
_WORKER_INDEXERS: dict = {}


def _parse_pool(n_files: int, n_bytes: int = 1 << 62):
    """A spawn-context process pool for a big sync, or None (small syncs, one core, or pools unavailable)."""
    cpus = os.cpu_count() or 1
    if (not PARALLEL_ENABLED or n_files < PARALLEL_MIN_FILES or n_bytes < PARALLEL_MIN_BYTES or cpus < 2
            or os.environ.get("REME_NO_PARALLEL_INDEX")):
        return None
    try:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: the app forks from a worker thread of a multi-threaded process otherwise.
        return ProcessPoolExecutor(max_workers=min(cpus, 4), mp_context=multiprocessing.get_context("spawn"))
    except (OSError, ValueError, ImportError):
        return None


def _parse_in_worker(args) -> tuple["ParsedFile | None", str | None]:
    """Pool entry point: parse one file with a per-process parser (no store)."""
    vault, settings, entry = args
    key = (str(vault), id(settings))
    ix = _WORKER_INDEXERS.get(key)
    if ix is None:
        from .tokenizer import default_tokenizer

        ix = Indexer.__new__(Indexer)
        ix.vault, ix.settings, ix.tokenizer = Path(vault), settings, default_tokenizer()
        _WORKER_INDEXERS.clear()
        _WORKER_INDEXERS[key] = ix
    return ix._parse_safe(entry)


#: ``chunks.has_vec`` value of a chunk that gets no vector by design (see :func:`wants_vector`).
NO_VECTOR = 2
#: Chunks with fewer content characters than this get no vector: on the real vaults, near-empty chunks
#: ("-", a lone heading, an empty note's title) were nearest neighbours of almost every query ("hubs"),
#: crowding out real matches. They stay searchable by keyword (body and title fields).
MIN_VECTOR_CHARS = 12
_NON_CONTENT_RE = re.compile(r"[\s#>*_`|\-=~\[\]()!:.,;]+")


def wants_vector(text: str) -> bool:
    """True when a chunk's own text has enough content to be worth an embedding."""
    return len(_NON_CONTENT_RE.sub("", text[:200])) >= MIN_VECTOR_CHARS


class _index_file_lock:
    """Cross-process exclusion for index syncs (two ``--refresh`` on one vault): ``flock`` on
    ``<state dir>/index.lock``, blocking. Vector passes and searches do not take it."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / "index.lock"
        self.fd: int | None = None
        self.depth = 0  # re-entry by the thread already holding the Indexer's RLock

    def __enter__(self):
        self.depth += 1
        if self.depth > 1:
            return self
        try:
            import fcntl

            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except (ImportError, OSError):
            self.fd = None  # no flock here: single-process use only
        return self

    def try_enter(self) -> bool:
        """:meth:`__enter__` without waiting: False (and not entered) when another process holds the lock."""
        if self.depth > 0:
            self.depth += 1
            return True
        from ..lock import try_flock

        if not os.access(self.path.parent, os.W_OK):
            self.depth += 1  # no lock file possible here: single-process use only
            return True
        fd = try_flock(self.path, create=True)
        if fd is None:
            return False
        self.fd, self.depth = fd, 1
        return True

    def __exit__(self, *exc) -> None:
        self.depth -= 1
        if self.depth == 0 and self.fd is not None:
            os.close(self.fd)  # releases the flock
            self.fd = None


def path_date(rel: str) -> str | None:
    """The first ``YYYY-MM-DD`` path component (folder or file stem) of ``rel``, if it is a real date."""
    from datetime import date

    for part in rel.split("/"):
        stem = part.rsplit(".", 1)[0] if "." in part else part
        m = _DATE_RE.match(stem)
        if m:
            try:
                return date(int(m[1]), int(m[2]), int(m[3])).isoformat()
            except ValueError:
                continue
    return None


def chunk_vid(path: str, text: str, occurrence: int) -> int:
    """Stable 60-bit id of a chunk: from the chunk hash of (path, text), disambiguated by occurrence."""
    from ..markdown.chunker import chunk_id

    h = chunk_id(path, text if occurrence == 0 else f"{text}\x00{occurrence}")
    return int(h[:15], 16)


def _as_str_list(v) -> list[str]:
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v if x is not None and str(x).strip()]
    return [str(v)] if str(v).strip() else []


_CALLOUT_RE = re.compile(r"^\[![^\]]*\][+-]?\s*")
# No '[' in the label and no '(' in the destination: each attempt stops at the next bracket, so the scan is linear
# (the old ``[^\]]*`` label took 225 s on a line of 60,000 '[').
_MD_LINK_RE = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")
_EMPHASIS_RE = re.compile(r"(\*\*|__|\*|`|==|~~)")
#: Characters of a line :func:`plain_line` looks at in a summary: a description keeps 120 of them, and one
#: pathological line (5 MB, 200,000 links) must not cost more than a short one.
SUMMARY_SCAN_CHARS = 4000


def plain_line(line: str) -> str:
    """A Markdown line as plain text: wikilinks → their display text, Markdown links → their label, callout
    markers, emphasis and code ticks removed. Linear in ``len(line)``."""
    from ..markdown.links import parse_links

    links = parse_links(line)
    if links:
        parts: list[str] = []
        pos = 0
        for lk in sorted(links, key=lambda x: x.start):
            if lk.start < pos:
                continue
            parts.append(line[pos:lk.start])
            parts.append(lk.alias or lk.display or lk.target)
            pos = lk.end
        parts.append(line[pos:])
        line = "".join(parts)
    line = _MD_LINK_RE.sub(r"\1", line)
    line = _CALLOUT_RE.sub("", line)
    return " ".join(_EMPHASIS_RE.sub("", line).split())


def _first_line_summary(text: str, limit: int = 120) -> str:
    """The first prose line of a body as plain text (a note's description when its frontmatter has none).
    Looks at most at 200 lines of at most :data:`SUMMARY_SCAN_CHARS` characters each."""
    for line in text[: 200 * SUMMARY_SCAN_CHARS].splitlines()[:200]:
        line = line[:SUMMARY_SCAN_CHARS]
        s = line.strip()
        if not s or s.startswith(("#", "```", "~~~", "---", "|", "<", "!", "%%")) or "::" in s:
            continue
        s = plain_line(s.lstrip("-*> ").strip())
        if s and not s.startswith("[!"):
            return s[:limit] + ("…" if len(s) > limit else "")
    return ""


class Indexer:
    """Keeps the store (and the vector index) in step with the vault. Thread-safe: one writer at a time."""

    def __init__(self, vault: Path, settings: Settings, store: Store, tokenizer, vectors=None) -> None:
        self.vault = Path(vault)
        self.settings = settings
        self.store = store
        self.tokenizer = tokenizer
        self.vectors = vectors  # VectorState or None
        self.lock = threading.RLock()
        self._file_lock = _index_file_lock(store.db_path.parent)
        # Every file of the vault (attachments too) and a link resolver over it, kept in memory between syncs
        # and valid while the store's ``names_gen`` is the one they were loaded at (another process's sync
        # changes it). Only sync touches them, under ``self.lock``.
        self._paths: set[str] | None = None
        self._paths_gen: str | None = None
        self._resolver = None
        #: user-facing lines of what syncs of this process repaired (interrupted sync, corrupt/deleted index)
        self.repairs: list[str] = []
        layers = settings.layers
        self._text_roots = tuple(f"{d}/" for d in (layers.resource_dir, layers.daily_dir, layers.digest_dir))
        self._dialog_root = f"{layers.session_dir}/dialog/"  # chat records (reme_engine.search.chats)
        self._check_tokenizer()

    # -- scanning -----------------------------------------------------------------------------------------
    def _check_tokenizer(self) -> None:
        fp = self.store.get_meta("tokenizer")
        if fp != self.tokenizer.fingerprint:
            with self.store.write() as c:
                if fp is not None:
                    # Different tokens: every file must be re-tokenised. Forget hashes so sync re-reads all.
                    c.execute("UPDATE files SET sha = '', mtime = -1")
                self.store.set_meta("tokenizer", self.tokenizer.fingerprint)
        from ..search.chats import CHUNKING

        if self.store.get_meta("dialog_chunking") != CHUNKING:  # chat records chunk by turn: re-read them
            with self.store.write() as c:
                c.execute("UPDATE files SET sha = '', mtime = -1 WHERE substr(path, -6) = '.jsonl'")
                self.store.set_meta("dialog_chunking", CHUNKING)

    def is_indexable(self, rel: str) -> bool:
        low = rel.lower()
        if low.endswith(MARKDOWN_EXTS):
            return True
        if low.endswith(".jsonl") and rel.startswith(self._dialog_root):
            return True
        return low.endswith(TEXT_EXTS) and rel.startswith(self._text_roots)

    def scan(self, report: IndexReport | None = None) -> tuple[dict[str, ScanEntry], list[str]]:
        """Walk the vault. Returns ``({rel: entry} of indexable files, all file paths for link resolution)``.

        Hidden files/folders are ignored. Directory symlinks are not followed (no loops); a file symlink is
        used only when its target is inside the vault, and a note is indexed once: a symlink to a file this scan
        indexes itself is skipped ("symlink to X: indexed there"; its name is no file for link resolution
        either), a symlink to anything else inside the vault (a hidden file, a file outside the indexed kinds) is
        indexed under the link. Skips are appended to ``report.skipped``.
        """
        root = self.vault.resolve()
        entries: dict[str, ScanEntry] = {}
        all_paths: list[str] = []
        skips = report.skipped if report is not None else []

        def onerror(err: OSError) -> None:
            name = str(getattr(err, "filename", "") or "?")
            try:
                name = os.path.relpath(name, root)
            except ValueError:
                pass
            skips.append({"path": name.encode("utf-8", "backslashreplace").decode("utf-8"),
                          "reason": f"unreadable folder: {err.strerror}"})

        for dirpath, dirnames, filenames in os.walk(root, onerror=onerror, followlinks=False):
            rel_dir = os.path.relpath(dirpath, root)
            rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for fn in filenames:
                if fn.startswith(".") or fn.endswith("~"):
                    continue
                rel = unicodedata.normalize("NFC", f"{rel_dir}/{fn}" if rel_dir else fn)
                abs_p = Path(dirpath) / fn
                if not is_valid_name(rel):
                    shown = rel.encode("utf-8", "backslashreplace").decode("ascii", "replace")
                    skips.append({"path": shown, "reason": "file name is not valid UTF-8 (or has a line break)"})
                    continue
                try:
                    st = os.lstat(abs_p)
                    if stat_mod.S_ISLNK(st.st_mode):
                        real = abs_p.resolve()
                        if not real.is_relative_to(root):
                            if self.is_indexable(rel):
                                skips.append({"path": rel, "reason": "symlink leaves the vault"})
                            continue
                        twin = self._indexed_target(real, root)
                        if twin is not None and twin != rel:
                            if self.is_indexable(rel):
                                skips.append({"path": rel, "reason": f"symlink to {twin}: indexed there"})
                            continue
                        st = os.stat(abs_p)
                    if not stat_mod.S_ISREG(st.st_mode):
                        continue
                except (OSError, RuntimeError) as exc:  # broken link, symlink loop, vanished
                    if self.is_indexable(rel):
                        skips.append({"path": rel, "reason": f"unreadable: {getattr(exc, 'strerror', None) or exc}"})
                    continue
                all_paths.append(rel)
                if self.is_indexable(rel):
                    if rel in entries:  # NFC/NFD twins: both names normalise to one path
                        skips.append({"path": rel, "reason": "duplicate name after Unicode normalisation"})
                        continue
                    entries[rel] = ScanEntry(rel, abs_p, st.st_mtime, st.st_size)
        return entries, all_paths

    def _indexed_target(self, real: Path, root: Path) -> str | None:
        """The vault path of a symlink's (fully resolved) target when a scan indexes that file under its own
        name (visible, an indexable kind), else None: then the link is just a second name for it."""
        if not real.is_relative_to(root):
            return None
        rel = unicodedata.normalize("NFC", real.relative_to(root).as_posix())
        if any(part.startswith(".") for part in rel.split("/")) or rel.endswith("~") or not self.is_indexable(rel):
            return None
        return rel

    # -- parsing ------------------------------------------------------------------------------------------
    def parse(self, entry: ScanEntry) -> ParsedFile:
        """Read and parse one file. Raises SkipFile (with a reason) or OSError (vanished)."""
        from ..markdown.chunker import chunk_markdown, chunk_plain

        tf = read_text(entry.abs, self.settings.max_file_bytes)
        text = tf.text
        rel = entry.rel
        stem = rel.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        budget = self.settings.chunk_bytes
        meta: dict = {}
        warning = None
        links: list = []
        if rel.lower().endswith(MARKDOWN_EXTS):
            from ..markdown.frontmatter import parse_frontmatter
            from ..markdown.links import frontmatter_links, parse_links

            fm = parse_frontmatter(text)
            meta, warning = fm.meta, fm.warning
            start_line, offset = fm.body_start_line, fm.body_offset
            if warning and fm.has_block:
                # Invalid frontmatter is the user's text too: index it as body so nothing becomes unsearchable.
                start_line, offset = 1, 0
            body = text[offset:]
            chunks = chunk_markdown(body, line_offset=start_line - 1, max_bytes=budget)
            links = parse_links(body, start_line=start_line, start_offset=offset, limit=MAX_LINKS_PER_FILE + 1)
            if len(links) > MAX_LINKS_PER_FILE:
                del links[MAX_LINKS_PER_FILE:]
                line = links[-1].line
                partial = (f"indexed partially: links after line {line} are not in the graph"
                           f" (more than {MAX_LINKS_PER_FILE:,} links)")
                warning = f"{warning}; {partial}" if warning else partial
            links.extend(frontmatter_links(meta))
            kind = "markdown"
        elif rel.startswith(self._dialog_root) and rel.lower().endswith(".jsonl"):
            # a chat record: one readable line per message, line i <-> file line i
            from ..search.chats import chunk_dialog, dialog_text

            body = dialog_text(text)[0]
            chunks = chunk_dialog(body, max_bytes=budget)  # small windows of whole turns, one day each
            kind = "text"
        else:
            body = text
            chunks = chunk_plain(text, max_bytes=budget)
            kind = "text"
        name = ""
        for key in ("name", "title"):
            v = meta.get(key)
            if isinstance(v, (str, int, float)) and str(v).strip():
                name = str(v).strip()
                break
        name = name or stem
        desc_v = meta.get("description")
        description = str(desc_v).strip() if isinstance(desc_v, (str, int, float)) else ""
        if not description:
            description = _first_line_summary(body)
        if not chunks:
            # An empty (or frontmatter-only) note is still findable by its name: one title-only chunk.
            from ..markdown.chunker import Chunk

            last = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
            chunks = [Chunk(last, last, "", (name or stem,))]
        aliases = _as_str_list(meta.get("aliases")) + _as_str_list(meta.get("alias"))
        from ..markdown.frontmatter import frontmatter_text_values

        title_text = " ".join([stem, name, *frontmatter_text_values(meta)]) if meta else f"{stem} {name}"
        title_tokens = " ".join(self.tokenizer.tokenize(title_text[:20000]))
        chunk_tokens = [" ".join(self.tokenizer.tokenize(ch.embed_text())) for ch in chunks]
        return ParsedFile(
            rel=rel, sha=tf.sha, size=tf.size, mtime=tf.mtime, kind=kind, meta=meta, name=name,
            description=description[:300], date=path_date(rel), aliases=aliases, warning=warning,
            chunks=chunks, links=links, title_tokens=title_tokens, chunk_tokens=chunk_tokens,
        )

    def _parse_safe(self, entry: ScanEntry) -> tuple[ParsedFile | None, str | None]:
        """``(parsed, None)`` or ``(None, skip reason)``; ``"__vanished__"`` when the file disappeared."""
        try:
            return self.parse(entry), None
        except SkipFile as sk:
            return None, sk.reason
        except FileNotFoundError:
            return None, "__vanished__"
        except (OSError, RuntimeError, RecursionError, ValueError) as exc:
            return None, f"unreadable: {exc}"

    # -- writing ------------------------------------------------------------------------------------------
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

    # -- the keyword + graph pass ---------------------------------------------------------------------------
    def sync(self, progress: Progress | None = None, *, paths: Iterable[str] | None = None) -> IndexReport:
        """Bring files, chunks, postings and links up to date with the vault.

        ``paths``: limit the work to these vault-relative paths (a watcher batch or the app's own writes);
        ``None`` = full scan. Never raises for a bad file: it is skipped with a reason.
        """
        from .store import brief, is_corruption

        with self.lock, self._file_lock:
            notice = None
            if self.store.gone():
                # the state dir (or the database) was deleted under us: start again, from the vault
                self.store.reopen()
                self._reset_derived()
                notice = "index database was deleted or replaced: rebuilt from the vault"
                paths = None
            try:
                report = self._sync(progress, paths)
            except sqlite3.DatabaseError as exc:
                if not is_corruption(exc):
                    raise
                log.warning("index database is corrupt (%s): moved aside, rebuilding from the vault", brief(exc))
                self.store.recover_corrupt(exc)
                self._reset_derived()
                notice = f"index was corrupt ({brief(exc)}): moved aside and rebuilt from the vault"
                report = self._sync(progress, None)
            if notice:
                report.repaired = notice if not report.repaired else f"{notice}; {report.repaired}"
            if report.repaired:
                self.repairs.append(report.repaired)
            return report

    def clear(self) -> None:
        """Drop every indexed row (files, chunks, postings, links, skips) and the vector file; the embedding cache
        stays. A database too damaged to delete from is moved aside instead (:meth:`Store.recover_corrupt`)."""
        from .store import brief, is_corruption

        with self.lock, self._file_lock:
            try:
                with self.store.write() as c:
                    for t in ("chunks_fts", "links", "chunks", "files", "skipped", "vec_tombstones"):
                        c.execute(f"DELETE FROM {t}")
                    c.execute("DELETE FROM meta WHERE key IN (?, ?, ?)", (SYNC_MARKER, "all_paths_cache", "last_sync"))
            except sqlite3.DatabaseError as exc:
                if not is_corruption(exc):
                    raise
                self.store.recover_corrupt(exc)
                self.repairs.append(f"index was corrupt ({brief(exc)}): moved aside and rebuilt from the vault")
            self._reset_derived()

    def _reset_derived(self) -> None:
        """Forget in-memory state derived from a database that was replaced (corrupt, deleted)."""
        self._paths = self._paths_gen = self._resolver = None
        self._check_tokenizer()
        if self.vectors is not None:
            self.vectors.reset()

    def _sync(self, progress: Progress | None, paths: Iterable[str] | None) -> IndexReport:
        """:meth:`sync` under the locks. One transaction when the work fits in one batch; otherwise batches
        under :data:`SYNC_MARKER`, the links and the path list in the last transaction with the marker's removal."""
        t0 = time.perf_counter()
        report = IndexReport()
        prog = progress or (lambda *a: None)
        interrupted = self.store.get_meta(SYNC_MARKER)
        if interrupted is not None:
            report.repaired = "the last sync was interrupted: finished it, every link re-resolved"
            paths = None  # the path list may predate the interrupted sync's files: rescan the vault
        with contextlib.ExitStack() as txn:
            known = self.store.file_rows() if paths is None else None
            if paths is None:
                entries, all_paths = self.scan(report)
                scope = set(entries) | set(known)
            else:
                entries = {}
                path_set = set(self._vault_paths())
                scope = set()
                root = self.vault.resolve()
                from ..vault.paths import VaultPathError, resolve

                for rel in paths:
                    rel = unicodedata.normalize("NFC", rel.strip("/"))
                    if not rel or is_hidden(rel) or not self.is_indexable(rel):
                        continue
                    scope.add(rel)  # an indexed note that became unusable (e.g. a symlink loop) is dropped
                    try:
                        p = resolve(root, rel).abs  # finds an NFD spelling on disk too
                    except VaultPathError as exc:
                        if os.path.lexists(root / rel):
                            report.skipped.append({"path": rel, "reason": f"unreadable: {exc}"})
                        path_set.discard(rel)
                        continue
                    try:
                        st = os.stat(p)
                        real = p.resolve()
                        twin = self._indexed_target(real, root) if real != p else None
                        if twin is not None and twin != rel and stat_mod.S_ISREG(st.st_mode):
                            report.skipped.append({"path": rel, "reason": f"symlink to {twin}: indexed there"})
                        elif stat_mod.S_ISREG(st.st_mode) and real.is_relative_to(root):
                            entries[rel] = ScanEntry(rel, p, st.st_mtime, st.st_size)
                        elif stat_mod.S_ISREG(st.st_mode):
                            report.skipped.append({"path": rel, "reason": "symlink leaves the vault"})
                    except (OSError, RuntimeError):
                        pass
                    if rel in entries:
                        path_set.add(rel)
                    else:
                        path_set.discard(rel)
                all_paths = path_set
            if known is None:
                known = self.store.file_rows(scope)
            report.scanned = len(entries)
            prior_skips = {r[0]: (r[1], r[2], r[3]) for r in self.store.conn.execute(
                "SELECT path, reason, size, mtime FROM skipped")}
            todo: list[tuple[ScanEntry, int | None]] = []
            for rel in sorted(scope):
                e = entries.get(rel)
                k = known.get(rel)
                if e is None:
                    continue
                if k is not None and k[1] == e.mtime and k[2] == e.size and k[3]:
                    report.unchanged += 1
                    continue
                ps = prior_skips.get(rel)
                if k is None and ps is not None and ps[1] == e.size and ps[2] == e.mtime:
                    report.skipped.append({"path": rel, "reason": ps[0]})  # still bad, unchanged since
                    continue
                todo.append((e, k[0] if k else None))
            removed = [rel for rel in scope if rel in known and rel not in entries]
            removed_by_sha: dict[str, list[str]] = {}
            for rel in removed:
                removed_by_sha.setdefault(known[rel][3], []).append(rel)
            paths_changed = bool(removed)
            aliased: list[str] = []  # modified files with aliases: links elsewhere may resolve to them anew
            total = len(todo)
            prog("index", 0, total, "")
            done = 0
            batch: list[tuple[ScanEntry, int | None]] = []
            # One transaction for the whole sync when it fits in one batch (watcher batches, the app's writes,
            # an incremental refresh): it is opened lazily, after the first batch is parsed, and joined by every
            # write below. A bigger sync commits per batch, announced by the marker first.
            single = total <= BATCH_FILES
            if not single:
                with self.store.write():
                    self.store.set_meta(SYNC_MARKER, json.dumps({"pid": os.getpid(), "at": time.time()}))
                crash_point("sync.after_marker")

            def flush(batch) -> None:
                nonlocal paths_changed
                parsed: list[tuple[ScanEntry, int | None, ParsedFile | None, str | None]] = []
                # Results arrive in order; with a pool, workers keep parsing ahead while this thread writes.
                for (e, fid), (pf, reason) in zip(batch, outcome_iter):
                    parsed.append((e, fid, pf, reason))
                if single and not self.store.conn.in_transaction:
                    txn.enter_context(self.store.write())
                with self.store.write() as c:
                    for e, fid, pf, reason in parsed:
                        if pf is None:
                            if fid is not None:
                                ids = self._remove(c, e.rel, fid)
                                report.chunks_removed += len(ids)
                                report.removed += 1
                                report.removed_paths.append(e.rel)
                                paths_changed = True
                            if reason != "__vanished__":
                                self._record_skip(c, e.rel, reason, e, report)
                            continue
                        if fid is not None and known[e.rel][3] == pf.sha:
                            # Touched, not changed: refresh the fast-path stamp only.
                            c.execute("UPDATE files SET mtime=?, size=? WHERE id=?", (pf.mtime, pf.size, fid))
                            report.unchanged += 1
                            continue
                        old = None
                        if fid is None and removed_by_sha.get(pf.sha):
                            # A removed file with the same content: a rename. Reuse its row (and vectors'
                            # cache entries through the text hash).
                            src = removed_by_sha[pf.sha].pop(0)
                            removed.remove(src)
                            old = known[src][0]
                            report.renamed += 1
                            report.removed_paths.append(src)
                            paths_changed = True
                        elif fid is None:
                            report.added += 1
                            paths_changed = True
                        else:
                            report.modified += 1
                        target = fid if fid is not None else old
                        had_aliases = fid is not None and c.execute(
                            "SELECT aliases != '[]' FROM files WHERE id=?", (fid,)).fetchone()[0]
                        self._apply(c, pf, target, report)
                        report.changed_paths.append(pf.rel)
                        if had_aliases or (fid is not None and pf.aliases):
                            aliased.append(pf.rel)

            pool = _parse_pool(len(todo), sum(e.size for e, _ in todo))
            outcome_iter = (pool.map(_parse_in_worker, [(self.vault, self.settings, e) for e, _ in todo],
                                     chunksize=16) if pool is not None
                            else (self._parse_safe(e) for e, _ in todo))
            try:
                for item in todo:
                    batch.append(item)
                    if len(batch) >= BATCH_FILES:
                        flush(batch)
                        crash_point("sync.after_batch")
                        done += len(batch)
                        batch = []
                        prog("index", done, total, item[0].rel)
                if batch:
                    flush(batch)
                    done += len(batch)
                    prog("index", done, total, "")
            finally:
                if pool is not None:
                    pool.shutdown(cancel_futures=True)
            crash_point("sync.after_keyword")
            # The last transaction (the only one of a single-batch sync): removals, skips, links, path list, and
            # the marker's removal land together.
            txn.enter_context(self._final_txn())
            if removed:
                with self.store.write() as c:
                    for rel in removed:
                        ids = self._remove(c, rel, known[rel][0])
                        report.chunks_removed += len(ids)
                        report.removed += 1
                        report.removed_paths.append(rel)
                        c.execute("DELETE FROM skipped WHERE path=?", (rel,))
            # Files skipped earlier that no longer exist are forgotten; skips found by the scan (or, for a batch,
            # by resolving its paths: symlinks, loops, names) are recorded so health_check lists them too.
            with self.store.write() as c:
                if paths is None:
                    gone = [p for p in prior_skips if p not in entries]
                    c.executemany("DELETE FROM skipped WHERE path=?", [(p,) for p in gone])
                now = time.time()
                if report.skipped:
                    c.executemany("INSERT OR REPLACE INTO skipped(path, reason, size, mtime, at) VALUES (?,?,?,?,?)",
                                  [(sk["path"], sk["reason"], None, None, now) for sk in report.skipped
                                   if sk["path"] not in entries])
            prog("links", 0, 1, "")
            self.resolve_links(all_paths=all_paths, only_changed=not paths_changed and not aliased,
                               changed=report.changed_paths, removed=report.removed_paths,
                               rebuild=interrupted is not None)
            if interrupted is not None or not single:
                self.store.conn.execute("DELETE FROM meta WHERE key = ?", (SYNC_MARKER,))
            crash_point("sync.after_links")
            txn.close()  # commit
            prog("links", 1, 1, "")
        if self.vectors is not None and self.vectors.ready and (
                report.chunks_removed or removed
                or self.store.conn.execute("SELECT 1 FROM vec_tombstones LIMIT 1").fetchone()):
            # also removals recorded by another process's sync of a file this one then found unchanged
            self.vectors.apply_tombstones()
        counts = self.store.counts()
        report.chunks_total = counts["chunks"]
        report.links_total = counts["links"]
        report.seconds_keyword = time.perf_counter() - t0
        return report

    @contextlib.contextmanager
    def _final_txn(self):
        """The sync's last transaction; on failure the in-memory path set and resolver (updated as the links
        are resolved) are dropped, so they never describe rows that were rolled back."""
        try:
            with self.store.write():
                yield
        except BaseException:
            self._paths = self._paths_gen = self._resolver = None
            raise

    # -- consistency ----------------------------------------------------------------------------------------
    def repair_interrupted(self) -> str | None:
        """When a sync was killed (its :data:`SYNC_MARKER` is set and no sync holds the index lock), bring the
        links back in step with the vault at once: rescan the file list and re-resolve every link in one
        transaction that also drops the marker. Files the killed sync had not reached yet stay as they were
        indexed (the next sync takes them). Returns a user-facing line, or None when nothing was interrupted.
        Cheap (~0.5 s for 3k notes / 7k links); never blocks on a running sync."""
        if self.store.get_meta(SYNC_MARKER) is None:
            return None
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if not self._file_lock.try_enter():
                return None  # another process is syncing: its marker is live
            try:
                if self.store.get_meta(SYNC_MARKER) is None:
                    return None
                _, all_paths = self.scan()
                with self._final_txn():
                    n = self.resolve_links(all_paths=all_paths, only_changed=False, changed=[], rebuild=True)
                    self.store.conn.execute("DELETE FROM meta WHERE key = ?", (SYNC_MARKER,))
                return f"the last sync was interrupted: links repaired ({n} re-resolved)"
            finally:
                self._file_lock.__exit__(None, None, None)
        finally:
            self.lock.release()

    def check_links(self, sample: int | None = 200) -> dict:
        """Link resolution against the path set: links resolved to a path that is not a file of the vault (as of
        the last sync), and ``sample`` random links (None: all) re-resolved with a fresh resolver.

        Returns ``{"links", "checked", "stale", "mismatched"}`` (counts); both problem counts are 0 when the
        index is consistent."""
        c = self.store.conn
        cached = self.store.get_meta("all_paths_cache")
        paths = set(json.loads(cached)) if cached else {r[0] for r in c.execute("SELECT path FROM files")}
        total = c.execute("SELECT count(*) FROM links").fetchone()[0]
        stale = sum(n for res, n in c.execute(
            "SELECT resolved, count(*) FROM links WHERE resolved IS NOT NULL GROUP BY resolved") if res not in paths)
        q = ("SELECT l.target, f.path, l.resolved, l.ambiguous, l.virtual FROM links l JOIN files f ON f.id = l.src_id")
        rows = [] if sample == 0 else c.execute(q + (" ORDER BY random() LIMIT ?" if sample is not None else ""),
                                                (sample,) if sample is not None else ()).fetchall()
        mismatched = 0
        if rows:
            resolver = self.build_resolver(paths)
            for target, src, res, amb, virt in rows:
                if not target:
                    want = (src, 0, src)
                else:
                    r = resolver.resolve(target, src)
                    want = (r.path, int(r.ambiguous), r.path or r.virtual)
                mismatched += want != (res, amb, virt)
        return {"links": total, "checked": len(rows), "stale": stale, "mismatched": mismatched}

    def repair_links(self) -> int:
        """Re-resolve every link against a fresh scan of the vault's files, in one transaction (after
        :meth:`check_links` found a problem). Returns the number of links updated."""
        with self.lock, self._file_lock:
            _, all_paths = self.scan()
            with self._final_txn():
                return self.resolve_links(all_paths=all_paths, only_changed=False, changed=[], rebuild=True)

    # -- links --------------------------------------------------------------------------------------------
    def _vault_paths(self) -> set[str]:
        """Every file path of the vault as of the last sync (attachments too): the in-memory copy, reloaded from
        the store when another process's sync changed it. The caller must not mutate it."""
        gen = self.store.get_meta("names_gen")
        if self._paths is None or gen != self._paths_gen:
            cached = self.store.get_meta("all_paths_cache")
            self._paths = set(json.loads(cached) if cached else
                              (r[0] for r in self.store.conn.execute("SELECT path FROM files")))
            self._paths_gen = gen
            self._resolver = None
        return self._paths

    def _aliases_of(self, paths: Iterable[str] | None = None) -> dict[str, list]:
        """``{path: aliases}`` of indexed files with aliases (all, or those in ``paths``)."""
        c = self.store.conn
        if paths is None:
            return {p: json.loads(a) for p, a in c.execute("SELECT path, aliases FROM files WHERE aliases != '[]'")}
        out: dict[str, list] = {}
        paths = list(paths)
        for i in range(0, len(paths), 500):
            part = paths[i : i + 500]
            out.update((p, json.loads(a)) for p, a in c.execute(
                f"SELECT path, aliases FROM files WHERE aliases != '[]' AND path IN ({','.join('?' * len(part))})",
                part))
        return out

    def build_resolver(self, all_paths: Iterable[str] | None = None):
        """A new :class:`LinkResolver` over every file of the vault (as of the last sync) and the indexed aliases.

        Callers own the result (sync keeps its own, updated in place)."""
        from ..markdown.links import LinkResolver

        if all_paths is None:
            # lock-free: sync replaces ``_paths`` (never mutates it), so a snapshot of the reference is safe
            paths, gen = self._paths, self._paths_gen
            if paths is None or gen != self.store.get_meta("names_gen"):
                cached = self.store.get_meta("all_paths_cache")
                paths = json.loads(cached) if cached else [r[0] for r in self.store.conn.execute("SELECT path FROM files")]
            all_paths = list(paths)
        return LinkResolver(all_paths, self._aliases_of())

    def resolve_links(self, *, all_paths: Iterable[str] | None, only_changed: bool, changed: list[str],
                      removed: list[str] = (), rebuild: bool = False) -> int:
        """(Re)compute ``links.resolved`` after a sync.

        ``all_paths``: the vault's files now (None: unchanged); ``changed``: files (re)written by the sync;
        ``removed``: files gone (renamed ones by their old path). The links of ``changed`` files are always
        re-resolved. When files appeared or vanished or a changed file has aliases (``only_changed`` False), the
        links elsewhere that may resolve differently are too: those resolved to a removed or changed file, and
        those whose target names an added or removed file (its name or stem, compared as the resolver does) or
        one of a changed file's aliases. With no usable in-memory resolver (first sync of this process, or
        another process changed the vault's names) every link is re-resolved. ``rebuild``: re-resolve every link
        with a fresh resolver and rewrite the path list (after an interrupted sync). Caller holds ``self.lock``;
        the writes join the caller's transaction when one is open. Returns the number of links updated.
        """
        from ..markdown.links import normalize_name

        c = self.store.conn
        if rebuild:
            self._resolver = None
            only_changed = False
        old_paths = self._vault_paths()
        resolver = self._resolver
        new_paths = old_paths if all_paths is None else set(all_paths)
        added, gone = new_paths - old_paths, old_paths - new_paths
        if added or gone or not only_changed:
            with self.store.write():
                if added or gone or rebuild:
                    self.store.set_meta("all_paths_cache", json.dumps(sorted(new_paths), ensure_ascii=False))
                gen = os.urandom(8).hex()
                self.store.set_meta("names_gen", gen)
            self._paths, self._paths_gen = new_paths, gen
        if only_changed and not changed and not added and not gone:
            return 0
        full = resolver is None
        if full:
            resolver = self.build_resolver(new_paths)
        else:
            for p in gone:
                resolver.remove(p)
            renamed_aliases = self._aliases_of(list(added) + list(changed))
            for p in added:
                resolver.add(p, renamed_aliases.get(p, ()))
            for p in changed:  # re-adding replaces a file's aliases
                if p in new_paths:
                    resolver.add(p, renamed_aliases.get(p, ()))
        self._resolver = resolver
        cols = "l.id, l.target, f.path, l.resolved, l.ambiguous, l.virtual"
        if full and (added or gone or not only_changed):
            rows = c.execute(f"SELECT {cols} FROM links l JOIN files f ON f.id = l.src_id").fetchall()
        else:
            rows = []
            for i in range(0, len(changed), 500):
                part = changed[i : i + 500]
                rows += c.execute(f"SELECT {cols} FROM links l JOIN files f ON f.id = l.src_id"
                                  f" WHERE f.path IN ({','.join('?' * len(part))})", part).fetchall()
            if added or gone or not only_changed:
                seen = {r[0] for r in rows}
                # links resolved to a file that went away or changed (its aliases may be gone)
                pointed = list(set(removed) | gone | set(changed))
                for i in range(0, len(pointed), 500):
                    part = pointed[i : i + 500]
                    for r in c.execute(f"SELECT {cols} FROM links l JOIN files f ON f.id = l.src_id"
                                       f" WHERE l.resolved IN ({','.join('?' * len(part))})", part):
                        if r[0] not in seen:
                            seen.add(r[0])
                            rows.append(r)
                # links whose target names an added/removed file, or is an alias of a changed/added file
                names: set[str] = set()
                for p in added | gone:
                    name = normalize_name(p).rsplit("/", 1)[-1]
                    names.add(name)
                    if name.endswith(".md"):
                        names.add(name[:-3])
                alias_keys = {normalize_name(a.strip()) for al in renamed_aliases.values() for a in (
                    [al] if isinstance(al, str) else al) if isinstance(a, str) and a.strip()} if not full else set()
                if names or alias_keys:
                    wanted = []
                    for lid, target in c.execute("SELECT id, target FROM links"):
                        if lid in seen or not target:
                            continue
                        nt = normalize_name(target.strip())
                        last = nt.rsplit("/", 1)[-1]
                        if last in names or (last.endswith(".md") and last[:-3] in names) or nt in alias_keys:
                            wanted.append(lid)
                    for i in range(0, len(wanted), 500):
                        part = wanted[i : i + 500]
                        rows += c.execute(f"SELECT {cols} FROM links l JOIN files f ON f.id = l.src_id"
                                          f" WHERE l.id IN ({','.join('?' * len(part))})", part).fetchall()
        updates = []
        for lid, target, src, old_res, old_amb, old_virt in rows:
            if not target:  # same-note heading link
                r_path, amb, virt = src, 0, src
            else:
                r = resolver.resolve(target, src)
                r_path, amb, virt = r.path, int(r.ambiguous), (r.path or r.virtual)
            if (r_path, amb, virt) != (old_res, old_amb, old_virt):
                updates.append((r_path, amb, virt, lid))
        if updates:
            with self.store.write() as cw:
                cw.executemany("UPDATE links SET resolved=?, ambiguous=?, virtual=? WHERE id=?", updates[:1])
                crash_point("sync.in_links")
                cw.executemany("UPDATE links SET resolved=?, ambiguous=?, virtual=? WHERE id=?", updates[1:])
        return len(updates)

    # -- the vector pass ----------------------------------------------------------------------------------
    def embed_pending(self, progress: Progress | None = None, report: IndexReport | None = None,
                      should_stop: Callable[[], bool] | None = None,
                      lock: "contextlib.AbstractContextManager | None" = None) -> IndexReport:
        """Give every chunk without a vector one (cache first, then the embedder). Saves the faiss index.

        ``lock`` (the engine's write lock) is held only while a batch is committed, never while the embedder
        runs, so keyword syncs of watcher batches and the app's own writes go on during a long vector pass. A
        chunk removed or replaced while its batch was being encoded gets no vector (its id no longer has
        ``has_vec = 0``); its embedding still goes to the cache.

        Embedder failures are recorded in ``report.embed_error`` (search then degrades to keyword-only for
        the missing chunks); they never raise.
        """
        import numpy as np

        from ..markdown.chunker import Chunk
        from .embedder import EmbedderError

        report = report or IndexReport()
        if self.vectors is None:
            return report
        guard = lock if lock is not None else contextlib.nullcontext()
        t0 = time.perf_counter()
        prog = progress or (lambda *a: None)
        vs = self.vectors
        space = vs.embedder.space
        c = self.store.conn
        rows = c.execute("SELECT id, text_hash, text, headings FROM chunks WHERE has_vec = 0").fetchall()
        total = len(rows)
        prog("embed", 0, total, "")
        done = 0
        dirty = False

        def commit(ids: list[int], vecs) -> int:
            """Under ``guard``: add the vectors of the chunks still waiting for one; returns how many."""
            nonlocal dirty
            live = set()
            for i in range(0, len(ids), 500):
                part = ids[i : i + 500]
                live.update(r[0] for r in c.execute(
                    f"SELECT id FROM chunks WHERE has_vec = 0 AND id IN ({','.join('?' * len(part))})", part))
            keep = [j for j, x in enumerate(ids) if x in live]
            if keep:
                with self.store.write() as cw:
                    cw.executemany("UPDATE chunks SET has_vec=1 WHERE id=?", [(ids[j],) for j in keep])
                    # a chunk deleted and restored (same id) before the index was saved: its old tombstone
                    # must not remove the vector added now (add() replaces the old copy anyway)
                    cw.executemany("DELETE FROM vec_tombstones WHERE id=?", [(ids[j],) for j in keep])
                vs.add(np.asarray([ids[j] for j in keep], dtype=np.int64), vecs[keep])
                dirty = True
                crash_point("embed.after_commit")
            return len(keep)

        # 1) cache hits, in bulk
        pending = []
        for i in range(0, len(rows), 500):
            part = rows[i : i + 500]
            hashes = list({r[1] for r in part})
            cached = {h: v for h, v in c.execute(
                f"SELECT text_hash, vec FROM emb.embeddings WHERE space=? AND text_hash IN ({','.join('?' * len(hashes))})",
                [space, *hashes])}
            hit_ids, hit_vecs = [], []
            for r in part:
                blob = cached.get(r[1])
                if blob is not None and len(blob) == 4 * vs.dim:
                    hit_ids.append(r[0])
                    hit_vecs.append(np.frombuffer(blob, dtype=np.float32))
                else:
                    pending.append(r)
            if hit_ids:
                with guard:
                    report.embed_cached += commit(hit_ids, np.vstack(hit_vecs))
                done += len(hit_ids)
                prog("embed", done, total, "")
        # 2) encode the rest in batches; commit each batch so progress survives interruption
        for i in range(0, len(pending), EMBED_BATCH):
            if should_stop is not None and should_stop():
                break
            part = pending[i : i + EMBED_BATCH]
            texts = [Chunk(0, 0, r[2], tuple(json.loads(r[3]))).embed_text() for r in part]
            try:
                m = vs.embedder.embed(texts)
            except EmbedderError as exc:
                report.embed_error = str(exc)
                break
            with guard:
                with self.store.write() as cw:
                    cw.executemany(
                        "INSERT OR REPLACE INTO emb.embeddings(space, text_hash, vec) VALUES (?,?,?)",
                        [(space, r[1], m[j].tobytes()) for j, r in enumerate(part)],
                    )
                report.embedded += commit([r[0] for r in part], m)
            done += len(part)
            prog("embed", done, total, "")
        if dirty:
            crash_point("embed.before_save")
            with guard:
                vs.save()
        report.seconds_vector = time.perf_counter() - t0
        return report

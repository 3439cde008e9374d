"""File jobs of the engine: paths and notes, read/write/edit/delete, folder listing, stat, frontmatter, day pages.

Each function takes the open vault as a :class:`~reme_engine.context.VaultContext` (the façade passes itself) and
is what one :class:`~reme_engine.engine.Engine` method delegates to. Paths are vault-relative strings; every path
goes through :func:`reme_engine.vault.paths.resolve` and every write through
:func:`reme_engine.vault.io.atomic_write` (conflict-checked against the hash read). Errors the user can act on
raise :class:`~reme_engine.errors.EngineError` with a one-line message.
"""

from __future__ import annotations

import stat as _stat

import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadArgument, EngineError, os_error_message
from ..results import (MAX_READ_CHARS, MAX_READ_LINES, DeleteResult, FrontmatterRead, FrontmatterUpdate, ListEntry, ListResult,
                       NoteTitle, ReadResult, StatResult, WriteResult)
from .io import SkipFile, WriteConflict, atomic_write, read_text, remove_if_unchanged
from .paths import VaultPath, VaultPathError, new_name_problem, resolve

if TYPE_CHECKING:
    from ..config import Settings
    from ..context import VaultContext
    from .daily import DailyCreateResult, DailyReindexResult

log = logging.getLogger("reme.engine")

#: bytes a read job accepts: above the index's ``max_file_bytes`` (8 MB) so a note too large to index can still be
#: read a range at a time (the person's own file must never be unreachable)
MAX_READ_FILE_BYTES = 64 * 1024 * 1024


# -- paths and notes ------------------------------------------------------------------------------------------
def resolve_path(ctx: VaultContext, rel: str, *, allow_root: bool = False, for_write: bool = False) -> VaultPath:
    """``rel`` resolved inside the vault; EngineError (the path module's message) when it is not a valid vault path."""
    try:
        return resolve(ctx.vault, rel, allow_root=allow_root, for_write=for_write)
    except VaultPathError as exc:
        raise EngineError(str(exc)) from exc


_SUFFIX_RE = re.compile(r"\.[A-Za-z0-9]{1,10}$")


def has_suffix(rel: str) -> bool:
    """True when the last part of ``rel`` ends in a file suffix (``.md``, ``.txt``, ``.pdf``…: a dot, then 1-10
    letters or digits, trailing spaces and dots aside); ``adv/newnote`` and ``notes v1. draft`` have none and name
    notes (``.md`` left out)."""
    # a trailing space or dot is not part of the name's suffix: "trail.md " names trail.md plus a space (refused
    # by new_name_problem with that reason), never "trail.md .md"
    return bool(_SUFFIX_RE.search(rel.rsplit("/", 1)[-1].rstrip(" .")))


def find_note(ctx: VaultContext, path: str, *, for_write: bool = False) -> VaultPath:
    """The existing file ``path`` names, written with or without ``.md`` (as Obsidian links omit it); for a read
    (not ``for_write``) also a bare note name a wikilink would open, when exactly one note has it.

    A folder does not count (``foo`` finds ``foo.md`` beside a folder ``foo/``); a dangling symlink does (so
    it can be deleted). Raises EngineError ``no such note: X — did you mean Y?`` when nothing matches."""
    vp = resolve_path(ctx, path, for_write=for_write)

    def present(v) -> bool:
        return os.path.lexists(v.abs) and not v.abs.is_dir()

    if present(vp):
        return vp
    if vp.rel and not vp.rel.lower().endswith(".md"):
        alt = resolve_path(ctx, vp.rel + ".md", for_write=for_write)
        if present(alt):
            return alt
    if vp.rel and not for_write:
        # a name as a wikilink gives it (``双链笔记``, ``folder/note``): the note ``[[name]]`` opens, when only one
        # does; an ambiguous name stays an error that lists the candidates (writes always need the exact path)
        try:
            name = vp.rel[:-3] if vp.rel.lower().endswith(".md") else vp.rel
            r = ctx.indexer.build_resolver().resolve(name, "")
        except Exception:  # a damaged index: the plain error below
            log.debug("no link resolution for %s", vp.rel, exc_info=True)
        else:
            if r.path and not r.candidates:
                hit = resolve_path(ctx, r.path)
                if present(hit):
                    return hit
    raise EngineError(missing_note(ctx, vp.rel or path))


def missing_note(ctx: VaultContext, rel: str) -> str:
    """``no such note: X`` plus up to three suggestions: what a link ``[[X]]`` would open, else near names."""
    import difflib

    msg = f"no such note: {rel}"
    name = rel[:-3] if rel.lower().endswith(".md") else rel
    try:
        r = ctx.indexer.build_resolver().resolve(name, "")
        found = list(r.candidates or ([r.path] if r.path else []))
        if not found:
            rows = ctx.store.conn.execute("SELECT path FROM files").fetchall()
            by_key: dict[str, str] = {}
            for (p,) in rows:
                stem = p[:-3] if p.lower().endswith(".md") else p
                by_key.setdefault(stem.lower(), p)
                by_key.setdefault(stem.rsplit("/", 1)[-1].lower(), p)
            for k in difflib.get_close_matches(name.lower(), list(by_key), n=3, cutoff=0.6):
                if by_key[k] not in found:
                    found.append(by_key[k])
        # never the very path that is missing (an index row of a note moved or deleted a moment ago), nor a
        # suggestion that is gone from disk too
        found = [p for p in found if p != rel and os.path.lexists(ctx.vault / p)]
        if ctx.store.conn.execute("SELECT 1 FROM files WHERE path = ?", (rel,)).fetchone() is not None:
            msg += " (it was there a moment ago: moved or deleted meanwhile)"
    except Exception:  # a damaged index must not hide the real error
        log.debug("no suggestions for %s", rel, exc_info=True)
        found = []
    if found:
        msg += " — did you mean " + " or ".join(found[:3]) + "?"
    return msg


def ambiguous_links(ctx: VaultContext, src: str | None = None, limit: int | None = None) -> tuple[int, list[dict]]:
    """(number of ambiguous links, the first ``limit`` as ``{source, line, target, resolved, candidates}``),
    of one note (``src``) or the whole vault; candidates in resolution order, the chosen one first."""
    q = ("SELECT f.path, l.line, l.target, l.resolved FROM links l JOIN files f ON f.id = l.src_id"
         " WHERE l.ambiguous = 1")
    args: tuple = ()
    if src is not None:
        q += " AND f.path = ?"
        args = (src,)
    rows = ctx.store.conn.execute(q + " ORDER BY f.path, l.line, l.id", args).fetchall()
    if not rows:
        return 0, []
    resolver = ctx.indexer.build_resolver()
    out = []
    for path, line, target, resolved in rows[: len(rows) if limit is None else limit]:
        cands = list(resolver.resolve(target, path).candidates) or [resolved]
        out.append({"source": path, "line": line, "target": target, "resolved": resolved, "candidates": cands})
    return len(rows), out


def is_protected(settings: Settings, rel: str) -> bool:
    """True for the vault root, a layer folder, `digest/<bucket>` and `<session>/dialog`: never moved or deleted."""
    layers = settings.layers
    protected = set(layers.all()) | {f"{layers.digest_dir}/{b}" for b in ("personal", "procedure", "wiki")}
    protected.add(f"{layers.session_dir}/dialog")
    return rel.strip("/") in protected or rel.strip("/") == ""


def own_write(ctx: VaultContext, rel: str, sha: str | None) -> None:
    """Tell the watcher about a write the app indexes itself, so it is not reprocessed as an external edit."""
    if ctx.watcher is not None:
        ctx.watcher.expect_write(rel, sha)


def check_encodable(text: str) -> None:
    """EngineError when ``text`` cannot be written as UTF-8 (a lone surrogate from a bad paste or decoder) or holds
    a NUL character (the file would then read as binary: skipped by the index and refused by read and edit, as
    Obsidian and git treat it)."""
    nul = text.find("\x00")
    if nul >= 0:
        raise EngineError(f"not written: text has a NUL character at {nul} (the note would become a binary file)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EngineError(f"not written: text has an invalid character at {exc.start} (not valid UTF-8)") from exc


def valid_day(ctx: VaultContext, date: str) -> str:
    """``date`` checked as YYYY-MM-DD, or today in the app's timezone when empty; EngineError when invalid."""
    from .daily import valid_date

    if not date:
        return ctx.settings.today()
    try:
        return valid_date(date)
    except ValueError as exc:
        raise EngineError(str(exc)) from exc


# -- file jobs ------------------------------------------------------------------------------------------------
def read(ctx: VaultContext, path: str, start_line: int = 1, end_line: int | None = None,
         max_chars: int | None = MAX_READ_CHARS) -> ReadResult:
    """Lines ``start_line``..``end_line`` (1-based, inclusive) of a text file: at most MAX_READ_LINES lines and
    ``max_chars`` characters (None: no character budget; ``truncated`` says a budget cut it; ``line_cut`` when a
    single line was longer than ``max_chars``). Raises EngineError for a missing or unreadable file, a bad range or
    ``max_chars`` < 1."""
    vp = find_note(ctx, path)
    if not vp.abs.is_file():
        raise EngineError(f"no such file: {vp.rel}")
    try:
        tf = read_text(vp.abs, max(ctx.settings.max_file_bytes, MAX_READ_FILE_BYTES))
    except SkipFile as exc:
        raise EngineError(f"cannot read {vp.rel}: {exc.reason}") from exc
    lines = tf.text.splitlines(keepends=True)
    total = len(lines)
    start = int(start_line)
    if start < 1:
        raise BadArgument("start_line must be >= 1")
    if end_line is not None and int(end_line) < start:
        raise BadArgument(f"end_line ({end_line}) is before start_line ({start})")
    if start > max(total, 1):
        raise BadArgument(f"start_line ({start}) is past the end of {vp.rel} ({total} lines)")
    end = total if end_line is None else min(total, int(end_line))
    truncated = False
    if end - start + 1 > MAX_READ_LINES:
        end = start + MAX_READ_LINES - 1
        truncated = True
    budget = None if max_chars is None else int(max_chars)
    if budget is not None and budget < 1:
        raise BadArgument("max_chars must be >= 1")
    parts: list[str] = []
    used = 0
    line_cut = False
    for i in range(start - 1, end):
        line = lines[i]
        if budget is not None and used + len(line) > budget:
            truncated = True
            if not parts:  # one line over the budget: its head, marked
                parts.append(line[:budget])
                line_cut = True
                end = i + 1
            else:
                end = i
            break
        parts.append(line)
        used += len(line)
    return ReadResult(vp.rel, start, max(end, start - 1), total, "".join(parts), tf.sha, truncated, line_cut)


def write(ctx: VaultContext, path: str, content: str, *, overwrite: bool = True,
          expected_sha: str | None = None) -> WriteResult:
    """Create or replace a text file atomically and index it.

    ``overwrite=False`` refuses an existing file; ``expected_sha`` (from a read) refuses when the file changed
    since (EngineError, nothing written). A path without a suffix (``adv/newnote``) names a note and is written
    as ``adv/newnote.md`` unless a file of that exact name exists (as :func:`find_note` reads it). OSErrors
    (name too long, disk full, permission, read-only) are EngineErrors of one line.
    """
    vp = resolve_path(ctx, path, for_write=True)
    if vp.rel and not has_suffix(vp.rel) and not os.path.lexists(vp.abs):
        # "adv/newnote" is a note, as a read or a link would take it: written as adv/newnote.md
        vp = resolve_path(ctx, vp.rel + ".md", for_write=True)
    try:
        return _write(ctx, vp, content, overwrite, expected_sha)
    except OSError as exc:  # a name too long, a full disk, no permission: one line, not a traceback
        raise EngineError(os_error_message(exc, vp.rel)) from exc


def _write(ctx: VaultContext, vp: VaultPath, content: str, overwrite: bool,
           expected_sha: str | None) -> WriteResult:
    if vp.abs.is_dir():
        raise EngineError(f"{vp.rel} is a folder")
    with ctx.write_lock:
        exists = vp.abs.exists()
        if exists and not overwrite:
            raise EngineError(f"{vp.rel} already exists (pass overwrite=true to replace it)")
        if not exists:
            problem = new_name_problem(ctx.vault, vp.rel)
            if problem:
                raise EngineError(f"not created: {problem}")
        expect: Any = False
        if expected_sha:
            expect = expected_sha
        elif not exists:
            expect = None
        check_encodable(content)
        try:
            sha = atomic_write(vp.abs, content, expected_sha=expect)
        except WriteConflict as exc:
            raise EngineError(f"not written: {exc}") from exc
        own_write(ctx, vp.rel, sha)
        ctx.index_paths([vp.rel])
    return WriteResult(vp.rel, not exists, sha, len(content.encode("utf-8")))


def edit(ctx: VaultContext, path: str, old: str, new: str, *, count: int = 1,
         expected_sha: str | None = None) -> WriteResult:
    """Replace ``old`` with ``new`` in a file. ``count``: expected occurrences (0 = replace all).

    ``expected_sha`` (from a read): refuse when the file's current content hash differs (EngineError ``not
    written: …``, nothing written). Raises EngineError when ``old`` is absent or occurs a different number of
    times than ``count``.
    """
    if not old:
        raise EngineError("old text must not be empty")
    vp = find_note(ctx, path, for_write=True)
    if not vp.abs.is_file():
        raise EngineError(f"no such file: {vp.rel}")
    try:
        tf = read_text(vp.abs, ctx.settings.max_file_bytes)
    except SkipFile as exc:  # FileBusy included: a save in progress is a refusal, never a crash
        raise EngineError(f"cannot edit {vp.rel}: {exc.reason}") from exc
    if expected_sha and tf.sha != expected_sha:
        raise EngineError(f"not written: {vp.rel} changed on disk since the read that returned expected_sha")
    n = tf.text.count(old)
    if n == 0:
        raise EngineError(f"text to replace not found in {vp.rel}")
    if count and n != count:
        raise EngineError(f"text occurs {n} times in {vp.rel}, expected {count}; give more context or count=0")
    new_text = tf.text.replace(old, new)
    check_encodable(new_text)
    with ctx.write_lock:
        sha, size = _save_edited(ctx, vp, tf, new_text)
    return WriteResult(vp.rel, False, sha, size)


def _save_edited(ctx: VaultContext, vp: VaultPath, tf: Any, new_text: str) -> tuple[str, int]:
    """Write ``new_text`` over the file ``tf`` was read from, only if it still holds what was read (the BOM it
    had kept), then index it. Returns ``(sha, bytes written)``; EngineError ``not written: …`` when the file
    changed meanwhile. The caller holds the write lock."""
    if tf.encoding == "utf-8-sig" and not new_text.startswith("\ufeff"):
        new_text = "\ufeff" + new_text  # keep the BOM the file had
    try:
        sha = atomic_write(vp.abs, new_text, expected_sha=tf.sha)
    except WriteConflict as exc:
        raise EngineError(f"not written: {exc}") from exc
    except OSError as exc:
        raise EngineError(os_error_message(exc, vp.rel)) from exc
    own_write(ctx, vp.rel, sha)
    ctx.index_paths([vp.rel])
    return sha, len(new_text.encode("utf-8"))


def delete(ctx: VaultContext, path: str, expected_sha: str | None = None) -> DeleteResult:
    """Delete a file and report the links that still point to it (now dangling). With ``expected_sha`` (the
    ``sha`` a read returned) the file is deleted only if it still holds those bytes (EngineError ``not deleted: …
    changed on disk since it was read`` otherwise, the file untouched; see :func:`.io.remove_if_unchanged`)."""
    vp = resolve_path(ctx, path, for_write=True)
    if is_protected(ctx.settings, vp.rel):
        raise EngineError(f"refusing to delete the vault root or a layer folder: {vp.rel or '/'}")
    if vp.abs.is_dir():  # never falls back to foo.md: a delete must name exactly what goes
        raise EngineError(f"{vp.rel} is a folder; delete its files one by one")
    vp = find_note(ctx, path, for_write=True)
    if not vp.abs.exists() and not vp.abs.is_symlink():
        raise EngineError(f"no such file: {vp.rel}")
    from ..search.graph import inlinks

    with ctx.write_lock:
        survivors, _ = inlinks(ctx.store, vp.rel, None)
        own_write(ctx, vp.rel, None)
        try:
            if expected_sha:
                remove_if_unchanged(vp.abs, expected_sha)
            else:
                vp.abs.unlink()
        except WriteConflict as exc:
            ctx.index_paths([vp.rel])  # the person's newer bytes stay, and are indexed as theirs
            raise EngineError(f"not deleted: {exc}") from exc
        except OSError as exc:
            raise EngineError(os_error_message(exc, vp.rel, "delete")) from exc
        ctx.index_paths([vp.rel])
    return DeleteResult(vp.rel, [n.to_dict() for n in survivors])


def list_folder(ctx: VaultContext, path: str = "", *, recursive: bool = False, limit: int = 2000) -> ListResult:
    """Entries of a folder: ``{path, entries: [{path, is_dir, size, mtime}], truncated}`` (hidden ones skipped).

    A symlink whose target leaves the vault (or cannot be resolved) is listed by name only:
    ``is_dir`` False, ``size``/``mtime`` None and ``outside_vault`` True — nothing about the target shows."""
    if limit < 1:
        raise EngineError("limit must be >= 1")
    vp = resolve_path(ctx, path, allow_root=True)
    if not vp.abs.is_dir():
        raise EngineError(f"not a folder: {vp.rel or '/'}")
    root = ctx.vault.resolve()
    entries: list[ListEntry] = []
    truncated = False
    if recursive:
        it = (Path(dp) / n for dp, dns, fns in os.walk(vp.abs)
              for n in (dns.__setitem__(slice(None), sorted(x for x in dns if not x.startswith("."))) or sorted(fns))
              if not n.startswith("."))
    else:
        it = (p for p in sorted(vp.abs.iterdir()) if not p.name.startswith("."))
    for p in it:
        if len(entries) >= limit:
            truncated = True
            break
        rel = p.relative_to(ctx.vault).as_posix()
        try:
            if p.is_symlink():
                try:
                    inside = p.resolve().is_relative_to(root)
                except (OSError, RuntimeError):  # a loop
                    inside = False
                if not inside:
                    entries.append({"path": rel, "is_dir": False, "size": None, "mtime": None,
                                    "outside_vault": True})
                    continue
            st = p.stat()
        except OSError:
            continue
        entries.append({"path": rel, "is_dir": p.is_dir(), "size": st.st_size, "mtime": st.st_mtime})
    return {"path": vp.rel, "entries": entries, "truncated": truncated}


def stat(ctx: VaultContext, path: str) -> StatResult:
    """Metadata of ``path`` (``.md`` optional for a note). A missing file is ``exists=False``, not an error.

    ``warning``: the file's frontmatter problem with its true file line; ``ambiguous_links``: its links that
    several files match (see :func:`ambiguous_links`)."""
    vp = resolve_path(ctx, path, allow_root=True)
    if vp.rel and not vp.abs.exists() and not vp.rel.lower().endswith(".md"):
        # the ``.md`` spelling, as find_note tries it, but without building find_note's "did you mean"
        # message for a miss (a resolver and difflib over every note: ~250 ms on 3,000 notes, then dropped)
        try:
            alt = resolve_path(ctx, vp.rel + ".md")
        except EngineError:
            alt = None
        if alt is not None and os.path.lexists(alt.abs) and not alt.abs.is_dir():
            vp = alt
    exists = vp.abs.exists()
    st = vp.abs.stat() if exists else None
    info = ctx.store.file_info(vp.rel)
    chunks = 0
    if info:
        chunks = ctx.store.conn.execute("SELECT count(*) FROM chunks WHERE file_id=?", (info["id"],)).fetchone()[0]
    sk = ctx.store.conn.execute("SELECT reason FROM skipped WHERE path=?", (vp.rel,)).fetchone()
    return StatResult(vp.rel, exists, vp.abs.is_dir(), st.st_size if st else None, st.st_mtime if st else None,
                      info is not None, chunks, info["name"] if info else None,
                      info["description"] if info else None, info["sha"] if info else None,
                      info["warning"] if info else None, sk[0] if sk else None,
                      ambiguous_links(ctx, vp.rel)[1] if info else [],
                      bool(st is not None and _stat.S_ISREG(st.st_mode) and not st.st_mode & 0o222))


# -- frontmatter --------------------------------------------------------------------------------------
def frontmatter_read(ctx: VaultContext, path: str) -> FrontmatterRead:
    """``{path, frontmatter, warning}`` parsed from the file on disk."""
    from ..markdown.frontmatter import parse_frontmatter

    r = read(ctx, path)
    fm = parse_frontmatter(r.text)
    return {"path": r.path, "frontmatter": fm.meta, "warning": fm.warning, "has_block": fm.has_block}


def frontmatter_update(ctx: VaultContext, path: str, updates: dict | None = None,
                       delete: list[str] | None = None) -> FrontmatterUpdate:
    """Merge ``updates`` into / remove ``delete`` keys from the frontmatter, keeping order and unknown keys."""
    from ..markdown.frontmatter import FrontmatterError, parse_frontmatter, update_frontmatter

    vp = find_note(ctx, path, for_write=True)
    if not vp.abs.is_file():
        raise EngineError(f"no such file: {vp.rel}")
    if updates is not None and not isinstance(updates, dict):
        raise EngineError("updates must be a JSON object of keys to set")
    with ctx.write_lock:
        try:
            tf = read_text(vp.abs, ctx.settings.max_file_bytes)
        except SkipFile as exc:
            raise EngineError(f"cannot edit {vp.rel}: {exc.reason}") from exc
        try:
            new_text = update_frontmatter(tf.text, updates or {}, delete or ())
            check_encodable(new_text)
        except (FrontmatterError, RecursionError, TypeError, ValueError) as exc:
            raise EngineError(f"{vp.rel}: frontmatter not updated: {exc}") from exc
        if (after := parse_frontmatter(new_text)).warning and after.has_block:
            raise EngineError(f"{vp.rel}: frontmatter not updated: the result would not parse")
        _save_edited(ctx, vp, tf, new_text)
    return {"path": vp.rel, "frontmatter": parse_frontmatter(new_text.lstrip("\ufeff")).meta}


# -- index listings and day pages -------------------------------------------------------------------------
def note_titles(ctx: VaultContext) -> list[NoteTitle]:
    """(Read-only.) Every indexed Markdown note's path, title and aliases, newest first (by mtime); one SQL
    query on the index (about 10 ms for 3,000 notes). Empty before the first index pass."""
    import json

    rows = ctx.store.conn.execute(
        "SELECT path, name, aliases, mtime FROM files WHERE kind = 'markdown' ORDER BY mtime DESC").fetchall()
    out: list[NoteTitle] = []
    for path, name, aliases, mtime in rows:
        try:
            al = tuple(str(a) for a in json.loads(aliases) if a) if aliases else ()
        except (ValueError, TypeError):
            al = ()
        out.append(NoteTitle(path, name or path.rsplit("/", 1)[-1].removesuffix(".md"), al, float(mtime)))
    return out


def refresh_day_indexes(ctx: VaultContext, paths: list[str]) -> list[str]:
    """Regenerate the card index of the existing day pages whose cards are among ``paths`` (added, edited,
    renamed or deleted elsewhere: the watcher calls this), so a page never lists a deleted card or misses a
    new one. Pages are never created here; pages without markers or edited meanwhile are left alone.
    Returns the pages rewritten."""
    from . import daily

    from .app_folder import card_dirs

    dates = set()
    for d in card_dirs(ctx.settings.layers):  # cards of the daily folder and of the app folder
        for p in paths:
            parts = p[len(d) + 1:].split("/") if p.startswith(d + "/") else []
            if len(parts) >= 2 and p.lower().endswith(".md"):
                try:
                    dates.add(daily.valid_date(parts[0]))
                except ValueError:
                    pass
    written = []
    for date in sorted(dates):
        with ctx.write_lock:
            try:
                res = daily.daily_reindex(ctx.vault, date, ctx.settings.layers, create_if_missing=False,
                                          max_bytes=ctx.settings.max_file_bytes)
            except (WriteConflict, OSError, ValueError, VaultPathError) as exc:
                log.info("day index of %s not regenerated: %s", date, exc)
                continue
            if res.changed:
                ctx.index_paths([res.path])
                written.append(res.path)
    return written


def daily_create(ctx: VaultContext, date: str) -> DailyCreateResult:
    """Create the day folder and day page of ``date`` (YYYY-MM-DD, already checked); idempotent; indexes a new
    page."""
    from . import daily

    with ctx.write_lock:
        res = daily.daily_create(ctx.vault, date, ctx.settings.layers)
        if res.page_created:
            ctx.index_paths([res.page])
    return res


def daily_reindex(ctx: VaultContext, date: str, insert_markers: bool = False,
                  on_write=None) -> DailyReindexResult:
    """Regenerate the index section of the day page of ``date`` (already checked) between its markers
    (``insert_markers`` adds them). EngineError when the page changed meanwhile (nothing written). ``on_write``:
    see :func:`reme_engine.vault.daily.daily_reindex` (a journal run records the page's change from it)."""
    from . import daily

    with ctx.write_lock:
        try:
            res = daily.daily_reindex(ctx.vault, date, ctx.settings.layers, insert_markers=insert_markers,
                                      on_write=on_write)
        except WriteConflict as exc:
            raise EngineError(f"day page changed while regenerating: {exc}") from exc
        if res.changed:
            ctx.index_paths([res.path])
    return res

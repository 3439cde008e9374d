"""Move/rename a note and rewrite its inbound links, under a move intent that a crash never leaves half done.

:func:`move` is what :meth:`reme_engine.engine.Engine.move` delegates to; :func:`recover_interrupted` finishes,
at the next open, a move a crash interrupted (ARCHITECTURE §8). The rename never replaces a file the user saved
meanwhile (:func:`_rename_noreplace`); a linking note changed meanwhile is a conflict and keeps its bytes.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..crashpoints import crash_point
from ..errors import EngineError, os_error_message
from ..results import MoveResult
from .files import find_note, has_suffix, is_protected, own_write, resolve_path
from .intent import MoveIntent
from .paths import LINK_BREAKING, new_name_problem
from .io import SkipFile, WriteConflict, atomic_write, read_text, rename_noreplace, unlink_second_name
from .paths import VaultPathError, resolve

if TYPE_CHECKING:
    from ..context import VaultContext

log = logging.getLogger("reme.engine")


def move(ctx: VaultContext, src: str, dst: str, *, on_rewrite=None, reasons: dict | None = None) -> MoveResult:
    """Move/rename a file and rewrite the inbound links that would break (anchor, display text, embed kept;
    a bare-name link stays a bare name when that is unambiguous; links through an alias are untouched),
    atomically per file.

    Refuses to overwrite an existing ``dst``, to move the root or a layer folder, and folders.
    A linking file changed meanwhile is reported in ``conflicts`` and left untouched. ``on_rewrite`` and
    ``reasons``: see :func:`rewrite_inbound`.
    """
    s = resolve_path(ctx, src, for_write=True)
    if not s.abs.is_dir():
        s = find_note(ctx, src, for_write=True)
    d = resolve_path(ctx, dst, for_write=True)
    if s.rel.lower().endswith(".md") and d.rel and not has_suffix(d.rel) and not os.path.isdir(d.abs):
        d = resolve_path(ctx, d.rel + ".md", for_write=True)  # "notes/new" names a note, as in a write
    if is_protected(ctx.settings, s.rel) or is_protected(ctx.settings, d.rel):
        raise EngineError("refusing to move the vault root or a layer folder")
    if s.abs.is_dir():
        raise EngineError(f"{s.rel} is a folder; moving folders is not supported")
    if not s.abs.is_file():
        raise EngineError(f"no such file: {s.rel}")
    if s.abs.is_symlink():
        raise EngineError(f"{s.rel} is a symlink; move its target instead")
    bad = [ch for ch in LINK_BREAKING if ch in d.rel]
    if bad:  # even onto an existing file (new_name_problem judges only new names)
        raise EngineError(f"a note named with {' '.join(bad)} cannot be linked to; choose another name")
    problem = new_name_problem(ctx.vault, d.rel) if not os.path.lexists(d.abs) else None
    if problem and not (d.rel.casefold() == s.rel.casefold() and "another case" in problem):
        raise EngineError(f"not moved: {problem}")  # (a rename that only changes the case is fine)
    if s.rel.lower().endswith(".md") and not d.rel.lower().endswith(".md"):
        raise EngineError("moving a note to a non-.md name would break the links to it; keep the .md")
    try:
        return _move(ctx, s, d, on_rewrite, reasons)
    except OSError as exc:  # a name too long, a full disk, no permission: one line, not a traceback
        raise EngineError(os_error_message(exc, d.rel, "move to")) from exc


def _move(ctx: VaultContext, s, d, on_rewrite=None, reasons: dict | None = None) -> MoveResult:
    with ctx.write_lock:
        if d.abs.exists() and not (d.abs.samefile(s.abs) and d.rel != s.rel):
            raise EngineError(f"destination exists: {d.rel}")
        # a full incremental sync (a no-op check when the index is current): the inbound links come from the
        # index, so notes edited since the last sync must be in it or their links would be missed
        ctx.indexer.sync()
        resolver = ctx.indexer.build_resolver()
        moved_aliases = list(resolver._aliases.get(s.rel, ()))
        sources = [r[0] for r in ctx.store.conn.execute(
            "SELECT DISTINCT f.path FROM links l JOIN files f ON f.id = l.src_id WHERE l.resolved = ?",
            (s.rel,))]
        # The intent is on disk before the first byte moves: a crash anywhere below is finished by the next
        # start (see recover_interrupted), so inbound links are never left half rewritten.
        with MoveIntent.begin(ctx.state_dir, s.rel, d.rel, sources, moved_aliases) as intent:
            try:
                d.abs.parent.mkdir(parents=True, exist_ok=True)
                _rename_noreplace(s.abs, d.abs)
            except BaseException:  # refused (read-only vault, destination taken): nothing moved, nothing to finish
                if not d.abs.exists() or s.abs.exists():
                    intent.done()
                raise
            crash_point("move.after_rename")
            rewritten, total, conflicts = rewrite_inbound(ctx, intent, resolver, on_rewrite, reasons)
            intent.done()
    return MoveResult(s.rel, d.rel, rewritten, total, conflicts)


def rewrite_inbound(ctx: VaultContext, intent: MoveIntent, resolver,
                    on_rewrite=None, reasons: dict | None = None) -> tuple[list[str], int, list[str]]:
    """Point the links of ``intent.sources`` at ``intent.dst`` (the file is already there) and index the result.

    ``resolver``: the vault before the move (it must know ``intent.src``). Idempotent: a linking note already
    rewritten has no link left that resolves to ``src``, so running it again after a crash changes nothing
    twice. Returns ``(rewritten paths, links rewritten, conflicts)``. A note another program changes between
    the read and the compare-and-swap write (or keeps changing while read) is read and rewritten again, with
    back-off, for :data:`REWRITE_RETRY_S` seconds; one still changing then, or not writable, is a conflict and
    keeps its bytes. ``on_rewrite(path, before_text, before_sha, after_text, after_sha)`` is
    called after each note written (texts without BOM), so a caller can journal exactly what was replaced.
    ``reasons`` (a dict), when given, gets ``{conflict path: why, in one line}`` (the OS's reason for a disk
    error, e.g. "No space left on device").
    """
    src, dst = intent.src, intent.dst
    why: dict[str, str] = reasons if reasons is not None else {}
    after = ctx.indexer.build_resolver()  # the vault as it will be: links that still work stay as written
    after.remove(src)
    after.add(dst, intent.aliases)
    resolver.remove(dst)
    resolver.add(src, intent.aliases)
    rewritten, total, conflicts = [], 0, []
    # the moved note's own self-links live at its new path now: (k, linking note as recorded, its path now)
    todo = [(k, p, dst if p == src else p) for k, p in enumerate(intent.sources)]
    # A note another program is writing (an appender between our read and our compare-and-swap, or one that
    # never settles for the read) is read again and retried, with back-off, for REWRITE_RETRY_S in all, so a short
    # burst of writes does not leave its link unrewritten. What is still busy then is a reported conflict.
    deadline = None  # set after the first pass: a vault with many linking notes still gets its retries
    delay = 0.05
    while todo:
        if deadline is not None:
            if time.monotonic() >= deadline:
                conflicts.extend(cur for _, _, cur in todo)
                break
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.4)
        busy: list[tuple[int, str, str]] = []
        for k, src_path, cur_path in todo:
            outcome, n, reason = _rewrite_one(ctx, src_path, cur_path, resolver, src, dst, after, on_rewrite)
            if outcome == _BUSY:
                busy.append((k, src_path, cur_path))
                why[cur_path] = reason
                continue
            why.pop(cur_path, None)
            if outcome == _WRITTEN:
                rewritten.append(cur_path)
                total += n
                crash_point(f"move.after_rewrite_{k}")
            elif outcome == _FAILED:
                conflicts.append(cur_path)
                why[cur_path] = reason
        todo = busy
        if deadline is None:
            deadline = time.monotonic() + REWRITE_RETRY_S
    for path in conflicts:
        log.warning("link in %s not rewritten: %s", path, why.get(path, "not writable"))
    for path in list(why):
        if path not in conflicts:
            del why[path]
    if ctx.watcher is not None:
        ctx.watcher.suppress([src, dst, *rewritten])
    # every linking note, not only the ones rewritten here: after a crash, the ones the killed process
    # rewrote are on disk but not yet in the index
    linking = [dst if p == src else p for p in intent.sources]
    ctx.index_paths(list(dict.fromkeys([src, dst, *linking])))
    return rewritten, total, conflicts


#: Seconds a move keeps retrying a linking note another program is writing before reporting it as a conflict.
REWRITE_RETRY_S = 3.0

_WRITTEN, _UNCHANGED, _BUSY, _FAILED = "written", "unchanged", "busy", "failed"


def _rewrite_one(ctx: VaultContext, src_path: str, cur_path: str, resolver, src: str, dst: str, after,
                 on_rewrite) -> tuple[str, int, str]:
    """Rewrite the links of one linking note (read, rewrite, compare-and-swap write with that read's hash).

    Returns ``(outcome, links rewritten, reason)`` (``reason``: one line, "" unless busy or failed): ``written``; ``unchanged`` (gone, or no link to rewrite); ``busy``
    (another program changed it between the read and the write, or kept it changing while read: worth a retry,
    its bytes untouched); ``failed`` (unreadable, outside the vault, read-only, disk full: reported as is).
    """
    from ..markdown.links import rewrite_links
    from .io import FileBusy
    from .provenance import APP, note_ownership, stamp

    try:
        vp = resolve(ctx.vault, cur_path)
        tf = read_text(vp.abs, ctx.settings.max_file_bytes)
    except FileNotFoundError:
        return _UNCHANGED, 0, ""  # deleted meanwhile: nothing left to point anywhere
    except FileBusy:
        return _BUSY, 0, "another program kept changing it while the move rewrote it"
    except SkipFile as exc:
        return _FAILED, 0, exc.reason
    except (OSError, VaultPathError) as exc:
        return _FAILED, 0, (os_error_message(exc, cur_path, "read").rsplit(": ", 1)[-1] if isinstance(exc, OSError)
                            else str(exc))
    new_text, n = rewrite_links(tf.text, src_path, resolver, src, dst, after, cur_path)
    if n == 0:
        return _UNCHANGED, 0, ""
    if note_ownership(tf.text).owner == APP:
        new_text = stamp(new_text)  # the app's own link rewrite keeps an app-owned note the app's
    if tf.encoding == "utf-8-sig":
        new_text = "\ufeff" + new_text
    try:
        sha = atomic_write(vp.abs, new_text, expected_sha=tf.sha)
    except WriteConflict as exc:  # changed meanwhile (retried), read-only or not a regular file (reported)
        if "changed on disk" in str(exc):
            return _BUSY, 0, "another program kept changing it while the move rewrote it"
        return _FAILED, 0, str(exc)
    except OSError as exc:  # read-only folder, disk full: left as is, the OS's reason said
        return _FAILED, 0, os_error_message(exc, cur_path, "rewrite").rsplit(": ", 1)[-1]
    own_write(ctx, cur_path, sha)
    if on_rewrite is not None:
        on_rewrite(cur_path, tf.text.lstrip("\ufeff"), tf.sha, new_text.lstrip("\ufeff"), sha)
    return _WRITTEN, n, ""


def recover_interrupted(ctx: VaultContext) -> list[str]:
    """Finish what a crash interrupted: moves whose links were not all rewritten (completed — the file is
    already at its new path — or dropped when the file never moved), and the app's own temp files left in
    the vault by a crashed write. Returns one user-facing line per thing done (empty when nothing was).

    Called when the engine opens; cheap when there is nothing to do (one folder listing). A move another
    process is running right now is left alone (its intent file is locked).
    """
    lines: list[str] = []
    try:
        intents = MoveIntent.interrupted(ctx.state_dir)
    except OSError as exc:
        log.warning("interrupted moves not checked: %s", exc)
        return lines
    for intent in intents:
        try:
            lines.append(finish_move(ctx, intent))
        except Exception as exc:  # never let a stuck intent keep the vault from opening; it is retried next time
            line = f"could not finish an interrupted move {intent.src} → {intent.dst} (retried at the next start): {exc}"
            log.warning(line)
            lines.append(line)
        finally:
            intent.release()
    return lines


def finish_move(ctx: VaultContext, intent: MoveIntent) -> str:
    """Complete (or drop, when the file never moved) one interrupted move; returns its user-facing line."""
    src_p, dst_p = ctx.vault / intent.src, ctx.vault / intent.dst
    if dst_p.exists() and src_p.exists() and _two_names_one_file(src_p, dst_p):
        # the crash fell between the hard link and the unlink of the rename (a file system without renameat2); a
        # save onto the old name since then is a new file there, which stays
        unlink_second_name(src_p, dst_p)
    moved = dst_p.exists() and (not src_p.exists() or dst_p.samefile(src_p))
    if moved:
        with ctx.write_lock:
            rewritten, total, conflicts = rewrite_inbound(ctx, intent, ctx.indexer.build_resolver())
        line = (f"finished an interrupted move {intent.src} → {intent.dst}: "
                f"{total} link(s) in {len(rewritten)} note(s) rewritten")
        if conflicts:
            line += f"; {len(conflicts)} note(s) left as they are (changed meanwhile or not writable): {', '.join(conflicts[:5])}"
    else:
        line = f"an interrupted move {intent.src} → {intent.dst} had not moved the file; nothing changed"
    intent.done()
    log.warning(line)
    return line


def _two_names_one_file(a: Path, b: Path) -> bool:
    """Both names are listed in their folders and are one file (hard links), not one entry seen twice through
    a case-insensitive file system."""
    try:
        return (a != b and a.samefile(b) and a.name in os.listdir(a.parent)
                and b.name in os.listdir(b.parent))
    except OSError:
        return False


def _rename_noreplace(src: Path, dst: Path) -> None:
    """Rename without ever replacing an existing ``dst`` (a file the user saved meanwhile), nor ever removing a
    save onto ``src`` made while it moved: :func:`.io.rename_noreplace` (one ``renameat2(RENAME_NOREPLACE)``; else
    hard link, then the old name unlinked only while it still names the moved file). A case-only rename on a
    case-insensitive file system (``dst`` is ``src`` under another case) is a plain ``rename``.
    """
    try:
        rename_noreplace(src, dst)
    except FileExistsError:
        if dst.samefile(src):  # same file under another case: a case-only rename
            os.rename(src, dst)
            return
        raise EngineError(f"destination exists: {dst.name}") from None

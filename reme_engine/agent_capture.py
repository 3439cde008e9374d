"""What an agent asks the vault to remember (``reme-tui mcp``'s ``remember`` tool): an entry in today's capture
card, marked as noted by the agent, never as the person's own words; optionally the exchange as a chat record so
auto_memory can distil it later. :meth:`reme_engine.engine.Engine.remember` delegates here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from .context import VaultContext


class RememberResult(TypedDict):
    """The capture card written (``created`` when new), the journal run, and the chat record made (or None)."""

    path: str
    created: bool
    run_id: str
    session_id: str | None
    session_path: str | None
    messages: int


def remember(engine: VaultContext, text: str, *, agent: str, conversation: list | None = None) -> RememberResult:
    """Append ``text`` to today's capture card as noted by ``agent``; optionally record ``conversation``.

    ``conversation``: ``[{role: "user"|"assistant", content: str}, …]`` stored as session record
    ``<session_dir>/dialog/agent-<hex>.jsonl`` opened by a system line naming the agent. The capture entry reads
    ``**HH:MM** · noted by agent <agent>`` (``noted by an agent`` when ``agent`` is empty) plus a link to that
    record. The append is journaled (run kind
    ``capture``), atomic and conflict-checked, and the card is indexed at once. Returns ``{path, created, run_id,
    session_id, session_path, messages}``. Raises ValueError for malformed messages, EngineError for an unreadable
    card.
    """
    from datetime import datetime

    from .markdown.links import format_link
    import time

    from .memory.auto_memory import CAPTURE_STEM, _append_block, _capture_head
    from .memory.capture import CAPTURE_WAIT_S, CardBusy, _LazyRun, capture_lock
    from .memory.session import ChatMessage, append_messages, new_session_id, session_rel
    from .vault.app_folder import cards_dir

    settings = engine.settings
    tz = settings.tzinfo()
    sid = srel = None
    who = f"agent {agent}" if agent else "an agent"
    msgs: list = []
    if conversation:
        if not isinstance(conversation, list):
            raise ValueError("conversation must be a list of {role, content} objects")
        sid = "agent-" + new_session_id()[:16]
        srel = session_rel(settings.layers, sid)
        msgs.append(ChatMessage.create("system", f"Conversation recorded by {who} through MCP; the user "
                                                 "turns are as the agent relayed them.", tz=tz))
        for i, m in enumerate(conversation):
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant") \
                    or not isinstance(m.get("content"), str):
                raise ValueError(f"conversation[{i}]: expected {{role: user|assistant, content: text}}")
            msgs.append(ChatMessage.create(m["role"], m["content"], tz=tz))
    now = datetime.now(tz)
    date = now.date().isoformat()
    rel = f"{cards_dir(settings.layers)}/{date}/{CAPTURE_STEM}.md"  # the app folder in an existing vault
    source = f" · {format_link(srel, alias='conversation')}" if srel else ""
    block = f"\n**{now:%H:%M}** · noted by {who}{source}\n\n{text.rstrip()}\n"
    if msgs:
        with engine.write_lock:
            append_messages(engine.vault, settings.layers, sid, msgs)
    # a card another program keeps writing: retried for up to CAPTURE_WAIT_S seconds, the write lock let go between
    # attempts (as chat capture does), then a one-line refusal the agent can retry; nothing half-written
    deadline = time.monotonic() + CAPTURE_WAIT_S
    delay = 0.05
    while True:
        with capture_lock(engine):  # one append at a time across the vault's processes, as chat capture does
            run = _LazyRun(engine, {"agent": agent, "session_id": sid})  # a busy attempt leaves no journal run
            try:
                created = _append_block(engine, run, rel, _capture_head(date), block, srel or rel)
            except CardBusy:
                run.finish("failed", {"paths": []})
                if time.monotonic() + delay > deadline:
                    raise
            except BaseException:
                run.finish("failed", {"paths": []})
                raise
            else:
                break
        time.sleep(delay)
        delay = min(delay * 2, 0.4)
    with engine.write_lock:
        if engine.watcher is not None:  # indexed here: the watcher need not process it again
            engine.watcher.suppress([rel])
        engine.index_paths([rel])
        if created:
            from .memory.day_index import reindex_day

            try:  # the day page the capture creates or links from is in the run: revert takes it back too
                reindex_day(engine, run, date)
            except Exception:  # the day page is the person's to fix; the capture is saved
                pass
        run.finish("ok", {"paths": [rel], "created": [rel] if created else [], "agent": agent})
    return {"path": rel, "created": created, "run_id": run.run_id, "session_id": sid, "session_path": srel,
            "messages": len(msgs)}


# -- an agent's note writes, journaled (the MCP server's write_note / edit_note / move_note) ---------------------
#: Journal run kinds of an agent's writes, by tool.
WRITE_KIND, EDIT_KIND, MOVE_KIND = "mcp:write_note", "mcp:edit_note", "mcp:move_note"
DELETE_KIND = "mcp:delete_note"


def _snapshot(abs_path) -> tuple[str | None, str | None]:
    """``(text, sha)`` of a file as the journal keeps it (BOM dropped), ``(None, None)`` when absent."""
    from .vault.io import content_hash

    try:
        data = abs_path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None, None
    return data.decode("utf-8", errors="replace").lstrip("\ufeff"), content_hash(data)


def _after(abs_path, sha: str) -> tuple[str | None, str]:
    """The text just written (re-read), or None when the file already holds something else (revert then refuses)."""
    text, now = _snapshot(abs_path)
    return (text if now == sha else None), sha


def _refuse_changed(rel: str):
    from .errors import EngineError

    return EngineError(f"not written: {rel} changed on disk since the read that returned expected_sha")


#: Attempts of a write or edit the caller gave no ``expected_sha`` for, when another program keeps changing the
#: note between this process's read and its compare-and-swap write.
BUSY_ATTEMPTS = 5


def _checked_sha(expected_sha: str | None) -> str | None:
    """``expected_sha`` as given, after checking it looks like a ``sha`` a read returned (32 hex digits, see
    :func:`reme_engine.vault.io.content_hash`). Raises BadArgument (exit 2) otherwise."""
    import re

    from .errors import BadArgument

    if expected_sha and not re.fullmatch(r"[0-9a-f]{32}", expected_sha):
        raise BadArgument(f"expected_sha {expected_sha!r} is not a sha a read returned (32 hex digits)")
    return expected_sha or None


def _while_busy(expected_sha: str | None, rel: str, attempt):
    """Run ``attempt()``; when the caller gave no ``expected_sha`` and the note changed between this process's
    read and its write (another program writing it), read and try again, :data:`BUSY_ATTEMPTS` times in all."""
    import time

    from .errors import EngineError

    for i in range(BUSY_ATTEMPTS):
        try:
            return attempt()
        except EngineError as exc:
            if expected_sha or "changed on disk" not in str(exc):
                raise
            if i == BUSY_ATTEMPTS - 1:
                raise EngineError(f"not written: {rel} kept changing while it was written (another program is "
                                  "writing it); nothing was changed, try again") from exc
            time.sleep(0.05 * (i + 1))  # the other writer is between two writes


def journaled_write(engine: VaultContext, path: str, content: str, *, overwrite: bool = True,
                    expected_sha: str | None = None, kind: str = WRITE_KIND) -> dict:
    """:meth:`Engine.write` as one journal run of ``kind`` (params: path, bytes; never the content), revertible.

    The note is read under the write lock first; the write then runs with that read's hash as its
    compare-and-swap (``None``: must not exist), so the journaled before-text is exactly what was replaced.
    ``expected_sha`` differing from the current hash refuses (EngineError ``not written: …``). Returns the
    :class:`~reme_engine.results.WriteResult` as a dict plus ``run_id``. EngineError as :meth:`Engine.write`.
    """
    import os
    from dataclasses import asdict

    from .vault.files import has_suffix, resolve_path

    vp = resolve_path(engine, path, for_write=True)
    if vp.rel and not has_suffix(vp.rel) and not os.path.lexists(vp.abs):
        vp = resolve_path(engine, vp.rel + ".md", for_write=True)  # as files.write names it
    expected_sha = _checked_sha(expected_sha)

    def attempt():
        with engine.write_lock:
            before = _snapshot(vp.abs) if not vp.abs.is_dir() else (None, None)
            if before[1] is not None and expected_sha and expected_sha != before[1]:
                raise _refuse_changed(vp.rel)
            res = engine.write(vp.rel, content, overwrite=overwrite, expected_sha=before[1])
            run = engine.journal.start_run(engine.vault, kind, {"path": res.path, "bytes": res.bytes})
            run.record_done(res.path, "create" if before[1] is None else "update", before,
                            _after(engine.vault / res.path, res.sha), step="write")
            run.finish("ok", {"paths": [res.path], "created": [res.path] if res.created else []})
        return {**asdict(res), "run_id": run.run_id}

    return _while_busy(expected_sha, vp.rel, attempt)


def journaled_edit(engine: VaultContext, path: str, old: str, new: str, *, count: int = 1,
                   expected_sha: str | None = None, kind: str = EDIT_KIND) -> dict:
    """:meth:`Engine.edit` as one journal run of ``kind`` (params: path, count, sizes of old/new), revertible.

    As :func:`journaled_write`: read under the write lock, then edited only if the note still has that read's
    hash. Returns the WriteResult as a dict plus ``run_id``; EngineError as :meth:`Engine.edit`.
    """
    from dataclasses import asdict

    from .vault.files import find_note

    vp = find_note(engine, path, for_write=True)
    expected_sha = _checked_sha(expected_sha)

    def attempt():
        with engine.write_lock:
            before = _snapshot(vp.abs)
            if expected_sha and before[1] != expected_sha:
                raise _refuse_changed(vp.rel)
            res = engine.edit(vp.rel, old, new, count=count, expected_sha=before[1])
            run = engine.journal.start_run(engine.vault, kind, {"path": res.path, "count": count,
                                                                "old_chars": len(old), "new_chars": len(new)})
            run.record_done(res.path, "update", before, _after(engine.vault / res.path, res.sha), step="edit")
            run.finish("ok", {"paths": [res.path], "created": []})
        return {**asdict(res), "run_id": run.run_id}

    return _while_busy(expected_sha, vp.rel, attempt)


def journaled_delete(engine: VaultContext, path: str, *, expected_sha: str, kind: str = DELETE_KIND) -> dict:
    """:meth:`Engine.delete` as one journal run of ``kind`` (params: path), revertible: the note's exact text is
    kept in the journal, and revert puts it back. Deleted only if the note still holds ``expected_sha`` (required:
    an agent never deletes bytes it has not read), checked and removed in one step against other writers
    (:func:`reme_engine.vault.io.remove_if_unchanged`). Returns the DeleteResult as a dict (``path``,
    ``dangling``: notes still linking to it) plus ``run_id``. EngineError ``not deleted: …`` when the note changed
    since it was read, and as :meth:`Engine.delete`.
    """
    from dataclasses import asdict

    from .errors import EngineError
    from .vault.files import find_note

    if not expected_sha:
        raise EngineError("not deleted: pass expected_sha (the sha a read returned)")
    _checked_sha(expected_sha)
    vp = find_note(engine, path, for_write=True)
    with engine.write_lock:
        before = _snapshot(vp.abs)
        if before[1] != expected_sha:
            raise EngineError(f"not deleted: {vp.rel} changed on disk since the read that returned expected_sha")
        res = engine.delete(vp.rel, expected_sha=expected_sha)
        run = engine.journal.start_run(engine.vault, kind, {"path": res.path})
        run.record_done(res.path, "delete", before, (None, None), step="delete")
        run.finish("ok", {"paths": [res.path], "created": []})
    return {**asdict(res), "run_id": run.run_id}


def journaled_frontmatter_update(engine: VaultContext, path: str, updates: dict | None = None,
                                 delete: list[str] | None = None, *, kind: str) -> dict:
    """:meth:`Engine.frontmatter_update` as one journal run of ``kind`` (params: path, the keys set and removed;
    never their values), revertible. Returns the FrontmatterUpdate plus ``run_id``; EngineError as the method."""
    from .vault.files import find_note

    vp = find_note(engine, path, for_write=True)
    with engine.write_lock:
        before = _snapshot(vp.abs)
        res = engine.frontmatter_update(vp.rel, updates, delete)
        run = engine.journal.start_run(engine.vault, kind, {"path": res["path"], "set": sorted(updates or {}),
                                                            "removed": list(delete or ())})
        run.record_done(res["path"], "update", before, _snapshot(engine.vault / res["path"]), step="frontmatter")
        run.finish("ok", {"paths": [res["path"]], "created": []})
    return {**res, "run_id": run.run_id}


def journaled_move(engine: VaultContext, src: str, dst: str, *, kind: str = MOVE_KIND) -> dict:
    """:meth:`Engine.move` as one journal run of ``kind`` (params: src, dst), revertible: the moved note (a
    delete at ``src`` and a create at ``dst``) and every linking note rewritten, each with the exact text it
    replaced (the move reports them as it writes). Returns the MoveResult as a dict plus ``run_id``; when some
    linking notes could not be rewritten (``conflicts``), also ``success: False`` and ``error`` naming them (the
    move itself is done and journaled). EngineError as :meth:`Engine.move`.
    """
    from dataclasses import asdict

    from .memory.journal import MOVE_REWRITE_STEP, MOVE_STEP
    from .vault import move as _move
    from .vault.files import find_note, resolve_path

    s = resolve_path(engine, src, for_write=True)
    if not s.abs.is_dir():
        s = find_note(engine, src, for_write=True)
    rewrites: list[tuple] = []
    reasons: dict[str, str] = {}
    with engine.write_lock:
        moved = _snapshot(s.abs)
        res = _move.move(engine, src, dst, on_rewrite=lambda *a: rewrites.append(a), reasons=reasons)
        run = engine.journal.start_run(engine.vault, kind, {"src": res.src, "dst": res.dst})
        if res.src == s.rel:
            run.record_done(res.src, "delete", moved, (None, None), step=MOVE_STEP)
            run.record_done(res.dst, "create", (None, None), moved, step=MOVE_STEP, sources=[res.src])
        for path, btext, bsha, atext, asha in rewrites:
            run.record_done(path, "update", (btext, bsha), (atext, asha), step=MOVE_REWRITE_STEP,
                            sources=[res.dst])
        run.finish("ok", {"paths": [res.dst, *res.rewritten_files], "created": [res.dst],
                          "conflicts": list(res.conflicts)})
    out = {**asdict(res), "run_id": run.run_id}
    if res.conflicts:
        # The move is done (and revertible); the notes whose links still point at the old name are the user's to
        # fix, so they are said, and the job is not a success (exit 1): never a silent exit 0.
        names = ", ".join(f"{p} ({reasons.get(p, 'not writable')})" for p in res.conflicts[:5]) + \
            (f" and {len(res.conflicts) - 5} more" if len(res.conflicts) > 5 else "")
        out["success"] = False
        out["conflict_reasons"] = {p: reasons.get(p, "not writable") for p in res.conflicts}
        out["error"] = (f"moved {res.src} → {res.dst}, but the links in {len(res.conflicts)} note(s) were not "
                        f"rewritten: {names}; "
                        f"they still point at {res.src}; their bytes are kept (fix the links, move it back, "
                        f"or revert run {run.run_id})")
    return out

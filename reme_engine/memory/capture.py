"""The no-LLM quick-capture journal: the user's chat messages appended verbatim to ``daily/<date>/capture.md``.

The app's capture card is stamped and appended to; once the user edits it (or if they made it), the captures
continue in reme's block at its end, on the same page and in time order, rather than in a second card.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Iterable

from ..markdown.frontmatter import render_frontmatter
from ..markdown.links import format_link
from ..vault import provenance as P
from ..vault.io import SkipFile, WriteConflict
from .cards import _day_folder, _read_card
from .merge import _checked_block_write
from .session import ChatMessage, session_rel, valid_session_id

CAPTURE_KIND = "capture"
#: Catalog of captured message ids: session path → JSON list of the last :data:`CAPTURE_IDS_KEPT` ids.
CAPTURE_CATALOG = "capture"
CAPTURE_IDS_KEPT = 2000
CAPTURE_STEM = "capture"


@dataclass
class CaptureResult:
    """Outcome of :func:`append_user_messages_verbatim`: ``paths`` written (capture cards), ``created`` among them,
    ``appended`` messages, ``skipped`` messages (not from the user, empty, or captured before), ``run_id`` of the
    journal run (None when nothing was written)."""

    session_id: str
    paths: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    appended: int = 0
    skipped: int = 0
    run_id: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _as_message(m: ChatMessage | dict) -> ChatMessage:
    if isinstance(m, ChatMessage):
        m.validate()
        return m
    return ChatMessage.from_dict(m)


def _capture_head(date: str) -> str:
    meta = {"name": f"Capture {date}", "description": f"Chat messages captured verbatim on {date}"}
    return render_frontmatter(meta) + f"\n# Capture {date}\n"


def _capture_block(m: ChatMessage, tz, srel: str) -> str:
    return f"\n**{m.time(tz):%H:%M}** · {format_link(srel, alias='chat')}\n\n{m.content.rstrip()}\n"


def _append_block(engine, run, rel: str, head: str, block: str, srel: str) -> bool:
    """Append ``block`` (text starting with a newline) to card ``rel`` (created with ``head`` when absent, stamped
    as the app's); True when created.

    A card the app owns gets ``block`` appended and is re-stamped; a card the user owns keeps every byte and
    ``block`` goes at the end of reme's block (a new one when there is no intact block). Conflict-checked
    against the text just read and retried on a concurrent edit, so a user's edit made meanwhile is kept (and,
    having made the card theirs, is appended to in the block) rather than overwritten. Raises EngineError.
    """
    from ..errors import EngineError

    for _ in range(5):
        try:
            cur = _read_card(engine, rel)
        except SkipFile as exc:
            raise EngineError(f"cannot append to {rel}: {exc.reason}") from exc
        if cur is None:
            new, expected = P.stamp(head + block), None
        else:
            text, sha, enc = cur
            if P.note_ownership(text).app_owned:
                new = P.stamp(text + ("" if not text or text.endswith("\n") else "\n") + block)
            else:
                # The user edited (or wrote) this card: their lines stay as they are; the captures continue in
                # reme's block at the end, on the same page and in time order.
                inner = P.live_block(text)
                entry = block.strip("\r\n")
                try:
                    new = _checked_block_write(text, P.set_block(text, f"{inner}\n\n{entry}" if inner else entry),
                                               rel)
                except WriteConflict as exc:
                    raise EngineError(str(exc)) from exc
            expected = sha
        try:
            run.write(rel, new, step=CAPTURE_KIND, sources=[srel], expected_sha=expected)
        except WriteConflict:
            continue
        return cur is None
    raise EngineError(f"{rel} kept changing while appending; try again")


def append_user_messages_verbatim(engine, session_id: str, messages: Iterable[ChatMessage | dict]) -> CaptureResult:
    """The no-LLM quick-capture journal: append the user's ``messages`` verbatim to ``daily/<date>/capture.md``.

    ``date`` is each message's day in the app timezone. A new capture card gets frontmatter ``name: Capture
    <date>`` and a description; each message is appended as a ``**HH:MM** · [[<session record>|chat]]`` line
    followed by its text unchanged (inside reme's block at the end once the user owns the card: see the module
    doc). Only ``role == "user"`` messages with text are captured, each id once (catalog
    ``capture``), so calling this again with the whole transcript is harmless. Writes are journaled (run kind
    ``capture``), atomic and conflict-checked (a concurrent edit of the card is kept). The day index is refreshed
    when a card is created, and written cards are re-indexed. Raises EngineError (bad session id, unreadable card)
    and ValueError for malformed messages. Needs no writer lock: the append is optimistic and retried.
    """
    from ..errors import EngineError

    try:
        sid = valid_session_id(session_id)
    except ValueError as exc:
        raise EngineError(str(exc)) from exc
    settings = engine.settings
    tz = settings.tzinfo()
    srel = session_rel(settings.layers, sid, engine.vault)
    res = CaptureResult(sid)
    batch = [_as_message(m) for m in messages]
    with engine.write_lock:
        raw = engine.store.catalog_get(CAPTURE_CATALOG).get(srel)
        try:
            done = list(json.loads(raw)) if raw else []
        except (ValueError, TypeError):
            done = []
        seen = set(done)
        by_date: dict[str, list[ChatMessage]] = {}
        for m in batch:
            if m.role != "user" or not m.content.strip() or m.id in seen:
                res.skipped += 1
                continue
            seen.add(m.id)
            by_date.setdefault(m.time(tz).date().isoformat(), []).append(m)
        if not by_date:
            return res
        run = engine.journal.start_run(engine.vault, CAPTURE_KIND,
                                       {"session_id": sid, "messages": sum(map(len, by_date.values()))})
        res.run_id = run.run_id
        try:
            for date, ms in by_date.items():
                rel = f"{_day_folder(engine, date)}/{CAPTURE_STEM}.md"
                created = _append_block(engine, run, rel, _capture_head(date),
                                        "".join(_capture_block(m, tz, srel) for m in ms), srel)
                res.paths.append(rel)
                if created:
                    res.created.append(rel)
                res.appended += len(ms)
                done.extend(m.id for m in ms)
                engine.store.catalog_set(CAPTURE_CATALOG, {srel: json.dumps(done[-CAPTURE_IDS_KEPT:])})
        except BaseException:
            run.finish("failed", {"paths": res.paths, "appended": res.appended})
            raise
        run.finish("ok", {"paths": res.paths, "appended": res.appended, "created": res.created})
        for rel in res.created:
            try:
                engine.daily_reindex(rel.split("/")[-2])
            except EngineError:
                pass  # the day page is the user's to fix; the capture itself is saved
        engine.index_paths(res.paths)
    return res

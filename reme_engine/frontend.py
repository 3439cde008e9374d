"""What a front end (the TUI) asks of the engine besides file jobs: link resolution with a kept resolver, the next
scheduled run, the chat records of a session, and the Markdown rules a viewer needs. The façade
(:class:`reme_engine.engine.Engine`) delegates here; nothing here imports a front end.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable

from .errors import EngineError

if TYPE_CHECKING:
    from .chat import ChatTurn
    from .llm.client import CancelToken
    from .engine import Engine
    from .markdown.links import Resolution
    from .memory.session import ChatMessage

_resolver_guard = threading.Lock()


def _resolver(engine: "Engine"):
    """The engine's kept resolver, rebuilt when the vault's names (``names_gen``) or the indexed aliases changed.
    The alias check is one aggregate over the rows with aliases (count, mtimes, lengths: about a millisecond on
    3,176 notes) instead of a resolver over every file built per link (150 ms median there, bench_tui_links)."""
    aliases = engine.store.conn.execute(  # the files table's aliases column (JSON list, '[]' when none)
        "SELECT count(*), total(mtime), total(length(aliases)) FROM files WHERE aliases != '[]'").fetchone()
    key = (engine.store.get_meta("names_gen"), tuple(aliases))
    with _resolver_guard:
        cached = getattr(engine, "_link_resolver", None)
        if cached is None or cached[0] != key:
            cached = engine._link_resolver = (key, engine.indexer.build_resolver())
    return cached[1]


def resolve_link(engine: "Engine", target: str, source: str = "") -> "Resolution":
    """Resolve ``target`` as written in ``source`` the way the index does (ARCHITECTURE §4), with the kept
    resolver (:func:`_resolver`)."""
    return _resolver(engine).resolve(target, source)


def resolve_links(engine: "Engine", targets: list[str], source: str = "") -> list["Resolution"]:
    """:func:`resolve_link` for several targets of one note (one freshness check)."""
    res = _resolver(engine)
    return [res.resolve(t, source) for t in targets]


def next_run(engine: "Engine", job: str) -> datetime | None:
    """When ``job`` (``proactive_refresh`` or ``auto_dream``) runs next: from the running scheduler, else from
    the settings' ``<job>_cron`` in the app timezone; None when disabled."""
    from .scheduler import next_fire

    if engine.scheduler is not None:
        try:
            return engine.scheduler.next_runs().get(job)
        except Exception:  # a stopping scheduler: fall back to the settings
            pass
    expr = (getattr(engine.settings, f"{job}_cron", "") or "").strip()
    if not expr:
        return None
    tz = engine.settings.tzinfo()
    try:
        return next_fire(expr, tz, datetime.now(tz))
    except Exception:
        return None


def chat_append(engine: "Engine", session_id: str, role: str, text: str,
                message_id: str | None = None) -> "ChatMessage":
    """See :meth:`Engine.chat_append`."""
    from .memory.session import ChatMessage, append_messages

    try:
        msg = ChatMessage.create(role, text, tz=engine.settings.tzinfo(), id=message_id)
        append_messages(engine.vault, engine.settings.layers, session_id, [msg])
    except ValueError as exc:
        raise EngineError(str(exc)) from exc
    return msg


def chat_history(engine: "Engine", session_id: str) -> list["ChatMessage"]:
    """See :meth:`Engine.chat_history`."""
    from .memory.session import read_session

    try:
        return list(read_session(engine.vault, engine.settings.layers, session_id))
    except ValueError as exc:
        raise EngineError(str(exc)) from exc


def chat_latest_session(engine: "Engine") -> str | None:
    """See :meth:`Engine.chat_latest_session`."""
    folder = engine.vault / engine.settings.layers.session_dir.strip("/") / "dialog"
    try:
        recs = [(p.stat().st_mtime, p.stem) for p in folder.glob("*.jsonl") if p.is_file()]
    except OSError:
        return None
    return max(recs)[1] if recs else None


def chat_capture(engine: "Engine", session_id: str, messages: list) -> list[str]:
    """See :meth:`Engine.chat_capture`."""
    from .errors import SavedWithWarning
    from .memory.capture import append_user_messages_verbatim

    res = append_user_messages_verbatim(engine, session_id, messages)
    if res.warnings:
        raise SavedWithWarning("; ".join(res.warnings), res.paths)
    return list(res.paths)


def chat_answer(engine: "Engine", session_id: str, question_id: str, on_text: Callable[[str], Any],
                cancel: "CancelToken | None" = None) -> "ChatTurn":
    """See :meth:`Engine.chat_answer`."""
    from .chat import ChatAnswerer, ChatTurn
    from .llm.client import Message

    history = chat_history(engine, session_id)
    question = next((m.content for m in history if m.id == question_id), "")
    past = [Message(m.role, m.content) for m in history if m.id != question_id and m.role in ("user", "assistant")]
    turn = ChatTurn(question)
    for d in ChatAnswerer(engine, engine.llm_client("chat")).stream(past, question, turn, cancel=cancel):
        if d.text:
            on_text(d.text)
    chat_append(engine, session_id, "assistant", turn.answer)
    return turn

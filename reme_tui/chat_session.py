"""The chat session of one app run, over the engine façade (no widget here: the Chat pane runs these calls in
thread workers and shows what they return).

A run's messages go to one chat record, created with the first message (``<session_dir>/dialog/<id>.jsonl``,
written by the engine). Without an LLM each message is also captured verbatim into today's capture card; with one,
the answer is streamed, recorded, and auto-memory turns the user's statements into a daily card. At start the
transcript of the record written last is shown again (:meth:`ChatSession.restore`), read-only: a new run starts
its own record, so auto-memory never re-reads an old conversation as this one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable

#: Messages of the previous session shown again at start.
RESTORE_MESSAGES = 20


@dataclass
class AnswerOutcome:
    """What :meth:`ChatSession.answer` reports: the bubble's ``status`` line and the ``remembered`` flag."""

    status: str
    remembered: bool = False


class ChatSession:
    """``session_id``: this run's record (None until the first message). Every method may raise what the façade
    raises (``EngineError``, ``OSError``, LLM errors)."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.session_id: str | None = None

    def new_message_id(self) -> str:
        """An id for a message about to be saved (uuid4 hex), so its bubble can show it before the write."""
        if self.session_id is None:
            self.session_id = uuid.uuid4().hex  # the engine's id format: safe as a file name
        return uuid.uuid4().hex

    def save(self, message_id: str, text: str):
        """(Worker thread.) Append the user's message to the record; returns the ChatMessage stored."""
        return self.engine.chat_append(self.session_id, "user", text, message_id=message_id)

    def record_path(self) -> str:
        """The record's vault-relative path."""
        layers = self.engine.settings.layers
        return f"{layers.session_dir.strip('/')}/dialog/{self.session_id}.jsonl"

    def capture(self, msg) -> str | None:
        """(Worker thread.) The no-LLM capture: ``msg`` appended to today's capture card; returns the card."""
        paths = self.engine.chat_capture(self.session_id, [msg])
        return paths[0] if paths else None

    def answer(self, question_id: str, on_text: Callable[[str], None], cancel=None) -> str:
        """(Worker thread.) Stream the answer to ``question_id`` into ``on_text``; returns the bubble's status.
        ``cancel``: the engine's CancelToken (set: LLMCancelled, nothing recorded)."""
        turn = self.engine.chat_answer(self.session_id, question_id, on_text, cancel)
        status = f"{len(turn.citations)} note(s) retrieved" + (" · nothing relevant found" if turn.nothing_found else "")
        if turn.unknown_citations:
            status += f" · ⚠ cites unknown {', '.join(turn.unknown_citations[:3])}"
        return status

    def remember(self) -> bool:
        """(Worker thread.) Auto-memory over the session; True when a card was created or updated."""
        res = self.engine.auto_memory(self.session_id)
        card = (res.to_dict() if hasattr(res, "to_dict") else {}) or {}
        return bool(card.get("created") or card.get("updated"))

    def restore(self) -> tuple[str | None, list]:
        """(Worker thread.) ``(id, last messages)`` of the chat record written last, or ``(None, [])``."""
        sid = self.engine.chat_latest_session()
        if sid is None:
            return None, []
        msgs = [m for m in self.engine.chat_history(sid) if m.role in ("user", "assistant") and m.content.strip()]
        return sid, msgs[-RESTORE_MESSAGES:]

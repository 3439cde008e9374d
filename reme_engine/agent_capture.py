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
    from .memory.auto_memory import CAPTURE_KIND, CAPTURE_STEM, _append_block, _capture_head
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
    with engine.write_lock:
        if msgs:
            append_messages(engine.vault, settings.layers, sid, msgs)
        run = engine.journal.start_run(engine.vault, CAPTURE_KIND, {"agent": agent, "session_id": sid})
        try:
            created = _append_block(engine, run, rel, _capture_head(date), block, srel or rel)
        except BaseException:
            run.finish("failed", {"paths": []})
            raise
        run.finish("ok", {"paths": [rel], "created": [rel] if created else [], "agent": agent})
        if engine.watcher is not None:  # indexed here: the watcher need not process it again
            engine.watcher.suppress([rel])
        engine.index_paths([rel])
        if created:
            try:
                engine.daily_reindex(date)
            except Exception:  # the day page is the person's to fix; the capture is saved
                pass
    return {"path": rel, "created": created, "run_id": run.run_id, "session_id": sid, "session_path": srel,
            "messages": len(msgs)}

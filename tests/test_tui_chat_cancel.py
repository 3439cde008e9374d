"""Chat: Escape cancels an answer in flight (scripted local LLM server that stalls mid-stream, or has not started
its reply: the worker is freed at once either way); a message that
cannot be saved (read-only ``session/dialog``) goes back into the input with a visible error."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_tui import settle, wait_for  # noqa: E402
from test_tui_panes import started  # noqa: E402


def _stalling_stream(release: threading.Event):
    """An OpenAI streamed reply: the first words, then nothing until ``release`` (a slow model mid-answer)."""
    from wire.server import SSE, openai_stream

    status, sse = openai_stream(["The chain has ", "five stages"])
    events = list(sse.events)

    def gen():
        yield from events[:2]  # role + "The chain has "
        release.wait(30)
        yield from events[2:]

    return status, SSE(gen())


async def test_escape_cancels_a_streaming_answer_and_keeps_the_question(app_for, demo_vault):
    from wire.server import ScriptedServer

    release = threading.Event()
    with ScriptedServer([_stalling_stream(release)]) as srv:
        app = app_for(llm={"provider": "openai", "model": "m", "base_url": srv.base_url, "api_key": "k",
                           "max_retries": 0})
        async with app.run_test(size=(160, 48)) as pilot:
            m = await started(pilot)
            await pilot.press("c", *"光伏产业链", "enter")
            await wait_for(pilot, lambda: any(b.role == "assistant" and b.streaming and b.text
                                              for b in m.chat.bubbles.values()), what="first words", timeout=30)
            assert m.chat.replying
            shown = {b.binding.action for b in m.active_bindings.values() if b.binding.show and b.enabled}
            assert "cancel_reply" in shown  # the footer says Esc cancels
            assert "Esc cancels" in str(m.chat.border_subtitle)
            assert pilot.app.focused is m.chat.input
            await pilot.press("escape")
            reply = [b for b in m.chat.bubbles.values() if b.role == "assistant"][-1]
            await wait_for(pilot, lambda: not reply.streaming, what="cancelled")
            assert reply.status.startswith("cancelled") and reply.text == "The chain has "
            assert not m.chat.replying and pilot.app.focused is m.chat.input  # this Escape did not move focus
            assert "cancel_reply" not in {b.binding.action for b in m.active_bindings.values() if b.enabled}
            release.set()  # the model goes on: its late words are dropped, nothing is recorded
            await wait_for(pilot, lambda: not [w for w in pilot.app.workers
                                               if w.group == "chat-answer" and not w.is_finished],
                           what="the answer's worker stopped at its next chunk", timeout=30)
            await settle(pilot)
            assert reply.text == "The chain has " and reply.status.startswith("cancelled")
            record = demo_vault / "session" / "dialog" / f"{m.chat.session.session_id}.jsonl"
            lines = [json.loads(x) for x in record.read_text(encoding="utf-8").splitlines() if x.strip()]
            assert [(x["role"], x["content"]) for x in lines] == [("user", "光伏产业链")]
            assert len(srv.requests) == 1  # no auto-memory call over a cancelled answer
            # Escape now does what it did before: back to the note
            await pilot.press("escape")
            await wait_for(pilot, lambda: pilot.app.focused is not m.chat.input, what="back to the note")


async def test_escape_frees_the_worker_of_an_answer_the_endpoint_has_not_started(app_for, demo_vault):
    """The LLM endpoint read the question and sends nothing (no status line): Escape marks the bubble cancelled
    and the answer's worker is free within a second or two — the engine's cancel hook shuts the connection down —
    instead of blocking until llm.total_timeout (60 s here); nothing is recorded and auto-memory is not asked."""
    import time

    from wire.server import Hold, ScriptedServer, openai_stream

    release = threading.Event()
    with ScriptedServer([Hold(release, openai_stream(["too late"]))]) as srv:
        try:
            app = app_for(llm={"provider": "openai", "model": "m", "base_url": srv.base_url, "api_key": "k",
                               "total_timeout": 60})
            async with app.run_test(size=(160, 48)) as pilot:
                m = await started(pilot)
                await pilot.press("c", *"光伏产业链", "enter")
                await wait_for(pilot, lambda: len(srv.requests) == 1 and m.chat.replying, what="question sent",
                               timeout=30)
                t0 = time.monotonic()
                await pilot.press("escape")
                await wait_for(pilot, lambda: not [w for w in pilot.app.workers
                                                   if w.group == "chat-answer" and not w.is_finished],
                               what="the answer's worker freed", timeout=5)
                freed = time.monotonic() - t0
                reply = [b for b in m.chat.bubbles.values() if b.role == "assistant"][-1]
                assert reply.status.startswith("cancelled") and reply.text == "" and freed < 5
                release.set()
                await settle(pilot)
                record = demo_vault / "session" / "dialog" / f"{m.chat.session.session_id}.jsonl"
                lines = [json.loads(x) for x in record.read_text(encoding="utf-8").splitlines() if x.strip()]
                assert [(x["role"], x["content"]) for x in lines] == [("user", "光伏产业链")]
                assert len(srv.requests) == 1 and not m.chat.cancel_tokens
        finally:
            release.set()


def _block(dialog: Path, how: str) -> None:
    """Make ``session/dialog`` unwritable: read-only (not for root, whom modes do not stop) or a plain file."""
    if how == "read-only":
        dialog.chmod(0o555)
    else:
        dialog.rmdir()
        dialog.write_text("not a folder", encoding="utf-8")


def _unblock(dialog: Path, how: str) -> None:
    if how == "read-only":
        dialog.chmod(0o755)
    elif dialog.is_file():
        dialog.unlink()
        dialog.mkdir()


@pytest.mark.parametrize("how", [
    pytest.param("read-only", marks=pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                                                       reason="root ignores file modes")),
    "not a folder"])
async def test_unsaved_chat_message_goes_back_into_the_input(app_for, demo_vault, how):
    dialog = demo_vault / "session" / "dialog"
    dialog.mkdir(parents=True, exist_ok=True)
    for p in dialog.iterdir():  # the earlier records go (a plain file cannot replace them)
        p.unlink()
    _block(dialog, how)
    try:
        app = app_for()
        async with app.run_test(size=(160, 48)) as pilot:
            m = await started(pilot)
            await pilot.press("c", *"remember the milk", "enter")
            await wait_for(pilot, lambda: any(b.status.startswith("⚠ not saved") for b in m.chat.bubbles.values()),
                           what="failed", timeout=20)
            assert m.chat.input.value == "remember the milk"  # the words are back, ready to send again
            assert any(n.title and "not saved" in n.title and "back in the chat input" in n.message
                       for n in pilot.app._notifications)
            assert "not saved" in m.status.work
            # the folder is writable again: Enter sends the same words, and the warning goes
            _unblock(dialog, how)
            pilot.app.clear_notifications()
            m.chat.input.focus()
            await pilot.press("enter")
            await wait_for(pilot, lambda: any(b.status.startswith("saved") for b in m.chat.bubbles.values()),
                           what="saved", timeout=20)
            assert m.chat.input.value == "" and m.status.work == ""
    finally:
        _unblock(dialog, how)
    new = list(dialog.iterdir())
    assert len(new) == 1 and "remember the milk" in new[0].read_text(encoding="utf-8")

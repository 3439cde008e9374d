"""The Chat pane: a scrolling transcript above a one-line input.

Enter on a non-empty input posts :class:`~reme_tui.messages.ChatSubmitted` to the pane itself; given a context,
the pane saves the message through its :class:`~reme_tui.chat_session.ChatSession` in thread workers (session
record, and today's capture card without an LLM), streams the answer when an LLM is configured, and lets
:class:`~reme_tui.messages.ChatSaved` / :class:`~reme_tui.messages.ChatReply` bubble up so the screen can reload
the day. At start it shows the transcript of the chat record written last (under an "earlier" divider).

Replies plug in through the streaming API, called on the UI thread as chunks arrive::

    msg_id = pane.begin_stream("assistant")    # an empty bubble
    pane.append_chunk(msg_id, "Hel")           # grows in place; the transcript follows the end
    pane.append_chunk(msg_id, "lo")
    pane.end_stream(msg_id)                    # returns the full text

Wikilinks in a message — an answer's citations ``[[path#L12-L18]]`` — are clickable once the message is complete:
a click posts :class:`~reme_tui.messages.FollowLink`, which opens the cited note at those lines; ``f`` with the
transcript focused lists the last answer's citations (:meth:`ChatPane.last_citations`).

Escape while an answer streams cancels it (:meth:`ChatPane.cancel_reply`, which sets the answer's engine cancel hook:
the worker is free at once, even before the endpoint's first byte): the bubble keeps what arrived, marked
cancelled, and is not recorded; the question stays in the session record. A message that could not be saved
(read-only folder, full disk) goes back into the input, so the user's words are never only in a failed bubble.
"""

from __future__ import annotations

import time
import uuid

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Static

from ..chat_session import ChatSession
from ..messages import ChatReply, ChatRestored, ChatSaved, ChatSubmitted, FollowLink

ROLE_LABELS = {"user": "you", "assistant": "reme", "system": "·"}
NO_LLM_NOTICE = "No LLM: quick capture. Each message is saved to today's capture card; answers need an LLM."
LLM_NOTICE = "Messages are saved to the session record as you send them."
#: Seconds an answer may show nothing before its bubble says how long it has been waiting (a slow or silent LLM
#: endpoint waits up to the engine's ``llm.total_timeout``).
WAITING_AFTER_S = 2.0
WAITING = "waiting for the LLM"
CANCELLED = "cancelled · not kept in the chat record"


class ReplyCancelled(Exception):
    """Raised from the streaming callback of a cancelled answer: it stops the SDK's stream (closing the HTTP
    response) at the next chunk, before the answer is recorded."""


class ChatBubble(Static):
    """One message: a role label, the text, and a dim status (saving…/saved/failed). ``text`` grows while
    streaming."""

    def __init__(self, msg_id: str, role: str, text: str = "", *, status: str = "") -> None:
        super().__init__("", classes=f"chat-msg -{role}", markup=False)
        self.msg_id = msg_id
        self.role = role
        self.text = text
        self.status = status
        self.streaming = False
        #: ``(shown, target, anchor)`` of the message's wikilinks (an answer's citations), in order
        self.citations: list[tuple[str, str, str | None]] = []
        self._refresh_text()

    def _refresh_text(self) -> None:
        t = Text()
        t.append(ROLE_LABELS.get(self.role, self.role) + " ", style="bold")
        if self.streaming or "[[" not in self.text:
            self.citations = []
            t.append(self.text + ("▍" if self.streaming else ""))
        else:
            t.append_text(self._linked_text())
        if self.status:
            t.append(f"  {self.status}", style="dim italic")
        self.update(t)

    def _linked_text(self) -> Text:
        """The text with each wikilink underlined and clickable (``action_follow_citation``)."""
        from reme_engine.engine import Engine

        parse_links = Engine.parse_links

        out = Text()
        pos = 0
        self.citations = []
        for link in parse_links(self.text):
            if link.kind != "wikilink" or not link.target or link.start < pos:
                continue
            out.append(self.text[pos:link.start])
            i = len(self.citations)
            shown = self.text[link.start:link.end]
            self.citations.append((shown, link.target, link.anchor))
            out.append(shown, style=Style(underline=True, meta={"@click": f"follow_citation({i})"}))
            pos = link.end
        out.append(self.text[pos:])
        return out

    def action_follow_citation(self, index: int) -> None:
        """Open citation number ``index`` (a click on it): the cited note, at the cited lines."""
        if 0 <= index < len(self.citations):
            _shown, target, anchor = self.citations[index]
            self.post_message(FollowLink(target, anchor, None))

    def set_status(self, status: str) -> None:
        self.status = status
        self._refresh_text()

    def append(self, chunk: str) -> None:
        self.text += chunk
        if self.status.startswith(WAITING):
            self.status = ""
        self._refresh_text()

    #: when this (streaming) answer started waiting for its first words (monotonic s; None: not waiting)
    waiting_since: float | None = None

    def show_waiting(self, now: float) -> None:
        """While no word of the answer has arrived: "waiting for the LLM · 12 s" as the bubble's status."""
        if self.streaming and not self.text and self.waiting_since is not None \
                and now - self.waiting_since >= WAITING_AFTER_S:
            self.set_status(f"{WAITING} · {int(now - self.waiting_since)} s")



class ChatLog(VerticalScroll, can_focus=True):
    """The transcript (focusable, so keys scroll it)."""

    def watch_has_focus(self, _has_focus: bool) -> None:
        # Textual restyles the whole subtree here (every block of a long note); no rule of the app styles the
        # blocks by this container's focus, so restyling the container itself is enough
        self.app.stylesheet.update_nodes([self], animate=True)


class ChatPane(Vertical):
    """``llm``: whether answers are available (changes the notice); ``bubbles``: message id → :class:`ChatBubble`."""

    def __init__(self, ctx=None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ctx = ctx  # PaneContext (None: a bare view driven through add_message/begin_stream)
        self.session = ChatSession(ctx.engine) if ctx is not None else None
        self.restored: str | None = None  # the earlier session shown again ("" when there was none to show)
        self.llm = False
        self.bubbles: dict[str, ChatBubble] = {}
        #: answers being streamed (reply bubble ids) and those the user cancelled (their late chunks are dropped)
        self.in_flight: set[str] = set()
        self.cancelled: set[str] = set()
        #: the engine's cancel hook of each answer in flight: Escape sets it, which frees the worker at once even
        #: while the endpoint has sent nothing (it would wait out llm.total_timeout otherwise)
        self.cancel_tokens: dict[str, object] = {}
        self.notice = Static(NO_LLM_NOTICE, id="chat-notice", markup=False)
        self.log_view = ChatLog(id="chat-log")
        self.input = Input(placeholder="Jot a thought, Enter saves it…", id="chat-input", compact=True)

    def compose(self) -> ComposeResult:
        yield self.notice
        yield self.log_view
        yield self.input

    def on_mount(self) -> None:
        self.border_title = "Chat"
        self.set_llm(self.llm)
        if self.session is not None:
            self._restore()
        self.set_interval(1.0, self._tick_waiting, name="chat-waiting")

    def _tick_waiting(self) -> None:
        now = time.monotonic()
        for bubble in self.bubbles.values():
            if bubble.streaming and bubble.waiting_since is not None:
                bubble.show_waiting(now)

    # -- the session (thread workers → messages to itself, then up) ---------------------------------------
    @work(thread=True, group="chat-restore", exit_on_error=False)
    def _restore(self) -> None:
        try:
            sid, msgs = self.session.restore()
        except Exception:  # an unreadable record: start empty, as before there was one
            sid, msgs = None, []
        self.post_message(ChatRestored(sid, msgs))

    def on_chat_restored(self, message: ChatRestored) -> None:
        message.stop()
        self.restored = message.session_id or ""
        if not message.messages or self.bubbles:
            self.restored = ""
            return  # nothing to restore, or the user already wrote (their bubbles stay last)
        first = message.messages[0].created_at[:10]
        self.log_view.mount(Static(Text(f"── earlier · {first} ──", style="dim"), classes="chat-divider"), before=0)
        for m in message.messages:
            bubble = ChatBubble(m.id, m.role, m.content, status="")
            self.bubbles[m.id] = bubble
            self.log_view.mount(bubble)
        self.log_view.mount(Static(Text("── this session ──", style="dim"), classes="chat-divider"))
        self.call_after_refresh(self.log_view.scroll_end, animate=False)

    def on_chat_submitted(self, message: ChatSubmitted) -> None:
        if self.session is None:
            return
        message.stop()
        msg_id = self.session.new_message_id()
        self.add_message("user", message.text, msg_id, status="saving…")
        self._save(msg_id, message.text, not self.llm)

    @work(thread=True, group="chat", exit_on_error=False)
    def _save(self, msg_id: str, text: str, capture: bool) -> None:
        """Append the message to the session record at once; without an LLM also to today's capture card."""
        from ..loaders import error_text

        try:
            msg = self.session.save(msg_id, text)
            srel = self.session.record_path()
        except Exception as exc:
            self.post_message(ChatSaved(msg_id, "session", None, error=error_text(exc)))
            return
        self.post_message(ChatSaved(msg_id, "session", srel))
        if not capture:
            return
        from reme_engine.errors import SavedWithWarning, WritePending

        try:
            path = self.session.capture(msg)
        except SavedWithWarning as exc:  # on the card; the journal / index lag behind (a full disk): saved, warned
            self.post_message(ChatSaved(msg_id, "capture", srel, exc.paths[0] if exc.paths else None,
                                        pending=str(exc)))
            return
        except WritePending as exc:  # the words are safe (chat record + pending queue): a note, not an error
            self.post_message(ChatSaved(msg_id, "capture", srel, pending=str(exc)))
            return
        except Exception as exc:
            self.post_message(ChatSaved(msg_id, "capture", srel, error=error_text(exc)))
            return
        self.post_message(ChatSaved(msg_id, "capture", srel, path))

    def on_chat_saved(self, message: ChatSaved) -> None:  # bubbles on: the screen reloads the day
        if self.session is None:
            return
        if message.error:
            what = "session record" if message.stage == "session" else "capture card"
            self.mark_failed(message.message_id, f"{what}: {message.error}")
            kept = self.restore_input(message.message_id)
            self.notify(message.error + ("; your words are back in the chat input" if kept else ""),
                        title=f"Chat not saved to the {what}", severity="error", timeout=10)
            return
        if message.pending and message.capture_path:  # on the card; what came after it failed
            self.mark_saved(message.message_id, f"saved → {message.capture_path.rsplit('/', 1)[-1]} · ⚠ see the warning")
            self.notify(message.pending, title="Chat saved, with a warning", severity="warning", timeout=10)
            return
        if message.pending:
            self.mark_saved(message.message_id, "saved · capture card busy, added when free")
            self.notify(message.pending, title="Chat saved", severity="warning", timeout=6)
            return
        if message.stage == "session":
            self.mark_saved(message.message_id, "saved" if self.llm else "saved · capturing…")
            if self.llm:
                from reme_engine.engine import CancelToken

                reply_id = self.begin_stream("assistant")
                self.in_flight.add(reply_id)
                self.cancel_tokens[reply_id] = cancel = CancelToken()
                self._bindings_changed()
                self._answer(message.message_id, reply_id, cancel)
            return
        cap = message.capture_path or ""
        self.mark_saved(message.message_id, f"saved → {cap.rsplit('/', 1)[-1]}" if cap else "saved")

    @work(thread=True, group="chat-answer", exit_on_error=False)
    def _answer(self, question_id: str, reply_id: str, cancel=None) -> None:
        """Stream a grounded answer (retrieval + citations) into bubble ``reply_id``, then run auto-memory for the
        session (the user's statements become a daily card). ``cancel``: the engine's CancelToken Escape sets."""
        from reme_engine.engine import LLMCancelled

        from ..loaders import error_text

        def on_text(text: str) -> None:
            if reply_id in self.cancelled:
                raise ReplyCancelled
            self.post_message(ChatReply(reply_id, text))

        try:
            status = self.session.answer(question_id, on_text, cancel)
            self.post_message(ChatReply(reply_id, done=True, status=status))
        except (ReplyCancelled, LLMCancelled):
            return
        except Exception as exc:
            self.post_message(ChatReply(reply_id, done=True, error=error_text(exc)))
            return
        finally:
            self.cancel_tokens.pop(reply_id, None)
        if reply_id in self.cancelled:  # cancelled after the last chunk: no auto-memory over it
            return
        try:
            if self.session.remember():
                self.post_message(ChatReply(reply_id, done=True, status=status + " · remembered"))
        except Exception as exc:  # memory failing must not lose the answer
            self.post_message(ChatReply(reply_id, done=True, status=status + f" · memory: {error_text(exc)}"))

    def on_chat_reply(self, message: ChatReply) -> None:  # bubbles on: the screen reloads the day list
        if message.reply_id in self.cancelled:
            message.stop()  # a late chunk or end of a cancelled answer: the bubble says "cancelled" already
            return
        if message.error:
            self.end_stream(message.reply_id, f"⚠ {message.error}")
            return
        if message.chunk:
            self.append_chunk(message.reply_id, message.chunk)
        if message.done:
            self.end_stream(message.reply_id, message.status)

    def set_llm(self, configured: bool) -> None:
        self.llm = configured
        self.notice.update(LLM_NOTICE if configured else NO_LLM_NOTICE)
        self._subtitle()
        self.input.placeholder = ("Ask or jot something, Enter sends…" if configured
                                  else "Jot a thought, Enter saves it…")

    @property
    def replying(self) -> bool:
        """Whether an answer is being streamed (Escape cancels it)."""
        return bool(self.in_flight)

    def cancel_reply(self) -> bool:
        """Cancel the answers being streamed: each bubble keeps what arrived, marked cancelled; the worker stops at
        once (the engine's cancel hook shuts the answer's connection, even one that has sent nothing yet) and
        records nothing. False when none."""
        if not self.in_flight:
            return False
        for reply_id in list(self.in_flight):
            self.cancelled.add(reply_id)
            token = self.cancel_tokens.get(reply_id)
            if token is not None:
                token.set()  # a socket shutdown: never blocks
            self.end_stream(reply_id, CANCELLED)
        self.notify("The answer was cancelled; your message stays in the chat record", title="Chat", timeout=4)
        return True

    def _bindings_changed(self) -> None:
        """The footer shows "Esc Cancel reply" only while an answer streams."""
        self._subtitle()
        if self.is_attached:
            self.screen.refresh_bindings()

    def restore_input(self, msg_id: str) -> bool:
        """Put the words of the unsaved message ``msg_id`` back into the input (before anything typed since);
        True when done."""
        bubble = self.bubbles.get(msg_id)
        if bubble is None or bubble.role != "user" or not bubble.text:
            return False
        typed = self.input.value
        if bubble.text not in typed:
            self.input.value = bubble.text + (" " + typed if typed.strip() else "")
            self.input.cursor_position = len(self.input.value)
        return True

    def _subtitle(self) -> None:
        if self.in_flight:
            self.border_subtitle = "answering · Esc cancels"
        elif self.input.has_focus:
            self.border_subtitle = "Enter sends · Esc back to the note" if self.llm else "Enter saves · Esc back"
        else:
            self.border_subtitle = "LLM" if self.llm else "journal · no LLM"

    def on_descendant_focus(self) -> None:
        self._subtitle()

    def on_descendant_blur(self) -> None:
        self._subtitle()

    # -- transcript -----------------------------------------------------------------------------------------
    def add_message(self, role: str, text: str, msg_id: str | None = None, status: str = "") -> str:
        """Append a finished message; returns its id."""
        msg_id = msg_id or uuid.uuid4().hex
        bubble = ChatBubble(msg_id, role, text, status=status)
        self.bubbles[msg_id] = bubble
        self.log_view.mount(bubble)
        self.log_view.scroll_end(animate=False)
        self.call_after_refresh(self.log_view.scroll_end, animate=False)
        return msg_id

    def begin_stream(self, role: str = "assistant", msg_id: str | None = None) -> str:
        """Start a message that grows chunk by chunk; returns its id."""
        msg_id = self.add_message(role, "", msg_id)
        self.bubbles[msg_id].streaming = True
        self.bubbles[msg_id].waiting_since = time.monotonic()
        self.bubbles[msg_id]._refresh_text()
        return msg_id

    def append_chunk(self, msg_id: str, chunk: str) -> None:
        """Add ``chunk`` to the streaming message ``msg_id`` and keep the end in view."""
        bubble = self.bubbles.get(msg_id)
        if bubble is None:
            return
        bubble.append(chunk)
        self.log_view.scroll_end(animate=False)

    def end_stream(self, msg_id: str, status: str = "") -> str:
        """Finish the streaming message; returns its full text."""
        bubble = self.bubbles.get(msg_id)
        if bubble is None:
            return ""
        bubble.streaming = False
        bubble.waiting_since = None
        bubble.set_status(status)
        if msg_id in self.in_flight:
            self.in_flight.discard(msg_id)
            self._bindings_changed()
        return bubble.text

    def last_citations(self) -> list[tuple[str, str, str | None]]:
        """``(shown, target, anchor)`` of the citations of the newest message that has any (else [])."""
        for bubble in reversed(list(self.bubbles.values())):
            if bubble.citations:
                return list(bubble.citations)
        return []

    def mark_saved(self, msg_id: str, detail: str = "saved") -> None:
        if (b := self.bubbles.get(msg_id)) is not None:
            b.set_status(detail)

    def mark_failed(self, msg_id: str, error: str) -> None:
        if (b := self.bubbles.get(msg_id)) is not None:
            b.set_status(f"⚠ not saved: {error}")

    # -- input ----------------------------------------------------------------------------------------------
    @on(Input.Submitted, "#chat-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            return
        self.input.value = ""
        self.post_message(ChatSubmitted(text))

    def focus_input(self) -> None:
        self.input.focus()

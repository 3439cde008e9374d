"""Chat capture while another program keeps writing the capture card: waited for a bounded time, else kept pending
(in the state dir) and appended later, by the retry thread or the next message; never lost, never duplicated, the
other program's lines never written over."""

import json
import threading
import time
import uuid

import pytest

from reme_engine.memory import capture as C
from reme_engine.memory.cards import _day_folder


def wait_until(pred, timeout: float = 20.0, what: str = "condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class Appender(threading.Thread):
    """The other program: appends a numbered line to ``path`` every ``every`` seconds until :meth:`stop` (or
    ``limit`` lines). The tests that need a card that never settles use 5 ms, well inside the 50 ms a read waits
    for quiet even on a loaded machine."""

    def __init__(self, path, limit: int | None = None, every: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.path, self.limit, self.n, self.every = path, limit, 0, every
        self.halt = threading.Event()

    def run(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while not self.halt.is_set() and (self.limit is None or self.n < self.limit):
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(f"shell line {self.n}\n")
            self.n += 1
            self.halt.wait(self.every)

    def stop(self) -> None:
        self.halt.set()
        self.join()

    def lines(self) -> list[str]:
        return [f"shell line {i}" for i in range(self.n)]


@pytest.fixture
def setup(make_engine, tmp_path):
    vault = tmp_path / "v"
    vault.mkdir()
    eng = make_engine(vault, embed=False)
    eng.index()
    sid = uuid.uuid4().hex
    date = eng.settings.today()
    card = vault / _day_folder(eng, date) / "capture.md"
    return eng, sid, card


def say(eng, sid, text):
    return eng.chat_append(sid, "user", text)


def shell_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("shell line")]


def assert_in_order(text: str, items: list[str]) -> None:
    """Each of ``items`` occurs exactly once in ``text``, in this order."""
    pos = -1
    for it in items:
        assert text.count(it) == 1, (it, text)
        assert text.index(it) > pos, (it, text)
        pos = text.index(it)


def test_a_card_busy_for_a_moment_is_waited_for(setup):
    eng, sid, card = setup
    w = Appender(card, limit=40)  # ~0.8 s of appends, then quiet
    w.start()
    wait_until(lambda: w.n >= 3, what="the writer started")
    msg = say(eng, sid, "zebra note while the shell writes")
    paths = eng.chat_capture(sid, [msg])
    w.join()
    text = card.read_text(encoding="utf-8")
    assert paths and card.as_posix().endswith(paths[0])
    assert text.count("zebra note while the shell writes") == 1
    assert shell_lines(text) == w.lines()  # none of the other program's lines written over, lost or moved
    assert not (eng.settings.state_dir / C.PENDING_FILE).exists()


def test_a_card_that_never_settles_keeps_the_words_pending_and_the_retry_thread_adds_them(setup, monkeypatch):
    eng, sid, card = setup
    monkeypatch.setattr(C, "CAPTURE_WAIT_S", 0.3)
    monkeypatch.setattr(C, "PENDING_RETRY_S", 0.2)
    monkeypatch.setattr("reme_engine.vault.io.STABLE_READ_MAX_WAIT_S", 0.2)
    w = Appender(card, every=0.005)
    w.start()
    wait_until(lambda: w.n >= 3, what="the writer started")
    first, second = say(eng, sid, "first okapi words"), say(eng, sid, "second okapi words")
    for m in (first, second):
        with pytest.raises(C.CapturePending) as ei:
            eng.chat_capture(sid, [m])
        assert "kept in the chat record; added to the capture card when it is free" in str(ei.value)
        assert "capture.md" in str(ei.value) and ei.value.result.pending == 1
    pending = C.load_pending(eng)
    assert [(s, m.content) for s, m in pending] == [(sid, "first okapi words"), (sid, "second okapi words")]
    assert "okapi" not in card.read_text(encoding="utf-8")
    w.stop()
    # the retry thread appends both once the card is quiet, in time order, and clears the pending file
    wait_until(lambda: not (eng.settings.state_dir / C.PENDING_FILE).exists(), what="pending captures appended")
    text = card.read_text(encoding="utf-8")
    assert_in_order(text, ["first okapi words", "second okapi words"])
    assert shell_lines(text) == w.lines()
    # a later message (or a repeat of an old one) appends once, nothing twice
    third = say(eng, sid, "third okapi words")
    eng.chat_capture(sid, [first, second, third])
    assert_in_order(card.read_text(encoding="utf-8"), ["first okapi words", "second okapi words",
                                                       "third okapi words"])
    runs = [r for r in eng.journal.runs(limit=50) if r["kind"] == "capture"]
    assert all(r["status"] == "ok" and r["changes"] >= 1 for r in runs)  # busy attempts leave no empty runs


def test_pending_words_survive_a_restart_and_go_first_with_the_next_message(setup, make_engine, monkeypatch):
    eng, sid, card = setup
    monkeypatch.setattr(C, "CAPTURE_WAIT_S", 0.3)
    monkeypatch.setattr(C, "PENDING_RETRY_S", 600.0)  # no retry thread pass here: the next message does it
    monkeypatch.setattr("reme_engine.vault.io.STABLE_READ_MAX_WAIT_S", 0.2)
    w = Appender(card, every=0.005)
    w.start()
    wait_until(lambda: w.n >= 3, what="the writer started")
    early = say(eng, sid, "early ibis words")
    with pytest.raises(C.CapturePending):
        eng.chat_capture(sid, [early])
    w.stop()
    state = eng.settings.state_dir
    eng.close()
    assert json.loads((state / C.PENDING_FILE).read_text(encoding="utf-8"))["entries"][0]["message"]["id"] == \
        early.id
    eng2 = make_engine(eng.settings.vault, embed=False, state_dir=str(state))
    late = say(eng2, sid, "late ibis words")
    paths = eng2.chat_capture(sid, [late])
    assert paths and not (state / C.PENDING_FILE).exists()
    text = card.read_text(encoding="utf-8")
    assert_in_order(text, ["early ibis words", "late ibis words"])
    assert shell_lines(text) == w.lines()


async def test_the_chat_pane_says_where_the_words_are_and_the_card_gets_them_later(app_for, monkeypatch):
    """The real app: a message sent while the card is busy is marked kept (not lost), then lands in the card."""
    from reme_tui.messages import ChatSaved
    from test_tui import started, wait_for

    monkeypatch.setattr(C, "CAPTURE_WAIT_S", 0.3)
    monkeypatch.setattr(C, "PENDING_RETRY_S", 0.2)
    monkeypatch.setattr("reme_engine.vault.io.STABLE_READ_MAX_WAIT_S", 0.2)
    posted: list = []
    app = app_for()
    async with app.run_test(size=(160, 48), message_hook=posted.append) as pilot:
        m = await started(pilot)
        eng = app.engine
        card = eng.vault / _day_folder(eng, eng.settings.today()) / "capture.md"
        w = Appender(card, every=0.005)
        w.start()
        try:
            await wait_for(pilot, lambda: w.n >= 3, what="the writer started")
            await pilot.press("c", *"tapir words", "enter")
            await wait_for(pilot, lambda: any(isinstance(x, ChatSaved) and x.stage == "capture" for x in posted),
                           what="capture answered")
            (bubble,) = [b for b in m.chat.bubbles.values() if b.text == "tapir words"]
            assert bubble.status == "saved · capture card busy, added when free"  # saved, not "⚠ not saved"
            saved = [x for x in posted if isinstance(x, ChatSaved) and x.stage == "capture"][0]
            assert not saved.error and "kept in the chat record" in saved.pending
        finally:
            w.stop()
        await wait_for(pilot, lambda: "tapir words" in card.read_text(encoding="utf-8"), what="appended later")
        text = card.read_text(encoding="utf-8")
        assert text.count("tapir words") == 1 and shell_lines(text) == w.lines()


def test_words_left_pending_are_appended_when_the_next_run_starts(setup, make_engine, monkeypatch):
    """The app quit while the card was busy: its next start appends them without waiting for a new message."""
    eng, sid, card = setup
    monkeypatch.setattr(C, "CAPTURE_WAIT_S", 0.3)
    monkeypatch.setattr(C, "PENDING_RETRY_S", 600.0)  # this engine's own retry thread never gets to it
    monkeypatch.setattr("reme_engine.vault.io.STABLE_READ_MAX_WAIT_S", 0.2)
    w = Appender(card, every=0.005)
    w.start()
    wait_until(lambda: w.n >= 3, what="the writer started")
    with pytest.raises(C.CapturePending):
        eng.chat_capture(sid, [say(eng, sid, "left behind quokka words")])
    w.stop()
    state = eng.settings.state_dir
    eng.close()
    monkeypatch.setattr(C, "PENDING_RETRY_S", 0.1)
    eng2 = make_engine(eng.settings.vault, embed=False, state_dir=str(state))
    eng2.start_background(watch=False, schedule=False)
    wait_until(lambda: "left behind quokka words" in card.read_text(encoding="utf-8"), what="appended at start")
    wait_until(lambda: not (state / C.PENDING_FILE).exists(), what="pending file gone")
    assert card.read_text(encoding="utf-8").count("left behind quokka words") == 1
    assert shell_lines(card.read_text(encoding="utf-8")) == w.lines()


def test_an_agents_remember_waits_for_a_card_busy_for_a_moment(setup, monkeypatch):
    """MCP `remember` while another program appends to the card for a moment: the entry lands once, every line of
    the other program is kept, and the busy attempts leave no failed runs in the journal."""
    from reme_engine.agent_capture import remember

    eng, _sid, card = setup
    monkeypatch.setattr("reme_engine.vault.io.STABLE_READ_MAX_WAIT_S", 0.2)
    w = Appender(card, every=0.005)
    w.start()
    wait_until(lambda: w.n >= 3, what="the writer started")
    threading.Timer(0.6, w.halt.set).start()  # busy for a moment, then quiet
    r = remember(eng, "Prefers the window seat.", agent="test-agent")
    w.join()
    text = card.read_text(encoding="utf-8")
    assert r["path"] == card.relative_to(eng.vault).as_posix()
    assert text.count("Prefers the window seat.") == 1 and shell_lines(text) == w.lines()
    runs = [x for x in eng.journal.runs(limit=50) if x["kind"] == "capture"]
    assert [x["status"] for x in runs] == ["ok"] and runs[0]["run_id"] == r["run_id"]

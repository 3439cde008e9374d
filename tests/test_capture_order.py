"""Messages sent one after another while the capture card is busy land on it in the order they were sent, whether
they wait for the card, are kept pending, or are written once it is free."""

import threading
import uuid

from test_capture_busy import Appender, shell_lines, wait_until

from reme_engine.memory import capture as C
from reme_engine.memory.cards import _day_folder


def test_captures_sent_while_the_card_is_busy_keep_their_order(make_engine, tmp_path, monkeypatch):
    monkeypatch.setattr(C, "CAPTURE_WAIT_S", 0.3)
    monkeypatch.setattr(C, "PENDING_RETRY_S", 600.0)  # no retry pass takes a turn here: the later messages flush
    monkeypatch.setattr("reme_engine.vault.io.STABLE_READ_MAX_WAIT_S", 0.2)
    vault = tmp_path / "v"
    vault.mkdir()
    eng = make_engine(vault, embed=False)
    eng.index()
    sid = uuid.uuid4().hex
    card = vault / _day_folder(eng, eng.settings.today()) / "capture.md"
    card.parent.mkdir(parents=True, exist_ok=True)
    writer = Appender(card, every=0.005)  # the card never settles while it runs
    writer.start()
    wait_until(lambda: writer.n >= 3, what="the other program started")
    done: list[int] = []

    def send(i: int, msg) -> None:
        try:
            eng.chat_capture(sid, [msg])
        except C.CapturePending:
            pass
        done.append(i)

    words = [f"message {i} of the walrus" for i in range(1, 6)]
    threads = []
    for i, w in enumerate(words, 1):
        t = threading.Thread(target=send, args=(i, eng.chat_append(sid, "user", w)), daemon=True)
        t.start()
        threads.append(t)
        wait_until(lambda: C._turns(eng)._next == i, what=f"capture {i} queued")
        if i == 3:  # the first ones were kept pending; the card frees while 3–5 are on their way
            wait_until(lambda: len(done) >= 2, what="two captures answered")
            writer.stop()
    for t in threads:
        t.join(30)
    wait_until(lambda: not (eng.settings.state_dir / C.PENDING_FILE).exists(), what="pending captures appended")
    text = card.read_text(encoding="utf-8")
    positions = [text.index(w) for w in words]
    assert all(text.count(w) == 1 for w in words), text
    assert positions == sorted(positions), text
    assert shell_lines(text) == writer.lines()


def test_a_busy_day_page_gets_its_new_capture_card_listed_once_quiet(make_engine, tmp_path, monkeypatch):
    from reme_engine.vault.daily import DAY_INDEX_START, INDEX_END, INDEX_START

    monkeypatch.setattr(C, "PENDING_RETRY_S", 0.2)
    monkeypatch.setattr("reme_engine.vault.io.STABLE_READ_MAX_WAIT_S", 0.2)
    vault = tmp_path / "v"
    vault.mkdir()
    eng = make_engine(vault, embed=False)
    date = eng.settings.today()
    folder = _day_folder(eng, date)
    page = vault / f"{folder}.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(f"# {date}\n\n{INDEX_START}\n{INDEX_END}\n", encoding="utf-8")
    eng.index()
    writer = Appender(page, every=0.005)
    writer.start()
    wait_until(lambda: writer.n >= 3, what="the other program started")
    sid = uuid.uuid4().hex
    paths = eng.chat_capture(sid, [eng.chat_append(sid, "user", "a narwhal thought")])
    assert paths and (vault / paths[0]).exists()
    writer.stop()

    def listed() -> bool:
        text = page.read_text(encoding="utf-8")
        section = text.split(DAY_INDEX_START, 1)[1].split(INDEX_END, 1)[0]  # (the start marker gains a hash)
        return "capture" in section

    wait_until(listed, what="the day page lists the capture card")
    text = page.read_text(encoding="utf-8")
    assert shell_lines(text) == writer.lines()

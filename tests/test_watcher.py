"""The vault watcher on a real temp dir with real file operations (no mocks).

Every wait polls with a deadline instead of sleeping a fixed time, so the tests hold on a loaded 2-core machine.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import unicodedata
from pathlib import Path

import pytest

from reme_engine.index.watcher import VaultWatcher, is_temp_or_hidden
from reme_engine.vault.io import atomic_write, content_hash

DEADLINE = 5.0


def indexable(rel: str) -> bool:
    """Like ``Indexer.is_indexable`` with default layers: Markdown anywhere, text files in the layers."""
    low = rel.lower()
    return low.endswith(".md") or (low.endswith((".txt", ".json")) and rel.startswith(("resource/", "daily/")))


class Sink:
    """Collects batches from the watcher thread."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.times: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, paths: list[str]) -> None:
        with self._lock:
            self.batches.append(list(paths))
            self.times.append(time.monotonic())

    def seen(self) -> set[str]:
        with self._lock:
            return {p for b in self.batches for p in b}

    def clear(self) -> None:
        with self._lock:
            self.batches.clear()
            self.times.clear()

    def wait_for(self, *paths: str, timeout: float = DEADLINE) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if set(paths) <= self.seen():
                return True
            time.sleep(0.02)
        return set(paths) <= self.seen()

    def settle(self, quiet: float = 0.8) -> None:
        """Wait until no batch arrived for ``quiet`` seconds (bounded by DEADLINE)."""
        deadline = time.monotonic() + DEADLINE
        count = -1
        last_change = time.monotonic()
        while time.monotonic() < deadline:
            with self._lock:
                n = len(self.batches)
            if n != count:
                count, last_change = n, time.monotonic()
            elif time.monotonic() - last_change >= quiet:
                return
            time.sleep(0.02)


@pytest.fixture
def vault(tmp_path) -> Path:
    v = tmp_path / "vault"
    for d in ("daily", "resource", "digest/wiki", ".obsidian"):
        (v / d).mkdir(parents=True)
    (v / "daily" / "old.md").write_text("old\n")
    return v


@pytest.fixture
def watch(vault):
    made: list[VaultWatcher] = []

    def make(**kw) -> tuple[VaultWatcher, Sink]:
        sink = Sink()
        w = VaultWatcher(vault, indexable, sink, **kw)
        assert w.start(wait=10), "watcher did not become ready"
        made.append(w)
        return w, sink

    yield make
    for w in made:
        assert w.stop(5)


def write(path: Path, text: str = "x\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_create_modify_delete(vault, watch):
    w, sink = watch()
    t0 = time.monotonic()
    write(vault / "daily" / "a.md", "one\n")
    assert sink.wait_for("daily/a.md")
    assert sink.times[0] - t0 < 2.5  # "within ~1 s"; slack for a loaded machine
    sink.settle()
    sink.clear()
    with open(vault / "daily" / "a.md", "a", encoding="utf-8") as fh:
        fh.write("two\n")
    assert sink.wait_for("daily/a.md")
    sink.settle()
    sink.clear()
    (vault / "daily" / "a.md").unlink()
    assert sink.wait_for("daily/a.md")
    sink.settle()
    assert sink.seen() == {"daily/a.md"}


def test_atomic_save_via_replace(vault, watch):
    w, sink = watch()
    target = vault / "daily" / "old.md"
    # how editors save: temp file beside the target (several naming styles), then rename over it
    for tmp_name in (".old.md.tmp123", "old.md.tmp", "old.md~", "4913"):
        write(vault / "daily" / tmp_name, "new content\n")
    os.replace(vault / "daily" / ".old.md.tmp123", target)
    os.replace(vault / "daily" / "old.md.tmp", target)
    os.unlink(vault / "daily" / "4913")
    assert sink.wait_for("daily/old.md")
    sink.settle()
    assert sink.seen() == {"daily/old.md"}
    assert target.read_text() == "new content\n"


def test_swap_and_temp_files_ignored(vault, watch):
    w, sink = watch()
    junk = [".obsidian/workspace.json", ".obsidian/plugins/x/notes.md", ".git/objects/ab.md", ".trash/gone.md",
            "daily/.#a.md", "daily/.a.md.swp", "daily/a.md.swp", "daily/a.md.swx", "daily/b.md~", "daily/4913",
            "daily/c.tmp", "daily/.~lock.report.md#", "daily/#auto.md#", "daily/.hidden.md"]
    for rel in junk:
        write(vault / rel)
    write(vault / "daily" / "sentinel.md")
    assert sink.wait_for("daily/sentinel.md")
    sink.settle()
    assert sink.seen() == {"daily/sentinel.md"}
    for rel in junk:
        assert is_temp_or_hidden(rel), rel
    assert not is_temp_or_hidden("daily/2026-11-29/session_1.md")


def test_burst_of_2000_files_is_coalesced(vault, watch):
    w, sink = watch()
    names = [f"daily/n{i:04d}.md" for i in range(2000)]
    for rel in names:
        (vault / rel).write_text(rel, encoding="utf-8")
    # each file written twice: still one entry per path
    for rel in names[:500]:
        (vault / rel).write_text(rel + " again", encoding="utf-8")
    assert sink.wait_for(*names, timeout=15)
    sink.settle()
    assert sink.seen() == set(names)
    assert len(sink.batches) <= 5, [len(b) for b in sink.batches]
    for b in sink.batches:
        assert b == sorted(b) and len(b) == len(set(b))


def test_new_day_folder_with_files_created_immediately(vault, watch):
    w, sink = watch()
    day = vault / "daily" / "2026-11-29"
    day.mkdir()
    names = ["daily/2026-11-29/session_abc.md", "daily/2026-11-29/topic.md", "daily/2026-11-29/interests.json"]
    for rel in names:
        write(vault / rel)
    (day / "nested").mkdir()
    write(day / "nested" / "deep.md")
    names.append("daily/2026-11-29/nested/deep.md")
    write(vault / "daily" / "2026-11-29.md")  # the day page next to it
    names.append("daily/2026-11-29.md")
    assert sink.wait_for(*names)
    sink.settle()
    assert sink.seen() == set(names)
    # the new folder is watched from now on
    sink.clear()
    write(day / "later.md")
    assert sink.wait_for("daily/2026-11-29/later.md")


def test_rename_reports_old_and_new(vault, watch):
    w, sink = watch()
    os.rename(vault / "daily" / "old.md", vault / "daily" / "new-name.md")
    assert sink.wait_for("daily/old.md", "daily/new-name.md")
    # a move into a new folder as well
    sink.settle()
    sink.clear()
    (vault / "digest" / "wiki" / "moved").mkdir()
    os.rename(vault / "daily" / "new-name.md", vault / "digest" / "wiki" / "moved" / "new-name.md")
    assert sink.wait_for("daily/new-name.md", "digest/wiki/moved/new-name.md")


def test_folder_delete_and_recreate(vault, watch):
    w, sink = watch()
    day = vault / "daily" / "2026-11-28"
    write(day / "a.md")
    write(day / "b.md")
    assert sink.wait_for("daily/2026-11-28/a.md", "daily/2026-11-28/b.md")
    sink.settle()
    sink.clear()
    shutil.rmtree(day)
    assert sink.wait_for("daily/2026-11-28/a.md", "daily/2026-11-28/b.md")
    sink.settle()
    sink.clear()
    day.mkdir()
    write(day / "c.md")
    assert sink.wait_for("daily/2026-11-28/c.md")
    sink.settle()
    sink.clear()
    write(day / "d.md")  # still watched after the recreate
    assert sink.wait_for("daily/2026-11-28/d.md")
    # a top-level layer folder too
    sink.settle()
    sink.clear()
    shutil.rmtree(vault / "daily")
    assert sink.wait_for("daily/old.md", "daily/2026-11-28/c.md")
    (vault / "daily").mkdir()
    write(vault / "daily" / "fresh.md")
    assert sink.wait_for("daily/fresh.md")


def test_folder_moved_out_of_vault_uses_known_under(vault, tmp_path, watch):
    write(vault / "digest" / "wiki" / "topic" / "a.md")
    write(vault / "digest" / "wiki" / "topic" / "b.md")
    index = {"digest/wiki/topic/a.md", "digest/wiki/topic/b.md", "daily/old.md"}
    asked = []

    def known_under(prefix):
        asked.append(prefix)
        return [p for p in index if p.startswith(prefix + "/")]

    w, sink = watch(known_under=known_under)
    shutil.move(str(vault / "digest" / "wiki" / "topic"), str(tmp_path / "elsewhere"))
    assert sink.wait_for("digest/wiki/topic/a.md", "digest/wiki/topic/b.md")
    assert "digest/wiki/topic" in asked


def test_own_writes_are_suppressed(vault, watch):
    w, sink = watch()
    own = vault / "daily" / "own.md"
    data = "written by the app\n"
    w.expect_write("daily/own.md", content_hash(data.encode()))
    atomic_write(own, data)
    # after the write, too (the engine may register it either way)
    sha = atomic_write(vault / "daily" / "own2.md", "also ours\n")
    w.expect_write("daily/own2.md", sha)
    write(vault / "daily" / "sentinel.md")
    assert sink.wait_for("daily/sentinel.md")
    sink.settle()
    assert "daily/own.md" not in sink.seen() and "daily/own2.md" not in sink.seen()
    assert w.stats["suppressed"] >= 1
    # the user editing the file afterwards is an external change again
    sink.clear()
    own.write_text("user edit\n", encoding="utf-8")
    assert sink.wait_for("daily/own.md")
    # suppress(): a delete/move done by the app
    sink.settle()
    sink.clear()
    os.rename(vault / "daily" / "own2.md", vault / "daily" / "own3.md")
    w.suppress(["daily/own2.md", "daily/own3.md"])
    write(vault / "daily" / "sentinel2.md")
    assert sink.wait_for("daily/sentinel2.md")
    sink.settle()
    assert sink.seen() == {"daily/sentinel2.md"}


def test_new_resources_callback(vault, watch):
    got: list[list[str]] = []
    w, sink = watch(on_new_resources=got.append)
    write(vault / "resource" / "2026-11-29" / "paper.txt", "abstract\n")
    (vault / "resource" / "scan.pdf").write_bytes(b"%PDF-1.4\n")
    write(vault / "daily" / "x.md")
    assert sink.wait_for("resource/2026-11-29/paper.txt", "daily/x.md")
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline and {p for b in got for p in b} != {"resource/2026-11-29/paper.txt",
                                                                          "resource/scan.pdf"}:
        time.sleep(0.02)
    assert {p for b in got for p in b} == {"resource/2026-11-29/paper.txt", "resource/scan.pdf"}
    assert "resource/scan.pdf" not in sink.seen()  # not indexable, still a new resource


def test_symlink_out_of_vault_ignored(vault, tmp_path, watch):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, vault / "linked")
    w, sink = watch()
    write(outside / "secret.md")
    write(vault / "daily" / "sentinel.md")
    assert sink.wait_for("daily/sentinel.md")
    sink.settle()
    assert sink.seen() == {"daily/sentinel.md"}


@pytest.mark.parametrize("link", ["a/loop", "a/up"])
def test_a_folder_symlink_loop_does_not_hide_the_vaults_changes(vault, watch, link):
    """``a/loop -> ..`` (the vault again) or ``a/up -> ../..`` (a folder holding the vault): watchfiles follows
    the symlink and then reports the vault's events under the looped path. They are reported under the files'
    own vault paths, once, and nothing outside the vault is."""
    (vault / "a").mkdir()
    os.symlink("..", vault / "a" / "loop") if link == "a/loop" else os.symlink("../..", vault / "a" / "up")
    w, sink = watch()
    write(vault / "a" / "n.md")
    write(vault / "daily" / "d.md")
    write(vault.parent / "beside.md")  # outside the vault, watched only through the symlink
    assert sink.wait_for("a/n.md", "daily/d.md"), sink.batches
    sink.settle()
    assert sink.seen() == {"a/n.md", "daily/d.md"}, sink.batches


def test_files_changed_before_the_watch_started_are_reported_with_since(vault):
    """A note edited after the first index pass read it but before the watcher started (``since`` = the pass's
    start) is reported once the watch is in place, with no event after the start; older files are not."""
    old = vault / "daily" / "old.md"
    past = time.time() - 3600
    os.utime(old, (past, past))
    since = time.time() - 1.0
    write(vault / "digest" / "wiki" / "edited.md", "edited during the first pass\n")
    sink = Sink()
    w = VaultWatcher(vault, indexable, sink, since=since)
    try:
        assert w.start(wait=10)
        assert sink.wait_for("digest/wiki/edited.md"), sink.batches
        sink.settle()
        assert sink.seen() == {"digest/wiki/edited.md"}, sink.batches
    finally:
        assert w.stop(5)


def test_paths_are_nfc(vault, watch):
    w, sink = watch()
    nfd = unicodedata.normalize("NFD", "daily/café.md")
    write(vault / nfd)
    nfc = unicodedata.normalize("NFC", "daily/café.md")
    assert sink.wait_for(nfc)
    assert all(unicodedata.is_normalized("NFC", p) for p in sink.seen())


def test_vault_root_disappears_and_returns(vault, watch):
    errors: list[str] = []
    w, sink = watch(on_error=errors.append, known_under=lambda prefix: ["daily/old.md", "daily/lost.md"])
    backup = vault.parent / "backup"
    shutil.move(str(vault), str(backup))
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline and not errors:
        time.sleep(0.02)
    assert errors and "disappeared" in errors[0]
    shutil.move(str(backup), str(vault))
    # reconcile: everything present plus what the index knew
    assert sink.wait_for("daily/old.md", "daily/lost.md")
    sink.settle()
    sink.clear()
    write(vault / "daily" / "after.md")
    assert sink.wait_for("daily/after.md")
    assert w.running


def test_stop_is_prompt(vault, watch):
    w, sink = watch()
    time.sleep(0.2)
    t0 = time.monotonic()
    assert w.stop(5)
    assert time.monotonic() - t0 < 0.5
    assert not w.running


def test_a_failed_batch_is_delivered_again_until_it_succeeds(vault, monkeypatch):
    """``on_batch`` failing (the index's disk full) keeps the paths: they are delivered again once it works, with
    one ``on_error`` report, and no new event is needed."""
    import reme_engine.index.watcher as W

    monkeypatch.setattr(W, "BATCH_RETRY_S", 0.2)
    calls: list[list[str]] = []
    errors: list[str] = []
    fail = threading.Event()
    fail.set()

    def on_batch(paths):
        calls.append(list(paths))
        if fail.is_set():
            raise OSError(28, "No space left on device")

    w = VaultWatcher(vault, indexable, on_batch, on_error=errors.append)
    assert w.start(wait=10)
    try:
        for i in range(3):
            write(vault / "digest" / "wiki" / f"full{i}.md")
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline and len(calls) < 2:  # the first delivery and at least one retry
            time.sleep(0.02)
        assert len(calls) >= 2 and all(set(c) == {f"digest/wiki/full{i}.md" for i in range(3)} for c in calls), calls
        fail.clear()  # space is back
        n = len(calls)
        while time.monotonic() < deadline + DEADLINE and len(calls) == n:
            time.sleep(0.02)
        assert set(calls[n]) == {f"digest/wiki/full{i}.md" for i in range(3)}, calls
        assert any("index not updated for 3 changed file(s)" in e and "No space left" in e for e in errors), errors
        time.sleep(1.0)
        assert len(calls) == n + 1, calls  # delivered, then no more retries
    finally:
        assert w.stop(5)


def test_callback_errors_do_not_stop_watching(vault):
    calls: list[list[str]] = []

    def flaky(paths):
        calls.append(paths)
        if len(calls) == 1:
            raise RuntimeError("index failed")

    w = VaultWatcher(vault, indexable, flaky)
    assert w.start(wait=10)
    try:
        write(vault / "daily" / "one.md")
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline and not calls:
            time.sleep(0.02)
        write(vault / "daily" / "two.md")
        while time.monotonic() < deadline + DEADLINE and not any("daily/two.md" in c for c in calls):
            time.sleep(0.02)
        assert any("daily/two.md" in c for c in calls)
    finally:
        assert w.stop(5)


def test_engine_index_follows_the_vault(vault, tmp_path):
    """End to end with the real engine: what the index holds after external edits."""
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    settings = load_settings({"vault": str(vault), "state_dir": str(tmp_path / "state"),
                              "embedder": {"kind": "none"}}, env={})
    eng = Engine.open(settings)
    try:
        eng.index(vectors=False)
        w = VaultWatcher(eng.vault, eng.indexer.is_indexable, lambda paths: eng.index_paths(paths, vectors=False),
                         known_under=lambda pre: [p for p in eng.store.file_rows() if p.startswith(pre + "/")])
        assert w.start(wait=10)
        try:
            day = vault / "daily" / "2026-11-29"
            day.mkdir()
            write(day / "card.md", "# Card\nfresh words\n")
            os.rename(vault / "daily" / "old.md", vault / "daily" / "renamed.md")
            for i in range(300):
                write(vault / "digest" / "wiki" / f"w{i}.md", f"# W{i}\n")
            (vault / "resource" / ".x.tmp").write_text("temp")

            def indexed():
                return set(eng.store.file_rows())

            want = {"daily/2026-11-29/card.md", "daily/renamed.md"} | {f"digest/wiki/w{i}.md" for i in range(300)}
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and indexed() != want:
                time.sleep(0.05)
            assert indexed() == want
            shutil.rmtree(day)
            deadline = time.monotonic() + DEADLINE
            while time.monotonic() < deadline and "daily/2026-11-29/card.md" in indexed():
                time.sleep(0.05)
            assert "daily/2026-11-29/card.md" not in indexed()
        finally:
            assert w.stop(5)
    finally:
        eng.close()


def test_a_note_edited_after_the_first_pass_read_it_reaches_the_index(vault, tmp_path):
    """The app starts the watcher once its first index pass is done: a note edited after that pass read it and
    before the watch was in place is indexed when the watcher starts, not at the next start of the app."""
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    settings = load_settings({"vault": str(vault), "state_dir": str(tmp_path / "state"),
                              "embedder": {"kind": "none"}}, env={})
    eng = Engine.open(settings)
    try:
        eng.index(vectors=False)
        write(vault / "daily" / "old.md", "old\nedited meanwhile: wombatzz\n")
        seen: list[list[str]] = []
        eng.start_background(on_indexed=lambda paths, rep: seen.append(paths), schedule=False)
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline and not eng.search("wombatzz", mode="keyword").hits:
            time.sleep(0.02)
        assert [h.path for h in eng.search("wombatzz", mode="keyword").hits] == ["daily/old.md"], seen
    finally:
        eng.close()

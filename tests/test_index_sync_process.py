"""The app's first index in a child process (``reme_engine.index.sync_process``) and the search screen's keyword
answer while the vector model loads: real vaults in temp dirs, the real index, the real TUI."""

from __future__ import annotations

import asyncio
import threading
import time

from reme_engine.index import sync_process


def _settings(vault, state, **extra):
    from reme_engine.config import load_settings

    return load_settings({"vault": str(vault), "state_dir": str(state), **extra}, env={})


def test_child_sync_indexes_the_vault_for_this_process(demo_vault, tmp_path):
    """A sync run by the child lands in the same index: this process's engine finds a word of a note at once,
    the report is the child's, and no process is left behind."""
    from reme_engine.engine import Engine

    (demo_vault / "inbox").mkdir(exist_ok=True)
    (demo_vault / "inbox" / "child-note.md").write_text("# Child\n\nzyxchildsyncword here.\n", encoding="utf-8")
    eng = Engine.open(_settings(demo_vault, tmp_path / "state", embedder={"kind": "none"}))
    try:
        assert sync_process.wants_child(eng.store) is True  # nothing indexed yet
        assert sync_process.wants_child(eng.store, eng.vault) is False  # ~30 notes: not worth a process
        seen: list[tuple] = []
        report = sync_process.sync_in_child(eng.indexer, lambda *a: seen.append(a))
        assert report.added >= 20 and "inbox/child-note.md" in report.changed_paths
        assert any(s[0] == "index" for s in seen) and seen[-1][0] == "links"
        hits = eng.search("zyxchildsyncword", mode="keyword").hits
        assert [h.path for h in hits] == ["inbox/child-note.md"]
        assert eng.store.get_meta("last_sync")
        assert sync_process.wants_child(eng.store) is False  # indexed: the next start syncs here
        # an in-process sync afterwards finds nothing left to do
        again = eng.index(vectors=False)
        assert again.added == again.modified == again.removed == 0
    finally:
        eng.close()
    assert not [p for p in __import__("multiprocessing").active_children() if p.name == "reme-sync"]


def test_cancelled_child_sync_stops_and_leaves_a_usable_index(demo_vault, tmp_path):
    """Cancelling (the app quits during its first index) terminates the child; the next sync indexes everything."""
    from reme_engine.engine import Engine

    eng = Engine.open(_settings(demo_vault, tmp_path / "state", embedder={"kind": "none"}))
    try:
        t = time.monotonic()
        report = sync_process.sync_in_child(eng.indexer, None, lambda: True)
        assert report.added == 0 and time.monotonic() - t < 10
        assert not [p for p in __import__("multiprocessing").active_children() if p.name == "reme-sync"]
        full = eng.index(vectors=False)
        assert eng.search("光伏", mode="keyword").hits and full.chunks_total > 0
    finally:
        eng.close()


def test_keyword_pass_falls_back_to_this_process_when_the_child_fails(demo_vault, tmp_path, monkeypatch):
    """A child that cannot run (here: it raises at once) is reported in the log and the pass runs here; the
    in-memory keyword scorer is switched back on afterwards."""
    from reme_engine.engine import Engine
    from reme_tui import indexing

    monkeypatch.setattr(sync_process, "CHILD_MIN_STALE_FILES", 1)

    def fail(*a, **kw):
        raise sync_process.SyncChildFailed("no child here")

    monkeypatch.setattr(sync_process, "sync_in_child", fail)
    eng = Engine.open(_settings(demo_vault, tmp_path / "state", embedder={"kind": "none"}))
    try:
        assert indexing.child_pass_ahead(eng) is True  # the app would start the pass before its first frame
        report = indexing.keyword_pass(eng, None, lambda: False, child=True)
        assert report.added >= 20 and eng.searcher.memory_bm25 is True  # back on: the pass ran here
        assert eng.search("光伏", mode="keyword").hits
        assert indexing.child_pass_ahead(eng) is False  # indexed: the next start syncs in this process
    finally:
        eng.close()


class GatedModel:
    """The session's loaded offline embedder behind a model load the test releases: ``loaded`` stays False and
    :meth:`load` blocks until ``gate`` is set, as a first load of the real model takes seconds."""

    def __init__(self, real) -> None:
        self.real, self.gate, self.loads = real, threading.Event(), 0
        self.dim, self.space = real.dim, real.space
        self._loaded = False

    @property
    def loaded(self) -> bool:
        return self._loaded

    def load(self) -> None:
        self.loads += 1
        assert self.gate.wait(30)
        self._loaded = True

    def embed(self, texts):
        if not self._loaded:
            self.load()
        return self.real.embed(texts)

    def embed_pass(self, texts, **kw):
        return self.real.embed(texts)


def test_search_answers_from_keywords_while_the_model_loads(demo_vault, tmp_path, embedder):
    """In hybrid mode before the vector model is loaded, the search screen shows the keyword answer at once
    (saying so), loads the model on its own worker, and replaces the answer with the hybrid one when it is in."""
    from reme_engine.engine import Engine
    from reme_tui.app import create_app
    from reme_tui.screens.search import MODEL_LOADING, SearchScreen

    model = GatedModel(embedder)
    model._loaded = True  # index the vectors first (the real embedder), then pretend a fresh start
    eng = Engine.open(_settings(demo_vault, tmp_path / "state"), embedder=model)
    eng.index()
    model._loaded = False

    async def go():
        app = create_app(eng.settings, eng)
        async with app.run_test(size=(120, 36)) as pilot:
            m = app.main_screen

            async def wait(cond, what):
                deadline = time.monotonic() + 30
                while not cond():
                    assert time.monotonic() < deadline, what
                    await pilot.pause(0.02)

            await wait(lambda: m.keyword_ready, "first keyword pass")
            await pilot.press("slash")
            await wait(lambda: isinstance(app.screen, SearchScreen), "search screen")
            screen = app.screen
            await wait(lambda: model.loads == 1, "model load started on opening")
            for ch in "光伏":
                await pilot.press(ch)
            await wait(lambda: screen.result is not None, "keyword answer")
            assert screen.result.mode == "keyword" and screen.result.degraded == MODEL_LOADING
            assert screen.result.hits
            assert MODEL_LOADING in str(screen.info.render())
            model.gate.set()
            await wait(lambda: screen.result is not None and screen.result.mode == "hybrid", "hybrid answer")
            assert screen.result.hits and screen.result.degraded != MODEL_LOADING
            assert model.loads == 1
            await pilot.press("escape")

    try:
        asyncio.run(go())
    finally:
        model.gate.set()
        eng.close()


def test_first_pass_batches_refresh_the_switcher_list_and_an_open_search(app_for):
    """While the first keyword pass commits batches, the quick switcher's kept note list is dropped (its next
    opening reads the notes indexed since) and an open search short of hits searches again."""
    from reme_tui.messages import IndexProgress
    from reme_tui.screens.search import SearchScreen

    app = app_for()

    async def go():
        async with app.run_test(size=(120, 36)) as pilot:
            m = app.main_screen

            async def wait(cond, what):
                deadline = time.monotonic() + 30
                while not cond():
                    assert time.monotonic() < deadline, what
                    await pilot.pause(0.02)

            await wait(lambda: m.keyword_ready and m.note_index is not None, "startup")
            await pilot.press("slash")
            await wait(lambda: isinstance(app.screen, SearchScreen), "search screen")
            screen = app.screen
            for ch in "zyxnothing":
                await pilot.press(ch)
            await wait(lambda: screen.result is not None, "first answer")
            seq = screen.seq
            m.ctx.keyword_ready = False  # as during a first pass
            try:
                m.post_message(IndexProgress("index", 16, 3000))
                await wait(lambda: m.note_index is None and screen.seq > seq, "list dropped, search re-run")
            finally:
                m.ctx.keyword_ready = True
            await pilot.press("escape")

    asyncio.run(go())

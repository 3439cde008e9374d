"""The Textual app: a thin shell around one :class:`~reme_tui.screens.main.MainScreen`.

The app owns the engine, the theme, the keymap (``settings.keymap: {binding_id: key}``) and the app-wide
bindings (quit, help); everything else is coordinated by the main screen. ``run_app`` is what ``reme-tui``
calls; ``create_app`` builds an app for tests and embedding.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path

from textual import events
from textual.app import App
from textual.await_complete import AwaitComplete
from textual.binding import Binding

from .cjk import enable_cjk_line_breaking
from .commands import NoteCommands, ReMeCommands
from .driver import apply_escape_delay, driver_class
from .gc_idle import IdleCollector
from .screens.help import HelpScreen, collect_rows
from .screens.main import MainScreen
from .type_ahead import TypeAhead

DARK, LIGHT = "textual-dark", "textual-light"
#: Modifier names Textual accepts in a key spec (``ctrl+shift+o``).
MODIFIERS = frozenset({"ctrl", "shift", "alt", "meta", "super", "hyper"})


def is_key_spec(spec: str) -> bool:
    """True when every comma-separated key of ``spec`` (``settings.keymap``'s values) names a key Textual can
    report: modifiers from :data:`MODIFIERS` then one key — a character (``o``, ``é``), its name (``slash``,
    ``question_mark``) or a named key (``escape``, ``f5``, ``pageup``). Textual itself accepts any string and the
    binding then never fires."""
    from textual.keys import Keys, _character_to_key

    names = {k.value for k in Keys if "+" not in k.value and not k.value.startswith("<")}
    names |= {_character_to_key(chr(c)) for c in range(32, 127)}
    for key in spec.split(","):
        *mods, base = key.strip().split("+")
        if not base or any(m not in MODIFIERS for m in mods):
            return False
        if len(base) != 1 and base not in names:
            return False
    return bool(spec.strip())


class ReMeApp(App[int]):
    """``settings``: ``reme_engine.config.Settings``; ``engine``: an open ``Engine`` for ``settings.vault``."""

    CSS_PATH = "app.tcss"
    TITLE = "reme-tui"
    COMMANDS = App.COMMANDS | {ReMeCommands, NoteCommands}
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", id="help"),
    ]

    def __init__(self, settings, engine, *, background: bool = False) -> None:
        enable_cjk_line_breaking()
        apply_escape_delay()
        super().__init__(driver_class=driver_class())
        self.settings = settings
        self.engine = engine
        #: start the engine's watcher and cron thread after the first index pass (the real app; tests opt in)
        self.background = background
        self.main_screen: MainScreen | None = None
        self.unknown_keymap_ids: list[str] = []
        #: keep the theme the user picks in ``settings.config_path`` (the real app; tests opt in)
        self.persist_settings = background
        #: keys typed right after Ctrl+O wait for the quick switcher's input (see :mod:`reme_tui.type_ahead`)
        self.type_ahead = TypeAhead(self)
        #: full garbage collections only while the user is idle (see :mod:`reme_tui.gc_idle`; the real app, tests
        #: opt in): one walks the whole heap, 60–400 ms holding the GIL
        self.idle_gc: IdleCollector | None = IdleCollector() if background else None

    async def on_event(self, event) -> None:
        if self.idle_gc is not None and isinstance(event, (events.Key, events.MouseDown, events.MouseScrollDown,
                                                           events.MouseScrollUp)):
            self.idle_gc.input_seen()
        if self.type_ahead.hold(event):
            return
        await super().on_event(event)

    def on_unmount(self) -> None:
        if self.idle_gc is not None:
            self.idle_gc.stop()

    def on_mount(self) -> None:
        if self.idle_gc is not None:
            self.idle_gc.start()
            self.set_interval(self.idle_gc.check_s, self.idle_gc.tick, name="idle-gc")
        theme = getattr(self.settings, "theme", "") or DARK
        if theme in self.available_themes:
            self.theme = theme
        else:
            self.notify(f"unknown theme {theme!r}; using {self.theme}", severity="warning", timeout=10)
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        keymap = dict(getattr(self.settings, "keymap", {}) or {})
        bad_keys = {k: v for k, v in keymap.items() if not isinstance(v, str) or not is_key_spec(v)}
        for binding_id in bad_keys:
            del keymap[binding_id]  # the default key stays
        if bad_keys:
            self.notify("keymap: not a key: " + ", ".join(f"{k}: {v!r}" for k, v in bad_keys.items())
                        + " (default kept; keys look like ctrl+o, slash, f5)", severity="warning", timeout=10)
        if keymap:
            self.set_keymap(keymap)
        self.main_screen = MainScreen(self.engine, self.settings)
        # installed: a main screen that somehow leaves the stack is kept alive and pushed back (_keep_main)
        self.install_screen(self.main_screen, "main")
        self.push_screen("main")
        self.screen_change_signal.subscribe(self, self._keep_main)
        if keymap or bad_keys:
            known = self.binding_ids()
            self.unknown_keymap_ids = sorted(k for k in {**keymap, **bad_keys} if k not in known)
            if self.unknown_keymap_ids:
                self.notify("keymap: unknown binding ids " + ", ".join(self.unknown_keymap_ids)
                            + " (press ? to see the ids)", severity="warning", timeout=8)

    # -- the theme the user picks is kept -------------------------------------------------------------------
    def _theme_changed(self, theme) -> None:
        name = getattr(theme, "name", str(theme))
        if name == (getattr(self.settings, "theme", "") or DARK):
            return
        self.settings.theme = name
        path = getattr(self.settings, "config_path", None)
        if self.persist_settings and path is not None:
            self.run_worker(lambda: self._save_theme(Path(path), name), thread=True, group="config",
                            exclusive=True, exit_on_error=False)

    def _save_theme(self, path: Path, name: str) -> None:
        """(Worker thread.) Write ``theme: name`` into the config file; say so once, or say why not."""
        from .config_file import ConfigWriteError, save_setting

        try:
            save_setting(path, "theme", name)
        except ConfigWriteError as exc:
            self.call_from_thread(self.notify, str(exc), title="Theme not kept", severity="warning", timeout=6)
            return
        self.call_from_thread(self.notify, f"theme: {name} (kept in {path})", title="Theme", timeout=3)

    # -- the main screen never leaves ---------------------------------------------------------------------
    def pop_screen(self) -> AwaitComplete:
        """Pop the top screen, but never the main screen: a late second dismissal of a dialog (two quick Enter
        presses) would otherwise leave only the blank default screen."""
        if self.main_screen is not None and self.screen is self.main_screen:
            self.log.warning("refused to pop the main screen")
            return AwaitComplete()
        return super().pop_screen()

    def _keep_main(self, _screen) -> None:
        """Recovery: whenever the active screen changes and the main screen is no longer on the stack (a
        switch_screen, a bug), push it back."""
        m = self.main_screen
        if m is None or self._exit or not self.is_running:
            return
        if m not in self.screen_stack:
            self.log.warning("main screen left the stack; pushing it back")
            self.call_later(self._restore_main)

    def _restore_main(self) -> None:
        m = self.main_screen
        if m is not None and m not in self.screen_stack and not self._exit:
            self.push_screen("main")

    @staticmethod
    def binding_ids() -> set[str]:
        """Every binding id the app defines (what ``settings.keymap`` may name)."""
        from .screens.dialogs import IndexStatusScreen, LinkPickerScreen, NewNoteScreen
        from .screens.help import HelpScreen
        from .screens.search import SearchScreen
        from .screens.switcher import QuickSwitcherScreen
        from .widgets.agenda import AgendaList
        from .widgets.neighbours import NeighboursList
        from .widgets.vault_tree import VaultTree

        ids = set()
        for cls in (ReMeApp, MainScreen, SearchScreen, HelpScreen, VaultTree, NeighboursList, AgendaList,
                    NewNoteScreen, LinkPickerScreen, IndexStatusScreen, QuickSwitcherScreen):
            for b in cls.BINDINGS:
                if isinstance(b, Binding) and b.id:
                    ids.add(b.id)
        return ids

    # -- actions (bindings and the command palette) ---------------------------------------------------------
    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(collect_rows(self)))

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT if self.current_theme.dark else DARK

    def _main(self) -> MainScreen | None:
        return self.main_screen if self.main_screen is not None and self.main_screen.is_attached else None

    def action_main(self, name: str) -> None:
        """Run the main screen's action ``name`` (command palette entries use this)."""
        if (m := self._main()) is not None:
            if m is not self.screen and name not in ("toggle_theme",):
                # the palette closes first; anything else on top (help) goes too, so the action is seen
                while self.screen is not m and len(self.screen_stack) > 1:
                    self.pop_screen()
            getattr(m, f"action_{name}")()

    def open_path(self, path: str) -> None:
        """Open the note at vault path ``path`` in the main screen (the palette's note hits)."""
        if (m := self._main()) is not None:
            while self.screen is not m and len(self.screen_stack) > 1:
                self.pop_screen()
            m.open_note(path)

    def action_open_search(self) -> None:
        if (m := self._main()) is not None:
            m.action_search()

    def action_reindex(self) -> None:
        if (m := self._main()) is not None:
            m.action_reindex()

    def action_open_start(self) -> None:
        if (m := self._main()) is not None:
            m.action_open_start()

    def action_back(self) -> None:
        if (m := self._main()) is not None:
            m.action_back()

    def action_forward(self) -> None:
        if (m := self._main()) is not None:
            m.action_forward()


def create_app(settings, engine=None) -> ReMeApp:
    """An app over ``engine`` (opened from ``settings`` when None; then the caller closes ``app.engine``)."""
    if engine is None:
        from reme_engine.engine import Engine

        engine = Engine.open(settings)
    return ReMeApp(settings, engine)


@contextlib.contextmanager
def _stderr_logging_to(path: Path):
    """While the app runs, log handlers that write to the terminal's stderr (jieba's, a library's) write to
    ``path`` instead: a stray log line would corrupt the screen. Textual already captures ``print``."""
    moved: list[tuple[logging.StreamHandler, object]] = []
    log_file = None
    try:
        # loggerDict also holds PlaceHolder objects (no handlers); don't turn them into loggers
        loggers = [logging.getLogger(), *list(logging.root.manager.loggerDict.values())]
        handlers = [h for lg in loggers for h in getattr(lg, "handlers", [])]
        for h in handlers:
            if type(h) is logging.StreamHandler and getattr(h, "stream", None) in (sys.stderr, sys.__stderr__):
                if log_file is None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    log_file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in finally
                moved.append((h, h.setStream(log_file)))
    except OSError:
        pass
    try:
        yield
    finally:
        for h, old in moved:
            h.setStream(old)
        if log_file is not None:
            log_file.close()


def run_app(settings) -> int:
    """Open the engine for ``settings``, run the app until the user quits, close the engine. Returns 0."""
    from reme_engine.engine import Engine

    engine = Engine.open(settings)
    app = None
    try:
        app = ReMeApp(settings, engine, background=True)
        with _stderr_logging_to(Path(engine.state_dir) / "tui.log"):
            result = app.run()
        return int(result or 0) if isinstance(result, int) else 0
    finally:
        if app is not None and app.idle_gc is not None:
            app.idle_gc.stop()
        engine.close()

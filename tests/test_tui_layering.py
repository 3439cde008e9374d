"""The TUI's layering (ARCHITECTURE §3, §7.1): it reaches the engine only through the façade, its config and its
result types, and no engine call runs on the UI's event-loop thread — nothing the user does waits on the engine."""

from __future__ import annotations

import ast
import functools
import inspect
import threading
from pathlib import Path

from test_tui import main, open_and_wait, settle, started, wait_for

TUI = Path(__file__).resolve().parents[1] / "reme_tui"
#: The engine modules a front end may import: the façade (with its errors and result types) and the settings.
ALLOWED = {"reme_engine", "reme_engine.engine", "reme_engine.config", "reme_engine.errors", "reme_engine.results",
           "reme_engine.search.results", "reme_engine.demo"}
#: Entry points that open the engine themselves (argparse CLI, MCP server): not part of the app's layering.
OUTSIDE = {"cli.py", "mcp_server.py", "mcp_tools.py"}


def _engine_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, module)`` of every ``reme_engine`` import, except fallbacks inside ``except ImportError``."""
    fallback: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and "ImportError" in ast.unparse(node.type or ast.Name("")):
            fallback.update(id(n) for n in ast.walk(node))
    out = []
    for node in ast.walk(tree):
        if id(node) in fallback:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("reme_engine")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reme_engine"):
            out.append((node.lineno, node.module))
    return out


def test_tui_imports_only_the_facade_its_config_and_result_types():
    bad = []
    for py in sorted(TUI.rglob("*.py")):
        if py.name in OUTSIDE:
            continue
        for line, mod in _engine_imports(ast.parse(py.read_text(encoding="utf-8"))):
            if mod not in ALLOWED:
                bad.append(f"{py.relative_to(TUI.parent)}:{line} imports {mod}")
    assert not bad, "\n".join(bad)


def test_the_check_sees_a_direct_import():
    """The check above is not vacuous: an engine-internal import is reported, a guarded fallback is not."""
    tree = ast.parse("from reme_engine.markdown.links import parse_links\n"
                     "try:\n    from reme_engine.search.results import X\n"
                     "except ImportError:\n    from reme_engine.search.hybrid import X\n")
    assert [m for _l, m in _engine_imports(tree)] == ["reme_engine.markdown.links", "reme_engine.search.results"]


def _record_engine_calls(monkeypatch) -> list[tuple[str, str]]:
    """Wrap every public method of ``Engine`` (not the pure static helpers) to record ``(method, caller)`` of
    calls made on the main thread, where ``App.run_test`` runs the event loop, once the list's ``recording``
    attribute is set (opening the engine before the app starts is not the app's business)."""
    from reme_engine.engine import Engine

    class Calls(list):
        recording = False

    on_loop = Calls()
    for name, attr in list(vars(Engine).items()):
        if name.startswith("_") or isinstance(attr, (staticmethod, classmethod, property)) or not callable(attr):
            continue
        if name in ("close", "open"):  # the app's lifetime, outside the event loop
            continue

        def wrap(fn, name=name):
            @functools.wraps(fn)
            def recorded(self, *a, **kw):
                if on_loop.recording and threading.current_thread() is threading.main_thread():
                    on_loop.append((name, inspect.stack()[1].function))
                return fn(self, *a, **kw)
            return recorded

        monkeypatch.setattr(Engine, name, wrap(attr))
    return on_loop


async def test_no_engine_call_runs_on_the_event_loop(app_for, monkeypatch):
    """A day's use — start, open and follow notes, back, links depth 2, search, the agenda and its days, today,
    a quick capture, the quick switcher, the status and Changes views — makes every engine call from a thread
    worker: none on the UI's event-loop thread."""
    on_loop = _record_engine_calls(monkeypatch)
    app = app_for(today="2026-11-28")
    async with app.run_test(size=(160, 48)) as pilot:
        on_loop.recording = True
        m = await started(pilot)
        await open_and_wait(pilot, "digest/wiki/光伏产业链.md")
        await pilot.press("f")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "LinkPickerScreen", what="link picker")
        await pilot.press("enter")
        await wait_for(pilot, lambda: m.note.path != "digest/wiki/光伏产业链.md", what="link followed")
        await pilot.press("backspace")
        await wait_for(pilot, lambda: m.note.path == "digest/wiki/光伏产业链.md", what="back")
        m.links.focus()
        await pilot.press("x")
        await wait_for(pilot, lambda: m.links.hop2 is not None, what="depth 2")
        await pilot.press("slash", *"光伏")
        await wait_for(pilot, lambda: getattr(app.screen, "result", None) is not None, what="search results")
        await pilot.press("escape")
        await pilot.press("a")
        await settle(pilot)
        await pilot.press("left")
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)
        await pilot.press("c", *"记一下", "enter")
        await wait_for(pilot, lambda: any(b.status.startswith("saved →") for b in m.chat.bubbles.values()),
                       what="captured")
        await pilot.press("escape", "ctrl+o")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "QuickSwitcherScreen", what="switcher")
        await settle(pilot)
        await pilot.press("escape")
        m.action_show_status()
        await settle(pilot)
        await pilot.press("escape")
        m.action_changes()
        await settle(pilot)
        await pilot.press("escape")
        await settle(pilot)
        assert main(app) is m
        on_loop.recording = False
    assert not on_loop, f"engine calls on the event loop: {on_loop}"

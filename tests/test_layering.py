"""Architecture rules: the engine never imports Textual; one module owns wikilink parsing."""

import ast
import subprocess
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1] / "reme_engine"


def test_engine_imports_without_textual():
    code = (
        "import sys, pkgutil, importlib, reme_engine\n"
        "for m in pkgutil.walk_packages(reme_engine.__path__, 'reme_engine.'):\n"
        "    importlib.import_module(m.name)\n"
        "from reme_engine.engine import Engine\n"
        "bad = [m for m in sys.modules if m == 'textual' or m.startswith('textual.')]\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_no_engine_source_mentions_textual():
    for py in ENGINE.rglob("*.py"):
        tree = ast.parse(py.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(n.split(".")[0] in ("textual", "reme_tui") for n in names), py


def test_only_the_links_module_parses_wikilinks():
    """No other engine module carries its own wikilink regex."""
    for py in ENGINE.rglob("*.py"):
        if py.name == "links.py" or "demo" in py.parts:
            continue
        src = py.read_text(encoding="utf-8")
        assert r"\[\[" not in src, f"{py} parses wikilinks itself; use reme_engine.markdown.links"

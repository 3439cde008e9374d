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


# -- the import graph ---------------------------------------------------------------------------------------------
ROOT = ENGINE.parent


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(tree: ast.AST):
    """Every Import/ImportFrom node that can run: module level and inside functions, but not under
    ``if TYPE_CHECKING:`` (annotations only, never executed)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _modules(pkg: Path) -> dict[str, Path]:
    out = {}
    for py in pkg.rglob("*.py"):
        parts = list(py.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = py
    return out


def _imported(name: str, py: Path, node) -> list[str]:
    """Absolute module names ``node`` (in module ``name``, file ``py``) imports; ``from pkg import mod`` names
    the submodule."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = name.split(".") if py.name == "__init__.py" else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        mod = ".".join(base + ([node.module] if node.module else []))
    else:
        mod = node.module or ""
    return [mod] + [f"{mod}.{a.name}" for a in node.names]


def _graph(pkg: Path) -> dict[str, set[str]]:
    mods = _modules(pkg)
    graph: dict[str, set[str]] = {}
    for name, py in mods.items():
        edges = set()
        for node in _runtime_imports(ast.parse(py.read_text(encoding="utf-8"))):
            found = [m for m in _imported(name, py, node) if m in mods]
            # ``from pkg import mod`` imports mod; ``from pkg import name`` imports pkg
            subs = [m for m in found[1:]] if isinstance(node, ast.ImportFrom) else found
            edges.update(subs or found[:1])
        edges.discard(name)
        graph[name] = edges
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as ``[a, b, …, a]``, or None (iterative DFS, white/grey/black)."""
    colour = dict.fromkeys(graph, 0)
    for start in sorted(graph):
        if colour[start]:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        colour[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                colour[path.pop()] = 2
                stack.pop()
            elif colour.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif colour.get(nxt) == 0:
                colour[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_cycle_finder_finds_a_function_level_cycle(tmp_path):
    """The checker itself: a cycle closed only by an import inside a function is found."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text("x = 1\ndef f():\n    from .a import y\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import y\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        g = _graph(pkg)
    finally:
        ROOT = saved
    assert _cycle(g) in (["pkg.a", "pkg.b", "pkg.a"], ["pkg.b", "pkg.a", "pkg.b"])
    assert g["pkg.c"] == set()  # type-only imports never run


def test_engine_import_graph_is_acyclic():
    """No import cycle in reme_engine, counting imports inside functions (they close cycles at run time too)."""
    cycle = _cycle(_graph(ENGINE))
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_nothing_below_the_facade_imports_it():
    """Pipelines and job modules get the engine as a context object; only the job table sits above it."""
    graph = _graph(ENGINE)
    importers = sorted(m for m, edges in graph.items() if "reme_engine.engine" in edges)
    assert importers == ["reme_engine.jobs"], importers


def test_every_public_facade_method_has_a_return_type():
    import inspect

    from reme_engine.engine import Engine

    missing = []
    for name, member in vars(Engine).items():
        if name.startswith("_"):
            continue
        fn = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
        if not callable(fn):
            continue
        if inspect.signature(fn).return_annotation is inspect.Signature.empty:
            missing.append(name)
    assert not missing, f"Engine methods without a return annotation: {missing}"


def test_every_direct_import_is_stdlib_first_party_or_declared():
    """Each third-party module reme_engine and reme_tui import is provided by a dependency pyproject.toml
    declares (pydantic was imported but only arrived through mcp)."""
    import importlib.metadata as md
    import re
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    declared = {re.split(r"[\[<>=!~; ]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}
    providers = md.packages_distributions()
    undeclared = {}
    for pkg in (ENGINE, ROOT / "reme_tui"):
        for py in pkg.rglob("*.py"):
            for node in _runtime_imports(ast.parse(py.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.level:
                    continue
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for top in {n.split(".")[0] for n in names}:
                    if top in sys.stdlib_module_names or top in ("reme_engine", "reme_tui", "__future__"):
                        continue
                    dists = {d.lower().replace("_", "-") for d in providers.get(top, [])}
                    if not dists & declared:
                        undeclared.setdefault(top, set()).add(py.relative_to(ROOT).as_posix())
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"

"""Shared fixtures: real vaults copied into temp dirs, engines with isolated state dirs, one loaded embedder."""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("REME_SHARED_DATA", REPO.parent / "shared" / "data"))


def shared(rel: str) -> Path:
    """Path of a shared dataset; skips the test when it is not available."""
    p = SHARED_DATA / rel
    if not p.exists():
        pytest.skip(f"shared data not available: {rel}")
    return p


def pytest_collection_finish(session):
    """Every test module and what it imports is loaded: collect once and freeze that heap (see below), and let the
    young generation grow 10,000 objects (not 700) before a collection, so a Textual test's many short-lived
    objects do not promote into a full collection every few milliseconds of layout."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """After each test (its fixtures torn down): collect its garbage, then freeze the survivors (``gc.freeze``).

    The session's heap (Textual, the SDKs, hypothesis, fixtures: ~500k objects) is long-lived; without this every
    full collection the interpreter starts walked all of it (~0.25 s each, ~1 s of CPU per TUI test). Frozen
    objects are still freed by reference counting; only cycles among them would wait for the end. The app's idle
    collector unfreezes on stop, as it does for a user; the next test's end freezes again."""
    yield
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _isolate_env(monkeypatch, tmp_path_factory):
    """No test reads the developer's config or writes to the real user data dir."""
    home = tmp_path_factory.mktemp("home")
    for var in ("REME_VAULT", "REME_STATE_DIR", "REME_CONFIG", "REME_EMBEDDER", "REME_EMBEDDING_BASE_URL",
                "REME_LLM_PROVIDER", "REME_LLM_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "REME_TIMEZONE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    # one model fast-load cache per session: written once, then every process that loads the model (a CLI or MCP
    # subprocess) loads it in ~1 s instead of building the tokenizer's tables (and writing 86 MB) again
    monkeypatch.setenv("REME_MODEL_CACHE", str(tmp_path_factory.getbasetemp() / "model-cache"))
    # subprocesses (CLI, MCP server, killed writers) keep the project's bytecode (__pycache__, git-ignored) even
    # where the environment says PYTHONDONTWRITEBYTECODE: the first one compiles the modules, the rest load them
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)


@pytest.fixture(scope="session")
def embedder():
    """The real offline embedder, loaded once per test session (~1.2 s)."""
    from reme_engine.index.embedder import OfflineEmbedder

    e = OfflineEmbedder()
    e.load()
    return e


def copy_vault(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


@pytest.fixture
def make_engine(tmp_path, request):
    """``make_engine(vault, embed=True, **settings)`` → an open Engine with its state in tmp_path; closed after.

    The session's loaded embedder is requested only when ``embed`` (a keyword-only test never loads the model)."""
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    engines = []

    def make(vault: Path, *, embed: bool = True, _seed: Path | None = None, **overrides):
        state = tmp_path / f"state{len(engines)}"
        if _seed is not None and not state.exists():
            seed_state(_seed, state)
        cli = {"vault": str(vault), "state_dir": str(state)}
        if not embed:
            cli["embedder"] = {"kind": "none"}
        cli.update(overrides)
        settings = load_settings(cli, env={})
        eng = Engine.open(settings, embedder=request.getfixturevalue("embedder") if embed else None)
        engines.append(eng)
        return eng

    yield make
    for e in engines:
        e.close()


def seed_state(template: Path, state: Path) -> Path:
    """Copy a closed index template (``demo_index_template``) to ``state``: ``copy2`` keeps every file's mtime, so
    the store's clean-shutdown stamp (size + mtime_ns of the databases) still matches and the copy opens clean."""
    shutil.copytree(template, state, copy_function=shutil.copy2)
    return state


@pytest.fixture(scope="session")
def demo_index_template(tmp_path_factory) -> Path:
    """The keyword index (+ graph) of the demo vault with default settings, built once per session: a closed state
    dir to copy (:func:`seed_state`). Every copy of the demo vault (``copy2``) carries the source's mtimes and sizes,
    which is all the engine's no-op check compares, so an app opened on a seeded copy finds every note unchanged and
    its startup pass parses nothing. Built with the bytes of the source checked unchanged (indexing writes nothing
    to a vault)."""
    from reme_engine.config import load_settings
    from reme_engine.demo import demo_vault_source
    from reme_engine.engine import Engine

    base = tmp_path_factory.mktemp("demo-index")
    vault = copy_vault(demo_vault_source(), base / "vault")
    before = tree(vault)
    settings = load_settings({"vault": str(vault), "state_dir": str(base / "state"), "embedder": {"kind": "none"}},
                             env={})
    with Engine.open(settings) as eng:
        report = eng.index(vectors=False)
    assert report.added and not report.skipped and tree(vault) == before
    return base / "state"


@pytest.fixture
def app_for(demo_vault, make_engine, request):
    """``app_for(today=None, vault=None, embed=False, **settings)`` → a ReMeApp on the demo vault copy (or
    ``vault``), keyword-only unless ``embed``; ``today`` pins ``settings.today()`` (the engine shares the settings,
    so proactive_read and daily_create agree).

    On the demo vault the state dir starts as a copy of ``demo_index_template`` (an index already up to date, so
    the app's startup pass is a no-op check; notes the test changed before are re-read as in real use). Tests of a
    first index (progress, "indexing…", the first pass's report) mark themselves ``@pytest.mark.cold_index``,
    snapshot tests of a first start included; the other snapshot tests start warm (a warm start paints what a first
    start paints: ``test_tui.py``'s 160x48 cold/warm snapshot pair)."""
    from reme_tui.app import create_app  # lazy: most tests never import Textual

    warm = request.node.get_closest_marker("cold_index") is None

    def make(*, today: str | None = None, vault: Path | None = None, embed: bool = False, **overrides):
        seed = request.getfixturevalue("demo_index_template") if warm and vault is None else None
        eng = make_engine(vault or demo_vault, embed=embed, _seed=seed, **overrides)
        if today is not None:
            eng.settings.today = lambda: today  # type: ignore[method-assign]
        return create_app(eng.settings, eng)

    return make


@pytest.fixture
def demo_vault(tmp_path) -> Path:
    from reme_engine.demo import demo_vault_source

    return copy_vault(demo_vault_source(), tmp_path / "demo")


@pytest.fixture(scope="session")
def zh_vault_index(tmp_path_factory, embedder):
    """knowledge-garden-zh copied and fully indexed once per session (keyword + vectors), read-only use."""
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    src = shared("vaults/knowledge-garden-zh")
    base = tmp_path_factory.mktemp("kgzh")
    vault = copy_vault(src, base / "vault")
    settings = load_settings({"vault": str(vault), "state_dir": str(base / "state")}, env={})
    eng = Engine.open(settings, embedder=embedder)
    eng.index()
    yield eng
    eng.close()


def tree(vault: Path) -> dict:
    """``{vault-relative path: bytes}`` of every file: compare before/after to prove what a run touched."""
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in sorted(vault.rglob("*")) if p.is_file()}


@pytest.fixture
def open_engine(tmp_path):
    """``open_engine(vault=None, **settings)`` → a keyword-only Engine (Asia/Shanghai) on ``vault`` or a new empty
    temp vault, with its own state dir; closed after the test."""
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    engines = []

    def make(vault=None, **over):
        if vault is None:
            vault = tmp_path / f"vault{len(engines)}"
            vault.mkdir()
        cli = {"vault": str(vault), "state_dir": str(tmp_path / f"state{len(engines)}"),
               "embedder": {"kind": "none"}, "timezone": "Asia/Shanghai", **over}
        e = Engine.open(load_settings(cli, env={}))
        engines.append(e)
        return e

    yield make
    for e in engines:
        e.close()

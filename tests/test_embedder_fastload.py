"""The offline model's fast-load cache (``reme_engine.index.usem3_cache``): same tokens and bit-identical vectors
as the package's stock load, written atomically, ignored when damaged, used by a real one-shot ``job search``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reme_engine.index import usem3_cache
from reme_engine.index.embedder import OfflineEmbedder

TEXTS = [
    "向量搜索与知识管理", "personal knowledge base in the terminal", "读书笔记 认知 Zettelkasten 卡片盒",
    "Ünïcödé ﬁ ligatures and full-width ＡＢＣ １２３", "emoji 🚀✨ and symbols ∑∫ √2", "",
    "   leading and trailing spaces   ", "日本語のテキストと한국어 텍스트", "x" * 300,
    "# Heading\n\n- [ ] task with [[wikilink]] and `code`", "Привет, мир! Ελληνικά", "a",
]


@pytest.fixture(scope="module")
def cache_folder(tmp_path_factory, embedder):
    """A cache written from the session's stock-loaded model."""
    folder = tmp_path_factory.mktemp("model-cache") / "usem3"
    usem3_cache.save(folder, embedder._model)
    return folder


def test_cached_tokenizer_gives_the_stock_tokens(embedder, cache_folder):
    stock = embedder._model._sp
    lazy = usem3_cache.load(cache_folder, 1)._sp
    full = usem3_cache.load(cache_folder, 1, full=True)._sp
    assert not isinstance(full._prefixes, usem3_cache.LazyPrefixes)
    for text in TEXTS:
        want = stock.encode(text)
        assert lazy.encode(text) == want, text
        assert full.encode(text) == want, text
        assert lazy.encode(text, out_type=str) == stock.encode(text, out_type=str)
    assert lazy.vocab_size == stock.vocab_size
    # the bucketed table holds exactly the stock one
    assert lazy._prefixes.materialize() == stock._prefixes


def test_cached_model_embeds_bit_identically(embedder, cache_folder):
    cached = OfflineEmbedder()
    model = usem3_cache.load(cache_folder, 1)
    assert model is not None
    cached._model, cached.load_source = model, "cache"
    for text in TEXTS:  # queries (one text: the lazy tokenizer path)
        assert np.array_equal(cached.embed([text]), embedder.embed([text])), text
    batch = TEXTS * 2  # a batch below MATERIALIZE_CHARS: still bucket by bucket
    got = cached.embed(batch)
    assert not cached._materialized
    assert np.array_equal(got, embedder.embed(batch))
    batch = TEXTS * 30  # enough text for a pass: the tokenizer's whole table is materialised first
    got = cached.embed(batch)
    assert cached._materialized
    assert np.array_equal(got, embedder.embed(batch))
    assert got.dtype == np.float32 and got.shape == (len(batch), 512)


def test_embedder_writes_the_cache_once_then_loads_from_it(tmp_path, embedder):
    first = OfflineEmbedder(cache_dir=tmp_path / "models")
    first.load()
    assert first.load_source == "stock+saving"
    assert first.wait_cache_saved(120)
    [folder] = (tmp_path / "models").iterdir()
    assert folder.name.startswith(f"usem3-{first._version}-f{usem3_cache.FORMAT}-")
    assert sorted(p.name for p in folder.iterdir()) == ["meta.json", "tokenizer.bin", "weights.bin"]  # no temps
    second = OfflineEmbedder(cache_dir=tmp_path / "models")
    second.load()
    assert second.load_source == "cache"
    q = ["读书笔记 认知"]
    assert np.array_equal(second.embed(q), embedder.embed(q))
    # a fresh process loading from the cache imports the package without its __init__'s importlib.metadata
    code = ("import sys, json; from reme_engine.index.embedder import OfflineEmbedder as E;"
            " e = E(cache_dir=sys.argv[1]); v = e.embed(['读书笔记 认知']); import usem3; print(json.dumps([e.load_source, usem3.__version__,"
            " usem3.USE.__name__, 'importlib.metadata' in sys.modules, v[0].tolist()]))")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "models")], capture_output=True, text=True,
                       timeout=120)
    source, version, cls, metadata, vec = json.loads(p.stdout)
    assert (source, version, cls, metadata) == ("cache", first._version, "USE", False), p.stderr[-2000:]
    assert np.array_equal(np.asarray(vec, dtype=np.float32), embedder.embed(q)[0])


def test_a_damaged_cache_falls_back_to_the_stock_load(tmp_path, embedder, cache_folder):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(cache_folder, bad)
    with open(bad / "weights.bin", "r+b") as f:  # truncated, as after a full disk
        f.truncate(1000)
    assert usem3_cache.load(bad, 1) is None
    shutil.copy2(cache_folder / "weights.bin", bad / "weights.bin")
    (bad / "tokenizer.bin").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00junk")
    assert usem3_cache.load(bad, 1) is None
    meta = json.loads((cache_folder / "meta.json").read_text())
    (bad / "meta.json").write_text(json.dumps({**meta, "format": -1}))
    assert usem3_cache.load(bad, 1) is None
    (bad / "meta.json").unlink()
    assert usem3_cache.load(bad, 1) is None
    # through the embedder: a damaged folder under the right key is ignored, the stock load rewrites it
    key = usem3_cache.cache_key(embedder._version)
    root = tmp_path / "models"
    shutil.copytree(cache_folder, root / key)
    (root / key / "meta.json").write_text("{not json")
    e = OfflineEmbedder(cache_dir=root)
    e.load()
    assert e.load_source == "stock+saving" and e.wait_cache_saved(120)
    assert usem3_cache.load(root / key, 1) is not None


def test_one_shot_search_uses_the_cache(tmp_path):
    """Two real ``reme-tui job search`` processes on a small vault: the first writes the cache, the second loads
    from it; both answer the same hits with the same scores (exit 0, JSON on stdout)."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "reading.md").write_text("# 读书笔记\n\n认知科学与知识管理的读书笔记。\n", encoding="utf-8")
    (vault / "garden.md").write_text("# Garden\n\nNotes about vegetables and tomatoes.\n", encoding="utf-8")
    env = {**os.environ, "REME_VAULT": str(vault), "REME_STATE_DIR": str(tmp_path / "state"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("REME_EMBEDDER", None)
    env.pop("REME_MODEL_CACHE", None)  # the default place, in the user cache dir
    cmd = [sys.executable, "-c", "import sys; from reme_tui.cli import main; sys.exit(main())",
           "job", "search", "query=认知 读书", "--no-server"]
    outs = []
    for _ in range(2):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        outs.append(json.loads(p.stdout))
    models = tmp_path / "cache" / "reme-tui" / "models"
    [folder] = models.iterdir()
    assert (folder / "meta.json").is_file()
    hits = [[(h["path"], round(h["score"], 9)) for h in o["hits"]] for o in outs]
    assert hits[0] == hits[1] and hits[0][0][0] == "reading.md"


def test_the_encode_child_loads_from_the_cache(tmp_path, embedder, cache_folder):
    """A vector pass in the niced child process (the app's, ``--serve``'s) loads the model from the cache, whole
    prefix table at once, and gives the in-process vectors bit for bit; it never writes the cache itself."""
    import shutil

    root = tmp_path / "models"
    key = usem3_cache.cache_key(embedder._version)
    shutil.copytree(cache_folder, root / key)
    before = sorted(p.name for p in (root / key).iterdir())
    e = OfflineEmbedder(cache_dir=root, child_min_texts=1)
    try:
        texts = TEXTS * 3
        got = e.embed_pass(texts, pass_texts=len(texts))
        pid = e.child_pid
        assert pid is not None and not e.loaded  # encoded in the child: this process loaded nothing
        assert np.array_equal(got, embedder.embed(texts))
        maps = Path(f"/proc/{pid}/maps")
        if maps.exists():  # the child (idle now, alive) has the cached weights memory-mapped: it loaded from them
            assert str((root / key / "weights.bin").resolve()) in maps.read_text()
    finally:
        e.close()
    assert sorted(p.name for p in (root / key).iterdir()) == before


def test_saving_prunes_long_unused_caches_of_other_versions(tmp_path, embedder):
    import time

    root = tmp_path / "models"
    old, recent, foreign = root / "usem3-0.0.1-f1-aaaa", root / "usem3-0.0.2-f1-bbbb", root / "usem3-notes"
    for d in (old, recent):
        d.mkdir(parents=True)
        for name in ("meta.json", "tokenizer.bin", "weights.bin"):
            (d / name).write_bytes(b"x")
    foreign.mkdir()  # not one of ours (no meta.json): never touched
    long_ago = time.time() - usem3_cache.PRUNE_AFTER_S - 3600
    for name in ("meta.json", "tokenizer.bin"):
        os.utime(old / name, (long_ago, long_ago))
    usem3_cache.save(root / "usem3-new", embedder._model)
    assert not old.exists() and recent.is_dir() and foreign.is_dir()
    assert usem3_cache.load(root / "usem3-new", 1) is not None

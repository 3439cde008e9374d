"""``reme-tui mcp`` while its query model loads: a hybrid ``search`` answers from keywords at once and says so (as
the app's search does), starts the load, and is hybrid again once the model is in. Through the SDK's own client
(in-process transport), on a demo vault copy indexed with the real offline model."""

from __future__ import annotations

import json
import threading

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402


class GatedEmbedder:
    """The session's loaded model behind a load that waits for ``gate`` (a slow model load, made deterministic)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.space, self.dim = inner.space, inner.dim
        self.gate = threading.Event()
        self.load_started = threading.Event()
        self.loaded = False

    def load(self) -> None:
        self.load_started.set()
        assert self.gate.wait(60)
        self.loaded = True

    def embed(self, texts):
        if not self.loaded:
            self.load()
        return self.inner.embed(texts)

    def __getattr__(self, name):
        return getattr(self.inner, name)


async def _search(c: Client, **args) -> dict:
    res = await c.call_tool("search", args)
    assert not res.is_error, res.content[0].text
    return json.loads(res.content[0].text)


def test_hybrid_search_answers_from_keywords_while_the_model_loads(demo_vault, make_engine, embedder):
    from reme_tui.mcp_server import build_server
    from reme_tui.mcp_tools import MODEL_LOADING, VaultServer

    eng = make_engine(demo_vault)  # the vault's vectors, made once with the real model
    eng.index()
    settings = eng.settings
    eng.close()
    gated = GatedEmbedder(embedder)
    vs = VaultServer(settings, embed=False, watch=False, embedder=gated)
    vs.start()

    async def run() -> None:
        async with Client(build_server(vs)) as c:
            first = await _search(c, query="光伏 产业链")
            assert first["degraded"].startswith(MODEL_LOADING) and first["mode"] == "keyword"
            assert first["hits"] and not any("vector_rank" in h["why"] for h in first["hits"])
            assert gated.load_started.wait(10)  # the search started the load
            with anyio.fail_after(10):
                kw = await _search(c, query="光伏 产业链", mode="keyword")  # keyword mode: never degraded by it
            assert not (kw.get("degraded") or "").startswith(MODEL_LOADING)
            gated.gate.set()
            with anyio.fail_after(30):
                while not gated.loaded:
                    await anyio.sleep(0.02)
            again = await _search(c, query="光伏 产业链")
            assert not (again.get("degraded") or "").startswith(MODEL_LOADING) and again["mode"] == "hybrid"
            assert any("vector_rank" in h["why"] for h in again["hits"])
            assert [h["path"] for h in first["hits"]][0] == "digest/wiki/光伏产业链.md"

    try:
        anyio.run(run)
    finally:
        gated.gate.set()
        vs.close()

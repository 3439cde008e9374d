"""The OpenAI-compatible embedder through the real `openai` client against a local wire-format server."""

import numpy as np
import pytest

from reme_engine.index.embedder import EmbedderError, OpenAIEmbedder
from wire.server import ScriptedServer, openai_embeddings


def test_vectors_are_normalised_and_batched():
    with ScriptedServer(default=openai_embeddings(dim=8)) as srv:
        emb = OpenAIEmbedder(srv.base_url, "test-embed", "k", batch_size=2, max_retries=0)
        m = emb.embed(["a", "b", "c"])
        assert m.shape == (3, 8) and emb.dim == 8
        assert np.allclose(np.linalg.norm(m, axis=1), 1.0)
        assert len(srv.requests) == 2  # batches of 2
        assert srv.requests[0]["body"]["model"] == "test-embed"
        assert srv.requests[0]["headers"]["authorization"] == "Bearer k"


def test_sdk_retries_a_server_error():
    with ScriptedServer([(503, {"error": {"message": "busy"}})], default=openai_embeddings()) as srv:
        emb = OpenAIEmbedder(srv.base_url, "m", "k", max_retries=2)
        assert emb.embed(["x"]).shape == (1, 8)
        assert len(srv.requests) == 2


def test_failure_raises_embedder_error():
    with ScriptedServer(default=lambda p, b: (400, {"error": {"message": "bad model"}})) as srv:
        emb = OpenAIEmbedder(srv.base_url, "m", "k", max_retries=0)
        with pytest.raises(EmbedderError, match="bad model"):
            emb.embed(["x"])


def test_wrong_dimension_is_refused():
    with ScriptedServer(default=openai_embeddings(dim=4)) as srv:
        emb = OpenAIEmbedder(srv.base_url, "m", "k", dimensions=8, max_retries=0)
        with pytest.raises(EmbedderError, match="dimension"):
            emb.embed(["x"])


def test_engine_degrades_to_keyword_and_heals(tmp_path):
    """A failing remote embedder leaves keyword search working; once it answers, vectors fill in."""
    from reme_engine.config import load_settings
    from reme_engine.engine import Engine

    v = tmp_path / "v"
    (v / "digest/wiki").mkdir(parents=True)
    (v / "digest/wiki/a.md").write_text("# Alpha\n\nsolar panels and 光伏 modules\n")
    healthy = {"on": False}
    ok = openai_embeddings(dim=8)

    def handler(path, body):
        if not healthy["on"]:
            return 500, {"error": {"message": "down"}}
        return ok(path, body)

    with ScriptedServer(default=handler) as srv:
        s = load_settings({"vault": str(v), "state_dir": str(tmp_path / "st"),
                           "embedder": {"kind": "openai", "base_url": srv.base_url, "model": "m",
                                        "api_key": "k", "dimensions": 8}}, env={})
        e = Engine.open(s)
        e.embedder._max_retries = 0
        try:
            r = e.index()
            assert r.embed_error and "down" in r.embed_error
            res = e.search("solar", mode="hybrid")
            assert res.hits and res.hits[0].path == "digest/wiki/a.md"
            assert res.degraded and "keyword" in res.degraded
            healthy["on"] = True
            r = e.index()
            assert r.embedded == 1 and not r.embed_error
            res = e.search("solar", mode="hybrid")
            assert res.degraded is None and res.hits[0].vector_rank == 1
        finally:
            e.close()

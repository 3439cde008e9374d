"""Index consistency and health: the cheap check at open, ``health_check`` and the per-file problem lists.

What :meth:`reme_engine.engine.Engine.health_check` and ``file_problems`` delegate to, and the check the engine
runs when it opens (ARCHITECTURE §8 "Consistency and repair"). None of these raises for a damaged index: a corrupt
database is moved aside and rebuilt from the vault, and the result says so.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from . import __version__
from .results import HEALTH_FIRST_N, EngineStatus, FileProblems, HealthReport
from .vault.files import ambiguous_links

if TYPE_CHECKING:  # the façade owns these checks; the name is for annotations only
    from .engine import Engine

log = logging.getLogger("reme.engine")


def check_index_at_open(engine: Engine) -> list[str]:
    """The cheap consistency check at open (milliseconds; never raises for a damaged index).

    - a corrupt database found by the store's open check was moved aside (rebuilt by the next index);
    - an interrupted sync (its marker set, no sync running) has its links re-resolved against the vault now;
    - links resolved to paths that are not in the path set (always), and after an unclean shutdown or a
      scheduled ``quick_check`` also 200 random links re-resolved: any disagreement re-resolves every link.
    """
    import sqlite3

    from .index.store import brief, is_corruption

    out = [f"{r.split(':', 1)[0]} was corrupt: moved aside, rebuilt from the vault" for r in engine.store.recovered]
    try:
        line = engine.indexer.repair_interrupted()
        if line:
            out.append(line)
        from .index.indexer import SYNC_MARKER

        # with the marker still set another process is syncing: its links land with its last commit
        syncing = engine.store.get_meta(SYNC_MARKER) is not None
        deep = engine.store.unclean or engine.store.integrity != "skipped"
        chk = {"stale": 0, "mismatched": 0} if syncing else engine.indexer.check_links(sample=200 if deep else 0)
        if chk["stale"] or chk["mismatched"]:
            n = engine.indexer.repair_links()
            out.append(f"links out of step with the vault ({chk['stale']} stale, {chk['mismatched']} of "
                       f"{chk['checked']} sampled wrong): {n} re-resolved")
    except (sqlite3.DatabaseError, ValueError) as exc:  # ValueError: a damaged JSON value
        if isinstance(exc, sqlite3.DatabaseError) and not is_corruption(exc):
            raise
        engine.store.recover_corrupt(exc)
        engine.indexer._reset_derived()
        out.append(f"index was corrupt ({brief(exc)}): moved aside, rebuilt from the vault")
    for line in out:
        log.warning("%s", line)
    return out


def health_check(engine: Engine) -> HealthReport:
    """Component health: store integrity, index consistency, vault readable, embedder state, skipped files.

    What it checks (each a key of ``checks``): ``store`` — ``PRAGMA quick_check`` of the index and the
    embedding cache (a corrupt file is moved aside and the index rebuilt from the vault: the value then says
    ``repaired: …``); ``sync`` — no interrupted sync left; ``links`` — links resolved to paths outside the
    vault's path set, and up to 500 random links re-resolved from scratch (disagreements are repaired);
    ``vectors`` — the loaded vector index holds exactly the chunks marked as embedded (orphans dropped);
    ``coverage`` — every indexable file of the vault is in the index or skipped with a reason (a change the index
    missed, e.g. while the disk under the state dir was full, is indexed now: ``repaired: …``).
    ``ok`` is False while something is wrong and could not be repaired. Never raises for a damaged index."""
    import sqlite3

    from .index.indexer import SYNC_MARKER
    from .index.store import brief, is_corruption

    checks: dict[str, Any] = {}
    ok = True
    repaired: list[str] = []
    try:
        problem = engine.store.quick_check()
        if problem:
            raise sqlite3.DatabaseError(f"integrity check failed: {problem}")
        with engine.write_lock, engine.store.write() as c:  # the keyword index's own structure (~0.5 s per 4k notes)
            c.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES('integrity-check', 0)")
        checks["store"] = "ok (quick_check of index and embedding cache, keyword index integrity-check)"
    except sqlite3.DatabaseError as exc:
        if not is_corruption(exc):
            checks["store"] = f"error: {exc}"
            ok = False
        else:
            with engine.write_lock:
                engine.store.recover_corrupt(exc)
                engine.indexer._reset_derived()
                engine.index(vectors=False)
            checks["store"] = f"repaired: {brief(exc)} (moved aside, rebuilt from the vault)"
            repaired.append(checks["store"])
    try:
        if engine.store.get_meta(SYNC_MARKER) is not None:
            line = engine.indexer.repair_interrupted()
            checks["sync"] = f"repaired: {line}" if line else "a sync is running in another process"
        else:
            checks["sync"] = "ok (no interrupted sync)"
        chk = engine.indexer.check_links(sample=500)
        if chk["stale"] or chk["mismatched"]:
            n = engine.indexer.repair_links()
            checks["links"] = (f"repaired: {chk['stale']} stale, {chk['mismatched']} of {chk['checked']} sampled "
                               f"wrong; {n} re-resolved")
        else:
            checks["links"] = f"ok ({chk['links']} links, {chk['checked']} re-resolved from scratch agree)"
        if engine.vectors is not None and not engine.vectors.ready:
            try:  # a one-shot health_check checks them too: faiss's file only, no model is loaded
                engine.vectors.open()
            except Exception as exc:  # noqa: BLE001 — a corrupt vector index is a finding, not a crash
                engine.vectors.error = str(exc)
        if engine.vectors is not None and engine.vectors.ready:
            with engine.write_lock:
                rec = engine.vectors.reconcile()
            have = engine.store.counts()["chunks_with_vectors"]
            checks["vectors"] = (f"ok ({have} vectors match the embedded chunks)"
                                 if not (rec["missing"] or rec["orphans"]) else
                                 f"repaired: {rec['orphans']} orphan vectors dropped, {rec['missing']} missing "
                                 "queued for the next vector pass")
        else:
            checks["vectors"] = ("error: " + engine.vectors.error if engine.vectors is not None and engine.vectors.error
                                 else "off (no embedder)" if engine.vectors is None else "not loaded (dimension unknown)")
    except sqlite3.DatabaseError as exc:
        checks["links"] = f"error: {exc}"
        ok = False
    try:
        checks["coverage"] = _coverage(engine)
        if checks["coverage"].startswith("repaired"):
            repaired.append(checks["coverage"])
        ok = ok and not checks["coverage"].startswith("error")
    except Exception as exc:  # noqa: BLE001 — an unreadable vault or index: a finding, not a crash
        checks["coverage"] = f"error: {exc}"
        ok = False
    checks["vault"] = "ok" if os.access(engine.vault, os.R_OK | os.X_OK) else "error: not readable"
    ok = ok and checks["vault"] == "ok"
    if engine.embedder is None:
        checks["embedder"] = "disabled (keyword search only)"
    else:
        checks["embedder"] = f"{engine.embedder.space}" + (f" (error: {engine.vectors.error})"
                                                           if engine.vectors and engine.vectors.error else "")
    checks["llm"] = "configured" if engine.settings.llm.configured else "not configured (LLM features off)"
    checks["daily_dir"] = engine.settings.layers.daily_dir + (" (found in the vault)" if engine.detected_daily_dir
                                                             else "")
    if engine.repair_notice:
        checks["repair"] = engine.repair_notice
    out: HealthReport = {"ok": ok, "version": __version__, "checks": checks, "index": engine.store.counts(),
           "skipped": engine.store.skipped()}
    out.update(file_problems(engine))
    return out


def _coverage(engine: Engine) -> str:
    """The ``coverage`` check: walk the vault as a sync does (no file read) and index the indexable files the
    index holds neither as a file nor as a skip; one line saying what was found."""
    from .index.report import IndexReport

    entries, _ = engine.indexer.scan(IndexReport())
    known = {r[0] for r in engine.store.conn.execute("SELECT path FROM files")}
    known |= {r["path"] for r in engine.store.skipped()}
    missing = sorted(set(entries) - known)
    if not missing:
        return f"ok ({len(entries)} indexable files, all in the index)"
    engine.index_paths(missing, vectors=False)
    still = {r[0] for r in engine.store.conn.execute("SELECT path FROM files")} | \
        {r["path"] for r in engine.store.skipped()}
    left = [p for p in missing if p not in still]
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    if left:
        return f"error: {len(left)} of {len(entries)} indexable files are not in the index and could not be indexed: {shown}"
    return f"repaired: {len(missing)} file(s) of the vault were missing from the index, indexed now: {shown}"


def file_problems(engine: Engine, first: int = HEALTH_FIRST_N) -> FileProblems:
    """Per-file problems the index knows of, each as ``{"count": n, "first": [...]}`` (the first ``first``,
    by path): ``file_warnings`` — ``{path, warning}`` (invalid or unclosed frontmatter, with true file
    lines); ``ambiguous_links`` — ``{source, line, target, resolved, candidates}``. Empty on a damaged
    index (health_check reports that)."""
    import sqlite3

    try:
        rows = engine.store.conn.execute(
            "SELECT path, warning FROM files WHERE warning IS NOT NULL AND warning != '' ORDER BY path").fetchall()
        n_amb, amb = ambiguous_links(engine, limit=first)
    except sqlite3.DatabaseError as exc:
        log.warning("file problems unavailable: %s", exc)
        rows, n_amb, amb = [], 0, []
    return {"file_warnings": {"count": len(rows), "first": [{"path": p, "warning": w} for p, w in rows[:first]]},
            "ambiguous_links": {"count": n_amb, "first": amb}}


def status(engine: Engine) -> EngineStatus:
    """Index figures for the status line: the store's counts, last sync time, embedder, vectors and LLM state."""
    counts = engine.store.counts()
    vectors = engine.vectors
    return {  # type: ignore[typeddict-item]  # the store's counts are merged in
        "vault": str(engine.vault),
        "state_dir": str(engine.state_dir),
        **counts,
        "embedder": engine.embedder.space if engine.embedder else None,
        "vectors_loaded": bool(vectors and vectors.ready),
        # the store's count of chunks with a vector, the number health_check and --refresh show too; the loaded
        # index holding exactly those is what health_check verifies (and repairs)
        "vectors": counts["chunks_with_vectors"] if vectors is not None else None,
        "llm_configured": engine.settings.llm.configured,
        "tokenizer": engine.tokenizer.fingerprint,
        "daily_dir": engine.settings.layers.daily_dir,
        "daily_dir_detected": engine.detected_daily_dir is not None,
        "last_indexed": engine.store.get_meta("last_sync"),
        "repair_notice": engine.repair_notice,
    }

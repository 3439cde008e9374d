"""The MCP tools of ``reme-tui mcp`` (:mod:`reme_tui.mcp_server` serves them): the open vault behind them
(:class:`VaultServer`) and one thin wrapper per tool over an engine job (:mod:`reme_engine.jobs`); its docstring is
the tool's description, its errors the job's one-line messages (:class:`ToolFailure`). No MCP SDK import here, so
``reme-tui mcp --help`` lists the tools without paying for the SDK.
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

#: Characters of a hit's chunk text returned as its snippet (read_note gives the rest).
SNIPPET_CHARS = 400
#: Characters of a neighbour's description in search hits (traverse gives them whole).
NEIGHBOR_DESC_CHARS = 80
#: Neighbours listed per direction in search hits (``outlinks_total``/``inlinks_total`` count them all;
#: traverse lists every one): the neighbour lists were ~45 % of a response an agent reads in full.
NEIGHBORS_SHOWN = 5
#: Most search hits, list_notes entries and traverse notes an agent can ask for (bounded results).
MAX_HITS, MAX_LIST, MAX_NODES = 100, 2000, 500
#: Edges traverse returns at most, and characters of each node's description.
MAX_EDGES, NODE_DESC_CHARS = 1000, 200
#: Result caps of `changes`: runs listed, changes of one run, characters of each before/after text.
MAX_RUNS, MAX_CHANGES, CHANGE_TEXT_CHARS = 200, 500, 20_000
#: Seconds a tool waits for the engine to open (~1 s on a quiet machine); then a one-line "still opening" error.
OPEN_TIMEOUT_S = 10.0
#: Seconds a read waits for the first index pass of a never-indexed vault before answering from the part indexed
#: so far (marked partial): a small vault's pass ends within it, a big one's takes minutes.
FIRST_INDEX_GRACE_S = 1.0
#: Seconds between index catch-up passes of a read-only server (which runs no watcher).
RESYNC_S = 30.0
#: Engine threads doing one-off search work, and how :meth:`VaultServer.status` names them.
_TRANSIENT_THREADS = (("reme-null-floor", "gibberish floor probe"), ("reme-ivf-retrain", "vector index retrain"))


#: ``degraded`` of a hybrid search answered while the query model loads (the TUI's search says the same).
MODEL_LOADING = "vector model loading: keyword results for now"


class ToolFailure(Exception):
    """A tool's user-facing failure; ``str(exc)`` is the one-line message returned as an MCP tool error."""


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: ``run(vault_server, args) -> dict`` (its docstring is the tool description), the engine job
    whose parameters give the input schema (``job``; ``drop`` removes some, ``extra`` adds MCP-only ones in the
    same :class:`reme_engine.jobs.Param` form, ``help`` replaces the job table's text of a parameter where the
    tool differs from the CLI: JSON arrays instead of comma lists, no ``fm.KEY=VALUE``), and whether it writes
    (left out by ``--read-only``)."""

    name: str
    run: Callable[["VaultServer", dict], Any]
    job: str | None = None
    drop: tuple[str, ...] = ()
    extra: tuple = ()
    writes: bool = False
    title: str = ""
    help: Mapping[str, str] = field(default_factory=dict)
    #: ``{param: (min, max)}`` enforced by the input schema (results stay bounded whatever an agent asks)
    bounds: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: ``{param: setting}``: the byte limit (a field of :class:`reme_engine.config.McpSettings`) of a text the
    #: tool writes; the description states the configured value (:meth:`limits_text`)
    limits: Mapping[str, str] = field(default_factory=dict)

    def limits_text(self, settings) -> str:
        """The tool's size limits in words, for its description ("" without any), e.g. ``Limits: content at
        most 1,048,576 bytes of UTF-8 (setting mcp.max_write_bytes); larger is refused, nothing written.``"""
        if not self.limits:
            return ""
        parts = [f"{param} at most {getattr(settings.mcp, key):,} bytes of UTF-8 (setting mcp.{key})"
                 for param, key in self.limits.items()]
        return "Limits: " + "; ".join(parts) + "; larger is refused, nothing written."

    @property
    def summary(self) -> str:
        return (inspect.getdoc(self.run) or "").split("\n\n")[0].replace("\n", " ")


# ------------------------------------------------------------------------------------------------ the engine


class VaultServer:
    """The open vault behind the tools: the engine opens on a background thread (:meth:`start`); tools wait for it.

    ``settings``: :class:`reme_engine.config.Settings`; ``watch``: keep the index current once open (the vault
    watcher; read-only: a keyword catch-up pass every ``RESYNC_S`` seconds instead, as the watcher also writes
    day pages); ``embed``: once open, compute the vectors still missing (a vault nobody embedded otherwise answers
    hybrid searches from keywords alone), like ``--serve``: in the embedder's niced background process, skipped
    while another process (the app, ``--serve``) embeds the vault; then load the query model and the title vectors
    so the first hybrid search does not wait for them.
    """

    def __init__(self, settings, *, read_only: bool = False, watch: bool = True, embed: bool = True,
                 embedder=None) -> None:
        self.settings = settings
        self.read_only = read_only
        self.watch = watch
        self.embed = embed
        self._embedder = embedder
        self._engine = None
        self._error: str | None = None
        self._opened = threading.Event()
        self._indexed = threading.Event()  # the index exists (from an earlier run, or the first pass finished)
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        #: what the open thread is doing now ("" when idle): opening, index catch-up, vector pass
        self._work = "opening"
        self._embedded = 0  # vectors this server's own passes made
        self._progress = (0, 0)  # (files read, files to read) of the running index pass
        self._pass_started: float | None = None  # time.monotonic() when the catch-up pass began
        self._model_thread: threading.Thread | None = None  # loads the query model (see load_model_soon)
        self._model_lock = threading.Lock()

    def start(self) -> None:
        """Open the engine, then catch up the index and start the watcher, all on a daemon thread. Idempotent
        (the server calls it at each message after the handshake)."""
        with self._start_lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._open, name="reme-mcp-open", daemon=True)
            self._thread.start()

    def _open(self) -> None:
        from reme_engine.engine import Engine

        try:
            eng = Engine.open(self.settings, embedder=self._embedder)
        except Exception as exc:  # ConfigError, OSError: every tool reports it
            self._error = f"cannot open the vault: {exc}"
            self._work = ""
            self._opened.set()
            return
        self._engine = eng
        if eng.store.get_meta("last_sync"):
            self._indexed.set()  # search the existing index while the catch-up pass runs
        self._opened.set()
        if self.embed:  # the query model loads beside the catch-up pass (~0.3 s from its cache, 1-2 s without)
            self.load_model_soon(eng)
        self._work = "index catch-up"
        self._pass_started = time.monotonic()
        try:
            eng.index(self._on_progress, vectors=False)  # keyword + graph catch-up; a no-op pass is ~50 ms
            self._indexed.set()
            eng.search("warm up", limit=1, mode="keyword", neighbors=False)  # loads the tokenizer's dictionary
            if self.watch and not self.read_only:
                eng.start_background(watch=True, schedule=False, on_event=self._log_event)
            elif self.embed:  # no watcher, but a long-running process: passes encode in the embedder's child
                eng.start_background(watch=False, schedule=False)
            eng.start_local_server()  # one-shot `reme-tui job search` … asks this server (ARCHITECTURE §7.3)
        except Exception as exc:  # logged; tools keep working on what is indexed
            _log(f"index catch-up failed: {exc}")
            self._indexed.set()
        self._vector_pass(eng)
        self._warm_vectors(eng)
        # Read-only: no watcher (it also regenerates day pages, a vault write); the index is caught up now and then.
        while self.watch and self.read_only and not self._closing.wait(RESYNC_S):
            try:
                if eng.index(vectors=False).chunks_added:
                    self._vector_pass(eng)
            except Exception as exc:
                _log(f"index catch-up failed: {exc}")

    @staticmethod
    def model_loading(eng) -> bool:
        """True while ``eng``'s embedder still has its model to load (a hybrid search would wait for it); False
        without vectors or for an embedder with nothing to load (a remote endpoint). As the TUI's search."""
        emb = getattr(eng, "embedder", None)
        return emb is not None and getattr(eng, "vectors", None) is not None and not getattr(emb, "loaded", True)

    def load_model_soon(self, eng) -> None:
        """Load ``eng``'s query model on a daemon thread (idempotent; a no-op once loaded or without a model)."""
        with self._model_lock:
            if self._model_thread is not None or not self.model_loading(eng):
                return

            def load() -> None:
                try:
                    eng.embedder.load()
                except Exception as exc:  # the next hybrid search reports the embedder's failure itself
                    if not self._closing.is_set():
                        _log(f"loading the vector model failed: {exc}")

            self._model_thread = threading.Thread(target=load, name="reme-mcp-model", daemon=True)
            self._model_thread.start()

    def _on_progress(self, phase: str, done: int, total: int, _path: str) -> None:
        if phase == "index":
            self._progress = (done, total)

    def _warm_vectors(self, eng) -> None:
        """Load the vector index and the query model, and start the title-vector build, before the agent's first
        hybrid search (the default mode) has to: that search otherwise waits ~1.5-4 s for the model and runs
        beside the build. After the handshake and the catch-up, so neither `ready` nor keyword search pays."""
        if not self.embed or eng.vectors is None or self._closing.is_set():
            return
        self._work = "loading the vector model"
        try:
            res = eng.search("warm up", limit=1, mode="hybrid", neighbors=False)
            if res.degraded and "no vector yet" not in res.degraded:
                _log(f"vector search unavailable: {res.degraded}")
        except Exception as exc:  # logged; the first hybrid search tries again
            if not self._closing.is_set():  # the client left mid-load: nothing failed that anyone will use
                _log(f"loading the vector model failed: {exc}")
        finally:
            self._work = ""

    def _vector_pass(self, eng) -> None:
        """Embed the chunks still without a vector, if any (this thread; stops when the server closes). The vector
        state lives in the state dir, not the vault, so a read-only server does it too."""
        self._work = "vector pass"
        try:
            if not self.embed or eng.vectors is None or self._closing.is_set() \
                    or not eng.store.index_state()["vectors_pending"]:
                return
            rep = eng.embed_pending(should_stop=self._closing.is_set)
            self._embedded += rep.embedded
            if rep.embed_error:
                _log(f"vector pass failed: {rep.embed_error}")
            elif rep.embed_busy:
                _log(f"vector pass {rep.embed_busy}")
            elif rep.embedded:
                _log(f"vector pass: {rep.embedded} chunk(s) embedded")
        except Exception as exc:  # logged; hybrid search keeps ranking the rest by keywords
            _log(f"vector pass failed: {exc}")
        finally:
            self._work = ""

    @staticmethod
    def _log_event(ev: dict) -> None:
        if ev.get("event") in ("watch_error", "failed"):
            _log(f"{ev.get('event')}: {ev.get('error')}")

    @property
    def engine(self):
        """The open :class:`~reme_engine.engine.Engine`; raises ToolFailure when it could not be opened."""
        self.start()  # no-op once started
        if not self._opened.wait(OPEN_TIMEOUT_S):
            raise ToolFailure("the vault is still opening; try again in a moment")
        if self._engine is None:
            raise ToolFailure(self._error or "the vault is not open")
        return self._engine

    def indexed_engine(self):
        """``(engine, partial)``: the engine, and None once an index exists, else (after at most
        ``FIRST_INDEX_GRACE_S`` after the pass began) what the first index pass of a never-indexed vault has done so far
        (:meth:`partial`), so a read answers from the notes committed already instead of waiting for the pass.
        ToolFailure when the vault cannot be opened."""
        eng = self.engine
        if self._indexed.is_set():
            return eng, None
        # the grace counts from the pass's start: once a big vault's pass outlasts it, reads answer at once
        started = self._pass_started
        left = FIRST_INDEX_GRACE_S - (time.monotonic() - started) if started is not None else FIRST_INDEX_GRACE_S
        return eng, (None if self._indexed.wait(max(0.0, left)) else self.partial(eng))

    def partial(self, eng) -> dict:
        """``{"indexing": str, "files_indexed": int (notes searchable now), "files_read": int, "files_total":
        int (0 while the vault is being listed)}``: how far the first index pass got."""
        try:
            indexed = eng.store.index_state()["files"]
        except Exception:  # the store mid-creation: nothing searchable yet
            indexed = 0
        done, total = self._progress
        msg = (f"first index pass of this vault still running: {indexed} of {total or '?'} files indexed so far; "
               "results cover only those (and their links may be incomplete); ask again later for the rest")
        return {"indexing": msg, "files_indexed": indexed, "files_read": done, "files_total": total}

    def status(self) -> dict:
        """What the server is doing, for clients and benchmarks (the ``reme://status`` resource; never raises):
        ``{"engine": "opening" | "open" | "error", "error": str | None, "indexed": bool, "background": [str]
        (work running now: "opening", "index catch-up", "vector pass", "loading the vector model", "title
        vectors", "gibberish floor probe", "vector index retrain"; [] once settled),
        "files", "chunks", "vectors_pending" (chunks waiting for a vector), "vectors_loaded": bool,
        "title_vectors": "off" | "not built" | "building" | "ready" | "failed: …", "embedded_here": int,
        "vault": str, "state_dir": str | None, "warnings": [str] (only when there is one: a daily-note format
        reme cannot follow)}`` (absolute paths: the vault this server serves and the state dir it
        keeps the index in, so a user can see when a client started it on another state dir than the app's)."""
        out: dict = {"engine": "opening", "error": self._error, "indexed": self._indexed.is_set(),
                     "background": [self._work] if self._work else [], "embedded_here": self._embedded,
                     "vault": str(self.settings.vault) if self.settings.vault is not None else None,
                     "state_dir": str(self.settings.state_dir) if self.settings.state_dir is not None else None}
        eng = self._engine
        if eng is None:
            if self._error:
                out["engine"] = "error"
            return out
        out["engine"] = "open"
        out["vault"], out["state_dir"] = str(eng.vault), str(eng.state_dir)  # as resolved by the open engine
        if getattr(eng, "daily_format_warning", None):
            out["warnings"] = [eng.daily_format_warning]  # e.g. a daily-note format reme cannot follow
        try:
            out.update({k: v for k, v in eng.store.index_state().items() if k in ("files", "vectors_pending")})
            out["chunks"] = eng.store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        except Exception as exc:  # a store being rebuilt: say so rather than fail
            out["error"] = f"index unreadable right now: {exc}"
        vectors = eng.vectors
        out["vectors_loaded"] = bool(vectors is not None and vectors.ready)
        titles = eng.searcher.titles() if out["vectors_loaded"] else None
        if titles is None:
            out["title_vectors"] = "off" if vectors is None or not eng.searcher.title_vectors else "not built"
        else:
            thread = getattr(titles, "_thread", None)  # built on a thread at the first vector query
            if thread is not None and thread.is_alive():
                out["title_vectors"] = "building"
                out["background"].append("title vectors")
            elif titles.error:
                out["title_vectors"] = f"failed: {titles.error}"
            else:
                out["title_vectors"] = "ready" if titles.built.is_set() else "not built"
        # the search's other one-off background work, by the engine's thread names (they take cores meanwhile)
        alive = {t.name for t in threading.enumerate()}
        out["background"] += [label for name, label in _TRANSIENT_THREADS if name in alive]
        return out

    def runs_inline(self, spec: ToolSpec, args: dict) -> bool:
        """True for calls known to take a few milliseconds (reads of an open, indexed vault; searches that load
        no model), which run on the event loop; writes and anything that may load or wait run on a worker."""
        if spec.writes or self._engine is None or not self._indexed.is_set():
            return False
        if spec.name == "search":
            vectors = self._engine.vectors
            if args.get("mode") == "keyword" or vectors is None:
                return True
            # the query is encoded here: inline only with a local model already loaded (not a network embedder,
            # not the first query, which loads it; the vector pass encodes in its own process, not this model)
            return vectors.ready and getattr(self._engine.embedder, "loaded", False) is True
        return spec.name in ("read_note", "list_notes", "traverse", "today", "changes")

    def close(self) -> None:
        self._closing.set()
        if self._thread is not None:
            self._thread.join(timeout=30)  # an index pass in progress finishes its batch
        if self._engine is not None:
            self._engine.close()

    # -- helpers for the tools ------------------------------------------------------------------------------
    def job(self, name: str, args: dict, engine=None) -> Any:
        """Run engine job ``name`` with ``args`` (None values dropped: the job's defaults apply); its result dict,
        or ToolFailure with the job's one-line error."""
        from reme_engine.jobs import run_job

        raw = {k: v for k, v in args.items() if v is not None}
        res = run_job(engine if engine is not None else self.engine, name, raw)
        if not res.pop("success", False):
            raise ToolFailure(str(res.get("error") or f"{name} failed"))
        res.pop("job", None)
        return res

    @staticmethod
    def journaled(fn: Callable, *args, **kw) -> dict:
        """``fn(*args, **kw)`` (a journaled write of :mod:`reme_engine.agent_capture`), its one-line
        EngineError/OSError as ToolFailure."""
        from reme_engine.engine import EngineError
        from reme_engine.errors import os_error_message

        try:
            return fn(*args, **kw)
        except EngineError as exc:
            raise ToolFailure(str(exc)) from exc
        except OSError as exc:
            raise ToolFailure(os_error_message(exc, str(args[1] if len(args) > 1 else ""))) from exc

    def note_path(self, path: str, *, must_exist: bool = True) -> str:
        """``path`` as given, or with ``.md`` added when only that exists (``must_exist``) or when it has no
        suffix (new notes). Never raises: a bad path is left for the engine to refuse with its own message."""
        from reme_engine.vault.paths import VaultPathError, resolve

        if not isinstance(path, str) or not path or path.lower().endswith(".md"):
            return path
        try:
            if must_exist:
                if resolve(self.engine.vault, path).abs.exists():
                    return path
                return path + ".md" if resolve(self.engine.vault, path + ".md").abs.is_file() else path
        except VaultPathError:
            return path
        last = path.rstrip("/").rsplit("/", 1)[-1]
        return path if "." in last.lstrip(".") else path + ".md"


def _log(msg: str) -> None:
    print(f"reme-tui mcp: {msg}", file=sys.stderr, flush=True)


def _check_size(vs: VaultServer, tool: str, param: str, value: Any, key: str) -> None:
    """ToolFailure (nothing written) when ``value`` (text, or a JSON value measured as compact JSON) is over the
    ``mcp.<key>`` byte limit: one agent call never buries a note under megabytes."""
    import json

    if value is None:
        return
    limit = getattr(vs.settings.mcp, key)
    data = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    size = len(data.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ToolFailure(f"not written: {param} is {size:,} bytes, over the {limit:,}-byte limit of one {tool} "
                          f"call (setting mcp.{key}); split it or write less")


#: Why an agent is not served hidden files: Obsidian plugins keep API keys in ``.obsidian/plugins/*/data.json``,
#: git remotes carry tokens in ``.git/config``, and ``.env`` files hold secrets; none of them is a note.
HIDDEN_REFUSAL = ("not served: {path!r} is a hidden file or inside a hidden folder (.obsidian/, .git/, .env …), "
                  "which hold app settings and often secrets, not notes")


def _visible(vs: VaultServer, path: Any) -> None:
    """ToolFailure when ``path`` names a hidden (dot) file or folder, or reaches one through a symlink (reads of
    the vault's notes only; the index leaves those out too). A path the vault refuses anyway is left to the
    engine's own message."""
    from reme_engine.vault.paths import VaultPathError, is_hidden, resolve, to_rel

    if not isinstance(path, str) or not path:
        return
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    if is_hidden("/".join(parts)):
        raise ToolFailure(HIDDEN_REFUSAL.format(path=path))
    try:
        vp = resolve(vs.engine.vault, path)
        real = to_rel(vs.engine.vault.resolve(), vp.abs.resolve())
    except (VaultPathError, OSError, ValueError, RuntimeError):
        return
    if real not in ("", ".") and is_hidden(real):
        raise ToolFailure(HIDDEN_REFUSAL.format(path=path) + f" (it leads to {real})")


def _index_truth(vs: VaultServer, res: dict) -> dict:
    """A write's reply with ``not_indexed`` (why, and what still works) when the index left the note out."""
    why = res.pop("not_indexed", None)  # the WriteResult's reason: replaced by the reply's fuller line
    if res.get("indexed", True) is False:
        why = why or vs.engine.index_skip_reason(res["path"]) or "skipped by the index"
        res["not_indexed"] = (f"{why}: the note is saved and read_note reads it, but search, links and traverse "
                              "leave it out (the index limit is the setting max_file_bytes)")
    return res


# ------------------------------------------------------------------------------------------------ the tools


def _search(vs: VaultServer, a: dict) -> dict:
    """Search the person's notes (hybrid BM25 + vectors; Chinese and English). Call this first.

    Each hit gives its path and line range (read more with read_note), the heading breadcrumb, a snippet and why it
    ranked (each leg's rank and score); the first hit of each note also gives the note's description and its hop-2
    neighbours (up to 5 notes it links to and 5 that link to it, with their descriptions, and the totals; traverse
    lists them all). Filters: layer (daily | digest | resource | session), path_prefix, paths, date_from/date_to,
    frontmatter values. mode=keyword skips the embedding model. `degraded` says when results are weaker than
    usual (no vectors yet; the vector model still loading right after start-up, when a hybrid search answers
    from keywords; a vault still being indexed for the first time, when `partial` says how far it got).
    """
    eng, partial = vs.indexed_engine()
    layer = a.pop("layer", None)
    if layer:
        layers = eng.settings.layers
        folders = {"daily": layers.daily_dir, "digest": layers.digest_dir, "resource": layers.resource_dir,
                   "session": layers.session_dir}
        if layer not in folders:
            raise ToolFailure(f"unknown layer {layer!r} (daily | digest | resource | session)")
        prefix = folders[layer].strip("/") + "/"
        if a.get("path_prefix") and not a["path_prefix"].startswith(prefix):
            raise ToolFailure(f"path_prefix {a['path_prefix']!r} is outside layer {layer!r}")
        a["path_prefix"] = a.get("path_prefix") or prefix
    loading = (a.get("mode") or "hybrid") == "hybrid" and vs.model_loading(eng)
    if loading:  # as the app does: keyword results at once rather than a wait of seconds for the model
        vs.load_model_soon(eng)
        a = {**a, "mode": "keyword"}
    res = vs.job("search", a, eng)
    if loading:
        res["degraded"] = "; ".join(x for x in (MODEL_LOADING, res.get("degraded")) if x)
    neighbors = res.pop("neighbors", {}) or {}
    hits, shown = [], set()
    for h in res.pop("hits", []):
        text = h["text"]
        first = h["path"] not in shown
        nb = neighbors.get(h["path"]) if first else None
        shown.add(h["path"])
        hit = {
            "path": h["path"], "lines": f"{h['start_line']}-{h['end_line']}", "start_line": h["start_line"],
            "end_line": h["end_line"], "heading": " > ".join(h.get("headings") or []), "name": h["name"],
            "snippet": text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "…",
            "score": round(h["score"], 6),
            "why": _why(h),
        }
        if first:
            hit["description"] = h["description"]  # the note's: with its first hit only, like its neighbours
        if nb:  # once per file, with its first hit (a file's later hits share it)
            hit["neighbors"] = {"outlinks": [_neighbor(n) for n in nb.get("outlinks", ())[:NEIGHBORS_SHOWN]],
                                "inlinks": [_neighbor(n) for n in nb.get("inlinks", ())[:NEIGHBORS_SHOWN]],
                                "outlinks_total": nb.get("outlinks_total"),
                                "inlinks_total": nb.get("inlinks_total")}
        hits.append(hit)
    out = {**res, "hits": hits}
    if partial:
        out["partial"] = partial
        out["degraded"] = "; ".join(x for x in (partial["indexing"], res.get("degraded")) if x)
    return out


def _why(h: dict) -> dict:
    """Why a hit ranked: the TUI's why-line, and each leg's rank and raw score (a leg that missed it is absent)."""
    from reme_tui.render import why_line

    out: dict = {"text": why_line(_Obj(h))}
    if h["keyword_rank"] is not None:
        out.update(keyword_rank=h["keyword_rank"], bm25=round(h["keyword_score"] or 0.0, 3))
    if h["vector_rank"] is not None:
        out.update(vector_rank=h["vector_rank"], cosine=round(h["vector_score"] or 0.0, 4))
        if h.get("vector_title"):
            out["title"] = True  # the cosine is the note's title vector's, not this chunk's
    elif h.get("vector_imputed"):
        out["vector_imputed"] = True  # no vector yet: ranked by its keyword rank
    return out


def _neighbor(n: dict) -> dict:
    """A neighbour without its false/empty flags and with a short description: a pointer to read on, kept small
    (a response's size is most of a call's cost beyond the engine)."""
    desc = n.get("description") or ""
    if len(desc) > NEIGHBOR_DESC_CHARS:
        desc = desc[:NEIGHBOR_DESC_CHARS] + "…"
    out = {"path": n["path"]}
    name = n.get("name") or ""
    if name and name != n["path"].rsplit("/", 1)[-1].rsplit(".", 1)[0]:
        out["name"] = name  # left out when it is the file name, which the path already says
    if desc:
        out["description"] = desc
    out.update({k: n[k] for k in ("predicate", "embed", "dangling", "anchor", "ambiguous") if n.get(k)})
    return out


class _Obj:
    """Attribute access over a hit dict (for the TUI's why-line)."""

    def __init__(self, d: dict) -> None:
        self.__dict__.update(d)


def _read_note(vs: VaultServer, a: dict) -> dict:
    """Read a note (or lines of it): its text and content hash.

    Pass the returned `sha` as `expected_sha` to write_note / edit_note so a note changed meanwhile is never
    overwritten. Hidden files and folders (.obsidian/, .git/, .env) are not served. Lines are 1-based and
    inclusive; at most 5000 lines and max_chars characters per call (`truncated` says when more remain: read on
    from end_line + 1; `line_cut` when one line alone was longer).
    """
    _visible(vs, a["path"])
    a["path"] = vs.note_path(a["path"])
    return vs.job("read", a)


def _write_note(vs: VaultServer, a: dict) -> dict:
    """Create or replace a note (atomic write, indexed at once, journaled: see changes / revert).

    Replacing an existing note needs `expected_sha` from read_note, and is refused if the note changed since (the
    person may have edited it). overwrite=false refuses an existing note outright. A path without a suffix gets
    '.md'. Dot-folders (.obsidian/, .git/) and paths outside the vault are refused. Returns the path, sha,
    `indexed` and `run_id` (the journal run; revert undoes it). A note larger than the index's limit (setting
    max_file_bytes, 8 MiB) is saved as the app saves it but left out of search: `indexed` is false and
    `not_indexed` says why.
    """
    from reme_engine.agent_capture import journaled_write
    from reme_engine.vault.paths import VaultPathError, resolve

    _check_size(vs, "write_note", "content", a.get("content"), "max_write_bytes")
    a["path"] = vs.note_path(a["path"], must_exist=False)
    eng = vs.engine
    if not a.get("expected_sha") and a.get("overwrite", True) is not False:
        try:
            exists = resolve(eng.vault, a["path"]).abs.is_file()
        except VaultPathError:
            exists = False  # the write refuses the path with its own message
        if exists:  # an agent never replaces a note it has not read: the person may have just written it
            raise ToolFailure(f"{a['path']} already exists: pass expected_sha (from read_note) to replace it")
    return _index_truth(vs, vs.journaled(journaled_write, eng, a["path"], a["content"],
                                         overwrite=a.get("overwrite", True), expected_sha=a.get("expected_sha")))


def _edit_note(vs: VaultServer, a: dict) -> dict:
    """Replace exact text in a note (find and replace; atomic, indexed at once, journaled: see changes / revert).

    `old` must occur exactly `count` times (count=0: replace all). With `expected_sha` (from read_note) the edit is
    refused if the note changed since; without it the edit applies to the note's current text. Returns the path,
    the new sha, `indexed` (false, with `not_indexed`, when the note outgrew the index's limit) and `run_id`.
    """
    from reme_engine.agent_capture import journaled_edit

    _check_size(vs, "edit_note", "new", a.get("new"), "max_write_bytes")
    a["path"] = vs.note_path(a["path"])
    if not a.get("old"):
        raise ToolFailure("old text must not be empty")
    return _index_truth(vs, vs.journaled(journaled_edit, vs.engine, a["path"], a["old"], a.get("new", ""),
                                         count=a.get("count", 1) if a.get("count") is not None else 1,
                                         expected_sha=a.get("expected_sha")))


def _move_note(vs: VaultServer, a: dict) -> dict:
    """Move or rename a note and rewrite the links that point to it (in every linking note, atomically).

    Refuses an existing destination, folders and layer folders; linking notes another program kept changing
    meanwhile are retried for a few seconds, then listed in `conflicts` (with a `warning` line) and left
    untouched. One journal run (`run_id`) holds the move and every rewritten note: revert undoes all of it.
    """
    from reme_engine.agent_capture import journaled_move

    a["src"] = vs.note_path(a["src"])
    if a["src"].lower().endswith(".md"):
        a["dst"] = vs.note_path(a["dst"], must_exist=False)
    res = vs.journaled(journaled_move, vs.engine, a["src"], a["dst"])
    if res.pop("success", True) is False:  # moved, but some links left as they were: said, not an error (done)
        res["warning"] = res.pop("error")
    return res


def _delete_note(vs: VaultServer, a: dict) -> dict:
    """Delete a note the person asked you to delete. Needs `expected_sha` from read_note, and is refused if the
    note changed since (the person may have just edited it). Journaled: the note's text is kept and revert (with
    the returned `run_id`) puts it back. Folders, layer folders and paths outside the vault are refused. Returns
    `dangling`: the notes that still link to it.
    """
    from reme_engine.agent_capture import journaled_delete

    a["path"] = vs.note_path(a["path"])
    if not a.get("expected_sha"):
        raise ToolFailure(f"not deleted: pass expected_sha (from read_note of {a['path']})")
    return vs.journaled(journaled_delete, vs.engine, a["path"], expected_sha=a["expected_sha"])


def _list_notes(vs: VaultServer, a: dict) -> dict:
    """List a folder of the vault (notes and sub-folders; hidden entries skipped). path='' is the vault root."""
    _visible(vs, a.get("path"))
    return vs.job("list", a)


def _traverse(vs: VaultServer, a: dict) -> dict:
    """Walk the wikilink graph from a note: the notes it links to (out), that link to it (in), or both, to a depth.

    Nodes carry name, description (cut at 200 characters) and depth; edges carry the link's predicate (typed
    links) and whether it embeds. At most max_nodes notes and 1000 edges between them; `outlinks_total` /
    `inlinks_total` count the notes the start note links to / that link to it, and `truncated` says something
    was left out.
    """
    eng, partial = vs.indexed_engine()
    _visible(vs, a["path"])
    a["path"] = vs.note_path(a["path"])
    out = vs.job("traverse", a, eng)
    start = out.get("start") or a["path"]
    raw = out.pop("edges", [])
    out["outlinks_total"] = sum(1 for e in raw if e["src"] == start)
    out["inlinks_total"] = sum(1 for e in raw if e["dst"] == start)
    kept = {n["path"] for n in out["nodes"]}
    edges: dict[tuple, dict] = {}
    for e in raw:  # one edge per (src, dst, kind): with direction=both a walk meets an edge from both ends
        if e["src"] in kept and e["dst"] in kept:
            key = (e["src"], e["dst"], e.get("predicate"), bool(e.get("embed")))
            if key in edges:
                continue
            if len(edges) < MAX_EDGES:
                edges[key] = e
            else:
                out["truncated"] = True
        else:
            out["truncated"] = True  # an edge to a note past max_nodes
    out["edges"] = list(edges.values())
    out["edges_total"] = len(raw)
    for n in out["nodes"]:
        desc = n.get("description") or ""
        if len(desc) > NODE_DESC_CHARS:
            n["description"] = desc[:NODE_DESC_CHARS] + "…"
    if partial:
        out["partial"] = partial
    return out


def _today(vs: VaultServer, a: dict) -> dict:
    """Today's (or a date's) daily page and cards: what the person captured and did that day.

    Returns the day page (the daily note, if it exists: <daily folder>/<date>.md, or where the vault's Obsidian
    Daily notes format puts it, e.g. Journal/2026/12/2026-12-02-Wed.md) and every card of the day with its name,
    description and kind (session | resource | note): under daily/<date>/, and in an existing Obsidian vault also
    under the app folder's reme/daily/<date>/. Read either with read_note. `page_path` is where that day's note
    is or would be created (write there only if the person asks for a daily note). `warning` says when the
    daily-note format cannot be followed (then `page` and `page_path` are null).
    """
    from reme_engine.engine import EngineError

    eng = vs.engine
    date = a.get("date") or eng.settings.today()
    cards = vs.job("daily_list", {"date": date}, eng)["result"]
    out: dict = {"date": date, "page": None, "page_path": None, "cards": cards}
    try:
        out["page_path"] = page = eng.day_page(date)
    except EngineError as exc:  # a daily format with a time of day: no path rather than a wrong one
        out["warning"] = str(exc)
        return out
    if (eng.vault / page).is_file():
        out["page"] = page
    return out


def _agenda(vs: VaultServer, a: dict) -> dict:
    """The day's proactive topics and agenda (from the day's interests.yaml): what the person cares about now.

    `answer` is a ready-to-read summary; `topics` and `agenda` the structured items.
    """
    return vs.job("proactive_read", a)


def _changes(vs: VaultServer, a: dict) -> dict:
    """The change journal: recent runs that wrote to the vault, newest first (the app's pipelines auto_dream,
    auto_memory…, captures, and every agent write: remember, write_note, edit_note, move_note, delete_note), or one
    run's file
    changes with run_id. Undo a run with revert.

    Each run has run_id, kind, params, status, started_at/finished_at (Unix seconds), the number of changes and
    reverted_at. With run_id: each change's path, action (create | update | delete) and hashes; with_text adds the
    texts before and after, each cut at 20,000 characters (`truncated` marks a cut text).
    """
    if not a.get("run_id"):
        return vs.job("dream_log", a)
    res = vs.job("dream_log", a)
    changes = res.get("changes") or []
    res["changes_total"] = len(changes)
    if len(changes) > MAX_CHANGES:
        res["changes"] = changes = changes[:MAX_CHANGES]
        res["truncated"] = True
    for ch in changes:
        for key in ("before_text", "after_text"):
            text = ch.get(key)
            if isinstance(text, str) and len(text) > CHANGE_TEXT_CHARS:
                ch[key] = text[:CHANGE_TEXT_CHARS]
                ch["truncated"] = True  # read_note gives the current text whole
    return res


def _revert(vs: VaultServer, a: dict) -> dict:
    """Undo a run from the change journal: restore the files it changed, refusing any changed again since.

    Takes the vault's writer lock: refused while the app or a cron job is running a pipeline.
    """
    from reme_engine.lock import LockHeld

    eng = vs.engine
    lock = eng.writer_lock("mcp:revert")
    if not lock.acquire(blocking=False):
        raise ToolFailure(f"revert not run: {LockHeld(lock.holder(wait=True))}")
    try:
        return vs.job("revert", a, eng)
    finally:
        lock.release()


def _remember(vs: VaultServer, a: dict) -> dict:
    """Remember something the person told you: append it to today's capture card (<date>/capture.md in the
    daily folder, or in reme/daily/ in an existing Obsidian vault).

    Use it for facts, preferences and decisions the person stated, in their words where possible. The entry is
    marked as noted by an agent (`agent` names you), never as the person's own writing, and is journaled (see
    changes / revert). Refused when the entry would take the day's card past the index's limit (max_file_bytes),
    which would hide the whole card from search. With `conversation` (a list of {role: user|assistant,
    content}) the exchange is also kept as a chat session record marked as recorded by an agent, so auto_memory
    can distil it into a card later.
    """
    from reme_engine.engine import EngineError

    eng = vs.engine
    text = (a.get("text") or "").strip()
    if not text:
        raise ToolFailure("nothing to remember: text is empty")
    _check_size(vs, "remember", "text", text, "max_remember_bytes")
    _check_size(vs, "remember", "conversation", a.get("conversation"), "max_write_bytes")
    # one short line; no Markdown/link syntax from the client ends up in the entry's header
    agent = " ".join("".join(c for c in (a.get("agent") or "") if c not in "[]|*_`#<>" and (c.isprintable() or
                                                                                          c.isspace())).split())[:80]
    try:
        res = dict(eng.remember(text, agent=agent, conversation=a.get("conversation")))
    except (EngineError, ValueError, OSError) as exc:
        raise ToolFailure(str(exc)) from exc
    res["indexed"] = eng.index_skip_reason(res["path"]) is None
    return _index_truth(vs, res)


def tool_specs() -> list[ToolSpec]:
    """Every tool, readers first. Cheap (no SDK import): ``reme-tui mcp --help`` lists them."""
    from reme_engine.jobs import Param

    P = Param
    return [
        ToolSpec("search", _search, "search", drop=("render",), title="Search notes", extra=(
            P("layer", "str", help="only this layer: daily | digest | resource | session"),), help={
            "limit": f"hits to return (1-{MAX_HITS})",
            "paths": 'only these notes: a JSON array of vault-relative paths, e.g. ["digest/wiki/a.md"]',
            "frontmatter": 'only notes whose frontmatter has these values: a JSON object, e.g. {"status": "done"}',
            "date_from": "YYYY-MM-DD: only notes of this day or later (by their daily/<date>/ or resource/<date>/ "
                         "folder)",
            "date_to": "YYYY-MM-DD: only notes of this day or earlier (inclusive)",
            "path_prefix": "only paths starting with this, e.g. digest/ or daily/2026-11-",
            "neighbors": "give each note's first hit its linked notes (false: smaller results)"},
            bounds={"limit": (1, MAX_HITS)}),
        ToolSpec("read_note", _read_note, "read", title="Read a note"),
        ToolSpec("list_notes", _list_notes, "list", title="List a folder", help={
            "path": "vault-relative folder, e.g. digest/wiki ('' = the vault root)",
            "limit": f"most entries to return (1-{MAX_LIST}; `truncated` says when more exist)"},
            bounds={"limit": (1, MAX_LIST)}),
        ToolSpec("traverse", _traverse, "traverse", title="Follow links", help={
            "depth": "hops to follow (1: the note's direct links)",
            "max_nodes": f"most notes to return (1-{MAX_NODES}; `truncated` says when the walk stopped early)"},
            bounds={"depth": (0, 5), "max_nodes": (1, MAX_NODES)}),
        ToolSpec("today", _today, "daily_list", title="Today's page and cards"),
        ToolSpec("agenda", _agenda, "proactive_read", title="Topics and agenda of a day",
                 bounds={"min_confidence": (0, 1), "horizon_days": (1, 366)}),
        ToolSpec("changes", _changes, "dream_log", title="Change journal", help={
            "limit": f"most runs to list, newest first (1-{MAX_RUNS})",
            "run_id": "show this run's file changes (a run_id from the list); empty: list recent runs",
            "with_text": "with run_id: include each change's text before and after"},
            bounds={"limit": (1, MAX_RUNS)}),
        ToolSpec("write_note", _write_note, "write", writes=True, title="Write a note", help={
            "expected_sha": "the `sha` from read_note: refuse if the note changed since (needed to replace an "
                            "existing note)"}, limits={"content": "max_write_bytes"}),
        ToolSpec("edit_note", _edit_note, "edit", writes=True, title="Edit a note", help={
            "new": "replacement text ('' deletes the old text)",
            "count": "how many times `old` must occur (0: replace every occurrence)",
            "expected_sha": "the `sha` from read_note: refuse if the note changed since"},
            bounds={"count": (0, 1_000_000)}, limits={"new": "max_write_bytes"}),
        ToolSpec("move_note", _move_note, "move", writes=True, title="Move a note", help={
            "src": "vault-relative path of the note to move ('.md' may be left out)",
            "dst": "its new vault-relative path (links to it are rewritten)"}),
        ToolSpec("delete_note", _delete_note, "delete", writes=True, title="Delete a note", help={
            "path": "vault-relative path of the note ('.md' may be left out)",
            "expected_sha": "the `sha` from read_note (required): refuse if the note changed since"}),
        ToolSpec("remember", _remember, None, writes=True, title="Remember a fact", extra=(
            P("text", "str", required=True, help="the fact or short note, as the person said it"),
            P("agent", "str", "", help="your name as an agent (e.g. claude-code), shown with the entry"),
            P("conversation", "json", help="optional: the exchange as a list of {role: user|assistant, content}"),
        ), limits={"text": "max_remember_bytes", "conversation": "max_write_bytes"}),
        ToolSpec("revert", _revert, "revert", writes=True, title="Undo a run", help={
            "run_id": "the run to undo (a run_id from `changes`)"}),
    ]

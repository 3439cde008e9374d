"""The ``reme-tui`` command line.

    reme-tui [--vault DIR]                         open the app (the demo vault when none is configured)
    reme-tui --refresh [--vault DIR] [--date D]    headless: bring the index up to date, print a summary
    reme-tui job NAME [key=value ...]              run one engine job, print one JSON object
    reme-tui mcp [--read-only] [--http]            serve the vault to agents over MCP (`reme-tui mcp --help`)

Imports stay lazy so ``job`` and ``--refresh`` never pay for Textual, and keyword-only jobs never load the model.
A read-only ``job`` first asks a running app or ``--serve`` on the vault over its local socket
(:mod:`reme_engine.local_server`; standard library only, no engine import) and runs in-process when none answers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time


#: The sub-commands (``reme-tui NAME …``).
COMMANDS = ("job", "mcp")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="reme-tui",
        description="A local-first, self-evolving personal knowledge base in the terminal.",
        epilog="Jobs: `reme-tui job --help` lists them (`reme-tui job NAME --help`: one). Environment: REME_VAULT, REME_STATE_DIR, REME_CONFIG, "
        "REME_NO_SERVER, "
        "REME_EMBEDDER, REME_EMBEDDING_BASE_URL/MODEL/API_KEY, REME_LLM_PROVIDER/MODEL/BASE_URL/API_KEY.",
    )
    p.add_argument("--vault", help="vault folder (default: REME_VAULT, the config file, else the demo vault)")
    p.add_argument("--config", help="config file (default: REME_CONFIG or the platform config dir)")
    p.add_argument("--state-dir", help="where the index and caches live (default: outside the vault)")
    p.add_argument("--embedder", choices=["offline", "openai", "none"], help="embedder kind")
    p.add_argument("--refresh", action="store_true", help="run the headless refresh and exit")
    p.add_argument("--serve", action="store_true",
                   help="no UI: keep the watcher and the cron scheduler running until stopped (for a service)")
    p.add_argument("--date", help="date for --refresh (YYYY-MM-DD, default today)")
    p.add_argument("--no-vectors", action="store_true", help="--refresh: skip the vector pass")
    p.add_argument("--no-server", action="store_true",
                   help="job: run in this process even when the app or --serve could answer (also REME_NO_SERVER=1)")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    p.add_argument("command", nargs="?", help="`job` to run one engine job; `mcp` to serve the vault over MCP")
    p.add_argument("args", nargs=argparse.REMAINDER, help="job name and key=value parameters")
    return p


def load(args: argparse.Namespace):
    """Settings from defaults ← config ← env ← flags; opens the demo vault when no vault is configured."""
    from reme_engine.config import default_data_dir, load_settings

    cli = {"vault": args.vault, "state_dir": args.state_dir}
    if args.embedder:
        cli["embedder"] = {"kind": args.embedder}
    settings = load_settings(cli, config_path=args.config)
    if settings.vault is None:
        from reme_engine.demo import install_demo_vault

        settings.vault = install_demo_vault(default_data_dir() / "demo-vault").resolve()
        settings.is_demo = True
    return settings


def _err(msg: str) -> None:
    print(f"reme-tui: {msg}", file=sys.stderr)


class _OneLine(logging.Formatter):
    """``reme-tui: message`` without the traceback (that goes to the job log)."""

    def format(self, record: logging.LogRecord) -> str:
        return f"reme-tui: {record.getMessage()}"


def _print_json(result: dict) -> None:
    try:
        # one JSON object; indented for a person at a terminal, one line for pipes and scripts
        indent = 2 if sys.stdout.isatty() else None
        print(json.dumps(result, ensure_ascii=False, default=str, indent=indent), flush=True)
    except BrokenPipeError:  # `| head` closed the pipe: not an error of the job
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _usage(name: str | None, msg: str) -> int:
    _print_json({"success": False, "job": name, "error": msg, "usage_error": True})
    return 2


def run_job_cli(args: argparse.Namespace, rest: list[str]) -> int:
    """``reme-tui job NAME key=value …``: exactly one JSON object on stdout, whatever happens, and the exit
    status of :func:`reme_engine.jobs.exit_code` (0 success, 1 the job failed, 2 bad usage). Warnings and errors
    are one line each on stderr; tracebacks go to ``<state dir>/job.log`` only."""
    root = logging.getLogger()
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.WARNING)
    to_stderr.setFormatter(_OneLine())
    added: list[logging.Handler] = [to_stderr]
    root.addHandler(to_stderr)
    try:
        return _run_job_cli(args, rest, lambda state_dir: _log_to_state_dir(root, state_dir, added))
    finally:
        for h in added:
            root.removeHandler(h)
            if h is not to_stderr:
                h.close()


def _log_to_state_dir(root: logging.Logger, state_dir, added: list) -> None:
    """Full records (tracebacks included) of this job run appended to ``<state dir>/job.log``."""
    try:
        h = logging.FileHandler(os.path.join(str(state_dir), "job.log"), encoding="utf-8")
    except OSError:
        return
    h.setLevel(logging.WARNING)
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(h)
    added.append(h)


#: Flags that take no value (the word after one is the job name or a parameter, not its value).
_BOOL_FLAGS = ("--no-server",)


def _ask_server(args: argparse.Namespace, name: str, raw: dict) -> dict | None:
    """The result of read-only job ``name`` from the app or ``--serve`` running on this vault, or None (no
    server, another version or other settings, a transport error: the caller runs the job itself)."""
    from reme_engine.local_server import READ_ONLY_JOBS, ask, no_server_requested, settings_identity

    if name not in READ_ONLY_JOBS or getattr(args, "no_server", False) or no_server_requested():
        return None
    try:
        from reme_engine.config import finalize_state_dir

        settings = load(args)
        return ask(finalize_state_dir(settings), name, raw, settings_identity(settings))
    except Exception:  # a config problem: the in-process run reports it the usual way
        return None


def _enable_parallel() -> None:
    """Big syncs may parse in spawned worker processes: our entry point is import-safe for them."""
    from reme_engine.index import indexer

    indexer.PARALLEL_ENABLED = True


def _one_shot_search(engine, raw: dict) -> None:
    """Tune a one-shot ``job search`` process: a keyword search scores through SQLite FTS5 directly instead of
    the in-memory BM25 scorer that a long-running app or ``--serve`` keeps (building it imports numpy and reads
    the query terms' postings: ~0.3 s of a 0.8 s job, for one query). The contract: the same hits in the same
    order, scores equal to the served ones within 1e-12 relative (FTS5's ``bm25()`` in C against the same formula
    in numpy; exact ties may come in another order). A hybrid search keeps the in-memory scorer (numpy is loaded
    for the vector leg anyway), so its answer is the served one bit for bit."""
    if str(raw.get("mode", "")).strip().lower() == "keyword":
        engine.searcher.memory_bm25 = False


def _run_job_cli(args: argparse.Namespace, rest: list[str], log_to) -> int:
    if not rest:
        return _usage(None, "job needs a name; `reme-tui job help` lists them")
    # Flags may follow the job name too (`reme-tui job search query=x --vault V`).
    flags = [a for a in rest if a.startswith("--")]
    if flags:
        idx = [i for i, a in enumerate(rest) if a.startswith("--")]
        flag_args = []
        for i in idx:
            flag_args.append(rest[i])
            if ("=" not in rest[i] and rest[i] not in _BOOL_FLAGS and i + 1 < len(rest)
                    and not rest[i + 1].startswith("--") and "=" not in rest[i + 1]):
                flag_args.append(rest[i + 1])
        ns, unknown = build_parser().parse_known_args(flag_args)
        if unknown:
            return _usage(rest[0] if not rest[0].startswith("--") else None,
                          f"unknown option(s) for job: {' '.join(unknown)}")
        for key in ("vault", "config", "state_dir", "embedder", "no_server"):
            if getattr(ns, key):
                setattr(args, key, getattr(ns, key))
        rest = [a for a in rest if a not in flag_args]
    if not rest:
        return _usage(None, "job needs a name; `reme-tui job help` lists them")
    name, raw = rest[0], {}
    for item in rest[1:]:
        if "=" not in item:
            return _usage(name, f"expected key=value, got {item!r}")
        k, v = item.split("=", 1)
        raw[k] = v
    served = _ask_server(args, name, raw)
    if served is not None:  # the same object and exit status as in-process (local_server.exit_code_of)
        from reme_engine.local_server import exit_code_of

        code = exit_code_of(served)
        if code == 2:
            served.setdefault("usage_error", True)
        _print_json(served)
        return code
    _enable_parallel()
    from reme_engine.jobs import JOBS, exit_code, run_job

    job = JOBS.get(name)
    if name == "help" and not raw and sys.stdout.isatty():
        # a person at a terminal reads the grouped text; pipes and scripts keep the one JSON object
        from reme_engine.jobs import format_jobs_help

        try:
            print(format_jobs_help(shutil.get_terminal_size((100, 24)).columns - 1), flush=True)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    engine = None
    try:
        if job is not None and job.needs_engine:
            from reme_engine.engine import Engine

            engine = Engine.open(load(args))
            log_to(engine.state_dir)
            if (name in ("search", "traverse", "stat", "health_check") and not engine.store.get_meta("last_sync")
                    and not engine.indexer.sync_in_progress()):  # another process's first sync: use what it committed
                # A vault never indexed before: a keyword + graph pass first (seconds), vectors later.
                engine.index(vectors=False)
            elif name in ("search", "traverse") and not engine.indexer.sync_in_progress():
                # No app or --serve keeps this index current: bring the keyword + graph index up to date with the
                # notes saved since (an unchanged vault costs one stat pass, ~50 ms on 3,000 notes), so a note
                # written a moment ago is found. A failure here still searches what is indexed.
                try:
                    engine.index(vectors=False)
                except Exception as exc:  # noqa: BLE001 - the search itself must still answer
                    logging.getLogger("reme.cli").warning("catch-up index before %s failed: %s", name, exc)
            if name == "search":
                _one_shot_search(engine, raw)
        result = run_job(engine, name, raw)
    except Exception as exc:  # opening the vault failed (config, disk, a bug): still one JSON object
        from reme_engine.config import ConfigError

        if isinstance(exc, ConfigError):
            result = {"success": False, "job": name, "error": str(exc), "usage_error": True}
        elif isinstance(exc, OSError):
            result = {"success": False, "job": name, "error": str(exc)}
        else:
            logging.getLogger("reme.cli").error("job %s: %s: %s", name, type(exc).__name__, exc, exc_info=True)
            result = {"success": False, "job": name,
                      "error": f"internal error: {type(exc).__name__}: {exc} (the traceback is in the log)"}
    finally:
        if engine is not None:
            try:
                engine.close()
            except Exception as exc:  # the result is already decided; closing must not add a traceback
                logging.getLogger("reme.cli").warning("closing the vault: %s", exc, exc_info=True)
    code = exit_code(result)
    if code == 2:
        result.setdefault("usage_error", True)
    if result.get("success") and result.get("not_indexed"):  # saved, yet search will not find it: say so
        _err(f"{result.get('path')} is not indexed: {result['not_indexed']}")
    _print_json(result)
    return code


class _Bar:
    """Index progress for ``--refresh``: a ``rich.progress`` bar per stage on stderr when stdout is a terminal (a
    person is watching); otherwise a log-friendly line per stage and every 10 s (cron, systemd, pipes).
    Called as the indexer's ``Progress`` callback ``(stage, done, total, detail)``."""

    #: indexer stages and what the bar calls them; "links" is instant and not shown
    LABELS = {"scan": "scan", "index": "index", "embed": "vectors"}

    def __init__(self, tty: bool | None = None) -> None:
        self.tty = sys.stdout.isatty() if tty is None else tty
        self.stage: str | None = None
        self.last = 0.0
        self._progress = None
        self._task = None

    def __call__(self, stage: str, done: int, total: int, detail: str) -> None:
        if stage == "links":
            return
        if self.tty:
            self._draw(stage, done, total)
            return
        now = time.monotonic()
        if stage != self.stage:
            self.stage, self.last = stage, now
            if total:
                sys.stderr.write(f"{stage}: {total} to do\n")
        # a line every 10 s so a long vector pass is visibly alive in a log
        if total and done and (now - self.last >= 10 or done == total):
            self.last = now
            sys.stderr.write(f"{stage}: {done}/{total}\n")
            sys.stderr.flush()

    def _draw(self, stage: str, done: int, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        if self._progress is None:
            self._progress = Progress(TextColumn("{task.description:>7}"), BarColumn(), MofNCompleteColumn(),
                                      TimeRemainingColumn(), console=Console(file=sys.stderr), transient=False)
            self._progress.start()
        if stage != self.stage:
            self.stage = stage
            self._task = self._progress.add_task(self.LABELS.get(stage, stage), total=total or None)
        self._progress.update(self._task, completed=done, total=total or None)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _stage_line(name: str, result: dict) -> str:
    """One summary line for an LLM stage from its report dict."""
    llm = result.get("llm") or result.get("tally") or {}
    calls = llm.get("calls", result.get("llm_calls", 0))
    tokens = (llm.get("input_tokens", 0) or 0) + (llm.get("output_tokens", 0) or 0)
    keys = ("status", "created", "updated", "corroborated", "refined", "corrected", "cards", "removed", "topics",
            "agenda_items", "failed")
    parts = [f"{k} {result[k] if not isinstance(result[k], list) else len(result[k])}" for k in keys
             if k in result and result[k] not in (None, "")]
    return f"{name:<10} " + "  ".join(parts + [f"calls {calls}", f"tokens {tokens}"])


def run_refresh(args: argparse.Namespace) -> int:
    """Headless refresh: index → auto_resource → auto_dream → proactive refresh, with a summary per stage.

    Without an LLM the LLM stages are skipped with a one-line reason (proactive refresh uses its keyword
    fallback) and the command still succeeds. Exit status 1 when indexing or a stage fails.
    """
    from reme_engine.engine import Engine, EngineError, result_to_dict

    settings = load(args)
    t0 = time.perf_counter()
    bar = _Bar()
    stage_lines: list[str] = []
    failed = False
    try:
        with Engine.open(settings) as engine:
            date = engine.day(args.date or "")
            stage_lines.extend(f"recovered  {line}" for line in engine.recovered)
            report = engine.index(bar, vectors=not args.no_vectors)
            counts = engine.store.counts()
            problems = engine.file_problems()
            bar.close()
            from reme_engine.llm.client import LLMError, LLMNotConfigured

            stages = [("resource", lambda: engine.auto_resource()),
                      ("dream", lambda: engine.auto_dream(date)),
                      ("proactive", lambda: engine.proactive_refresh(date))]
            no_llm = ""  # the how-to-configure hint, printed once however many stages need an LLM
            for name, fn in stages:
                try:
                    res = result_to_dict(fn())
                    stage_lines.append(_stage_line(name, res if isinstance(res, dict) else {}))
                    if isinstance(res, dict) and res.get("status") == "failed":
                        failed = True
                except LLMNotConfigured as exc:
                    stage_lines.append(f"{name:<10} skipped: no LLM configured")
                    no_llm = no_llm or str(exc).split(": ", 1)[-1]
                except (LLMError, EngineError) as exc:
                    stage_lines.append(f"{name:<10} failed: {exc}")
                    failed = True
                except ImportError as exc:
                    stage_lines.append(f"{name:<10} not available: {exc}")
            if no_llm:
                stage_lines.append(f"llm        not configured: {no_llm}")
    except Exception as exc:
        bar.close()
        _err(f"refresh failed: {exc}")
        return 1
    dt = time.perf_counter() - t0
    lines = [
        f"vault      {settings.vault}" + ("  (demo)" if settings.is_demo else ""),
        f"date       {date}",
        f"files      scanned {report.scanned}  added {report.added}  changed {report.modified}  "
        f"removed {report.removed}  renamed {report.renamed}  unchanged {report.unchanged}  "
        f"skipped {len(report.skipped)}",
        f"chunks     {counts['chunks']} in index  (+{report.chunks_added} / -{report.chunks_removed})",
        f"links      {counts['links']}  ({counts['dangling_links']} dangling)",
        *([f"repair     {engine.repair_notice}"] if engine.repair_notice else []),
        (_vector_line(counts, report) if settings.embedder.kind != "none"
         else "vectors    off (embedder: none; keyword search only)"),
        *stage_lines,
        f"time       {dt:.2f}s  (keyword+graph {report.seconds_keyword:.2f}s, vectors {report.seconds_vector:.2f}s)",
    ]
    if report.skipped:
        lines.append("skipped files:")
        for s in report.skipped[:15]:
            lines.append(f"  {s['path']}: {s['reason']}")
        if len(report.skipped) > 15:
            lines.append(f"  … and {len(report.skipped) - 15} more (see `reme-tui job health_check`)")
    lines.extend(_problem_lines(problems))
    print("\n".join(lines))
    return 1 if failed else 0


def _vector_line(counts: dict, report) -> str:
    """``vectors`` summary line: how many of the index's chunks have a vector, then what this run did. The run's
    ``embedded`` counts only chunks embedded now, so it is smaller than the chunk count whenever the embedding
    cache or an earlier run already held the rest — the line says so instead of two bare numbers.

    The count is the store's ``chunks_with_vectors`` (the one number ``health_check`` and the app's status line
    show); chunks that get no vector by design (too little text, ``index.parse.wants_vector``) are said apart,
    never counted as having one."""
    total, pending = counts["chunks"], counts["chunks_without_vectors"]
    have = counts.get("chunks_with_vectors", total - pending)
    none = max(0, total - have - pending)
    before = max(0, have - report.embedded - report.embed_cached)
    line = (f"vectors    {have} of {total} chunks have a vector"
            + (f", {none} get none (too little text to embed)" if none else "")
            + f"  (this run: embedded {report.embedded}, from the embedding cache {report.embed_cached}"
            + (f", {before} had one already)" if before else ")"))
    if getattr(report, "embed_busy", None):
        line += f"  {report.embed_busy}"
    elif pending:
        line += f"  pending {pending}: keyword search covers them meanwhile"
    if report.embed_error:
        line += f"  error: {report.embed_error}"
    return line


def _problem_lines(problems: dict, first: int = 15) -> list[str]:
    """Summary lines for :meth:`Engine.file_problems`: a count line, then the first ``first`` of each kind."""
    warn, amb = problems["file_warnings"], problems["ambiguous_links"]
    if not warn["count"] and not amb["count"]:
        return []
    out = [f"problems   {warn['count']} file(s) with a frontmatter warning  {amb['count']} ambiguous link(s)"]
    if warn["count"]:
        out.append("frontmatter warnings:")
        out += [f"  {w['path']}: {w['warning']}" for w in warn["first"][:first]]
        if warn["count"] > min(first, len(warn["first"])):
            out.append(f"  … and {warn['count'] - min(first, len(warn['first']))} more "
                       "(see `reme-tui job health_check`)")
    if amb["count"]:
        out.append("ambiguous links (the first candidate is used):")
        out += [f"  {a['source']}:{a['line']} [[{a['target']}]] → {', '.join(a['candidates'])}"
                for a in amb["first"][:first]]
        if amb["count"] > min(first, len(amb["first"])):
            out.append(f"  … and {amb['count'] - min(first, len(amb['first']))} more "
                       "(see `reme-tui job health_check`)")
    return out


def _serve_event_line(ev: dict) -> str:
    """One log line for a background event: cron runs by job, repairs and watcher errors by what they say."""
    detail = ev.get("error") or ev.get("notice") or ev.get("result") or ""
    kind = "cron " + ev["job"] if ev.get("job") else "index" if ev.get("event") == "index_repaired" else "serve"
    return f"{kind} {ev.get('event')}: {detail}".rstrip(": ")


def run_serve(args: argparse.Namespace) -> int:
    """Headless service: index, then watch the vault and run the cron jobs until SIGINT/SIGTERM."""
    import signal
    import threading

    from reme_engine.engine import Engine

    settings = load(args)
    stop = threading.Event()

    def log(msg: str) -> None:
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {msg}", file=sys.stderr, flush=True)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    with Engine.open(settings) as engine:
        # read-only one-shot jobs ask this process from now on (what the first sync has committed so far)
        served = engine.start_local_server()
        if served is not None:
            log(f"answering one-shot jobs on {served.path}" if served.running else
                f"another process answers one-shot jobs on {served.path}; this one takes over when it ends")
        report = engine.index(vectors=False)
        log(f"serving {settings.vault}: {report.scanned} files indexed; watcher and scheduler running")
        engine.start_background(
            on_event=lambda ev: log(_serve_event_line(ev)),
            on_indexed=lambda paths, rep: log(f"indexed {len(paths)} changed path(s)"))
        for name, when in engine.scheduler.next_runs().items():
            log(f"next {name}: {when.isoformat() if when else 'disabled'}")
        if engine.vectors is not None:
            rep = engine.embed_pending(should_stop=stop.is_set)
            if getattr(rep, "embed_busy", None):
                log(f"vectors: {rep.embed_busy}")
            elif not stop.is_set():
                log(f"vectors up to date: embedded {rep.embedded}, from the cache {rep.embed_cached}")
            # title vectors now, not on the first query: a one-shot `job search` builds them before it ranks, so a
            # served answer without them would rank otherwise (see reme_engine.jobs._title_vectors_first)
            if engine.searcher.titles() is not None:
                while not stop.is_set() and not engine.searcher.wait_titles(timeout=1.0):
                    pass
                if not stop.is_set():
                    log("title vectors ready")
        while not stop.wait(1.0):
            pass
        log("stopping")
    return 0


def _job_help_wanted(argv: list[str]) -> str | None:
    """For ``reme-tui [flags] job [NAME] … -h|--help``: ``""`` (list every job) or ``NAME`` (that job); None for
    any other command line. argparse would answer ``--help`` with the top-level usage, which names no job."""
    parser = build_parser()
    takes_value = {s for a in parser._actions if a.option_strings and a.nargs != 0 for s in a.option_strings}
    words, i = [], 0
    while i < len(argv):  # the words that are neither a flag nor a flag's value
        a = argv[i]
        if a.startswith("-"):
            if a in takes_value and "=" not in a:
                i += 1
        else:
            words.append(a)
        i += 1
    if not words or words[0] != "job" or not any(a in ("-h", "--help") for a in argv):
        return None
    name = next((w for w in words[1:] if "=" not in w), "")
    return "" if name == "help" else name


def _print_job_help(name: str) -> int:
    """``job --help`` / ``job NAME --help``: the grouped text of ``job help`` (all jobs, or just ``NAME``'s entry),
    always as text, as ``--help`` is for a person; an unknown ``NAME`` is a one-line error (exit 2) after the list."""
    from reme_engine.jobs import JOBS, _suggest, format_jobs_help

    width = shutil.get_terminal_size((100, 24)).columns - 1
    known = not name or name in JOBS
    try:
        print(format_jobs_help(width, only=name or None if known else None), flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if not known:
        _err(f"unknown job {name!r}{_suggest(name, JOBS)}")
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    job_help = _job_help_wanted(argv)
    if job_help is not None:
        return _print_job_help(job_help)
    args = build_parser().parse_args(argv)
    try:
        if args.version:
            from reme_engine import __version__

            print(f"reme-tui {__version__}")
            return 0
        if args.command == "job":  # enables parallel parsing itself, once no server answered
            return run_job_cli(args, args.args)
        _enable_parallel()
        if args.command == "mcp":
            from reme_tui.mcp_server import main as mcp_main

            return mcp_main(args, args.args)
        if args.command is not None:
            from reme_engine.jobs import JOBS, did_you_mean

            close = did_you_mean(args.command, COMMANDS)
            job = (did_you_mean(args.command, JOBS) or [args.command])[0]  # `reme-tui serach` → job search
            hint = f"did you mean `reme-tui {close[0]}`?" if close else f"did you mean `reme-tui job {job}`?"
            _err(f"unknown command {args.command!r} ({hint})")
            return 2
        if args.refresh:
            return run_refresh(args)
        if args.serve:
            return run_serve(args)
        from reme_tui.app import run_app

        return run_app(load(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from reme_engine.config import ConfigError

        if isinstance(exc, ConfigError):
            _err(str(exc))
            return 2
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""Named jobs over the engine façade: parameter specs, ``key=value`` coercion and JSON-able results.

``run_job(engine, name, params)`` is what ``reme-tui job NAME key=value …`` calls; ``JOBS`` is the table that
``reme-tui job help`` prints. Every job returns ``{"success": bool, "job": name, ...result fields}``; failures
carry ``error``.

One exit-code rule for every job (:func:`exit_code`): 0 success, 1 the job failed (including a pipeline run
whose ``status`` is ``failed``), 2 bad usage (unknown job, unknown/missing/mistyped parameter; such results
carry ``"usage_error": true``). An unexpected exception never escapes: its traceback goes to the log and the
result is a failure saying so.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Callable

from . import __version__
from .config import ConfigError
from .engine import Engine, EngineError, result_to_dict


log = logging.getLogger("reme.jobs")

#: exit status of ``reme-tui job``: success, the job failed, bad usage
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class JobError(ValueError):
    """Unknown job or invalid parameters; the message says which and what is expected."""


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # str | int | float | bool | list | json
    default: Any = None
    required: bool = False
    help: str = ""


@dataclass(frozen=True)
class Job:
    name: str
    help: str
    params: tuple[Param, ...]
    run: Callable[[Engine, dict], Any]
    needs_engine: bool = True
    writes: bool = False


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {v!r}")


def coerce(p: Param, v: Any) -> Any:
    """Convert a CLI string (or a Python value) to the parameter's type. Raises JobError."""
    try:
        if p.type == "int":
            return int(v)
        if p.type == "float":
            return float(v)
        if p.type == "bool":
            return _bool(v)
        if p.type == "list":
            if isinstance(v, (list, tuple)):
                return [str(x) for x in v]
            return [x.strip() for x in str(v).split(",") if x.strip()]
        if p.type == "json":
            return json.loads(v) if isinstance(v, str) else v
        return str(v)
    except (ValueError, TypeError) as exc:
        raise JobError(f"parameter {p.name}: expected {p.type}, got {v!r}") from exc


def _search(e: Engine, a: dict) -> dict:
    from .search.hybrid import SearchFilters
    from .search.render import render_search

    fm = {k[3:]: v for k, v in a.items() if k.startswith("fm.")}
    if a.get("frontmatter"):
        if not isinstance(a["frontmatter"], dict):
            raise JobError("frontmatter must be a JSON object, e.g. frontmatter='{\"tags\": \"x\"}'")
        fm.update(a["frontmatter"])
    filters = SearchFilters(path_prefix=a.get("path_prefix") or None, paths=a.get("paths") or None,
                            date_from=a.get("date_from") or None, date_to=a.get("date_to") or None,
                            frontmatter=fm or None)
    try:
        res = e.search(a["query"], limit=a["limit"], mode=a["mode"], filters=filters, neighbors=a["neighbors"])
    except ValueError as exc:
        raise JobError(str(exc)) from exc
    out = res.to_dict()
    if a["render"]:
        out["text"] = render_search(res)
    return out


def _fm_update(e: Engine, a: dict) -> Any:
    updates = dict(a.get("updates") or {})
    updates.update({k[4:]: v for k, v in a.items() if k.startswith("set.")})
    if not updates:
        raise JobError("nothing to update: pass updates='{\"key\": \"value\"}' or set.KEY=VALUE")
    return e.frontmatter_update(a["path"], updates)


def _reindex(e: Engine, a: dict) -> Any:
    return e.reindex(clear=a["clear"], vectors=a["vectors"])


P = Param
JOBS: dict[str, Job] = {j.name: j for j in [
    Job("search", "Hybrid search (BM25 + vectors, RRF) with the hop-2 neighbour directory.", (
        P("query", "str", required=True, help="what to look for (Chinese or English)"),
        P("limit", "int", 10, help="hits to return"),
        P("mode", "str", "hybrid", help="hybrid | keyword | vector"),
        P("path_prefix", "str", help="only paths starting with this (e.g. digest/)"),
        P("paths", "list", help="only these paths (comma-separated)"),
        P("date_from", "str", help="YYYY-MM-DD, from a daily/<date> or resource/<date> segment"),
        P("date_to", "str"),
        P("frontmatter", "json", help='JSON object of required frontmatter values; or fm.KEY=VALUE'),
        P("neighbors", "bool", True, help="include the hop-2 directory"),
        P("render", "bool", False, help="add the text rendering of ARCHITECTURE §11.3.4 as `text`"),
    ), _search),
    Job("traverse", "Breadth-first walk over wikilinks from a note.", (
        P("path", "str", required=True), P("depth", "int", 1), P("direction", "str", "both", help="out | in | both"),
        P("max_nodes", "int", 200),
    ), lambda e, a: e.traverse(a["path"], a["depth"], a["direction"], a["max_nodes"])),
    Job("read", "Read lines of a file (1-based, inclusive).", (
        P("path", "str", required=True), P("start_line", "int", 1), P("end_line", "int"),
    ), lambda e, a: e.read(a["path"], a["start_line"], a["end_line"])),
    Job("write", "Create or replace a file (atomic) and index it.", (
        P("path", "str", required=True), P("content", "str", required=True), P("overwrite", "bool", True),
        P("expected_sha", "str", help="refuse if the file changed since this hash"),
    ), lambda e, a: e.write(a["path"], a["content"], overwrite=a["overwrite"], expected_sha=a["expected_sha"]),
        writes=True),
    Job("edit", "Find and replace text in a file.", (
        P("path", "str", required=True), P("old", "str", required=True), P("new", "str", required=True),
        P("count", "int", 1, help="expected occurrences; 0 = all"),
    ), lambda e, a: e.edit(a["path"], a["old"], a["new"], count=a["count"]), writes=True),
    Job("delete", "Delete a file; reports inbound links left dangling.", (P("path", "str", required=True),),
        lambda e, a: e.delete(a["path"]), writes=True),
    Job("move", "Move/rename a file, rewriting inbound links.", (
        P("src", "str", required=True), P("dst", "str", required=True),
    ), lambda e, a: e.move(a["src"], a["dst"]), writes=True),
    Job("list", "List a folder.", (P("path", "str", ""), P("recursive", "bool", False), P("limit", "int", 2000)),
        lambda e, a: e.list(a["path"], recursive=a["recursive"], limit=a["limit"])),
    Job("stat", "File metadata and index state.", (P("path", "str", required=True),), lambda e, a: e.stat(a["path"])),
    Job("frontmatter_read", "Read a note's frontmatter.", (P("path", "str", required=True),),
        lambda e, a: e.frontmatter_read(a["path"])),
    Job("frontmatter_update", "Merge keys into a note's frontmatter (order and unknown keys kept).", (
        P("path", "str", required=True), P("updates", "json", help="JSON object; or set.KEY=VALUE"),
    ), _fm_update, writes=True),
    Job("frontmatter_delete", "Remove keys from a note's frontmatter.", (
        P("path", "str", required=True), P("keys", "list", required=True),
    ), lambda e, a: e.frontmatter_update(a["path"], {}, a["keys"]), writes=True),
    Job("daily_create", "Create today's (or date's) day folder and index page; idempotent.", (P("date", "str", ""),),
        lambda e, a: e.daily_create(a["date"]), writes=True),
    Job("daily_list", "Cards of a day.", (P("date", "str", ""),), lambda e, a: e.daily_list(a["date"])),
    Job("daily_reindex", "Regenerate the day index section between its markers.", (
        P("date", "str", ""), P("insert_markers", "bool", False),
    ), lambda e, a: e.daily_reindex(a["date"], a["insert_markers"]), writes=True),
    Job("reindex", "Bring the index up to date (clear=true rebuilds it; the embedding cache is kept).", (
        P("clear", "bool", False), P("vectors", "bool", True),
    ), _reindex, writes=True),
    Job("proactive_read", "Read daily/<date>/interests.yaml: the day's proactive topics and agenda.", (
        P("date", "str", ""), P("include_content", "bool", True), P("horizon_days", "int", 1),
        P("min_confidence", "float", 0.4),
    ), lambda e, a: e.proactive_read(a["date"], a["include_content"], a["horizon_days"], a["min_confidence"])),
    Job("auto_dream", "Distil changed daily notes into digest nodes (needs an LLM).", (
        P("date", "str", ""), P("hint", "str", "", help="a focus for extraction"),
        P("scan_days", "int", 1, help="days ending at date to scan for changed daily notes"),
    ), lambda e, a: e.auto_dream(a["date"], a["hint"], scan_days=a["scan_days"]), writes=True),
    Job("auto_memory", "Turn a chat session's new messages into a daily card (needs an LLM).", (
        P("session_id", "str", required=True),
    ), lambda e, a: e.auto_memory(a["session_id"]), writes=True),
    Job("auto_resource", "Give new/changed files under resource/ daily cards (needs an LLM).", (),
        lambda e, a: e.auto_resource(), writes=True),
    Job("proactive_refresh", "Write daily/<date>/interests.yaml: topics and agenda (keyword fallback without an LLM).",
        (P("date", "str", ""), P("use_llm", "bool", True)),
        lambda e, a: e.proactive_refresh(a["date"], use_llm=a["use_llm"]), writes=True),
    Job("dream_log", "List LLM pipeline runs, or one run's changes.", (
        P("limit", "int", 20), P("run_id", "str", ""), P("with_text", "bool", False),
    ), lambda e, a: e.dream_log(a["limit"], a["run_id"], a["with_text"])),
    Job("revert", "Restore the files a run changed (refuses files changed since).", (
        P("run_id", "str", required=True),
    ), lambda e, a: e.revert(a["run_id"]), writes=True),
    Job("health_check", "Component health and skipped files.", (), lambda e, a: e.health_check()),
    Job("version", "Version of reme-tui.", (), lambda e, a: {"version": __version__}, needs_engine=False),
    Job("help", "List jobs and their parameters.", (), lambda e, a: {"jobs": jobs_help()}, needs_engine=False),
]}


def jobs_help() -> list[dict]:
    """Every job as ``{name, group, help, params: [{name, type, default, required, help}]}`` (``job help``)."""
    return [{"name": j.name, "group": job_group(j.name), "help": j.help,
             "params": [{"name": p.name, "type": p.type, "default": p.default, "required": p.required,
                         "help": p.help} for p in j.params]} for j in JOBS.values()]


#: How ``job help`` groups the jobs for people, in display order (a job not named here is listed under "other").
JOB_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("find and read", ("search", "traverse", "read", "list", "stat")),
    ("change notes", ("write", "edit", "delete", "move", "frontmatter_read", "frontmatter_update",
                      "frontmatter_delete")),
    ("daily notes", ("daily_create", "daily_list", "daily_reindex")),
    ("proactive", ("proactive_read", "proactive_refresh")),
    ("LLM pipelines", ("auto_memory", "auto_resource", "auto_dream")),
    ("runs and undo", ("dream_log", "revert")),
    ("index and status", ("reindex", "health_check", "version", "help")),
)


def job_group(name: str) -> str:
    """The :data:`JOB_GROUPS` heading of job ``name`` (``"other"`` when none lists it)."""
    return next((g for g, names in JOB_GROUPS if name in names), "other")


def format_jobs_help(width: int = 100) -> str:
    """``job help`` for a person at a terminal: the jobs grouped, one line each (name, what it does), then its
    parameters as ``name=<type>`` (``*`` required) with their help and default. ``width`` is the
    terminal's width in columns; long lines wrap under their text. Pipes and scripts get :func:`jobs_help` as
    JSON instead."""
    import textwrap

    groups: dict[str, list[Job]] = {}
    for j in JOBS.values():
        groups.setdefault(job_group(j.name), []).append(j)
    order = [g for g, _ in JOB_GROUPS] + ["other"]
    out = ["reme-tui job NAME key=value …   (one JSON object on stdout; exit 0 ok, 1 failed, 2 bad usage)", ""]
    for g in order:
        if g not in groups:
            continue
        out.append(f"{g}:")
        for j in groups[g]:
            out.extend(textwrap.wrap(j.help, width=max(40, width), initial_indent=f"  {j.name:<19} ",
                                     subsequent_indent=" " * 22))
            for p in j.params:
                mark = "*" if p.required else " "
                head = f"{p.name}=<{p.type}>"
                text = p.help or ""
                if p.default not in (None, "") and not p.required:
                    shown = str(p.default).lower() if isinstance(p.default, bool) else p.default
                    text += f"{' ' if text else ''}(default {shown})"
                out.extend(textwrap.wrap(text, width=max(40, width),
                                         initial_indent=f"    {mark}{head:<26} ", subsequent_indent=" " * 32)
                           or [f"    {mark}{head}"])
        out.append("")
    out.append("* required.  Paths name notes with or without .md.  `reme-tui job help | cat` prints the JSON.")
    return "\n".join(out)


def did_you_mean(word: str, choices) -> list[str]:
    """Up to three of ``choices`` spelt like ``word`` (difflib ratio ≥ 0.6), best first."""
    import difflib

    return difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)


def _suggest(word: str, choices) -> str:
    close = did_you_mean(word, choices)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def parse_params(job: Job, raw: dict[str, Any]) -> dict[str, Any]:
    """Validate and coerce ``raw`` against ``job.params``; dotted keys (``fm.x``, ``set.x``) pass through."""
    spec = {p.name: p for p in job.params}
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if k in spec:
            out[k] = coerce(spec[k], v)
        elif "." in k and k.split(".", 1)[0] in ("fm", "set"):
            out[k] = v
        else:
            raise JobError(f"job {job.name}: unknown parameter {k!r}{_suggest(k, spec)} "
                           f"(known: {', '.join(spec) or 'none'})")
    for p in job.params:
        if p.name not in out:
            if p.required:
                raise JobError(f"job {job.name}: missing parameter {p.name}")
            out[p.name] = p.default
    return out


def run_job(engine: Engine | None, name: str, raw: dict[str, Any]) -> dict:
    """Run a job; never raises for user errors: returns ``{"success": False, "error": ...}`` instead."""
    job = JOBS.get(name)
    if job is None:
        close = did_you_mean(name, JOBS)
        return {"success": False, "job": name, "usage_error": True, "did_you_mean": close,
                "error": f"unknown job {name!r}{_suggest(name, JOBS)} (`reme-tui job help` lists them)"}
    try:
        args = parse_params(job, raw)
    except JobError as exc:
        return {"success": False, "job": name, "error": str(exc), "usage_error": True}
    try:
        result = result_to_dict(job.run(engine, args))
    except JobError as exc:  # a parameter the job itself found invalid
        return {"success": False, "job": name, "error": str(exc), "usage_error": True}
    except (EngineError, ConfigError) as exc:
        return {"success": False, "job": name, "error": str(exc)}
    except Exception as exc:
        from .llm.client import LLMError

        if isinstance(exc, LLMError):  # includes LLMNotConfigured: one line saying how to configure
            return {"success": False, "job": name, "error": str(exc)}
        log.error("job %s failed unexpectedly", name, exc_info=True)
        return {"success": False, "job": name,
                "error": f"internal error: {type(exc).__name__}: {exc} (the traceback is in the log)"}
    if isinstance(result, dict):
        success = result.pop("success", True)
        if result.get("status") == "failed":  # a pipeline run that failed is a failed job, whatever else it says
            success = False
        if not success and not result.get("error"):
            errors = result.get("errors") or []
            result["error"] = (result.get("message") or "; ".join(str(e) for e in errors[:3])
                               or f"{name} failed")
        return {"success": success, "job": name, **result}
    return {"success": True, "job": name, "result": result}


def exit_code(result: dict) -> int:
    """The process exit status for a :func:`run_job` result: 0 success, 1 the job failed, 2 bad usage."""
    if result.get("success"):
        return EXIT_OK
    if result.get("usage_error") or result.get("job") not in JOBS:
        return EXIT_USAGE
    return EXIT_FAILED

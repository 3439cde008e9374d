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

import dataclasses
import inspect
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from . import __version__
from .config import ConfigError
from .engine import Engine, EngineError, result_to_dict
from .errors import BadArgument


log = logging.getLogger("reme.jobs")

#: exit status of ``reme-tui job``: success, the job failed, bad usage
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class JobError(ValueError):
    """Unknown job or invalid parameters; the message says which and what is expected."""


@dataclass(frozen=True)
class Param:
    """One job parameter: ``type`` is ``str | int | float | bool | list | json`` (what ``job help`` prints and
    :func:`coerce` converts a ``key=value`` string to); ``pytype`` is the Python type (MCP schemas)."""

    name: str
    type: str
    default: Any = None
    required: bool = False
    help: str = ""

    @property
    def pytype(self) -> Any:
        return {"str": str, "int": int, "float": float, "bool": bool, "list": list[str], "json": Any}[self.type]


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
    """Convert a CLI string (or a Python value) to the parameter's type; None stays None (the default applies).
    Raises JobError."""
    if v is None:
        return None
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


#: Help of parameters by name, for every job that takes one (a job's own ``help=`` entry wins).
PARAM_HELP = {
    "path": "vault-relative path, e.g. digest/wiki/topic.md ('.md' may be left out)",
    "src": "vault-relative path of the note to move",
    "dst": "new vault-relative path (inbound links are rewritten)",
    "content": "the whole new text of the note (UTF-8 Markdown)",
    "overwrite": "replace an existing note (false: refuse if it exists)",
    "expected_sha": "the `sha` an earlier read returned: refuse if the file changed since",
    "old": "exact text to replace (include enough context to be unique)",
    "new": "replacement text",
    "start_line": "first line, 1-based",
    "end_line": "last line, inclusive (default: the end, at most 5000 lines)",
    "max_chars": "characters returned at most (default 200000: a huge note is read in parts from end_line + 1)",
    "depth": "hops to follow",
    "direction": "out | in | both",
    "max_nodes": "stop after this many notes",
    "recursive": "list sub-folders too",
    "limit": "most entries to return",
    "date": "YYYY-MM-DD (default: today in the app's timezone)",
    "date_from": "YYYY-MM-DD, inclusive (a note's date is the daily/<date> or resource/<date> folder it is in)",
    "date_to": "YYYY-MM-DD, inclusive",
    "path_prefix": "only paths starting with this (e.g. digest/)",
    "paths": "only these vault-relative paths (a list; on the command line, comma-separated)",
    "frontmatter": "JSON object of required frontmatter values (on the command line also fm.KEY=VALUE)",
    "include_content": "include the raw interests.yaml text",
    "horizon_days": "days ahead whose agenda items are included",
    "min_confidence": "drop topics below this confidence (0-1)",
    "run_id": "a run's id, as `dream_log` lists them (`changes` over MCP)",
    "with_text": "include before/after texts of each change",
    "keys": "frontmatter keys to remove (a list; on the command line, comma-separated)",
    "clear": "drop the index first and rebuild it from the vault (the embedding cache is kept)",
    "vectors": "also compute the vectors of new chunks (false: keyword index only)",
    "insert_markers": "add the index markers to a day page that has none",
    "use_llm": "call the configured LLM (false: keyword topics only, no API call)",
    "session_id": "the chat record's id (its file is <session dir>/dialog/<id>.jsonl)",
}


def param_type(annotation: Any) -> str:
    """The job type of a signature annotation (a string under ``from __future__ import annotations``):
    ``int | None`` → ``int``, ``list[str]`` → ``list``, ``dict[...]`` → ``json``. Raises TypeError for others."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    kinds = [t for t in text.replace(" ", "").split("|") if t != "None"]
    base = kinds[0].split("[", 1)[0] if len(kinds) == 1 else ""
    if base in ("str", "int", "float", "bool"):
        return base
    if base in ("list", "tuple"):
        return "list"
    if base in ("dict", "Any"):
        return "json"
    raise TypeError(f"no job parameter type for annotation {text!r}")


def params_from(fields: Iterable[tuple[str, Any, Any]], *, drop: Iterable[str] = (),
                help: dict[str, str] | None = None, expand: dict[str, tuple[Param, ...]] | None = None
                ) -> tuple[Param, ...]:
    """Params from ``(name, annotation, default)`` triples (``inspect.Parameter.empty`` default = required),
    leaving out ``drop`` and replacing a name in ``expand`` by its params."""
    out: list[Param] = []
    for name, annotation, default in fields:
        if name in (expand or {}):
            out.extend(expand[name])
            continue
        if name in drop:
            continue
        required = default is inspect.Parameter.empty
        out.append(Param(name, param_type(annotation), None if required else default, required,
                         (help or {}).get(name) or PARAM_HELP.get(name, "")))
    return tuple(out)


def signature_params(fn: Callable, **kw: Any) -> tuple[Param, ...]:
    """The job parameters of façade method ``fn``: its signature's names, types (annotations) and defaults
    (see :func:`params_from` for ``drop``/``help``/``expand``). The one declaration of a job's inputs: the
    signature; ``job help`` and the MCP tool schemas both read what this returns."""
    ps = [p for p in inspect.signature(fn).parameters.values()
          if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return params_from(((p.name, p.annotation, p.default) for p in ps), **kw)


def dataclass_params(cls: type, **kw: Any) -> tuple[Param, ...]:
    """The job parameters of a dataclass's fields (all optional: their defaults), e.g. search filters."""
    return params_from(((f.name, f.type, f.default) for f in dataclasses.fields(cls)), **kw)


def method_job(name: str, help: str, *, method: str | None = None, drop: Iterable[str] = (),
               param_help: dict[str, str] | None = None, extra: tuple[Param, ...] = (),
               expand: dict[str, tuple[Param, ...]] | None = None, run: Callable[[Engine, dict], Any] | None = None,
               writes: bool = False) -> Job:
    """A job over façade method ``method`` (default ``name``): parameters from its signature (plus ``extra``),
    run by calling it with them by name unless ``run`` is given."""
    fn = getattr(Engine, method or name)
    params = signature_params(fn, drop=drop, help=param_help, expand=expand) + extra
    if run is None:
        names = [p.name for p in params]

        def run(e: Engine, a: dict) -> Any:
            return getattr(e, fn.__name__)(**{n: a[n] for n in names})
    return Job(name, help, params, run, writes=writes)


#: Seconds a one-shot search waits for the title vectors (see :func:`_title_vectors_first`).
TITLE_WAIT_S = 5.0


def _title_vectors_first(e: Engine, query: str, mode: str) -> bool:
    """In a one-shot process, build the title vectors (:mod:`reme_engine.search.titles`) before a hybrid or vector
    search, so the answer is the one a running app or ``--serve`` gives (they build them in the background; a
    one-shot search without them ranked other notes first). Built from the embedding cache when the app ran on
    the vault (~0.4 s on 3,000 notes, partly hidden behind the model load started here); bounded by
    :data:`TITLE_WAIT_S`. Returns True when the build is still running (the search goes on without them)."""
    vs = e.vectors
    if mode == "keyword" or vs is None or vs.live:
        return False
    if not vs.ready:
        try:
            vs.open()
        except Exception:  # noqa: BLE001 — a corrupt vector index: the search itself reports it
            return False
    tv = e.searcher.titles()
    if tv is None or tv._data is not None:
        return False
    tv.built.clear()
    tv.refresh()
    t = tv._thread
    if t is None or not t.is_alive():
        return False
    try:
        vs.embedder.embed([query])  # loads the model while the build reads the cache
    except Exception:  # noqa: BLE001 — the search reports an embedder failure itself
        return False
    return not tv.built.wait(TITLE_WAIT_S)


def _search(e: Engine, a: dict) -> dict:
    from .search.hybrid import SearchFilters
    from .search.render import render_search

    fm = {k[3:]: v for k, v in a.items() if k.startswith("fm.")}
    if a.get("frontmatter"):
        if not isinstance(a["frontmatter"], dict):
            raise JobError("frontmatter must be a JSON object, e.g. frontmatter='{\"tags\": \"x\"}'")
        fm.update(a["frontmatter"])
    given = {f.name: a.get(f.name) or None for f in dataclasses.fields(SearchFilters)}
    filters = SearchFilters(**{**given, "frontmatter": fm or None})
    pending = _title_vectors_first(e, a["query"], a["mode"])
    try:
        res = e.search(a["query"], limit=a["limit"], mode=a["mode"], filters=filters, neighbors=a["neighbors"])
    except ValueError as exc:
        raise JobError(str(exc)) from exc
    out = res.to_dict()
    if pending:
        note = f"title vectors still building after {TITLE_WAIT_S:g} s: the ranking may differ from the app's"
        out["degraded"] = f"{out['degraded']}; {note}" if out.get("degraded") else note
    if a["render"]:
        out["text"] = render_search(res)
    return out


# The file jobs are journal runs of kind ``cli:<job>`` (see :mod:`reme_engine.agent_capture`): the Changes view
# lists them and ``revert`` undoes them, as it does the app's and an agent's writes. They are the person's writes:
# the journal never counts them as the app's (``memory.journal.PERSON_KIND_PREFIXES``).
CLI_KIND = "cli:{}"


def _not_indexed(res: dict) -> dict:
    """A write's result with ``not_indexed`` only when the index left the note out, then saying what still works
    (as MCP's ``write_note`` reply has it)."""
    why = res.pop("not_indexed", None)
    if res.get("indexed", True) is False:
        limit = " (the index limit is the setting max_file_bytes)" if why and why.startswith("too large") else ""
        res["not_indexed"] = (f"{why or 'skipped by the index'}: the note is saved and `job read` reads it, but "
                              f"search, links and traverse leave it out{limit}")
    return res


def _write(e: Engine, a: dict) -> dict:
    from .agent_capture import journaled_write

    return _not_indexed(journaled_write(e, a["path"], a["content"], overwrite=a["overwrite"],
                                        expected_sha=a["expected_sha"], kind=CLI_KIND.format("write")))


def _edit(e: Engine, a: dict) -> dict:
    from .agent_capture import journaled_edit

    return _not_indexed(journaled_edit(e, a["path"], a["old"], a["new"], count=a["count"],
                                       expected_sha=a["expected_sha"], kind=CLI_KIND.format("edit")))


def _delete(e: Engine, a: dict) -> Any:
    """A journaled delete; without ``expected_sha`` the bytes read just now are the ones allowed to go (a write in
    between refuses). A folder, a layer folder or a missing file goes to :meth:`Engine.delete` for its error."""
    from .agent_capture import _snapshot, journaled_delete
    from .vault.files import find_note, is_protected, resolve_path

    sha = a["expected_sha"]
    vp = resolve_path(e, a["path"], for_write=True)
    if not sha and not vp.abs.is_dir() and not is_protected(e.settings, vp.rel):
        sha = _snapshot(find_note(e, a["path"], for_write=True).abs)[1]
    if not sha:
        return e.delete(a["path"], a["expected_sha"])
    return journaled_delete(e, a["path"], expected_sha=sha, kind=CLI_KIND.format("delete"))


def _move(e: Engine, a: dict) -> dict:
    from .agent_capture import journaled_move

    return journaled_move(e, a["src"], a["dst"], kind=CLI_KIND.format("move"))


def _fm_update(e: Engine, a: dict) -> Any:
    raw = a.get("updates") or {}
    if not isinstance(raw, dict):
        raise JobError(f"parameter updates: expected a JSON object of key: value, got {raw!r}")
    updates = dict(raw)
    updates.update({k[4:]: _cli_value(v) for k, v in a.items() if k.startswith("set.")})
    if not updates:
        raise JobError("nothing to update: pass updates='{\"key\": \"value\"}' or set.KEY=VALUE")
    return _fm_journaled(e, a["path"], updates, None)


def _keys(keys: list[str]) -> list[str]:
    """The frontmatter keys to delete; JobError (exit 2) when none is given (an empty run would be journaled)."""
    if not keys:
        raise JobError("nothing to delete: pass keys=KEY[,KEY…]")
    return keys


def _cli_value(v: Any) -> Any:
    """A ``set.KEY=VALUE`` value: JSON when it reads as JSON (``12``, ``true``, ``["a", "b"]``), else the text, so
    a number stays a number in the frontmatter."""
    if not isinstance(v, str):
        return v
    try:
        return json.loads(v)
    except ValueError:
        return v


def _fm_journaled(e: Engine, path: str, updates: dict | None, delete: list[str] | None) -> dict:
    from .agent_capture import journaled_frontmatter_update

    return journaled_frontmatter_update(e, path, updates, delete, kind=CLI_KIND.format("frontmatter"))


def _search_filters() -> tuple[Param, ...]:
    from .search.results import SearchFilters  # plain dataclasses: no index or model import

    return dataclass_params(SearchFilters)


P = Param
_LLM = ("llm",)  # pipelines take a client object: not a job parameter
JOBS: dict[str, Job] = {j.name: j for j in [
    method_job("search", "Hybrid search (keyword BM25 and vectors, fused) with the hop-2 neighbour directory.",
               param_help={"query": "what to look for (Chinese or English)", "limit": "hits to return",
                           "mode": "hybrid | keyword | vector", "neighbors": "include the hop-2 directory"},
               expand={"filters": _search_filters()},
               extra=(P("render", "bool", False, help="add the text rendering of ARCHITECTURE §11.3.4 as `text`"),),
               run=_search),
    method_job("traverse", "Breadth-first walk over wikilinks from a note."),
    method_job("read", "Read lines of a file (1-based, inclusive)."),
    method_job("write", "Create or replace a file (atomic) and index it; journaled (revert undoes it).", run=_write,
               writes=True),
    method_job("edit", "Find and replace text in a file; journaled (revert undoes it).",
               param_help={"count": "expected occurrences; 0 = all"}, run=_edit, writes=True),
    method_job("delete", "Delete a file; reports inbound links left dangling; journaled (revert restores it).",
               run=_delete, writes=True),
    method_job("move", "Move/rename a file, rewriting inbound links; journaled (revert undoes it).", run=_move,
               writes=True),
    method_job("list", "List a folder."),
    method_job("stat", "File metadata and index state."),
    method_job("frontmatter_read", "Read a note's frontmatter."),
    method_job("frontmatter_update", "Merge keys into a note's frontmatter (order and unknown keys kept).",
               drop=("delete",), run=_fm_update,
               param_help={"updates": "JSON object; or set.KEY=VALUE (VALUE read as JSON when it is: 12, true)"},
               writes=True),
    method_job("frontmatter_delete", "Remove keys from a note's frontmatter.", method="frontmatter_update",
               drop=("updates", "delete"), extra=(P("keys", "list", required=True, help=PARAM_HELP["keys"]),),
               run=lambda e, a: _fm_journaled(e, a["path"], {}, _keys(a["keys"])), writes=True),
    method_job("daily_create", "Create today's (or date's) day folder and index page; idempotent.", writes=True),
    method_job("daily_list", "Cards of a day."),
    method_job("daily_reindex", "Regenerate the day index section between its markers.", writes=True),
    method_job("reindex", "Bring the index up to date (clear=true rebuilds it; the embedding cache is kept).",
               drop=("progress",), writes=True),
    method_job("proactive_read", "Read daily/<date>/interests.yaml: the day's proactive topics and agenda."),
    method_job("auto_dream", "Distil changed daily notes into digest nodes (needs an LLM).", drop=_LLM,
               param_help={"hint": "a focus for extraction",
                           "scan_days": "days ending at date to scan for changed daily notes"}, writes=True),
    method_job("auto_memory", "Turn a chat session's new messages into a daily card (needs an LLM).", drop=_LLM,
               writes=True),
    method_job("auto_resource", "Give new/changed files under resource/ daily cards (needs an LLM).", drop=_LLM,
               writes=True),
    method_job("proactive_refresh",
               "Write daily/<date>/interests.yaml: topics and agenda (keyword fallback without an LLM).",
               drop=(*_LLM, "carry_forward"), writes=True),
    method_job("dream_log", "List LLM pipeline runs, or one run's changes."),
    method_job("revert", "Restore the files a run changed (refuses files changed since).", writes=True),
    method_job("health_check", "Component health and skipped files."),
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


def format_jobs_help(width: int = 100, only: str | None = None) -> str:
    """``job help`` (and ``job --help``) for a person at a terminal: the jobs grouped, one line each (name, what it
    does), then its parameters as ``name=<type>`` (``*`` required) with their help and default. ``width`` is the
    terminal's width in columns; long lines wrap under their text. ``only`` names one job (``job NAME --help``):
    just its entry; an unknown name raises KeyError. Pipes and scripts get :func:`jobs_help` as JSON instead."""
    import textwrap

    if only is not None and only not in JOBS:
        raise KeyError(only)
    groups: dict[str, list[Job]] = {}
    for j in JOBS.values():
        if only is None or j.name == only:
            groups.setdefault(job_group(j.name), []).append(j)
    order = [g for g, _ in JOB_GROUPS] + ["other"]
    usage = f"reme-tui job {only or 'NAME'} key=value …"
    out = [f"{usage}   (one JSON object on stdout; exit 0 ok, 1 failed, 2 bad usage)", ""]
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
    """Validate and coerce ``raw`` against ``job.params``; dotted keys (``fm.x``, ``set.x``) pass through; a None
    value counts as not given. Raises JobError for an unknown or missing parameter or a bad value."""
    spec = {p.name: p for p in job.params}
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if k in spec:
            if v is None:  # an explicit null is an absent parameter: its default applies (or it is missing)
                continue
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
    except (JobError, BadArgument) as exc:  # a parameter the job itself found invalid
        return {"success": False, "job": name, "error": str(exc), "usage_error": True}
    except (EngineError, ConfigError) as exc:
        return {"success": False, "job": name, "error": str(exc)}
    except OSError as exc:  # a file job's OS failure is the user's to act on (full disk, permission): one line
        from .errors import os_error_message

        what = next((str(args[k]) for k in ("path", "src", "date") if args.get(k)), "")
        msg = os_error_message(exc, what or "-", name)
        if not what:  # no file named in the call (daily_create of today): no empty name in the line
            msg = f"cannot {name}: {msg.rsplit(': ', 1)[-1]}"
        return {"success": False, "job": name, "error": msg}
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


# A running app or --serve answers the read-only jobs over the local socket with this very function, so a reply
# is exactly what the job prints in-process (the socket module cannot import the table: it sits below the façade).
from . import local_server as _local_server  # noqa: E402

_local_server.register_job_runner(run_job)

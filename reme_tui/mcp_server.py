"""``reme-tui mcp``: the vault over the Model Context Protocol, so agents share the person's memory.

Built on the official ``mcp`` SDK (``MCPServer``); nothing of the protocol is written here. Every tool is a thin
wrapper over a job of :mod:`reme_engine.jobs` (the engine façade's named jobs): its JSON input schema is derived
from the job's parameter table (names, types, defaults, help), its description is the wrapper's docstring, its
result is one JSON object in a text block, and its errors are the job's own one-line messages (the ones
``reme-tui job …`` prints), returned as MCP tool errors (``isError: true``). ``--read-only`` registers no
writing tool at all.

Resources: one ``reme://note/<path>`` per note, and ``reme://status`` (JSON: index counts, vectors pending, the
background work running now), which benchmarks poll to measure a settled server.

Transports: stdio (what desktop clients launch) or, with ``--http``, streamable HTTP on loopback only (``--host``
127.0.0.1, localhost or ::1). The socket is bound before anything else opens: a port in use, a port out of range or
a host that is not loopback is one line on stderr and exit status 2, not a traceback.

Write limits: one call writes at most ``mcp.max_write_bytes`` (write_note content, edit_note replacement,
remember's conversation) and ``mcp.max_remember_bytes`` (remember's text); each writing tool's description states
the configured values. A note over the index's ``max_file_bytes`` is saved as the app saves it, and the reply says
it is not indexed and why (``indexed: false``, ``not_indexed``); ``remember`` refuses an entry that would take the day's
capture card past that limit. Hidden files and folders (``.obsidian/``, ``.git/``, ``.env``) are not served to
agents at all (plugins keep API keys there). A tool that fails unexpectedly answers one line; its traceback goes to
the server's stderr.

Start-up: the SDK (≈1.2 s of imports on a quiet 2-core EPYC, mostly its pydantic protocol models) is imported
only when serving; the engine opens on a background thread once the ``initialize`` handshake is answered (a
middleware starts it at the next message; a tool call waits for it), and the query
model starts loading on its own thread as soon as the engine is open (~0.3 s from its fast-load cache); a hybrid
search that comes before it is in answers from keywords at once and says so in ``degraded`` (as the app's search
does), then is hybrid again. After opening, a keyword + graph catch-up pass runs, then the
vault watcher (no cron: dreaming stays with the app or ``--serve``), then the vector pass of whatever has no vector
yet (``--no-embed`` skips it), encoded in the embedder's niced background process; while the app or ``--serve``
embeds the vault the pass is skipped (one cross-process embed lock). Last, the vector index, the query model and
the title vectors are loaded, so the agent's first hybrid search does not wait for them. A ``--read-only`` server writes nothing
into the vault, so it runs no watcher (which also regenerates day pages) and re-syncs its index every
``RESYNC_S`` seconds instead. Beside the TUI or ``--serve`` the server shares the vault's index, journal and
cross-process writer lock (``revert`` takes it); its writes are conflict-checked, atomic and indexed at once, so
the other process's watcher finds them already indexed.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Callable

from reme_tui.mcp_tools import ToolFailure, ToolSpec, VaultServer, _log, tool_specs

__all__ = ["ToolFailure", "ToolSpec", "VaultServer", "tool_specs", "build_server", "build_parser", "main"]

#: URI prefix of a note resource (``reme://note/digest/wiki/x.md``).
NOTE_URI = "reme://note/"
#: URI of the server's status resource (JSON, :meth:`VaultServer.status`).
STATUS_URI = "reme://status"
#: Default port of ``--http``.
DEFAULT_PORT = 8765

# ------------------------------------------------------------------------------------------------ schemas


def _annotation(p, bounds: tuple[int, int] | None = None) -> Any:
    """The Python type of a job parameter, with its description (pydantic turns it into the JSON schema).

    A ``str`` parameter whose help is a list of choices (``"hybrid | keyword | vector"``, optionally after a
    ``label: ``) becomes an enum, so clients see the valid values; ``bounds`` (min, max) limit a number."""
    from typing import Literal

    from pydantic import Field

    desc = p.help  # the job table's help, shared with `reme-tui job help`
    base = p.pytype
    choices = re.fullmatch(r"(?:[^:|]*: )?([\w-]+(?: \| [\w-]+)+)", desc) if p.type == "str" else None
    if choices:
        base = Literal[tuple(choices.group(1).split(" | "))]  # type: ignore[misc]
    elif p.type == "json":
        base = list[dict[str, str]] if p.name == "conversation" else dict[str, Any]
    if not p.required and p.default is None:
        base = base | None
    limits = {"ge": bounds[0], "le": bounds[1]} if bounds else {}
    return Annotated[base, Field(description=desc or None, **limits)] if desc or limits else base


def spec_params(spec: ToolSpec) -> list:
    """The job's parameters minus ``drop``, plus ``extra``: the tool's inputs, in order."""
    from reme_engine.jobs import JOBS

    from dataclasses import replace

    params = list(JOBS[spec.job].params) if spec.job else []
    params = [replace(p, help=spec.help[p.name]) if p.name in spec.help else p
              for p in params if p.name not in spec.drop]
    return params + [p for p in spec.extra if p.name not in {q.name for q in params}]


def tool_function(spec: ToolSpec, vs: VaultServer) -> Callable:
    """A function with the tool's signature (for the SDK's schema derivation) that runs ``spec`` and returns a
    ``CallToolResult``: the result as one JSON object in a text block, or ``isError`` with the one-line message."""
    from mcp.types import CallToolResult, TextContent

    def failed(text: str) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    def run(kwargs: dict) -> CallToolResult:
        try:
            result = spec.run(vs, kwargs)
        except ToolFailure as exc:
            return failed(str(exc))
        except OSError as exc:  # one the tool did not expect (a name too long while looking a path up): one line
            from reme_engine.errors import os_error_message

            named = next((v for k, v in kwargs.items() if k in ("path", "src", "dst") and isinstance(v, str)), "")
            return failed(os_error_message(exc, named, "read" if not spec.writes else "write"))
        except Exception as exc:  # a bug: one line for the agent (not the SDK's bare "Error executing tool"),
            import traceback  # and the traceback in the server's log for the person

            _log(f"{spec.name} failed:\n{traceback.format_exc()}")
            return failed(f"{spec.name} failed: {type(exc).__name__}: {exc} (a bug in reme-tui; the traceback is "
                          "in the server's log)")
        data = result if isinstance(result, dict) else {"result": result}
        # One copy of the result, as JSON text: a second one in structuredContent (optional without an output
        # schema) doubled every response, and bytes are most of a call's cost beyond the engine.
        text = json.dumps(data, ensure_ascii=False, default=str, separators=(",", ":"))
        return CallToolResult(content=[TextContent(type="text", text=text)])

    async def call(**kwargs):
        if vs.runs_inline(spec, kwargs):
            return run(kwargs)  # a few ms: a worker-thread round trip would cost as much as the call itself
        import anyio

        return await anyio.to_thread.run_sync(run, kwargs)

    params = []
    for p in spec_params(spec):
        default = inspect.Parameter.empty if p.required else p.default
        params.append(inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=_annotation(p, spec.bounds.get(p.name))))
    call.__signature__ = inspect.Signature(params, return_annotation=CallToolResult)  # type: ignore[attr-defined]
    call.__name__ = spec.name
    limits = spec.limits_text(vs.settings)  # the configured values, so an agent can size its text before calling
    call.__doc__ = inspect.getdoc(spec.run) + (f"\n\n{limits}" if limits else "")
    return call


# ------------------------------------------------------------------------------------------------ the server

#: What a JSON-schema type means to an agent, for argument errors.
_EXPECTS = {"integer": "an integer", "number": "a number", "boolean": "true or false", "string": "a string",
            "array": "a JSON array", "object": "a JSON object"}


def argument_error(tool: str, schema: dict, exc) -> str:
    """One line for arguments the input schema refused (a pydantic ``ValidationError``): each bad argument by
    name, what it expects (type, choices, range, from the schema) and what was given, e.g. ``bad argument for
    search: limit expects an integer from 1 to 100, got 'five'``. Never a URL or a multi-line dump."""
    props = schema.get("properties", {})
    parts = []
    for err in exc.errors():
        loc = [str(x) for x in err.get("loc", ()) if not isinstance(x, int)]
        name = loc[0] if loc else "?"
        if err.get("type") == "missing":
            parts.append(f"{name} is required")
            continue
        parts.append(f"{name} expects {_expectation(props.get(name, {}))}, got {_shown(err.get('input'))}")
    names = ", ".join(props) or "none"
    return f"bad argument for {tool}: " + "; ".join(dict.fromkeys(parts)) + f" (its arguments: {names})"


def _expectation(prop: dict) -> str:
    """What a schema property accepts, in words: ``one of hybrid | keyword | vector``, ``an integer from 1 to
    100``, ``a JSON array of strings``."""
    options = [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"] or [prop]
    words = []
    for o in options:
        if "enum" in o:
            words.append("one of " + " | ".join(map(str, o["enum"])))
            continue
        w = _EXPECTS.get(o.get("type"), "a value")
        if o.get("type") == "array" and o.get("items", {}).get("type"):
            w += f" of {o['items']['type']}s"
        if "minimum" in o and "maximum" in o:
            w += f" from {o['minimum']} to {o['maximum']}"
        elif "minimum" in o:
            w += f" >= {o['minimum']}"
        words.append(w)
    return " or ".join(dict.fromkeys(words))


def _shown(value) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "…"



def build_server(vs: VaultServer):
    """The ``MCPServer`` with the tools (writers unless ``vs.read_only``) and the note resource template."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    from reme_engine import __version__

    from mcp.types import Resource

    class VaultMCP(MCPServer):
        async def call_tool(self, name, arguments, context=None):
            """The SDK's call, with argument errors as one line (:func:`argument_error`) and unknown argument
            names refused (the SDK would drop them silently, and the agent would think its filter applied)."""
            from mcp.server.mcpserver.exceptions import ToolError
            from pydantic import ValidationError

            tool = self._tool_manager.get_tool(name)
            if tool is not None:
                known = tool.parameters.get("properties", {})
                unknown = [k for k in (arguments or {}) if k not in known]
                if unknown:
                    raise ToolError(f"bad argument for {name}: unknown {', '.join(map(repr, unknown))} "
                                    f"(its arguments: {', '.join(known) or 'none'})")
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if tool is not None and isinstance(exc.__cause__, ValidationError):
                    raise ToolError(argument_error(name, tool.parameters, exc.__cause__)) from exc.__cause__
                raise

        async def list_resources(self) -> list:
            """The SDK's resources plus one ``reme://note/<path>`` per indexed note (name and description)."""
            import anyio

            def notes():
                rows = vs.engine.store.conn.execute("SELECT path, name, description FROM files ORDER BY path")
                return [Resource(uri=NOTE_URI + quote(p, safe="/"), name=p, title=n or None,
                                 description=d or None, mime_type="text/markdown")
                        for p, n, d in rows if p.lower().endswith(".md")]

            from urllib.parse import quote

            try:
                extra = await anyio.to_thread.run_sync(notes)
            except ToolFailure:
                extra = []
            return [*await super().list_resources(), *extra]

    mode = "read-only" if vs.read_only else "read and write"
    server = VaultMCP(
        "reme", title="reme-tui vault", version=__version__,
        instructions=(f"The person's personal knowledge base (a Markdown vault; {mode}). Start with `search`; "
                      "read hits with `read_note`; follow links with `traverse`; `today` and `agenda` give the "
                      "current day. Write only what the person asked for; pass `expected_sha` from read_note when "
                      "changing a note; record what the person tells you with `remember`."),
        log_level="WARNING",
    )
    async def open_after_initialize(ctx, call_next):
        # The engine opens (imports, store, tokenizer: ~1 s of GIL-bound work) once the handshake is answered:
        # started earlier, it competed with the `initialize` reply the client is waiting for.
        result = await call_next(ctx)
        if ctx.method != "initialize":
            vs.start()  # idempotent: `notifications/initialized`, or whatever comes first after it
        return result

    server.middleware.append(open_after_initialize)
    for spec in tool_specs():
        if spec.writes and vs.read_only:
            continue
        server.add_tool(tool_function(spec, vs), name=spec.name, title=spec.title,
                        annotations=ToolAnnotations(read_only_hint=not spec.writes,
                                                    # every writer but remember (it only appends) may replace
                                                    # or remove what is there
                                                    destructive_hint=spec.writes and spec.name != "remember",
                                                    idempotent_hint=not spec.writes, open_world_hint=False))

    @server.resource(NOTE_URI + "{+path}", name="note", title="A note of the vault", mime_type="text/markdown",
                     description="The text of a vault note by its vault-relative path.")
    def note(path: str) -> str:
        from mcp.server.mcpserver.exceptions import ResourceError

        from reme_tui.mcp_tools import _visible

        try:
            _visible(vs, path)
            return vs.job("read", {"path": vs.note_path(path)})["text"]
        except ToolFailure as exc:
            raise ResourceError(str(exc)) from exc

    @server.resource(STATUS_URI, name="status", title="What the server is doing", mime_type="application/json",
                     description="JSON: engine state, index counts, vectors pending, title vectors, and the "
                                 "background work running now (`background` is [] once settled).")
    def status() -> str:
        return json.dumps(vs.status(), ensure_ascii=False)

    return server


#: ``--host`` values: loopback only (the vault is never served to the network), and exactly the names the SDK's
#: DNS-rebinding protection allows in a request's Host header.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class StartupError(Exception):
    """``reme-tui mcp`` cannot start; ``str(exc)`` is the one line printed (exit status 2)."""


def bind_http(host: str, port: int):
    """A listening TCP socket on loopback ``host`` and ``port`` (0: any free port), bound before the engine opens
    so that a taken port is one clear line at start, not a traceback from inside the server. Raises StartupError:
    a host that is not loopback (:data:`LOOPBACK_HOSTS`), a port outside 0-65535, in use, or needing privileges."""
    import errno
    import socket

    if host not in LOOPBACK_HOSTS:
        raise StartupError(f"--host {host!r} is not allowed: the vault is served on loopback only "
                           f"({' | '.join(LOOPBACK_HOSTS)})")
    if not 0 <= port <= 65535:
        raise StartupError(f"port {port} is not a TCP port; pass --port 1-65535 (0 = any free port)")
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:  # "localhost" missing from /etc/hosts
        raise StartupError(f"cannot resolve --host {host}: {exc.strerror or exc}; pass --host 127.0.0.1") from exc
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart reuses a port left in TIME_WAIT
        sock.bind(addr)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(f"port {port} is in use; pass --port (another port, or 0 for any free one)") from exc
        if exc.errno == errno.EACCES:
            raise StartupError(f"port {port} needs privileges; pass --port above 1023 (or 0 for any free one)") \
                from exc
        if exc.errno == errno.EADDRNOTAVAIL:
            raise StartupError(f"address {host} is not available on this machine; pass --host 127.0.0.1") from exc
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


#: The SDK's own cap on an HTTP request body (4 MiB), kept unless the write limits need more.
HTTP_BODY_BYTES = 4 * 1024 * 1024


async def _serve_http(server, sock, max_write_bytes: int = 0) -> None:
    import uvicorn

    # A write up to mcp.max_write_bytes must reach the tool (which gives the limit's own error above it), not the
    # transport's 413: JSON escapes can make a text up to 6x longer (\u0001), plus room for the envelope.
    body = max(HTTP_BODY_BYTES, 6 * max_write_bytes + 64 * 1024)
    # host="127.0.0.1" turns on the SDK's DNS-rebinding protection (Host: 127.0.0.1, localhost or [::1])
    app = server.streamable_http_app(host="127.0.0.1", max_request_body_size=body)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    host, port = sock.getsockname()[:2]
    _log(f"serving on http://{f'[{host}]' if ':' in host else host}:{port}/mcp")
    await uvicorn.Server(config).serve(sockets=[sock])


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def build_parser() -> argparse.ArgumentParser:
    tools = "\n".join(f"  {s.name:<11} {'(write) ' if s.writes else ''}{s.summary}" for s in tool_specs())
    p = argparse.ArgumentParser(
        prog="reme-tui mcp", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve the vault to agents over the Model Context Protocol (stdio by default).",
        epilog=f"tools:\n{tools}\n\nresources: reme://note/<vault-relative path>, reme://status (what the server is doing)\n"
               "--read-only leaves out every (write) tool.")
    p.add_argument("--vault", help="vault folder (default: REME_VAULT, the config file, else the demo vault)")
    p.add_argument("--config", help="config file")
    p.add_argument("--state-dir", help="where the index lives (default: outside the vault, shared with the app)")
    p.add_argument("--embedder", choices=["offline", "openai", "none"], help="embedder kind")
    p.add_argument("--read-only", action="store_true", help="expose no writing tool")
    p.add_argument("--http", action="store_true", help="serve streamable HTTP on 127.0.0.1 instead of stdio")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"--http port (default {DEFAULT_PORT}; 0 = any)")
    p.add_argument("--host", default="127.0.0.1", help="--http address, loopback only: 127.0.0.1 (default), "
                                                        "localhost or ::1")
    p.add_argument("--no-watch", action="store_true", help="do not watch the vault for edits made elsewhere")
    p.add_argument("--no-embed", action="store_true",
                   help="no background vector work: by default the server embeds what nobody has, at low "
                        "priority (unless the app or --serve is doing it), then preloads the query model")
    return p


def _plain_stderr_logging() -> None:
    """One plain line per warning on stderr (an MCP client shows the server's stderr in its log). Set before the
    SDK's server is made: its own set-up (``logging.basicConfig`` with a Rich handler, which wraps and colours
    lines into box art in a client's log) then finds the root logger configured and leaves it alone."""
    import logging

    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("reme-tui mcp: %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)


def main(args: argparse.Namespace, rest: list[str]) -> int:
    """``reme-tui mcp …``: parse ``rest`` over the top-level ``args``, then serve until the client disconnects."""
    ns = build_parser().parse_args(rest)
    for key in ("vault", "config", "state_dir", "embedder"):
        if getattr(ns, key):
            setattr(args, key, getattr(ns, key))
    from reme_tui.cli import load

    settings = load(args)
    # the engine opens after the handshake: a vault that is not there must fail here, not at every tool call
    vault = Path(settings.vault).expanduser() if settings.vault else None
    if vault is None or not vault.is_dir():
        why = ("no vault configured (pass --vault or set REME_VAULT)" if vault is None else
               f"vault is a file, not a folder: {vault}" if vault.exists() else f"vault folder does not exist: {vault}")
        print(f"reme-tui mcp: {why}", file=sys.stderr, flush=True)
        return 2
    sock = None
    if ns.http:  # before anything opens: a taken port is one line and exit 2, not a traceback after start-up
        try:
            sock = bind_http(ns.host, ns.port)
        except StartupError as exc:
            print(f"reme-tui mcp: {exc}", file=sys.stderr, flush=True)
            return 2
    _plain_stderr_logging()
    vs = VaultServer(settings, read_only=ns.read_only, watch=not ns.no_watch, embed=not ns.no_embed)
    server = build_server(vs)  # the engine opens after the handshake (see build_server)
    import signal

    import anyio

    signal.signal(signal.SIGTERM, _interrupt)  # a service manager's stop: close the engine cleanly
    try:
        if ns.http:
            anyio.run(_serve_http, server, sock, settings.mcp.max_write_bytes)
        else:
            anyio.run(server.run_stdio_async)
    except KeyboardInterrupt:
        pass
    finally:
        vs.close()
        if sock is not None:
            sock.close()
    return 0

"""The local job socket: a running app or ``--serve`` answers read-only one-shot jobs for ``reme-tui job``.

A one-shot ``reme-tui job search`` in a new process opens the index and loads the embedding model (1–8 s); the
long-running process has both in memory already. It listens on a Unix domain socket in the vault's state dir,
``<state dir>/jobs.sock`` (mode 0600, the state dir tightened to the user only), and answers one request per
connection:

    greeting (one line, from the server as soon as it accepts):  {"reme_jobs": 1}
    request  (one line):  {"v": 1, "version": "<reme_engine version>", "identity": "<settings hash>",
                           "job": NAME, "params": {key: value-as-typed-on-the-command-line}}
    reply    (one line):  the job's result object, exactly what ``reme-tui job`` prints
                      or  {"protocol_error": "…", "v": 1}  (wrong version or settings, not a read-only job,
                          busy, timed out) — the client then runs the job in-process.

Only :data:`READ_ONLY_JOBS` go over the socket; writing jobs keep running in the caller under its own locks.
The client half (:func:`ask`) imports only the standard library, so a one-shot job that a server answers never
loads the engine, numpy or the model. Neither half imports the engine or the job table at import time: the
façade starts the server (``Engine.start_local_server``) and the server imports the table by name
(:data:`JOB_TABLE`) at its first request, unless a runner was registered (:func:`register_job_runner`).
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import logging
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any, Callable

from . import __version__

log = logging.getLogger("reme.local_server")

#: Wire protocol version: bumped whenever the request or reply shape changes (a mismatch falls back).
PROTOCOL = 1
#: The socket's file name in the state dir.
SOCKET_NAME = "jobs.sock"
#: Jobs a server may answer: those of the job table that change neither the vault nor the index. health_check
#: is left out (it repairs the index it finds damaged); help and version need no engine.
READ_ONLY_JOBS = frozenset({"search", "traverse", "read", "list", "stat", "frontmatter_read", "daily_list",
                            "proactive_read", "dream_log"})
#: Env var that forces in-process jobs (as ``--no-server`` does) when set to a non-empty value other than 0.
NO_SERVER_ENV = "REME_NO_SERVER"
#: Client defaults, seconds: connecting to a live Unix socket is immediate, so a slow connect means no server.
CONNECT_TIMEOUT_S = 0.05
#: The server's greeting, sent as soon as it accepts, before it reads the request; and how long a client waits
#: for it (a suspended app keeps accepting into the kernel's backlog but never answers).
HELLO = {"reme_jobs": PROTOCOL}
HELLO_TIMEOUT_S = 1.0
_HELLO_LINE = json.dumps(HELLO).encode("ascii") + b"\n"
#: Server defaults: the longest a job may run before the reply says "timed out" (the client then runs it itself),
#: and how many requests run at once before the next is told "busy".
JOB_TIMEOUT_S = 20.0
MAX_CONCURRENT = 8
#: Seconds between a standing-by server's attempts to take over, and a serving one's checks that its socket
#: file is still its own.
STANDBY_S = 2.0
#: Largest request line accepted, bytes.
MAX_REQUEST_BYTES = 1 << 20
#: Unix socket paths longer than this (Linux's sun_path is 108 bytes) are reached through /proc/self/fd.
_SUN_PATH_MAX = 100

#: Unix domain sockets and uids exist here (not on Windows): otherwise no server starts and jobs run in-process.
SUPPORTED = hasattr(socket, "AF_UNIX") and hasattr(os, "getuid")

_runner: Callable[[Any, str, dict], dict] | None = None

#: The module whose import registers the job runner, and the runner's name in it. Named, not imported: the table
#: sits above the façade, which sits above this module, so an import would close a cycle; and the app's first
#: paint need not pay for the table (~5 ms, more on a cold disk) before anyone asks.
JOB_TABLE = ("reme_engine.jobs", "run_job")


def register_job_runner(fn: Callable[[Any, str, dict], dict]) -> None:
    """Install ``fn(engine, job_name, raw_params) -> result dict`` (:func:`reme_engine.jobs.run_job`) as what a
    server runs. The job table calls this when imported; a server imports it at its first request otherwise."""
    global _runner
    _runner = fn


def job_runner() -> Callable[[Any, str, dict], dict] | None:
    """The registered runner, or None when :mod:`reme_engine.jobs` was never imported."""
    return _runner


def _run_job(engine: Any, name: str, raw: dict) -> dict:
    """Run job ``name`` on ``engine`` with the registered runner, importing :data:`JOB_TABLE` first when none is
    (its import registers :func:`reme_engine.jobs.run_job`)."""
    fn = _runner
    if fn is None:
        import importlib

        mod = importlib.import_module(JOB_TABLE[0])
        fn = _runner or getattr(mod, JOB_TABLE[1])
    return fn(engine, name, raw)


def socket_path(state_dir: str | os.PathLike) -> Path:
    """``<state_dir>/jobs.sock``."""
    return Path(state_dir) / SOCKET_NAME


def settings_identity(settings: Any) -> str:
    """A short hash of the settings that decide a read-only job's output (vault, embedder, search weights and
    fusion, chunking, timezone, language): a client whose settings differ from the server's (another
    ``--config`` or ``--embedder``) runs the job itself, so the output never depends on who answered."""
    emb = settings.embedder
    parts = {
        "vault": str(Path(settings.vault).resolve()) if settings.vault else None,
        "embedder": [emb.kind, getattr(emb, "model", None), getattr(emb, "base_url", None),
                     getattr(emb, "dimensions", None)],
        "weights": [settings.search_vector_weight, settings.search_keyword_weight, settings.rrf_k],
        "search": dataclasses.asdict(settings.search) if dataclasses.is_dataclass(settings.search) else None,
        "chunk_bytes": settings.chunk_bytes, "max_file_bytes": settings.max_file_bytes,
        "timezone": settings.timezone, "language": settings.language, "ann": settings.ann_threshold,
    }
    blob = json.dumps(parts, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


def no_server_requested(env: dict | None = None) -> bool:
    """True when ``REME_NO_SERVER`` asks for in-process jobs."""
    v = (os.environ if env is None else env).get(NO_SERVER_ENV, "").strip().lower()
    return v not in ("", "0", "false", "no", "off")


def _address(path: Path) -> tuple[str, int | None]:
    """What to bind/connect to for ``path``: the path itself, or ``/proc/self/fd/N/<name>`` through an open
    descriptor of its folder when the path is too long for ``sun_path`` (the caller closes the fd)."""
    s = os.fsencode(str(path))
    if len(s) <= _SUN_PATH_MAX:
        return str(path), None
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{fd}/{path.name}", fd


def _file_id(st: os.stat_result) -> tuple[int, int, int]:
    """Which file this is: device, inode and change time (a socket bound right after another was removed
    often gets the freed inode number; its change time differs)."""
    return st.st_dev, st.st_ino, st.st_ctime_ns


def _ours(st: os.stat_result) -> bool:
    """A socket file this user owns that no one else may open."""
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid() and not (st.st_mode & 0o077)


def _peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end (SO_PEERCRED, Linux), or None where unsupported."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    import struct

    try:
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i")))
    except OSError:
        return None
    return uid


def _read_line(sock: socket.socket, limit: int) -> bytes | None:
    """Bytes up to the first newline (excluded); None when the peer closed first or sent more than ``limit``."""
    buf = bytearray()
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk
        nl = buf.find(b"\n")
        if nl >= 0:
            return bytes(buf[:nl])
        if len(buf) > limit:
            return None


# -- client -------------------------------------------------------------------------------------------------------
def ask(state_dir: str | os.PathLike, job: str, params: dict[str, Any], identity: str, *,
        connect_timeout: float = CONNECT_TIMEOUT_S, hello_timeout: float = HELLO_TIMEOUT_S,
        reply_timeout: float = JOB_TIMEOUT_S + 5.0) -> dict | None:
    """Ask the server of ``state_dir`` to run read-only ``job`` with ``params`` (the raw ``key=value`` strings).

    Returns the job's result dict (what ``reme-tui job`` prints), or None when the caller should run the job
    itself: not a read-only job, no socket, a socket file that is not this user's alone, a stale socket (no
    process listening), a server of another version or other settings, busy or timed out, or any transport
    error, or no greeting within ``hello_timeout`` (a stopped process). Never raises. Timeouts in seconds."""
    if job not in READ_ONLY_JOBS or not SUPPORTED:
        return None
    path = socket_path(state_dir)
    try:
        if not _ours(os.lstat(path)):
            return None
    except OSError:
        return None
    fd = None
    try:
        addr, fd = _address(path)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(connect_timeout)
            s.connect(addr)
            uid = _peer_uid(s)
            if uid is not None and uid != os.getuid():
                return None
            req = {"v": PROTOCOL, "version": __version__, "identity": identity, "job": job, "params": params}
            s.sendall(json.dumps(req, ensure_ascii=True).encode("ascii") + b"\n")
            with s.makefile("rb") as f:
                # the server greets at once: a stopped or wedged process (listening, never answering) costs
                # hello_timeout, not reply_timeout
                s.settimeout(hello_timeout)
                if json.loads(f.readline(4096) or b"null") != HELLO:
                    return None
                s.settimeout(reply_timeout)
                line = f.readline()
            if not line.endswith(b"\n"):
                return None
    except (OSError, ValueError):
        return None
    finally:
        if fd is not None:
            os.close(fd)
    try:
        reply = json.loads(line)
    except ValueError:
        return None
    if not isinstance(reply, dict) or "protocol_error" in reply or reply.get("job") != job:
        return None
    return reply


def exit_code_of(result: dict) -> int:
    """The exit status of a result a server returned (always a known job): 0 success, 2 bad usage, 1 failed —
    the rule of :func:`reme_engine.jobs.exit_code`."""
    if result.get("success"):
        return 0
    return 2 if result.get("usage_error") else 1


# -- server -------------------------------------------------------------------------------------------------------
class LocalServer:
    """The socket server of one open engine. :meth:`start` binds ``<state dir>/jobs.sock`` and answers on a
    thread ``reme-local-server``; each request runs on its own ``reme-local-job`` thread, at most
    ``max_concurrent`` at once, each for at most ``job_timeout`` seconds. :meth:`close` stops listening and
    removes the socket file (only if it is still the one this server bound).

    ``run(job, raw_params) -> result dict`` runs a job (the registered runner bound to the engine);
    ``identity`` is :func:`settings_identity` of the engine's settings."""

    def __init__(self, state_dir: str | os.PathLike, run: Callable[[str, dict], dict], identity: str, *,
                 job_timeout: float = JOB_TIMEOUT_S, max_concurrent: int = MAX_CONCURRENT) -> None:
        self.state_dir = Path(state_dir)
        self.path = socket_path(state_dir)
        self.identity = identity
        self.job_timeout = job_timeout
        self._run = run
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._sock: socket.socket | None = None
        self._inode: tuple[int, int, int] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._active = 0
        self._active_lock = threading.Lock()
        #: requests answered / refused (protocol errors), for tests and the log
        self.answered = 0
        self.refused = 0

    @property
    def running(self) -> bool:
        """True while this server's socket is bound and answering."""
        return self._sock is not None and self._thread is not None and self._thread.is_alive()

    @property
    def standing_by(self) -> bool:
        """True while another process answers for this state dir and this one waits to take over when it ends."""
        return self._sock is None and self._thread is not None and self._thread.is_alive()

    def start(self, *, standby: bool = False) -> bool:
        """Bind and start answering; True when bound. False (logged) when the folder or an existing socket file
        belongs to another user, or another live server already answers here — then, with ``standby``, a thread
        checks every :data:`STANDBY_S` seconds and takes over once that process ends. A stale socket file of a
        dead process is removed first. OSError for other failures to bind."""
        if self._thread is not None and self._thread.is_alive():
            return self.running
        self._stop.clear()
        got = self._bind()
        if got == "bound" or (got == "live" and standby):
            self._thread = threading.Thread(target=self._loop, args=(got == "bound",), name="reme-local-server",
                                            daemon=True)
            self._thread.start()
        return got == "bound"

    def _bind(self) -> str:
        """``"bound"`` (``self._sock`` listens at :attr:`path`), ``"live"`` (another process answers there) or
        ``"refused"`` (not this user's folder or file)."""
        st = os.stat(self.state_dir)
        if st.st_uid != os.getuid():
            log.warning("local job socket not started: %s belongs to another user", self.state_dir)
            return "refused"
        if st.st_mode & 0o077:  # the socket's folder is the user's only (the index it serves is private too)
            os.chmod(self.state_dir, stat.S_IMODE(st.st_mode) & 0o700)
        found = self._clear_stale()
        if found != "clear":
            return found
        tmp = self.path.with_name(f".{SOCKET_NAME}.{os.getpid()}.{threading.get_ident()}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        fd = None
        try:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            addr, fd = _address(tmp)
            sock.bind(addr)
            os.chmod(tmp, 0o600)
            sock.listen(16)
            try:
                os.link(tmp, self.path)  # atomic: of two servers starting at once, one wins, none replaced
            except FileExistsError:
                log.info("local job socket: another process started serving %s meanwhile", self.state_dir)
                sock.close()
                return "live"
            finally:
                os.unlink(tmp)
        except BaseException:
            sock.close()
            raise
        finally:
            if fd is not None:
                os.close(fd)
        lst = os.lstat(self.path)
        self._inode = _file_id(lst)
        sock.settimeout(0.5)  # the accept loop checks for close twice a second
        self._sock = sock
        return "bound"

    def _clear_stale(self) -> str:
        """Remove a socket file no process listens on: ``"clear"`` then (or when there was none), ``"live"``
        when a process answers there, ``"refused"`` when the file is not this user's socket."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return "clear"
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
            log.warning("local job socket not started: %s exists and is not this user's socket", self.path)
            return "refused"
        fd = None
        try:
            addr, fd = _address(self.path)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(0.5)
                probe.connect(addr)
            log.info("local job socket: another process already serves %s", self.state_dir)
            return "live"
        except (ConnectionRefusedError, FileNotFoundError):
            pass  # stale: its process is gone
        except OSError as exc:
            if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                log.warning("local job socket: probing %s: %s", self.path, exc)
                return "live"  # undecided: leave it, look again later
        finally:
            if fd is not None:
                os.close(fd)
        try:
            os.unlink(self.path)
            log.info("local job socket: removed a stale socket file left by a process that ended")
        except FileNotFoundError:
            pass
        return "clear"

    def _loop(self, bound: bool) -> None:
        """The server thread: answer while the socket file is ours; otherwise (standing by) try to bind every
        :data:`STANDBY_S` seconds."""
        while not self._stop.is_set():
            if not bound:
                if self._stop.wait(STANDBY_S):
                    return
                try:
                    got = self._bind()
                except OSError as exc:
                    log.debug("local job socket: standby bind: %s", exc)
                    continue
                if got == "refused":
                    return
                if got != "bound":
                    continue
                log.info("local job socket: took over answering for %s", self.state_dir)
            self._serve()
            bound = False

    def close(self, wait: float = 2.0) -> None:
        """Stop listening, remove the socket file if it is still ours, and wait up to ``wait`` seconds for
        requests in progress (their threads are daemons: a longer one is abandoned)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
            self._thread = None
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
        if self._inode is not None:
            try:
                st = os.lstat(self.path)
                if _file_id(st) == self._inode:
                    os.unlink(self.path)
            except OSError:
                pass
            self._inode = None
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with self._active_lock:
                if not self._active:
                    break
            time.sleep(0.02)

    def _serve(self) -> None:
        """Accept until stopped, or until the socket file is no longer this server's (another process replaced
        it after taking this one for stale): then the socket is closed and the caller stands by."""
        sock = self._sock
        checked = time.monotonic()
        while not self._stop.is_set() and sock is not None:
            if time.monotonic() - checked >= STANDBY_S:
                checked = time.monotonic()
                if not self._still_ours():
                    log.info("local job socket: another process answers for %s now", self.state_dir)
                    self._sock, self._inode = None, None
                    sock.close()
                    return
            try:
                conn, _ = sock.accept()
            except TimeoutError:  # socket.timeout
                continue
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.05)  # EMFILE and the like: do not spin
                continue
            threading.Thread(target=self._handle, args=(conn,), name="reme-local-conn", daemon=True).start()

    def _still_ours(self) -> bool:
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return _file_id(st) == self._inode

    def _handle(self, conn: socket.socket) -> None:
        with self._active_lock:
            self._active += 1
        try:
            with conn:
                conn.settimeout(5.0)  # a request line arrives at once; a silent client is dropped
                uid = _peer_uid(conn)
                if uid is not None and uid != os.getuid():
                    return
                conn.sendall(_HELLO_LINE)
                line = _read_line(conn, MAX_REQUEST_BYTES)
                if line is None:
                    return  # the client went away or sent too much
                reply = self._answer(line)
                if "protocol_error" in reply:
                    self.refused += 1
                else:
                    self.answered += 1
                data = json.dumps(reply, ensure_ascii=True, default=str).encode("ascii") + b"\n"
                conn.settimeout(30.0)
                conn.sendall(data)
        except OSError:
            pass  # the client disconnected mid-request: nothing to answer
        except Exception:
            log.warning("local job socket: request failed", exc_info=True)
        finally:
            with self._active_lock:
                self._active -= 1

    def _refuse(self, why: str) -> dict:
        return {"protocol_error": why, "v": PROTOCOL}

    def _answer(self, line: bytes) -> dict:
        try:
            req = json.loads(line)
        except ValueError:
            return self._refuse("not a JSON request line")
        if not isinstance(req, dict):
            return self._refuse("not a JSON object")
        if req.get("v") != PROTOCOL or req.get("version") != __version__:
            return self._refuse(f"protocol {PROTOCOL}, version {__version__}")
        if req.get("identity") != self.identity:
            return self._refuse("different settings")
        job, params = req.get("job"), req.get("params")
        if job not in READ_ONLY_JOBS:
            return self._refuse(f"{job!r} is not a read-only job")
        if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
            return self._refuse("params must be an object")
        if not self._slots.acquire(blocking=False):
            return self._refuse("busy")
        box: list[dict] = []

        def work() -> None:
            try:
                box.append(self._run(job, params))
            except BaseException as exc:  # run_job never raises; a runner bug must not kill the reply
                box.append({"success": False, "job": job, "error": f"internal error: {type(exc).__name__}: {exc}"})
            finally:
                self._slots.release()

        t = threading.Thread(target=work, name="reme-local-job", daemon=True)
        t.start()
        t.join(self.job_timeout)
        if not box:
            return self._refuse(f"timed out after {self.job_timeout:g} s")
        if self._stop.is_set():  # the engine closed under the job: its result may be an error of closing
            return self._refuse("server stopping")
        return box[0]


def start_server(engine: Any, **kw: Any) -> LocalServer | None:
    """A started :class:`LocalServer` for ``engine`` (running the job table's runner on it, imported at the first
    request when not loaded yet) — answering, or standing by while another process answers for the state dir (it
    takes over when that one ends) — or None when the folder is not this user's (see :meth:`LocalServer.start`)
    or Unix sockets are missing. ``kw``: ``job_timeout``, ``max_concurrent``. Never raises for a socket that
    cannot be bound: logs it."""
    if not SUPPORTED:
        return None
    srv = LocalServer(engine.state_dir, lambda name, raw: _run_job(engine, name, raw),
                      settings_identity(engine.settings), **kw)
    try:
        srv.start(standby=True)
        return srv if srv.running or srv.standing_by else None
    except OSError as exc:
        log.warning("local job socket not started: %s", exc)
        return None

"""The engine's user-facing error, below every module that raises it (pipelines, file jobs, the façade).

Pipelines import :class:`EngineError` from here, never from :mod:`reme_engine.engine` (that would point upward
and close an import cycle through the façade). ``reme_engine.engine.EngineError`` is this same class.
"""

from __future__ import annotations


class EngineError(Exception):
    """A job failed for a reason the user can act on (bad path, conflict, missing file). Message is user-facing."""


class WritePending(EngineError):
    """A write that could not happen now but is kept and retried (a capture card another program keeps writing):
    nothing is lost, so front ends show it as saved-with-a-note, not as a failure. The message says where the
    words are and when they will land."""


class SavedWithWarning(WritePending):
    """The write happened (the words are on disk), but something after it did not: the change journal, a catalog
    or the index could not be written (a full disk). Front ends show it as saved, with the message as a warning —
    never as "not saved", which would make the person type it again. ``paths``: the files written."""

    def __init__(self, message: str, paths: list[str]) -> None:
        super().__init__(message)
        self.paths = list(paths)


class BadArgument(EngineError):
    """A parameter value the job itself found out of range (``end_line`` before ``start_line``, ``max_chars`` < 1):
    bad usage, so the CLI exits 2 as for a malformed parameter, not 1 as for a failed job."""


#: errno → the one-line reason shown for a failed write (the rest of an OSError is noise to the user).
_OS_REASONS = {
    "ENAMETOOLONG": "file name too long (at most 255 bytes per folder or file name)",
    "ENOSPC": "no space left on the disk",
    "EDQUOT": "disk quota exceeded",
    "EACCES": "permission denied",
    "EPERM": "operation not permitted",
    "EROFS": "the vault is on a read-only file system",
    "EISDIR": "is a folder",
    "ENOTDIR": "a part of the path is a file, not a folder",
    "EEXIST": "already exists",
    "ENOENT": "no such file or folder",
    "EBUSY": "the file is busy",
    "EIO": "input/output error",
    "EFBIG": "file too large (the file size limit was reached)",
}


def os_error_message(exc: OSError, rel: str, action: str = "write") -> str:
    """One line for an OSError of a file job: ``cannot <action> <rel>: <reason>``. ``rel`` is the vault-relative
    path (shortened to 80 characters; a too-long name would flood the line); the reason comes from the errno
    (``file name too long``, ``no space left on the disk``, ``permission denied``, ``read-only file system``…),
    else the OS's own short text. Never raises."""
    import errno as _errno

    name = _errno.errorcode.get(exc.errno or -1, "")
    reason = _OS_REASONS.get(name) or (exc.strerror or type(exc).__name__).lower()
    shown = rel if len(rel) <= 80 else rel[:60] + "…" + rel[-16:]
    return f"cannot {action} {shown}: {reason}"

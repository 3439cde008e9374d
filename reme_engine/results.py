"""The façade's result types: dataclasses for file jobs, TypedDicts where the result has always been a dict.

Every type here is plain data (no engine import), so the TUI, ``jobs.py`` and the MCP tools read results without
reaching into engine internals. :func:`result_to_dict` is how a job turns any of them into JSON; a TypedDict is a
dict at run time, so ``reme-tui job`` prints exactly what it printed before these types existed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

#: Lines a single ``read`` returns at most.
MAX_READ_LINES = 5000
#: Characters one read returns at most (whole lines while they fit; a longer first line is cut): a 5 MB one-line
#: note must not become a 5 MB tool result or JSON line. Read on from ``end_line + 1`` (or the cut line's rest
#: is not reachable by line range: open the file itself).
MAX_READ_CHARS = 200_000
#: Files health_check and the refresh summary list per kind of problem (the counts are always complete).
HEALTH_FIRST_N = 20


@dataclass
class ReadResult:
    """Lines ``start_line``..``end_line`` (1-based, inclusive) of ``path`` out of ``total_lines``; ``sha`` is the
    whole file's content hash (pass it back as ``expected_sha``); ``truncated`` when MAX_READ_LINES or
    MAX_READ_CHARS cut it; ``line_cut`` when the last line returned is itself cut (a line over MAX_READ_CHARS)."""

    path: str
    start_line: int
    end_line: int
    total_lines: int
    text: str
    sha: str
    truncated: bool
    line_cut: bool = False


@dataclass
class WriteResult:
    """A write or edit: ``created`` when the file did not exist, ``bytes`` of UTF-8 text written; ``indexed``
    False when the index left the file out, and then ``not_indexed`` is the index's one-line reason (e.g.
    ``too large (9,000 bytes > limit 8,000)``; None when indexed)."""

    path: str
    created: bool
    sha: str
    bytes: int
    indexed: bool = True
    not_indexed: str | None = None


@dataclass
class DeleteResult:
    """A delete: the notes still linking to ``path`` (now dangling), as neighbour dicts."""

    path: str
    surviving_inlinks: list[dict]


@dataclass
class MoveResult:
    """A move: the linking notes rewritten, how many links, and the notes left as they were (``conflicts``)."""

    src: str
    dst: str
    rewritten_files: list[str]
    rewritten_links: int
    conflicts: list[str] = field(default_factory=list)


@dataclass
class StatResult:
    """Metadata of one path: file system (``size`` bytes, ``mtime`` epoch seconds) and index state."""

    path: str
    exists: bool
    is_dir: bool
    size: int | None
    mtime: float | None
    indexed: bool
    chunks: int
    name: str | None = None
    description: str | None = None
    sha: str | None = None
    warning: str | None = None
    skipped_reason: str | None = None
    #: links of this note that several files match: ``{line, target, resolved, candidates}`` (chosen first)
    ambiguous_links: list[dict] = field(default_factory=list)
    #: a regular file without any write permission bit: the app's writes refuse it (``vault.io.atomic_write``)
    read_only: bool = False


@dataclass(frozen=True)
class NoteTitle:
    """One indexed Markdown note as a quick switcher lists it: ``title`` is the frontmatter name/title or the
    file stem; ``aliases`` the frontmatter aliases; ``mtime`` seconds since the epoch."""

    path: str
    title: str
    aliases: tuple[str, ...]
    mtime: float


class ListEntry(TypedDict, total=False):
    """One folder entry; ``size`` bytes and ``mtime`` epoch seconds are None for a link leaving the vault."""

    path: str
    is_dir: bool
    size: int | None
    mtime: float | None
    outside_vault: bool


class ListResult(TypedDict):
    """A folder listing: the folder's vault-relative ``path`` ("" = root), its entries, and whether ``limit`` cut
    them."""

    path: str
    entries: list[ListEntry]
    truncated: bool


class FrontmatterRead(TypedDict):
    """A note's parsed frontmatter; ``warning`` names an invalid block (its true file line), ``has_block`` whether
    the note has one at all."""

    path: str
    frontmatter: dict[str, Any]
    warning: str | None
    has_block: bool


class FrontmatterUpdate(TypedDict):
    """The note written and its frontmatter as it now parses."""

    path: str
    frontmatter: dict[str, Any]


class DreamLog(TypedDict, total=False):
    """Either ``runs`` (recent runs, newest first) or one ``run`` with its ``changes``."""

    runs: list[dict]
    run: dict
    changes: list[dict]


class ProblemList(TypedDict):
    """How many problems of one kind (always complete) and the first few, by path."""

    count: int
    first: list[dict]


class FileProblems(TypedDict):
    """Per-file problems: frontmatter warnings ``{path, warning}`` and ambiguous links ``{source, line, target,
    resolved, candidates}``."""

    file_warnings: ProblemList
    ambiguous_links: ProblemList


class EngineStatus(TypedDict):
    """Index figures for the status line (see :meth:`reme_engine.engine.Engine.status`); the store's counts
    (``files``, ``chunks``, ``links`` …) are merged in as further keys."""

    vault: str
    state_dir: str
    embedder: str | None
    vectors_loaded: bool
    vectors: int | None
    llm_configured: bool
    tokenizer: str
    daily_dir: str
    daily_dir_detected: bool
    last_indexed: str | None
    repair_notice: str | None


class HealthReport(TypedDict, total=False):
    """``ok`` False while something is wrong and could not be repaired; ``checks`` one line per component."""

    ok: bool
    version: str
    checks: dict[str, str]
    index: dict[str, Any]
    skipped: list[dict]
    file_warnings: ProblemList
    ambiguous_links: ProblemList


def result_to_dict(obj: Any) -> Any:
    """Dataclasses (and objects with ``to_dict``) to plain JSON-able structures; lists element-wise."""
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    if isinstance(obj, list):
        return [result_to_dict(x) for x in obj]
    return obj

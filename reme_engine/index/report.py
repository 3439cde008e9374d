"""What a sync or a vector pass reports (:class:`IndexReport`) and the progress callback type, below every index step
so the steps and the indexer import them without an import cycle. Re-exported by :mod:`reme_engine.index.indexer`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

#: Progress callback: ``(stage, done, total, detail)``; stage is "scan", "index", "links" or "embed".
Progress = Callable[[str, int, int, str], None]


@dataclass
class IndexReport:
    """What a sync did. Counts are files unless named otherwise; ``skipped`` lists ``{path, reason}``."""

    scanned: int = 0
    added: int = 0
    modified: int = 0
    removed: int = 0
    renamed: int = 0
    unchanged: int = 0
    skipped: list[dict] = field(default_factory=list)
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_total: int = 0
    links_total: int = 0
    embedded: int = 0
    embed_cached: int = 0
    embed_error: str | None = None
    #: the vector pass was skipped: another process holds the vault's embed lock (one line), or None
    embed_busy: str | None = None
    #: a first index's database was compacted at its end (FTS5 optimize + VACUUM, :meth:`Store.compact`)
    compacted: bool = False
    seconds_keyword: float = 0.0
    seconds_vector: float = 0.0
    changed_paths: list[str] = field(default_factory=list)
    removed_paths: list[str] = field(default_factory=list)
    #: what this sync repaired first, one user-facing line (interrupted sync, corrupt or deleted index), or None
    repaired: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

"""The narrow, typed view of an open vault that pipelines and the engine's job modules work against.

Pipelines (auto_memory, auto_resource, auto_dream, proactive refresh, chat retrieval) and the file-job modules
(:mod:`reme_engine.vault.files`, :mod:`reme_engine.vault.move`) take a :class:`VaultContext`, not the
:class:`~reme_engine.engine.Engine`: they see what they use and nothing imports the façade from below it.
``Engine`` satisfies the Protocol structurally; a test double needs only these members.

Only type names are imported here (under ``TYPE_CHECKING``), so this module sits below everything and costs no
import time.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # type names only; never executed, so no import edge at run time
    from .config import Settings
    from .index.embedder import Embedder
    from .index.indexer import Indexer, IndexReport
    from .index.store import Store
    from .memory.journal import ChangeJournal


@runtime_checkable
class VaultContext(Protocol):
    """What a pipeline may use of an open vault.

    - ``vault``: the vault's absolute, resolved root; ``state_dir``: its derived-state folder;
      ``settings``: the run's :class:`~reme_engine.config.Settings` (layers, limits, language, timezone).
    - ``store``: the index (catalog checkpoints, file rows); ``indexer``: link resolution
      (``build_resolver``); ``embedder``: the active embedder or None.
    - ``write_lock``: the in-process lock every vault mutation and index write holds (re-entrant).
    - ``journal``: the change journal every pipeline write goes through.
    - ``watcher``: the running vault watcher or None (``suppress``/``expect_write`` for the app's own writes).
    """

    vault: Path
    state_dir: Path
    settings: Settings
    store: Store
    indexer: Indexer
    embedder: Embedder | None
    write_lock: threading.RLock
    watcher: Any

    @property
    def journal(self) -> ChangeJournal: ...

    def index_paths(self, paths: list[str], *, vectors: bool = True) -> IndexReport:
        """Re-index just ``paths`` (vault-relative) after a write."""
        ...

    def daily_reindex(self, date: str = "", insert_markers: bool = False) -> Any:
        """Regenerate the day page index of ``date`` (YYYY-MM-DD)."""
        ...

    def search(self, query: str, *, limit: int = 10, mode: str = "hybrid", filters: Any = None,
               neighbors: bool = True) -> Any:
        """Search the vault (see :meth:`reme_engine.engine.Engine.search`)."""
        ...

    def traverse(self, path: str, depth: int = 1, direction: str = "both", max_nodes: int = 200) -> Any:
        """Walk the link graph from ``path``."""
        ...

    def read(self, path: str, start_line: int = 1, end_line: int | None = None) -> Any:
        """Lines of a vault file (see :meth:`reme_engine.engine.Engine.read`)."""
        ...

"""How the façade runs an LLM pipeline: the client it gets (built lazily where importing the SDK costs ~1 s), the
cross-process writer lock it holds (ARCHITECTURE §7.2; a held lock is a one-line EngineError, never a wait), and the
pipeline's own entry point, called with the vault context. :class:`reme_engine.engine.Engine` delegates here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .errors import EngineError

if TYPE_CHECKING:  # the façade passes itself; the name is for annotations only
    from .dream.models import DreamReport
    from .engine import Engine
    from .memory.auto_memory import AutoMemoryReport
    from .memory.auto_resource import AutoResourceReport
    from .proactive.refresh import ProactiveRefreshReport


def run_locked(engine: Engine, purpose: str, fn: Callable[[], Any]) -> Any:
    """``fn()`` under the vault's writer lock; EngineError ``<purpose> not run: … writer lock held …`` when
    another run (this process or another) holds it."""
    from .lock import LockHeld

    lock = engine.writer_lock(purpose)
    if not lock.acquire(blocking=False):
        raise EngineError(f"{purpose} not run: {LockHeld(lock.holder())}")
    try:
        return fn()
    finally:
        lock.release()


def auto_dream(engine: Engine, date: str, hint: str, llm: Any, scan_days: int) -> DreamReport:
    """See :meth:`reme_engine.engine.Engine.auto_dream` (``date`` already checked)."""
    from .dream.pipeline import run_auto_dream
    from .llm.client import LLMNotConfigured

    if llm is None:
        if not engine.settings.llm.configured:
            raise LLMNotConfigured("auto_dream")
        llm = lambda: engine.llm_client("auto_dream")  # noqa: E731 - a factory: built only when something changed
    if scan_days < 1:
        raise EngineError("scan_days must be >= 1")
    return run_locked(engine, "auto_dream", lambda: run_auto_dream(engine, date=date, hint=hint, llm=llm,
                                                                   scan_days=scan_days))


def auto_memory(engine: Engine, session_id: str, llm: Any) -> AutoMemoryReport:
    """See :meth:`reme_engine.engine.Engine.auto_memory`."""
    from .memory.auto_memory import run_auto_memory

    llm = llm or engine.llm_client("auto_memory")
    return run_locked(engine, "auto_memory", lambda: run_auto_memory(engine, session_id, llm=llm))


def auto_resource(engine: Engine, llm: Any) -> AutoResourceReport:
    """See :meth:`reme_engine.engine.Engine.auto_resource`."""
    from .memory.auto_resource import run_auto_resource

    llm = llm or engine.llm_client("auto_resource")
    return run_locked(engine, "auto_resource", lambda: run_auto_resource(engine, llm=llm))


def proactive_refresh(engine: Engine, date: str, llm: Any, use_llm: bool,
                      carry_forward: bool) -> ProactiveRefreshReport:
    """See :meth:`reme_engine.engine.Engine.proactive_refresh` (``date`` already checked); without a configured
    LLM the keyword fallback runs."""
    from .llm.client import LLMNotConfigured
    from .proactive.refresh import run_proactive_refresh

    if llm is None and use_llm:
        try:
            llm = engine.llm_client("proactive_refresh")
        except LLMNotConfigured:
            llm = None
    return run_locked(engine, "proactive_refresh", lambda: run_proactive_refresh(engine, date=date, llm=llm,
                                                                                  carry_forward=carry_forward))

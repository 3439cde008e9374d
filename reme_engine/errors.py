"""The engine's user-facing error, below every module that raises it (pipelines, file jobs, the façade).

Pipelines import :class:`EngineError` from here, never from :mod:`reme_engine.engine` (that would point upward
and close an import cycle through the façade). ``reme_engine.engine.EngineError`` is this same class.
"""

from __future__ import annotations


class EngineError(Exception):
    """A job failed for a reason the user can act on (bad path, conflict, missing file). Message is user-facing."""

"""reme_engine: the embedded engine of reme-tui (index, search, vault IO, memory pipelines).

This package never imports Textual; the TUI and the CLI reach it through :class:`reme_engine.engine.Engine`.
"""

__version__ = "0.1.0"

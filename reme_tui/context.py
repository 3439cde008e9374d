"""What the main screen's panes share: the engine façade, the settings, and the "vault changed" signal.

Panes load their own data: a pane starts a Textual thread worker that calls a pure loader of ``loaders.py``
with :attr:`PaneContext.engine` and posts the result to itself as a message (ARCHITECTURE §7.1). They subscribe
to :attr:`PaneContext.vault_changed` to reload what they show when the index saw files change; the screen
publishes it, so no one hand-writes a fan-out to every pane.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.signal import Signal


@dataclass
class VaultChange:
    """Payload of the ``vault_changed`` signal: ``paths`` (vault-relative) the index saw change; ``report``: the
    engine's ``IndexReport`` (``added``/``removed``/``renamed`` counts, ``changed_paths``/``removed_paths``,
    ``skipped``); ``first_pass``: the app's first index pass of this run finished (nothing on screen is stale);
    ``app_write``: the app itself wrote ``paths`` (a capture, a chat card, a day page, an edit; ``report`` None),
    and possibly files it does not name (a day page's card index), so a view compares what it shows with disk."""

    paths: list[str]
    report: Any
    first_pass: bool = False
    app_write: bool = False

    @property
    def names_changed(self) -> bool:
        """Files came or went (the tree and the day list must be re-read)."""
        rep = self.report
        return bool(rep is not None and (rep.added or rep.removed or rep.renamed))


@dataclass
class PaneContext:
    """``engine``: the open ``reme_engine.engine.Engine``; ``settings``: its Settings; ``vault_changed``: the
    signal (payload :class:`VaultChange`); ``keyword_ready``: the first keyword pass finished (links complete)."""

    engine: Any
    settings: Any
    vault_changed: Signal
    keyword_ready: bool = False

    def today(self) -> str:
        """Today's date (YYYY-MM-DD) in the app timezone."""
        return self.settings.today()

    @property
    def daily_dir(self) -> str:
        """The daily layer folder, vault-relative, without slashes."""
        return self.settings.layers.daily_dir.strip("/") or "daily"

"""Type-ahead for dialogs opened by a key: what the user types right after Ctrl+O or ``/`` goes into the dialog.

Textual forwards each key to the widget focused *when the app processes it*. A key that opens a dialog (the quick
switcher, search) is handled later, by the focused widget's own message queue, so on a busy machine the keys typed
right after it reach the main screen as commands (`R` re-indexes) and the dialog opens empty; an Enter then opens
its first row. :class:`TypeAhead` holds the keys that arrive after such a key until the dialog says it has focus
(:meth:`release`), then posts them again in order, so they reach the dialog's input. If no dialog takes them
within :data:`HOLD_S` seconds (it was already open, or the action was refused) they are released as they are.
"""

from __future__ import annotations

import time

from textual import events

#: Actions whose key opens a dialog that calls :meth:`TypeAhead.release` once its input has focus.
DIALOG_ACTIONS = frozenset({"quick_switch", "search"})
#: Longest hold (seconds): past it the held keys go where they would have gone.
HOLD_S = 2.0


class TypeAhead:
    """Key hold for one app. ``app``: the Textual App whose :meth:`~textual.app.App.on_event` calls :meth:`hold`."""

    def __init__(self, app) -> None:
        self.app = app
        self.until: float | None = None  # monotonic deadline while holding
        self.keys: list[events.Key] = []

    def hold(self, event: events.Event) -> bool:
        """Called for every event the app gets, before Textual dispatches it. True: the key was held (the caller
        must not dispatch it now)."""
        if (not isinstance(event, events.Key) or event.is_forwarded  # a key bubbling back up to the app
                or getattr(event, "_reme_replayed", False)):
            return False
        if self.until is not None:
            self.keys.append(events.Key(event.key, event.character))
            if time.monotonic() >= self.until:
                self.release()  # nobody took them: they go on as typed, this key after them
            return True
        if self._opens_dialog(event.key):
            self.until = time.monotonic() + HOLD_S
        return False

    def release(self) -> None:
        """The dialog has its input focused (or the hold is over): post the held keys again, in order."""
        self.until = None
        self._flush()

    def _flush(self) -> None:
        keys, self.keys = self.keys, []
        for k in keys:
            k._reme_replayed = True  # let through once: it was held already
            self.app.post_message(k)

    def _opens_dialog(self, key: str) -> bool:
        try:
            bound = self.app.active_bindings.get(key)
        except Exception:  # no screen yet
            return False
        return bound is not None and bound.enabled and bound.binding.action.split("(", 1)[0] in DIALOG_ACTIONS

"""The base of every modal of the app: a dialog that can be dismissed once, and only while it is on top.

Textual's ``Screen.dismiss`` pops whatever screen is on top. Two quick Enter presses post two ``Submitted``
messages to the dialog; the first dismisses it, the second would pop the screen *underneath* (the main screen),
leaving a dead app. :class:`Dialog` makes every later call a no-op.

:class:`StyledOnce`: Textual restyles a screen's whole subtree each time it is pushed (``ScreenResume``'s
``refresh_styles``), although mounting styled every widget already and a kept screen (search, quick switcher)
was styled at its last push: redone only when the app's CSS changed meanwhile (a theme change).
"""

from __future__ import annotations

from typing import Generic, TypeVar

from textual import events
from textual.await_complete import AwaitComplete
from textual.screen import ModalScreen

R = TypeVar("R")


class StyledOnce:
    """Screen mixin (before ``Screen`` in the bases): a push restyles the screen's widgets only when the app's
    CSS changed since they were styled (Textual counts its CSS changes in ``App._css_update_count``; a theme change
    is one). The restyle of every widget on each ``/`` or Ctrl+O was a fifth of the opening's UI work."""

    _styled_at_css: int | None = None  # the app's CSS change count when this screen's widgets were last styled

    def _css_count(self) -> int | None:
        return getattr(self.app, "_css_update_count", None)

    def _on_mount(self, _event: events.Mount) -> None:
        self._styled_at_css = self._css_count()  # each widget is styled as it mounts

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        # runs before Screen's own handler (Textual calls each class's handler along the MRO, subclasses first)
        count = self._css_count()
        if event.refresh_styles and count is not None and count == self._styled_at_css:
            event.refresh_styles = False
        self._styled_at_css = count


class Dialog(StyledOnce, ModalScreen[R], Generic[R]):
    """A modal screen whose :meth:`dismiss` runs at most once, and only while the dialog is the active screen."""

    _dismissed = False

    @property
    def dismissed(self) -> bool:
        """True once :meth:`dismiss` has taken effect (the result went to the caller)."""
        return self._dismissed

    def dismiss(self, result: R | None = None) -> AwaitComplete:
        """Close the dialog with ``result`` (see ``Screen.dismiss``); ignored after the first call or when the
        dialog is not on top (a key or message queued before the first dismissal arrived late)."""
        if self._dismissed or not self.is_attached or self.app.screen is not self:
            return AwaitComplete()
        self._dismissed = True
        return super().dismiss(result)

    def begin_opening(self, field) -> bool:
        """For a dialog kept and pushed again (the quick switcher, search): on the first resume of each push, focus
        ``field`` (its input) and release the keys typed ahead of it (:mod:`reme_tui.type_ahead`); True then,
        False on a later resume of the same push (the dialog came back from a dialog above it). The dialog sets
        ``_opened = False`` before each push."""
        if getattr(self, "_opened", False):
            return False
        self._opened = True
        field.focus()
        type_ahead = getattr(self.app, "type_ahead", None)
        if type_ahead is not None:  # after the focus: the held keys go to the input
            type_ahead.release()
        return True

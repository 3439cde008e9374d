"""Back/forward history of the notes opened in the note pane (a browser's history, one list and a cursor)."""

from __future__ import annotations

from typing import Iterator

#: One visit: ``(vault-relative path, file line or None)``.
Visit = tuple[str, "int | None"]


class History:
    """Visits in order with a cursor on the one shown. Iterating yields ``(path, line)`` oldest first.

    :meth:`visit` records a new visit (dropping the forward part, as browsers do; a second visit to the note
    already on top only updates its line); :meth:`back`/:meth:`forward` move the cursor and return the visit to
    show, or None at either end.
    """

    def __init__(self) -> None:
        self._visits: list[Visit] = []
        self._pos = -1

    def visit(self, path: str, line: int | None = None) -> None:
        del self._visits[self._pos + 1 :]
        if self._visits and self._visits[-1][0] == path:
            self._visits[-1] = (path, line)
        else:
            self._visits.append((path, line))
        self._pos = len(self._visits) - 1

    def back(self) -> Visit | None:
        if self._pos <= 0:
            return None
        self._pos -= 1
        return self._visits[self._pos]

    def forward(self) -> Visit | None:
        if self._pos >= len(self._visits) - 1:
            return None
        self._pos += 1
        return self._visits[self._pos]

    @property
    def can_back(self) -> bool:
        return self._pos > 0

    @property
    def can_forward(self) -> bool:
        return self._pos < len(self._visits) - 1

    def recent(self) -> list[str]:
        """Paths visited, most recent first, each once."""
        return list(dict.fromkeys(p for p, _line in reversed(self._visits)))

    def __iter__(self) -> Iterator[Visit]:
        return iter(list(self._visits))

    def __len__(self) -> int:
        return len(self._visits)

    def __getitem__(self, i: int) -> Visit:
        return self._visits[i]

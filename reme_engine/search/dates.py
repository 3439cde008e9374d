"""Calendar dates written in a query ("on October 13, 2023", "13 May 2023", "in July 2023", "2023-10-13",
"2023年5月3日") as day or month ranges, for the ranking rule that lifts candidates dated inside them.

Why a lift and not a filter (relative time words are filters, :mod:`.timeq`): a question naming a date is mostly
about what was said or written that day, but not always — "the week before August 3, 2023" is answered by what
was said on August 3 about the week before, and a note may mention a date it is not dated on. Measured on LoCoMo
(bench/RESULTS.md, "Issue 11, session 22 (A)"): 58 of 520 dev questions name a date, and they held 0.021 of the
chats' R@5 loss. A year alone ("in 2023") names no range worth lifting and is ignored, as is a month without a
year ("in June": which June is a guess).
"""

from __future__ import annotations

import calendar
import re
from datetime import date

_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
_MONTHS["sept"] = 9
_MON = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAYN = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
#: (pattern, kind) in the order tried; a span taken by one is not read again by a later, shorter one
_PATTERNS = [
    (re.compile(rf"\b{_MON}\s+{_DAYN},?\s+{_YEAR}\b", re.I), "mdy"),
    (re.compile(rf"\b{_DAYN}\s+(?:of\s+)?{_MON},?\s+{_YEAR}\b", re.I), "dmy"),
    (re.compile(r"\b((?:19|20)\d\d)-(\d{2})-(\d{2})\b"), "ymd"),
    (re.compile(r"((?:19|20)\d\d)\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]"), "ymd"),
    (re.compile(rf"\b{_MON},?\s+{_YEAR}\b", re.I), "my"),
    (re.compile(r"((?:19|20)\d\d)\s*年\s*(\d{1,2})\s*月"), "ym"),
]


def query_dates(query: str) -> list[tuple[str, str]]:
    """``[(first day, last day)]`` (ISO ``YYYY-MM-DD``) of the calendar dates and months written in ``query``, in
    the order found; impossible dates (February 30) are skipped. Pure."""
    return [r for _, r in _found(query)]


def strip_dates(query: str) -> str:
    """``query`` without the dates :func:`query_dates` reads in it (and an ``on``/``in`` right before one), or
    ``query`` unchanged when it has none or is nothing else. Pure."""
    spans = [span for span, _ in _found(query)]
    if not spans:
        return query
    out, pos = [], 0
    for a, b in sorted(spans):
        out.append(_PREP_RE.sub("", query[pos:a]))
        pos = b
    out.append(query[pos:])
    rest = " ".join("".join(out).split())
    return rest or query


_PREP_RE = re.compile(r"\b(?:on|in|of)\s*$", re.I)


def _found(query: str) -> list[tuple[tuple[int, int], tuple[str, str]]]:
    """``[((start, end), (first day, last day))]`` of the dates in ``query``, in order. Pure."""
    out: list[tuple[tuple[int, int], tuple[str, str]]] = []
    taken: list[tuple[int, int]] = []
    for pat, kind in _PATTERNS:
        for m in pat.finditer(query):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            g = m.groups()
            try:
                if kind == "mdy":
                    y, mo, d = int(g[2]), _MONTHS[g[0].lower()], int(g[1])
                elif kind == "dmy":
                    y, mo, d = int(g[2]), _MONTHS[g[1].lower()], int(g[0])
                elif kind == "ymd":
                    y, mo, d = int(g[0]), int(g[1]), int(g[2])
                else:
                    y, mo = (int(g[1]), _MONTHS[g[0].lower()]) if kind == "my" else (int(g[0]), int(g[1]))
                    first = date(y, mo, 1)
                    last = date(y, mo, calendar.monthrange(y, mo)[1])
                    taken.append(m.span())
                    out.append((m.span(), (first.isoformat(), last.isoformat())))
                    continue
                day = date(y, mo, d).isoformat()
            except (ValueError, KeyError):
                continue
            taken.append(m.span())
            out.append((m.span(), (day, day)))
    return sorted(out)

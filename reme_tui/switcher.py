"""The quick switcher's matcher (no Textual here): fuzzy over note titles, aliases and paths, CJK-aware.

A query matches a text when it is a substring of it (best at the start or after a separator) or, failing that,
when its characters occur in order (``光链`` → ``光伏产业链``, ``hyret`` → ``hybrid-retrieval``). Case and width
are folded (``casefold`` + NFKC, so full-width ``ＡＢＣ`` finds ``abc``); whitespace separates terms, and every
term must match the title, an alias or the path. Ties go to recently opened notes, then to newer files.

A query that extends the previous one only re-checks the previous matches, so typing stays well under the
30 ms-per-keystroke budget on a 3,000-note vault (see ``bench/bench_switcher.py``).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from dataclasses import field as _field

#: Characters after which a match counts as the start of a word.
SEPARATORS = frozenset(" /-_.()[]:·、，。・")
#: Weight of a match per field: a title beats an alias beats a path.
FIELD_WEIGHT = {"title": 1.0, "alias": 0.95, "path": 0.8}


def fold(text: str) -> str:
    """``text`` for matching: NFKC (full-width → ASCII) and casefolded."""
    return unicodedata.normalize("NFKC", text).casefold()


def _subsequence(q: str, t: str) -> list[int] | None:
    """Positions in ``t`` of the characters of ``q`` in order (the leftmost greedy match), or None."""
    pos, out = 0, []
    find = t.find
    for ch in q:
        i = find(ch, pos)
        if i < 0:
            return None
        out.append(i)
        pos = i + 1
    return out


def score_text(q: str, t: str) -> tuple[float, list[int]] | None:
    """Score of the folded term ``q`` in the folded text ``t`` (higher is better) and the matched positions, or
    None. Exact 120, prefix 100, after a separator 85, other substring 65, in-order characters 10–45; plus up to
    20 for how much of ``t`` the match covers (a shorter title wins)."""
    i = t.find(q)
    if i >= 0:
        if i == 0:
            base = 120.0 if len(t) == len(q) else 100.0
        elif t[i - 1] in SEPARATORS:
            base = 85.0
        else:
            base = 65.0
        return base + 20.0 * len(q) / len(t), list(range(i, i + len(q)))
    pos = _subsequence(q, t)
    if pos is None:
        return None
    gaps = pos[-1] - pos[0] + 1 - len(q)  # characters skipped inside the match
    starts = sum(1 for p in pos if p == 0 or t[p - 1] in SEPARATORS)  # matched word starts ("hr" in hybrid-retrieval)
    return max(10.0, 45.0 - 2.0 * gaps + 4.0 * starts - pos[0] * 0.5) + 20.0 * len(q) / len(t), pos


@dataclass
class Match:
    """One note matching a query: ``field`` (title / alias / path) of the best term match, ``text`` that field's
    original text, ``positions`` the matched character offsets in ``text``; ``score`` higher is better."""

    note: object  # reme_engine.engine.NoteTitle
    score: float
    field: str = "title"
    text: str = ""
    positions: list[int] = _field(default_factory=list)


class _Entry:
    __slots__ = ("note", "fields", "hay", "order")

    def __init__(self, note) -> None:
        self.note = note
        path = note.path[:-3] if note.path.lower().endswith(".md") else note.path
        fs = [("title", note.title, fold(note.title))]
        fs.extend(("alias", a, fold(a)) for a in note.aliases)
        fs.append(("path", path, fold(path)))
        self.fields = fs
        # every folded field in one string: a term whose characters are not in order here matches no field
        self.hay = "\x00".join(f[2] for f in fs)
        self.order = 0  # position in the note list (newest first)


class NoteIndex:
    """The folded fields of ``notes`` (``NoteTitle``-like: path, title, aliases; newest first), built once per
    note list (the costly part: about 10 ms per 1,000 notes) and shared by the matchers made from it."""

    def __init__(self, notes) -> None:
        self.entries = [_Entry(n) for n in notes]
        self.by_path = {e.note.path: e for e in self.entries}
        self.names: set[str] = set()  # folded titles, aliases and file names: "is there a note called …?"
        for i, e in enumerate(self.entries):
            e.order = i
            for kind, _orig, folded in e.fields:
                self.names.add(folded)  # a path ("race/r6") names its note as well as its file name does
                if kind == "path":
                    self.names.add(folded.rsplit("/", 1)[-1])

    def __len__(self) -> int:
        return len(self.entries)


class NoteMatcher:
    """Match queries against ``notes`` (a :class:`NoteIndex`, or a list of ``NoteTitle``-like objects, newest
    first).

    ``recent``: paths opened lately, most recent first — they list first for an empty query and win ties.
    ``match(query, limit)`` → the best :class:`Match` objects, best first."""

    def __init__(self, notes, recent: list[str] | tuple[str, ...] = ()) -> None:
        self.index = notes if isinstance(notes, NoteIndex) else NoteIndex(notes)
        self.entries = self.index.entries
        # O(recent), not O(notes): a matcher is made on every opening of the switcher
        self._n = max(1, len(self.entries))
        self._rank = {p: i for i, p in enumerate(dict.fromkeys(recent))}
        self._last_query: str | None = None
        self._last_pool: list[_Entry] = []

    def __len__(self) -> int:
        return len(self.entries)

    def boost(self, e: _Entry) -> float:
        """Tie-breaker of entry ``e``: 30 down to 3 for the notes opened lately (most recent highest), else up to 2
        for newer files."""
        r = self._rank.get(e.note.path)
        return max(3.0, 30.0 - r) if r is not None else 2.0 * (1 - e.order / self._n)

    def recent_first(self, limit: int) -> list[Match]:
        """The notes for an empty query: recently opened ones, then the newest files."""
        by_path = self.index.by_path
        picked = [by_path[p] for p in self._rank if p in by_path][:limit]
        seen = {id(e) for e in picked}
        for e in self.entries:  # newest first already
            if len(picked) >= limit:
                break
            if id(e) not in seen:
                picked.append(e)
        return [Match(e.note, self.boost(e), "title", e.note.title, []) for e in picked]

    def _match_entry(self, e: _Entry, terms: list[str]) -> Match | None:
        total = 0.0
        best: tuple[float, str, str, list[int]] | None = None
        for q in terms:
            term_best: tuple[float, str, str, list[int]] | None = None
            for kind, orig, folded in e.fields:
                r = score_text(q, folded)
                if r is None:
                    continue
                s = r[0] * FIELD_WEIGHT[kind]
                if term_best is None or s > term_best[0]:
                    term_best = (s, kind, orig, r[1])
            if term_best is None:
                return None
            total += term_best[0]
            if best is None:
                best = term_best
        assert best is not None
        _s, kind, orig, positions = best
        if len(orig) != len(fold(orig)):  # folding changed the length (rare: ß, ligatures): no highlight
            positions = []
        return Match(e.note, total + self.boost(e), kind, orig, positions)

    def match(self, query: str, limit: int = 50) -> list[Match]:
        """The best ``limit`` notes for ``query`` (empty → :meth:`recent_first`)."""
        q = " ".join(fold(query).split())
        if not q:
            self._last_query, self._last_pool = None, []
            return self.recent_first(limit)
        terms = q.split(" ")
        last = self._last_query
        if last is not None and q.startswith(last):
            # appending characters lengthens the last term or adds a term: it only ever matches a subset
            pool = self._last_pool
        else:
            pool = self.entries
        kept: list[_Entry] = []
        found: list[Match] = []
        for e in pool:
            hay = e.hay
            if any(_subsequence(t, hay) is None for t in terms):  # cheap reject, one string per note
                continue
            m = self._match_entry(e, terms)
            if m is not None:
                kept.append(e)
                found.append(m)
        self._last_query, self._last_pool = q, kept
        found.sort(key=lambda m: -m.score)
        return found[:limit]

    def exact(self, query: str) -> bool:
        """True when some note's title, alias or file name equals ``query`` (folded): no "create" offer then."""
        q = " ".join(fold(query).split()).strip("/")
        return q in self.index.names or (q.endswith(".md") and q[:-3] in self.index.names)

"""Field-aware ranking on fused candidates (pure functions): the title/alias boost and the day-index demotion.

See :func:`adjust`. The link parser is the one of :mod:`reme_engine.markdown.links` (day-index bullets).
"""

from __future__ import annotations

import json
import re

from ..markdown.links import parse_links
from .fusion import FusionConfig

_DAY_PAGE_RE = re.compile(r"(?:^|/)\d{4}-\d{2}-\d{2}\.md$")
_NORM_RE = re.compile(r"[\W_]+", re.UNICODE)
#: the marker of the app's generated day index (reme_engine.vault.daily.INDEX_START; not imported: layering)
_DAY_INDEX_MARK = "reme:day-index:"


def _alias_list(v) -> list[str]:
    if not v or v == "[]":  # most notes: no JSON to parse
        return []
    if isinstance(v, str):
        try:
            v = json.loads(v or "[]")
        except ValueError:
            return []
    return [str(a) for a in v] if isinstance(v, list) else []


_TARGETS_CACHE: dict[str, frozenset[str]] = {}


def _day_targets(text: str) -> frozenset[str]:
    """Wikilink targets of a day-index chunk (``path.md`` for paths, bare names as written), remembered by text:
    day pages are candidates of many queries and parsing their links was ~0.5 ms of each."""
    got = _TARGETS_CACHE.get(text)
    if got is None:
        got = frozenset(t + ".md" if "/" in t else t
                        for t in (lk.target.strip() for lk in parse_links(text) if lk.kind == "wikilink") if t)
        if len(_TARGETS_CACHE) > 4096:
            _TARGETS_CACHE.clear()
        _TARGETS_CACHE[text] = got
    return got


_NAMES_CACHE: dict[tuple, tuple[frozenset[str], str]] = {}


def _names_of(path: str, name: str, aliases) -> tuple[frozenset[str], str]:
    """``(names, joined)``: the normalised file stem, name and aliases of a note, and the same joined by NUL (a
    normalised query, which has no NUL, is inside one of the names exactly when it is inside ``joined``: one
    C-level scan). Remembered by ``(path, name, aliases)``: the same notes are candidates of many queries, and
    normalising ~100 candidates' names was ~0.5 ms of each search."""
    key = (path, name, aliases if isinstance(aliases, str) else repr(aliases))
    got = _NAMES_CACHE.get(key)
    if got is None:
        stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        names = frozenset(n for n in (normalise_name(x) for x in {stem, name, *_alias_list(aliases)} if x) if n)
        got = (names, "\0".join(names))
        if len(_NAMES_CACHE) > 20_000:
            _NAMES_CACHE.clear()
        _NAMES_CACHE[key] = got
    return got


def normalise_name(text: str) -> str:
    """Case-folded ``text`` without punctuation, emoji or spaces (for title/alias equality). Pure."""
    return _NORM_RE.sub("", text.casefold())


def is_day_index_chunk(path: str, text: str) -> bool:
    """True for a chunk of a day page (``…/YYYY-MM-DD.md``) that is mostly a generated card list: it holds the
    app's day-index marker, or at least half of its non-blank lines are ``- [[…]]`` bullets. Pure."""
    if not _DAY_PAGE_RE.search(path):
        return False
    if _DAY_INDEX_MARK in text:
        return True
    got = _LISTS_CACHE.get(text)
    if got is None:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        got = bool(lines) and sum(ln.startswith(("- [[", "* [[")) for ln in lines) * 2 >= len(lines)
        if len(_LISTS_CACHE) > 4096:
            _LISTS_CACHE.clear()
        _LISTS_CACHE[text] = got
    return got


#: text → "mostly ``- [[…]]`` bullets" (:func:`is_day_index_chunk`): day pages are candidates of many queries
_LISTS_CACHE: dict[str, bool] = {}


def exact_names_first(fused: dict[int, dict]) -> None:
    """After every scoring stage: a chunk :func:`adjust` marked ``name_match="exact"`` scores above every chunk
    marked ``"partial"`` (少数派 before 少数派创作手册, as Obsidian's switcher orders them), however much more body
    text the longer note matched. Mutates ``fused`` (``score``, ``field_boost``). Pure apart from that."""
    floor = max((d["score"] for d in fused.values() if d.get("name_match") == "partial"), default=None)
    if floor is None:
        return
    for d in fused.values():
        if d.get("name_match") == "exact" and d["score"] <= floor:
            lift = floor * 1.0001 - d["score"]
            d["score"] += lift
            d["field_boost"] = d.get("field_boost", 0.0) + lift


def adjust(fused: dict[int, dict], rows: dict[int, tuple], query: str, cfg: FusionConfig) -> None:
    """Field-aware ranking on fused candidates. ``rows``: {id: (path, name, aliases (list or JSON text), text or
    None)}. Mutates ``fused`` (``score``; ``field_boost`` and ``demoted`` in the details). Pure apart from that.

    1. The best chunk of a note whose name, file stem or an alias equals the query (after
       :func:`normalise_name`) gains ``title_boost × best score``; half when one of them contains the query;
       Such chunks are marked ``name_match`` (``"exact"`` / ``"partial"``) for :func:`exact_names_first`.
       Only keyword hits are checked: name, stem and aliases are indexed as the note's title field, so a note
       named like the query is always one.
    2. A generated day-index chunk (:func:`is_day_index_chunk`) that lists a note also among the candidates
       scores just below that note's best chunk: the page is a table of contents, the card is the answer. It is
       also marked ``collapsed`` (the searcher drops it when ``collapse_day_index``: the card it points to is
       listed above it, so the page would only repeat that card's summary in a slot of its own).
    """
    if not fused:
        return
    top = max(d["score"] for d in fused.values())  # the best hit's score (rank_key orders by score first)
    if cfg.title_boost > 0:
        q = normalise_name(query)
        if q:
            # per note, its best keyword hit in rank_key order (the one the boost goes to); no sort of them all
            inf = float("inf")
            best: dict[str, tuple] = {}
            for cid, d in fused.items():
                kr = d.get("keyword_rank")
                if kr is None:
                    continue
                r = rows.get(cid)
                if r is None:
                    continue
                key = (-d["score"], kr, d.get("vector_rank", inf), cid)
                b = best.get(r[0])
                if b is None or key < b[0]:
                    best[r[0]] = (key, cid, r)
            partial_ok = len(q) >= 2
            for _, cid, r in best.values():
                names, joined = _names_of(r[0], r[1], r[2])
                if q in names:
                    gain = cfg.title_boost
                    fused[cid]["name_match"] = "exact"
                elif partial_ok and q in joined:
                    gain = cfg.title_boost / 2
                    fused[cid]["name_match"] = "partial"
                else:
                    continue
                fused[cid]["score"] += gain * top
                fused[cid]["field_boost"] = gain * top
    if cfg.demote_day_index:
        days = [(cid, r) for cid, r in ((cid, rows.get(cid)) for cid in fused)
                if r is not None and r[3] and is_day_index_chunk(r[0], r[3])]
        if not days:  # most searches: no day page among the candidates (rows hold text only for day pages)
            return
        best_of: dict[str, float] = {}  # by path, and by file stem for basename links
        for cid, d in fused.items():
            r = rows.get(cid)
            if r is not None:
                stem = r[0].rsplit("/", 1)[-1].rsplit(".", 1)[0]
                for key in (r[0], stem):
                    best_of[key] = max(best_of.get(key, 0.0), d["score"])
        for cid, r in days:
            d = fused[cid]
            own = r[0].rsplit("/", 1)[-1].rsplit(".", 1)[0]
            targets = _day_targets(r[3])
            listed = [best_of[t] for t in targets if t in best_of and t not in (r[0], own)]
            if listed:
                d["collapsed"] = True
            if listed and max(listed) <= d["score"]:
                d["score"] = max(listed) * 0.999
                d["demoted"] = True

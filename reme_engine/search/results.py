"""What a search returns and how it is restricted: :class:`SearchFilters`, :class:`Hit`, :class:`SearchResult`.

Plain data, no I/O apart from :meth:`SearchFilters.sql` building a WHERE fragment. Split from ``hybrid.py``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields
from typing import Any, Callable


@dataclass
class SearchFilters:
    """Restrict a search. ``path_prefix`` (folder or path start), ``paths`` (exact), ``date_from``/``date_to``
    (inclusive YYYY-MM-DD, matched against the note's date path segment, or for a chat record's chunk the day of
    its turns), ``frontmatter`` ({key: value}; a list-valued key matches when it contains the value)."""

    path_prefix: str | None = None
    paths: list[str] | None = None
    date_from: str | None = None
    date_to: str | None = None
    frontmatter: dict[str, Any] | None = None

    def empty(self) -> bool:
        return not (self.path_prefix or self.paths or self.date_from or self.date_to or self.frontmatter)

    def sql(self) -> tuple[str, list]:
        """A WHERE fragment over ``files f`` joined with ``chunks c``, and its parameters."""
        conds, params = [], []
        if self.path_prefix:
            conds.append("substr(f.path, 1, ?) = ?")
            params += [len(self.path_prefix), self.path_prefix]
        if self.paths:
            conds.append(f"f.path IN ({','.join('?' * len(self.paths))})")
            params += list(self.paths)
        if self.date_from or self.date_to:
            from .chats import chunk_date_sql

            day = f"COALESCE(f.date, {chunk_date_sql()})"
            if self.date_from:
                conds.append(f"{day} >= ?")
                params.append(self.date_from)
            if self.date_to:
                conds.append(f"{day} <= ?")
                params.append(self.date_to)
        for key, value in (self.frontmatter or {}).items():
            match, mparams = _fm_value_match(value)
            # json_each yields the scalar itself, or each element of a list (object members are not values)
            conds.append(f"EXISTS (SELECT 1 FROM json_each(f.frontmatter, ?) j"
                         f" WHERE typeof(j.key) != 'text' AND ({match}))")
            params += ["$." + json.dumps(str(key), ensure_ascii=False), *mparams]
        return (" AND ".join(conds) or "1"), params


_NUMBER = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$")


def _fm_value_match(value: Any) -> tuple[str, list]:
    """SQL over one ``json_each`` row ``j`` matching a frontmatter filter ``value``, and its parameters.

    Values from the command line are text (``fm.publish=true``) and from JSON typed (``{"publish": true}``), while
    the note's value is as its YAML parsed (YAML 1.2 core: only true/false are booleans, ``yes`` is text). So a
    value matches by its text and, when it reads as one, as a boolean (``true``/``True``) or a number (``5`` is
    ``5``, ``5.0`` and ``"5"``); JSON null matches a key set to null. Dates are ISO text, matched as text."""
    if value is None:
        return "j.type = 'null'", []
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        text = repr(value) if isinstance(value, float) else str(value)
    else:
        text = str(value)
    conds, params = ["(j.type = 'text' AND j.atom = ?)"], [text]
    word = text.strip().lower()
    if word in ("true", "false"):
        conds.append("j.type = ?")
        params.append(word)
    elif _NUMBER.match(text.strip()):
        num = float(text)
        if math.isfinite(num):
            conds.append("(j.type IN ('integer', 'real') AND j.atom = ?)")
            params.append(int(num) if num.is_integer() and abs(num) < 2**63 else num)
    return " OR ".join(conds), params


@dataclass
class Hit:
    """One fused result: a chunk of ``path`` covering file lines ``start_line``..``end_line`` (1-based, inclusive).

    ``score`` is the fused score (its scale depends on the fusion method; ``convex``: 0..1 plus any field boost);
    ``keyword_rank``/``vector_rank`` are 1-based ranks in each leg (None when the leg did not retrieve it),
    ``keyword_score`` the BM25 score (higher is better), ``vector_score`` the cosine similarity,
    ``keyword_rrf``/``vector_rrf`` each leg's share of ``score`` (named after the original RRF fusion)."""

    path: str
    start_line: int
    end_line: int
    score: float
    text: str
    headings: list[str]
    name: str
    description: str
    chunk_id: int
    keyword_rank: int | None = None
    keyword_score: float | None = None
    vector_rank: int | None = None
    vector_score: float | None = None
    keyword_rrf: float = 0.0
    vector_rrf: float = 0.0
    #: the chunk has no vector yet (saved, not embedded): ``vector_rrf`` was imputed from its keyword rank
    #: (see :func:`impute_missing_vectors`)
    vector_imputed: bool = False
    #: score added by the field-aware rules (the note's name, file stem or alias is/contains the query) and by the
    #: second ranking stage (:mod:`.rerank`: one line holding the query's terms, neighbouring candidates)
    field_boost: float = 0.0
    #: a generated day-index chunk placed just below a card it lists
    demoted: bool = False
    #: ``vector_score`` is the cosine of the note's title vector (first chunk stands for the note), not the chunk's
    vector_title: bool = False

    def to_dict(self) -> dict:
        """The fields by name, in declaration order (``headings`` copied). Field by field: ``dataclasses.asdict``
        deep-copies every value and cost ~30 µs a hit."""
        d = {name: getattr(self, name) for name in _HIT_FIELDS}
        d["headings"] = list(self.headings)
        return d


_HIT_FIELDS = tuple(f.name for f in fields(Hit))


class _LazyNeighbors:
    """The ``SearchResult.neighbors`` attribute: a dict, or a zero-argument function making it, called on first
    read (then kept). A search makes the hop-2 directory this way so that callers that never read it (the TUI's
    search screen, one-shot callers asking for hits only) do not pay for it: it was ~40 % of a warm keyword
    search."""

    def __set_name__(self, owner, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return None  # the dataclass default, read on the class: None stands for an empty directory
        got = obj.__dict__.get(self.slot)
        if callable(got):
            got = got()
            obj.__dict__[self.slot] = got
        return got

    def __set__(self, obj, value: dict | Callable[[], dict]) -> None:
        obj.__dict__[self.slot] = {} if value is None else value


@dataclass
class SearchResult:
    """Hits best first, the hop-2 neighbour directory per hit file, timings (ms) and what degraded, if anything.

    ``neighbors`` (``{path: {"path", "outlinks", "inlinks", "outlinks_total", "inlinks_total"}}``, see
    :func:`reme_engine.search.graph.neighborhoods`) may be given as a function of no arguments: it is then built
    on first read, from the index as it is at that moment, on the reading thread (each thread has its own store
    connection), and kept."""

    query: str
    mode: str
    hits: list[Hit]
    neighbors: dict[str, dict] = _LazyNeighbors()
    took_ms: float = 0.0
    keyword_ms: float = 0.0
    vector_ms: float = 0.0
    degraded: str | None = None
    #: candidates hidden by the relative floor ("n weaker matches hidden"; search again with
    #: ``fusion=replace(cfg, relative_floor=0)`` to show them)
    hidden: int = 0
    #: the date range read from the query's time words (:mod:`.timeq`), applied as a date filter: ``{"date_from",
    #: "date_to", "phrase"}``; ``listing`` when nothing else was left to rank by (hits = what is dated in the range,
    #: newest day first)
    time_range: dict | None = None

    def to_dict(self) -> dict:
        return {
            "query": self.query, "mode": self.mode, "hits": [h.to_dict() for h in self.hits],
            "neighbors": self.neighbors, "took_ms": round(self.took_ms, 3), "keyword_ms": round(self.keyword_ms, 3),
            "vector_ms": round(self.vector_ms, 3), "degraded": self.degraded, "hidden": self.hidden,
            "time_range": self.time_range,
        }


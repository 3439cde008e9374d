"""Second-stage reranking of the fused candidates from their text (no model): see :func:`rerank`.

The first stage (``fuse`` + :func:`reme_engine.search.fields.adjust`) scores whole chunks: BM25 over a 2,000-byte
card of ~10 turns cannot tell a turn holding every query term from ten turns holding one each, and 98 % of the
LoCoMo evidence is already among the candidates (bench/RESULTS.md, "Issue 11, fourth round"). This stage re-reads
the text of the best ``rerank_depth`` candidates and adds, as shares of the best fused score:

* **turn coverage** (``rerank_coverage``): the IDF-weighted share of the query's terms found in the chunk's best
  single line (a turn of a chat record or a daily card, a paragraph of a note) — a proximity signal;
* **neighbours** (``rerank_neighbour``): the best fused score of the chunks just before/after it in the same file
  that are candidates too (a conversation's answer often spans adjacent windows);

and, last, **spread** (``rerank_spread``): the candidates are re-ordered greedily, each further chunk of a file
already placed counting ``(1 − spread)`` times its score per chunk placed (MMR-style diversity across notes and
sessions, for questions whose evidence spans several of them).

Pure apart from reading chunk texts through :func:`chunk_texts`; the searcher supplies the tokenizer and the
document frequencies.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections.abc import Callable

from .fields import _day_targets
from .fusion import FusionConfig, bm25_idf, rank_key, ranked_ids
from .linevec import speaker_labels, wants_lines

# The index tokenizer's CJK range (reme_engine.index.tokenizer, RULES_VERSION 3: CJK ideographs, kana, hangul;
# any other letters/digits make Latin runs). Copied, not imported: line_coverage matches tokens by the same runs.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_CJK_RUN_RE = re.compile(rf"[{_CJK}]+")
#: the rest of a Latin/digit run (``[^\W_]`` = ``str.isalnum``, CJK excluded: what :func:`_latin_char` accepts)
_LATIN_RUN_RE = re.compile(rf"[^\W_{_CJK}]*")


def chunk_texts(conn, ids: list[int]) -> dict[int, tuple[int, int, str, str]]:
    """``{chunk id: (file id, ordinal in the file, text, vault-relative path)}`` of the live chunks among ``ids``
    (one query per 500 ids). ``conn``: the index's sqlite3 connection (tables ``chunks``, ``files``)."""
    out: dict[int, tuple[int, int, str, str]] = {}
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        for r in conn.execute("SELECT c.id, c.file_id, c.ord, c.text, f.path FROM chunks c JOIN files f ON f.id ="
                              f" c.file_id WHERE c.id IN ({','.join('?' * len(part))})", part):
            out[r[0]] = (r[1], r[2], r[3], r[4])
    return out


def enabled(cfg: FusionConfig) -> bool:
    """True when ``cfg`` asks for any second-stage signal (and a depth > 1 to apply it to)."""
    return cfg.rerank_depth > 1 and (cfg.rerank_coverage > 0 or cfg.rerank_neighbour > 0 or cfg.rerank_spread > 0
                                     or cfg.rerank_lines > 0 or cfg.rerank_lines_chat > 0)


def _latin_char(c: str) -> bool:
    """True for a character that continues a Latin/digit token run (letters and digits outside the CJK range)."""
    return c.isalnum() and not _CJK_RUN_RE.match(c)


_FOLDED: dict[str, str] = {}


def _folded(text: str) -> str:
    """``text`` NFKC-normalised and lower-cased, remembered by text: the same chunks are candidates of many
    queries, and normalising 30 CJK chunks was ~40 % of the stage's time."""
    got = _FOLDED.get(text)
    if got is None:
        got = (text if text.isascii() or unicodedata.is_normalized("NFKC", text)
               else unicodedata.normalize("NFKC", text)).lower()
        if len(_FOLDED) > 4096:
            _FOLDED.clear()
        _FOLDED[text] = got
    return got


#: English inflection endings a Latin term may differ by in :func:`line_coverage` ("paint" ~ "painting",
#: "camped" ~ "camping", "activities" ~ "activity"): a question and its answer rarely inflect a word alike.
_SUFFIXES = ("ings", "ing", "ies", "ied", "ers", "er", "ed", "es", "s")
#: Inflections count in :func:`line_coverage` (measured on LoCoMo as daily cards, dev split: R@5 / R@10 0.828 /
#: 0.887 → 0.835 / 0.896; chat records 0.801 / 0.864 → 0.801 / 0.867; bench/RESULTS.md, "Issue 11, sixth round").
STEM = True
# Levers measured in the same round (0 / False = off; bench/bench_quality.py --levers):
#: a query word absent from the index still counts (at the IDF of a term in no chunk) when it has a stem
ABSENT_STEMMED = False
#: chat-record windows gain this share of an adjacent candidate window's score (the neighbour signal, chat records
#: only: two neighbouring windows of one record that both match are one exchange about the question). Off until
#: session 22 (no gain held out with the old vector leg); with the speaker names out of the vector query and the
#: date rule, on LoCoMo as chat records (dev | held-out R@5 / R@10): off 0.832 / 0.899 | 0.866 / 0.910, 0.05
#: 0.835 / 0.901 | 0.866 / 0.910, **0.1** 0.835 / 0.907 | 0.866 / 0.908, 0.2 0.840 / 0.905 | 0.860 / 0.904, 0.3
#: 0.840 / 0.902 | 0.864 / 0.904 (bench/RESULTS.md, "Issue 11, session 22 (A)"); no other set has chat records.
NEIGHBOUR_CHAT = 0.1
#: coverage = (1 − PAIR) · best line + PAIR · best two adjacent lines (an answer right after the question turn)
PAIR = 0.0
#: In a conversation (a daily card or chat record whose lines are turns), a query naming a speaker counts only the
#: lines that speaker says, and lines without a speaker label, in :func:`line_coverage`: a question about one
#: person is answered by that person's own turns (:func:`reme_engine.search.linevec.speaker_labels`). Measured
#: on LoCoMo, R@5 / R@10 dev | held-out: cards 0.835 / 0.896 | 0.853 / 0.908 → 0.835 / 0.898 | 0.859 / 0.909,
#: chat records 0.801 / 0.868 | 0.820 / 0.877 → 0.807 / 0.871 | 0.819 / 0.873 (bench/RESULTS.md, "Issue 11,
#: session 21 (C)"); no other set has conversation files. The same rule on the turn vectors lost (cards dev
#: R@10 0.894): the best-matching turn is often the other speaker's question whose answer follows it.
SPEAKERS = True


def stem(word: str) -> str:
    """A crude English stem of a lower-case Latin ``word`` (the ending of :data:`_SUFFIXES` dropped when ≥ 3
    characters are left, a doubled final consonant undone, a final ``e`` dropped), so that the inflections of one
    word share it. Not a linguistic stemmer: only used to compare two words. Pure."""
    w = _STEMS.get(word)
    if w is not None:
        return w
    w = word
    if len(w) >= 4 and w.isalpha() and w.isascii():
        for suf in _SUFFIXES:
            if w.endswith(suf) and len(w) - len(suf) >= 3 and not (suf == "s" and w[-2] in "siu"):
                w = w[:-len(suf)] + ("y" if suf in ("ies", "ied") else "")
                if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouylsz":
                    w = w[:-1]
                break
        if len(w) > 3 and w.endswith("e"):
            w = w[:-1]
    if len(_STEMS) > 65536:
        _STEMS.clear()
    _STEMS[word] = w
    return w


_STEMS: dict[str, str] = {}


_TERMS: dict[str, tuple[bool, str, str, bool]] = {}


def _term(t: str) -> tuple[bool, str, str, bool]:
    """``(is Latin, stem, prefix searched for, only Latin run characters)`` of a query term, remembered (a query's
    terms recur per chunk). The last: the term is one whole run as the tokenizer cuts them (always so for the
    tokenizer's Latin tokens), so :func:`line_coverage` may look it up among a text's runs."""
    got = _TERMS.get(t)
    if got is None:
        latin = not _CJK_RUN_RE.match(t)
        st = stem(t) if latin else t
        # the stem's final y/e varies (spy / spies); a stem of 1–2 letters keeps it: an empty prefix never ends
        pre = st[:-1] if latin and len(st) > 2 and st[-1] in "ye" else st
        got = (latin, st, pre, latin and bool(pre) and all(_latin_char(c) for c in t))
        if len(_TERMS) > 65536:
            _TERMS.clear()
        _TERMS[t] = got
    return got


class _TextLines:
    """What :func:`line_coverage` needs of one folded chunk text, computed once per text (not per query term):
    ``nl`` — offsets of its newlines (a match's line is ``bisect_left(nl, offset)``, instead of counting the
    newlines before every match); ``runs`` — each distinct Latin/digit run (as the tokenizer cuts them) → the set
    of lines holding it; ``stems`` — :func:`stem` of those runs → the union of their lines. A Latin query term's
    lines are then two dict lookups: the runs equal to it, and the runs sharing its stem (a run whose stem is the
    term's starts with the term's stem prefix, so this is what the prefix scan found)."""

    __slots__ = ("nl", "_runs", "_stems", "_low")

    def __init__(self, low: str) -> None:
        self._low = low
        self.nl = [m.start() for m in _NL_RE.finditer(low)]
        self._runs: dict[str, set[int]] | None = None
        self._stems: dict[str, set[int]] | None = None

    def latin(self) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
        """``(runs, stems)``, built on first use (a CJK-only query never needs them)."""
        if self._runs is None:
            nl = self.nl
            runs: dict[str, set[int]] = {}
            for m in _LATIN_TOKEN_RE.finditer(self._low):
                ln = bisect_left(nl, m.start())
                got = runs.get(m.group())
                if got is None:
                    runs[m.group()] = {ln}
                else:
                    got.add(ln)
            stems: dict[str, set[int]] = {}
            for r, lns in runs.items():
                st = stem(r)
                got = stems.get(st)
                if got is None:
                    stems[st] = set(lns)
                else:
                    got |= lns
            self._runs, self._stems = runs, stems
        return self._runs, self._stems


_NL_RE = re.compile("\n")
#: a whole Latin/digit run (what the tokenizer keeps as one Latin token)
_LATIN_TOKEN_RE = re.compile(rf"[^\W_{_CJK}]+")
_LINES: dict[str, _TextLines] = {}


def _text_lines(low: str) -> _TextLines:
    """The :class:`_TextLines` of a folded text, remembered by text (like :func:`_folded`: the same chunks are
    candidates of many queries)."""
    got = _LINES.get(low)
    if got is None:
        got = _TextLines(low)
        if len(_LINES) > 4096:
            _LINES.clear()
        _LINES[low] = got
    return got


def line_coverage(text: str, weights: dict[str, float], named: frozenset[str] = frozenset()) -> float:
    """Largest IDF-weighted share of the query terms (``weights``: {term: idf}, tokens of the index's tokenizer)
    found in one non-blank line of ``text``, in 0..1. Pure.

    ``named``: the query's terms that name a speaker of the conversation (:data:`SPEAKERS`); when given, a line
    whose speaker label (:func:`reme_engine.search.linevec.speaker_labels`) shares no word with it does not count.

    A Latin/digit term counts when it is a whole run of the line (lower-cased, NFKC, as the tokenizer cuts runs) or,
    with :data:`STEM`, a run with the same :func:`stem`; a CJK term (a jieba word or a bigram) when the line
    contains it: the matches the tokenizer would give, found with ``str.find`` (CJK) or looked up among the text's
    runs (Latin, :class:`_TextLines`) — running the tokenizer over ~30 chunks per query took ~15 ms, this ~0.5."""
    return coverage_of(weights)(text, named)


def coverage_of(weights: dict[str, float]) -> Callable[[str], float]:
    """:func:`line_coverage` with ``weights`` bound: ``fn(text) -> coverage``. The query's terms are looked at
    once (their stems, prefixes, kinds), not once per candidate text. Pure."""
    total = sum(weights.values())
    terms = [(t, w, *_term(t)) for t, w in weights.items()]
    stem_on, pair = STEM, PAIR

    def fn(text: str, named: frozenset[str] = frozenset()) -> float:
        if total <= 0 or not text:
            return 0.0
        return _coverage(_folded(text), terms, total, stem_on, pair, weights, named)
    return fn


def _coverage(low: str, terms: list[tuple], total: float, stem_on: bool, pair: float,
              weights: dict[str, float], named: frozenset[str] = frozenset()) -> float:
    """The body of :func:`line_coverage` on a folded text; ``terms``: ``(term, weight, *_term(term))``."""
    n = len(low)
    per_line: dict[int, float] = {}
    per_pair: dict[int, set] = {}
    idx = None
    for t, w, latin, st, pre, plain in terms:
        if latin and stem_on and plain:
            # the runs equal to the term or sharing its stem: exactly the runs the prefix scan below would accept
            if idx is None:
                idx = _text_lines(low)
            runs, stems = idx.latin()
            a, b = runs.get(t), stems.get(st)
            if a is None:
                if b is None:
                    continue
                lines = b
            else:
                lines = a if b is None else a | b
        else:
            if pre not in low:  # most terms of a query are absent from most chunks: one C-level scan says so
                continue
            if idx is None:
                idx = _text_lines(low)
            nl = idx.nl
            lines = set()
            if latin and stem_on:
                # a term with characters outside the Latin runs: find the stem's prefix (its final y/e varies),
                # compare the whole run's stem
                i = low.find(pre)
                while i >= 0:
                    j = i + len(pre)
                    if i == 0 or not _latin_char(low[i - 1]):
                        j = _LATIN_RUN_RE.match(low, j).end()
                        run = low[i:j]
                        if run == t or stem(run) == st:
                            lines.add(bisect_left(nl, i))
                    i = low.find(pre, max(j, i + 1))
            elif not latin:
                # a CJK term (no newline in it): each line counts once, so after a match go on from the next line
                last = len(nl)
                i = low.find(t)
                while i >= 0:
                    ln = bisect_left(nl, i)  # the line of the match
                    lines.add(ln)
                    if ln >= last:
                        break
                    i = low.find(t, nl[ln] + 1)
            else:
                i = low.find(t)
                while i >= 0:
                    j = i + len(t)
                    if (i == 0 or not _latin_char(low[i - 1])) and (j >= n or not _latin_char(low[j])):
                        lines.add(bisect_left(nl, i))  # the line of the match
                    i = low.find(t, j)
        for ln in lines:
            per_line[ln] = per_line.get(ln, 0.0) + w
        if pair:
            for ln in lines:
                per_pair.setdefault(ln, set()).add(t)
                per_pair.setdefault(ln - 1, set()).add(t)
    if named and per_line:
        labels = speaker_labels(low)
        for ln in [ln for ln in per_line if ln in labels and not labels[ln] & named]:
            del per_line[ln]
    if not per_line:
        return 0.0
    best = max(per_line.values()) / total
    if pair:
        pb = max(sum(weights[t] for t in ts) for ts in per_pair.values()) / total
        best = (1 - pair) * best + pair * pb
    return min(1.0, best)


def rerank(fused: dict[int, dict], query: str, cfg: FusionConfig, *, texts: Callable[[list[int]], dict],
           query_tokens: Callable[[str], list[str]],
           doc_freqs: Callable[[list[str]], dict[str, int]], n_rows: int,
           line_cosines: Callable[[list[tuple[int, str, str]]], dict[int, float]] | None = None,
           conversation: Callable[[str], bool] | None = None,
           speakers: Callable[[], frozenset[str]] | None = None) -> None:
    """Second stage on ``fused`` ({chunk id: details with ``score``}, after the field rules). Mutates ``fused``:
    the best ``cfg.rerank_depth`` candidates not marked ``collapsed`` gain ``coverage`` / ``neighbour`` shares
    (recorded in the details as ``rerank_coverage`` / ``rerank_neighbour``, absolute score units), then, with
    ``rerank_spread``, their scores are rewritten so that :func:`rank_key` gives the diversified order (each keeps
    a score between its neighbours', so the relative floor still applies to comparable numbers).

    Everything the stage changes in a score is added to the details' ``field_boost`` too, so a hit's score stays
    the sum of the shares it shows (``keyword_rrf + vector_rrf + field_boost``).

    ``texts(ids) -> {id: (file id, ordinal, text, path)}`` (:func:`chunk_texts`); ``query_tokens``: the index's
    tokenizer's; ``doc_freqs(terms) -> {term: chunks containing it}``; ``n_rows``: chunks in the index.
    ``line_cosines([(id, text, path)]) -> {id: (best line cosine, is a chat record)}`` (:mod:`.linevec`, None = no line vectors): with
    ``rerank_lines``, a candidate gains that share × the best score × its best turn's cosine normalised like the
    vector leg's (``cosine_lo``..``cosine_hi``), recorded as ``rerank_lines``; a chat-record window (≤ 4 turns,
    already near turn level) with the share ``rerank_lines_chat`` instead.
    ``conversation(path) -> bool``: the files whose lines are turns (:func:`reme_engine.search.linevec.wants_lines`);
    with :data:`SPEAKERS`, the query's terms that name a speaker labelled in those candidates restrict their
    coverage to that speaker's lines (None = no such files). ``speakers() -> words`` naming a speaker of the
    vault's conversations (:class:`.speakers.SpeakerNames`: labels of files whose turns go back and forth; asked
    only when a query term is a candidate's label): only those labels count (a one-off ``**Fix**:`` names no one).
    Candidates beyond the depth are left as they are (they stay below: shares only raise scores, and the spread
    keeps the reordered block's lowest score). No-op when :func:`enabled` is false.
    """
    if not fused or not enabled(cfg):
        return
    order = ranked_ids(fused)
    if cfg.collapse_day_index:  # collapsed day pages are dropped after this stage: no depth slot for them
        order = [cid for cid in order if not fused[cid].get("collapsed")]
    head = order[:cfg.rerank_depth]
    if len(head) < 2:
        return
    top = fused[head[0]]["score"]
    if top <= 0:
        return
    info = texts(head)
    base = {cid: fused[cid]["score"] for cid in head}
    # a day page kept among the hits (collapse off) gains what the best card it lists gains, not its own share:
    # it stays just below that card, as the field rules placed it
    pages = [cid for cid in head if fused[cid].get("collapsed")]
    head = [cid for cid in head if not fused[cid].get("collapsed")]
    if cfg.rerank_coverage > 0:
        toks = query_tokens(query)
        df = doc_freqs(toks) if toks else {}
        # absent terms match no chunk (an absent inflection may match through its stem: with ABSENT_STEMMED it
        # counts, at the IDF of a term in no chunk)
        weights = {t: bm25_idf(df[t], n_rows) for t in toks if t in df}
        if STEM and ABSENT_STEMMED:
            for t in toks:
                if t not in weights and t.isascii() and t.isalpha() and stem(t) != t:
                    weights[t] = bm25_idf(0, n_rows)
        if len(weights) >= 2:  # one term: coverage is 0 or 1 for every chunk the keyword leg found anyway
            cover = coverage_of(weights)
            talks = {cid for cid in head if cid in info and conversation(info[cid][3])} \
                if SPEAKERS and conversation is not None else set()
            names: set[str] = set()
            for cid in talks:
                for words in speaker_labels(_folded(info[cid][2])).values():
                    names |= words
            named = frozenset(t for t in weights if t in names)
            if named and speakers is not None:
                named &= speakers()
            for cid in head:
                if cid in info:
                    gain = cfg.rerank_coverage * top * cover(info[cid][2], named if cid in talks else frozenset())
                    fused[cid]["score"] += gain
                    fused[cid]["rerank_coverage"] = gain
    if (cfg.rerank_lines > 0 or cfg.rerank_lines_chat > 0) and line_cosines is not None:
        best = line_cosines([(cid, info[cid][2], info[cid][3]) for cid in head if cid in info])
        span = cfg.cosine_hi - cfg.cosine_lo
        for cid, (cos, chat) in best.items():
            vn = min(1.0, max(0.0, (cos - cfg.cosine_lo) / span))
            w = cfg.rerank_lines_chat if chat else cfg.rerank_lines
            if vn > 0 and w > 0:
                gain = w * top * vn
                fused[cid]["score"] += gain
                fused[cid]["rerank_lines"] = gain
    nb_chat = NEIGHBOUR_CHAT
    if cfg.rerank_neighbour > 0 or nb_chat > 0:
        by_pos = {(v[0], v[1]): cid for cid, v in info.items()}
        for cid in head:
            if cid not in info:
                continue
            w = cfg.rerank_neighbour if not info[cid][3].endswith(".jsonl") else max(cfg.rerank_neighbour, nb_chat)
            if w <= 0:
                continue
            f, o = info[cid][0], info[cid][1]
            near = [base[n] for n in (by_pos.get((f, o - 1)), by_pos.get((f, o + 1))) if n is not None]
            if near:
                gain = w * max(near)
                fused[cid]["score"] += gain
                fused[cid]["rerank_neighbour"] = gain
    if pages:
        gained: dict[str, float] = {}  # by path and by file stem (day pages link either way)
        for cid in head:
            if cid in info:
                g = fused[cid]["score"] - base[cid]
                path = info[cid][3]
                for key in (path, path.rsplit("/", 1)[-1].rsplit(".", 1)[0]):
                    gained[key] = max(gained.get(key, 0.0), g)
        for cid in pages:
            if cid in info:
                g = max((gained.get(t, 0.0) for t in _day_targets(info[cid][2])), default=0.0)
                fused[cid]["score"] += g
        head = sorted(head + pages, key=lambda i: rank_key(i, fused[i]))
    if cfg.rerank_spread > 0:
        pool = sorted(head, key=lambda i: rank_key(i, fused[i]))
        placed: dict[int, int] = {}
        keep = 1.0 - cfg.rerank_spread
        prev = None
        while pool:
            # greedy MMR: the best score after discounting files already placed; ties keep the first-stage order
            j = max(range(len(pool)), key=lambda k: (fused[pool[k]]["score"]
                                                     * keep ** placed.get(info.get(pool[k], (pool[k],))[0], 0), -k))
            cid = pool.pop(j)
            f = info.get(cid, (cid,))[0]
            placed[f] = placed.get(f, 0) + 1
            s = fused[cid]["score"]
            if prev is not None and s >= prev:  # keep the picked order under rank_key
                fused[cid]["spread_from"] = s
                s = prev * (1 - 1e-9)
            fused[cid]["score"] = s
            prev = s
    for cid in base:  # what this stage changed is part of the field-aware share each hit shows
        delta = fused[cid]["score"] - base[cid]
        if delta:
            fused[cid]["field_boost"] = fused[cid].get("field_boost", 0.0) + delta


def rerank_for(searcher, fused: dict[int, dict], query: str, cfg: FusionConfig) -> None:
    """:func:`rerank` wired to a :class:`reme_engine.search.hybrid.HybridSearcher` (its store's connection, its
    tokenizer and FTS5 vocabulary counts). The hook of ``HybridSearcher.rank``, right after ``adjust``. Mutates
    ``fused``; no-op when the second stage is off."""
    if not fused or not enabled(cfg):
        return
    tok = searcher.tokenizer
    # the searcher's cached reader when it has one (HybridSearcher.chunk_texts: the same rows, kept per postings)
    texts = getattr(searcher, "chunk_texts", None) or (lambda ids: chunk_texts(searcher.store.conn, ids))
    rerank(fused, query, cfg, texts=texts,
           query_tokens=tok.query_tokens, doc_freqs=searcher._doc_freqs, n_rows=searcher._chunk_count(),
           line_cosines=_line_cosines_for(searcher, query, chats=cfg.rerank_lines_chat > 0)
           if cfg.rerank_lines > 0 or cfg.rerank_lines_chat > 0 else None,
           conversation=_conversation_for(searcher) if SPEAKERS else None,
           speakers=getattr(searcher, "speaker_names", None) if SPEAKERS else None)


_CONVERSATION: dict[tuple[str, str, str], bool] = {}


def _conversation_for(searcher) -> Callable[[str], bool]:
    """``path -> bool``: the searcher's files whose lines are turns (daily cards and chat records, in its
    ``line_dirs``), as :func:`reme_engine.search.linevec.wants_lines` tells them; remembered per path (a pure
    function of it, asked for each head candidate of every search)."""
    daily, session = getattr(searcher, "line_dirs", ("daily", "session"))

    def fn(path: str) -> bool:
        key = (path, daily, session)
        got = _CONVERSATION.get(key)
        if got is None:
            got = wants_lines(path, daily, session, chats=True)
            if len(_CONVERSATION) > 65536:
                _CONVERSATION.clear()
            _CONVERSATION[key] = got
        return got
    return fn


def _line_cosines_for(searcher, query: str, *, chats: bool = False):
    """``line_cosines`` for :func:`rerank` from the searcher's line vectors and the query vector its vector leg
    computed (``last_query_vec``), or None when there is none for this query (keyword mode, no embedder): the
    stage never encodes at query time. ``chats``: chat-record windows are scored too (from whatever turn vectors
    the cache holds: the vector pass builds them only with :data:`.linevec.CHAT_LINES`)."""
    got = getattr(searcher, "last_query_vec", None)
    vs = searcher.vectors
    if got is None or got[0] != query or vs is None or not vs.ready:
        return None
    from . import linevec  # here, not above: a keyword search then never imports numpy through it

    qv = got[1]
    lv = getattr(searcher, "_line_vectors", None)
    if lv is None or lv.space != vs.embedder.space:
        lv = searcher._line_vectors = linevec.LineVectors(searcher.store.conn, vs.embedder.space, vs.dim)
    daily, session = getattr(searcher, "line_dirs", ("daily", "session"))

    def fn(items):
        items = [(cid, t, p) for cid, t, p in items if linevec.wants_lines(p, daily, session, chats=chats)]
        if not items:
            return {}
        cos = lv.best_cosines([t for _, t, _ in items], qv)
        return {cid: (c, p.endswith(".jsonl")) for (cid, _, p), c in zip(items, cos) if c is not None}
    return fn

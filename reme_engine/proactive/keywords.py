"""The refresh without an LLM (ARCHITECTURE §6): topic candidates from keyword extraction over the changed daily notes.

Clearly marked and conservative: candidates get ``kind: keyword`` and a confidence in [0.40, 0.45] (below the
default ``min_push_confidence`` 0.5, so nothing is pushed and no agenda opener is invented); the file gets
``generator: keyword-fallback``.

Per note:

- Chinese: jieba's TF-IDF (``jieba.analyse.extract_tags``) blended with its TextRank (``jieba.analyse.textrank``),
  nouns only (``allowPOS``), words containing CJK characters.
- English (and other Latin-script words): a small TF-IDF — ``(1 + ln tf)`` in the note times
  ``ln((N + 1) / (df + 1)) + 1`` with ``df``/``N`` the vault's document (chunk) frequencies from the keyword index
  (an FTS5 vocabulary over the same tokens the search uses), stop-words removed; repeated two- and three-word
  phrases count too ("golden set v2").
- Both lists are damped by the vault frequency (a word in most chunks — template headings such as 灵感/闪念 — is
  not a topic), weighted by how much of the note each script makes up, and the note's top keywords kept.

Across notes: near-duplicate keywords are merged (one contains the other or two phrases share a word; CJK
character-bigram overlap ≥ 0.5; cosine ≥ 0.8 of the offline embedder's vectors when an embedder exists), then
keywords that occur in the same units are grouped (Jaccard of their unit sets > 0.5). A unit is a whole card (``<daily>/<date>/*.md`` — one topic per
card by design) or one paragraph/list item of a free-form day page (``<daily>/<date>.md``). Each group becomes a
candidate: title = its top three keywords joined by " · ", paths = the notes it occurs in (strongest first),
reason = which keywords and a short quote of the best passage. A group scores the sum of its three strongest
keywords; groups under a fifth of the best are dropped.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reme_engine.index.tokenizer import EN_STOPWORDS, ZH_STOPWORDS
from reme_engine.markdown.frontmatter import parse_frontmatter
from reme_engine.markdown.links import parse_links

from ..text import HAN
from .extract import note_text
from .model import KEYWORD_KIND, Candidate, DailyFile

#: Chinese POS tags kept (nouns, proper nouns, verbal/adjectival nouns, idioms and set phrases).
ZH_POS = ("n", "nr", "ns", "nt", "nz", "nrt", "nrfg", "vn", "an", "l", "i")
#: Frequent words that are never a topic on their own (on top of the search tokenizer's stop-words).
ZH_EXTRA_STOP = frozenset(
    """时候 问题 东西 事情 方面 情况 方式 时间 感觉 今天 明天 昨天 现在 之前 之后 一下 一些 这种 那种 其实 原因 部分
    地方 样子 意思 办法 人们 大家 自己 别人 东东 本质 总结 记录 笔记 内容 说明 备注 日记""".split())
EN_EXTRA_STOP = frozenset(
    """also would could should may might must shall one two three first second next last new old good bad get got
    make made take took use used using like just really still even much many well back way thing things lot lots
    today tomorrow yesterday week weeks day days time times year years month months since ago per via etc vs
    yes okay ok let lets want wants need needs think know see seen said say says going go goes went done
    about above after again against along among around before behind below beneath beside besides between beyond
    during except inside near onto outside through throughout toward towards upon within without across
    although because though however whether while until unless once ever every either neither nor yet so only
    own same another anything something nothing everything someone anyone everyone else instead maybe perhaps
    quite rather almost enough always never often sometimes usually already soon later early still around
    follow-up followup note notes todo misc
    md http https www com html png jpg pdf null true false name description tags date created modified title""".split())
#: English contraction endings ("I'll", "we're"): such words are never keywords.
_CONTRACTION_RE = re.compile(r"['’](?:ll|s|re|ve|d|t|m)$", re.I)

# Han only, deliberately: jieba segments Chinese; kana and hangul words go the whitespace (Latin-style) way.
_CJK = HAN
_CJK_RE = re.compile(f"[{_CJK}]")
_CJK_ONLY_RE = re.compile(f"^[{_CJK}]+$")
_LATIN_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:['’\-][A-Za-z0-9]+)*")
_SENT_SPLIT_RE = re.compile(r"[.!?;:,()\[\]{}\"“”‘’/|。！？；：，、（）]+")
#: External Markdown links ``[text](https://…)`` (not vault links, so parse_links does not report them).
_MDLINK_RE = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
_URL_RE = re.compile(r"https?://\S+|www\.\S+")
_COMMENT_RE = re.compile(r"<!--.*?-->", re.S)
_LEAD_RE = re.compile(r"^\s*(?:>\s*)*(?:[-*+]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+)?")
_MARKUP_RE = re.compile(r"[*_`~=<>#|]+")
_ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")

_JIEBA_LOCK = threading.Lock()
_jieba_ready = False


def _jieba(tmp_dir: Path | None):
    """jieba.analyse, quiet, caching its dictionary in ``tmp_dir`` (the engine's state dir) when it loads it."""
    global _jieba_ready
    import jieba
    import jieba.analyse

    with _JIEBA_LOCK:
        if not _jieba_ready:
            jieba.setLogLevel(logging.WARNING)  # its start-up lines would corrupt a Textual screen
            _jieba_ready = True
        if tmp_dir is not None and not jieba.dt.initialized:
            jieba.dt.tmp_dir = str(tmp_dir)  # process-wide; only matters until the dictionary is loaded
    return jieba.analyse


# --------------------------------------------------------------------------------------------------- text


@dataclass
class _Note:
    file: DailyFile
    card: bool
    units: list[str]  # cleaned passages (one for a card)
    text: str  # cleaned full text
    title: str  # frontmatter name/title or first heading, else the file stem


def _frontmatter(text: str) -> tuple[dict, str]:
    """``(meta, body)`` through the project's frontmatter parser (invalid YAML → empty meta, body kept)."""
    fm = parse_frontmatter(text)
    return fm.meta, text[fm.body_offset:] if fm.has_block else text


def _link_name(lk) -> str:
    """What a reader sees of a link: its alias, else the target's file name without ``.md``."""
    if lk.alias:
        return lk.alias.strip()
    return lk.target.rsplit("/", 1)[-1].removesuffix(".md").strip()


def _unlink(text: str) -> str:
    """``text`` with every vault link (wikilink or internal Markdown link, via the one link parser) replaced by
    its visible name. Spaces around it keep "[[web3]]和[[元宇宙]]" from fusing into one run for the segmenter."""
    links = parse_links(text)
    if not links:
        return text
    out, pos = [], 0
    for lk in links:
        if lk.start < pos:
            continue
        out += [text[pos:lk.start], " ", _link_name(lk), " "]
        pos = lk.end
    out.append(text[pos:])
    return "".join(out)


def _clean_line(line: str) -> str:
    line = _MDLINK_RE.sub(lambda m: " " + m.group(1) + " ", line)
    line = _URL_RE.sub(" ", line)
    line = _LEAD_RE.sub("", line)
    line = _MARKUP_RE.sub(" ", line)
    return " ".join(line.split())


def _units(body: str) -> list[str]:
    """Paragraphs and list items (with their indented continuation lines) of a free-form page; headings dropped."""
    units: list[list[str]] = []
    cur: list[str] | None = None
    in_code = False
    for raw in body.splitlines():
        s = raw.strip()
        if s.startswith("```") or s.startswith("~~~"):
            in_code = not in_code
            cur = None
            continue
        if in_code:
            continue
        if not s or s.startswith("#") or set(s) <= set("-*_=|: "):
            cur = None
            continue
        indented = raw[:1] in (" ", "\t")
        if _ITEM_RE.match(raw) and not indented:
            cur = [s]
            units.append(cur)
        elif cur is not None and (indented or not _ITEM_RE.match(raw)):
            cur.append(s)
        else:
            cur = [s]
            units.append(cur)
    out = [" ".join(_clean_line(x) for x in u).strip() for u in units]
    return [u for u in out if u]


#: The quick-capture card's own scaffolding (a time and a link to the session shown as "chat" before each
#: message; "noted by agent X" and its source link before an agent's note), matched after the links were replaced
#: by their visible names: the app's words, not the user's, so they are no topic ("Capture · Chat" was one, and
#: "noted · agent · <agent name>").
_CAPTURE_STAMP_RE = re.compile(r"^\*\*\d{1,2}:\d{2}\*\*\s*·\s+(?:chat\s|noted by [^\n]*)", re.M)


def _note(f: DailyFile, daily_dir: str) -> _Note:
    meta, body = _frontmatter(note_text(f))
    capture = f.path.rsplit("/", 1)[-1] == "capture.md" and str(meta.get("name", "")).startswith("Capture ")
    body = _unlink(_COMMENT_RE.sub(" ", body))
    if capture:
        body = _CAPTURE_STAMP_RE.sub("", body)
        meta = {}  # name/description are the app's template; the card's title comes from its H1 (dropped below)
    head = " ".join(str(meta.get(k)) for k in ("name", "description") if isinstance(meta.get(k), str))
    card = (not f.is_page) if f.is_page is not None else f.path != f"{daily_dir.strip('/')}/{f.day}.md"
    units = _units(body)
    if head:
        units.insert(0, _clean_line(head))
    if card:
        units = [" ".join(units)] if units else []
    title = next((str(meta[k]) for k in ("name", "title") if isinstance(meta.get(k), str)), "")
    if not title:
        h1 = re.search(r"^#\s+(.+)$", body, re.M)
        title = h1.group(1) if h1 else f.path.rsplit("/", 1)[-1].removesuffix(".md")
    return _Note(f, card, units, "\n".join(units), _clean_line(title))


class _Names:
    """CJK names the vault itself uses — note stems and names from the index, wikilink targets in the notes.

    jieba's general dictionary splits such names (隆基绿能 → 隆基绿 + 能); :meth:`widen` turns a keyword that only
    ever occurs inside one of them into the whole name. Index look-ups are per keyword (``instr`` in SQLite), so
    cost does not grow with the square of the vault size.
    """

    def __init__(self, store, raw_texts: list[str]) -> None:
        self._store = store
        self._cache: dict[str, list[str]] = {}
        self._linked = sorted({_link_name(lk) for t in raw_texts for lk in parse_links(t)
                               if _CJK_RE.search(lk.target)}, key=len)

    def _containing(self, k: str) -> list[str]:
        if k not in self._cache:
            found = [t for t in self._linked if k in t]
            if self._store is not None:
                try:
                    rows = self._store.conn.execute(
                        "SELECT path, name FROM files WHERE instr(path, ?) > 0 OR instr(name, ?) > 0 LIMIT 200",
                        (k, k)).fetchall()
                except Exception:  # noqa: BLE001 - no index: links only
                    rows = []
                for path, name in rows:
                    found += [t.strip() for t in (path.rsplit("/", 1)[-1].rsplit(".", 1)[0], name or "") if k in t]
            self._cache[k] = sorted({t for t in found if len(t) <= 12 and t != k and _CJK_ONLY_RE.match(t)}, key=len)
        return self._cache[k]

    def widen(self, k: str, text: str) -> str:
        """``k``, or the shortest name containing it when every occurrence of ``k`` in ``text`` lies inside it."""
        n = text.count(k)
        for t in self._containing(k):
            if n and n == text.count(t) * t.count(k):
                return t
        return k


# --------------------------------------------------------------------------------------------------- scores


class _DocFreq:
    """Document (chunk) frequencies of index tokens: ``df(term)`` and ``n`` (0 when no index)."""

    def __init__(self, store) -> None:
        self.n = 0
        self._conn = None
        self._cache: dict[str, int] = {}
        if store is None:
            return
        try:
            conn = store.conn
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.reme_proactive_vocab "
                         "USING fts5vocab(main, chunks_fts, row)")
            self.n = int(conn.execute("SELECT count(*) FROM chunks_fts").fetchone()[0])
            self._conn = conn
        except Exception:  # noqa: BLE001 - no index (or no FTS5 vocab): plain TF
            self.n = 0

    def df(self, term: str) -> int:
        term = term.lower()
        if self._conn is None:
            return 0
        if term not in self._cache:
            try:
                row = self._conn.execute("SELECT doc FROM temp.reme_proactive_vocab WHERE term = ?", (term,)).fetchone()
            except Exception:  # noqa: BLE001
                row = None
            self._cache[term] = int(row[0]) if row else 0
        return self._cache[term]

    def idf(self, term: str) -> float:
        parts = [p for p in re.split(r"[\s\-'’]+", term.lower()) if p]
        if not parts:
            return 1.0
        return sum(math.log((self.n + 1) / (self.df(p) + 1)) + 1 for p in parts) / len(parts)

    def damp(self, term: str) -> float:
        """In (0, 1]: ~1 for rare words, ~0 for words in nearly every chunk; 1 without an index."""
        if self.n < 20:
            return 1.0  # too small a vault to say a word is common
        d = self.df(term)
        return max(0.05, math.log((self.n + 1) / (d + 1)) / math.log(self.n + 1))


def _norm(scores: dict[str, float]) -> dict[str, float]:
    top = max(scores.values(), default=0.0)
    return {k: v / top for k, v in scores.items()} if top > 0 else {}


def _zh_keywords(text: str, analyse, k: int) -> dict[str, float]:
    cjk_text = text
    if not _CJK_RE.search(cjk_text):
        return {}
    ok = lambda w: (_CJK_RE.search(w) and len(w) >= 2 and w not in ZH_STOPWORDS and w not in ZH_EXTRA_STOP)  # noqa: E731
    tf = {w: s for w, s in analyse.extract_tags(cjk_text, topK=k * 2, withWeight=True, allowPOS=ZH_POS) if ok(w)}
    try:
        tr = {w: s for w, s in analyse.textrank(cjk_text, topK=k * 2, withWeight=True, allowPOS=ZH_POS) if ok(w)}
    except ZeroDivisionError:  # textrank on a graph without edges
        tr = {}
    tf, tr = _norm(tf), _norm(tr)
    # TF-IDF leads; TextRank (co-occurrence centrality) only reorders, it favours generic words (工作, 软件)
    return {w: tf.get(w, 0.0) + 0.3 * tr.get(w, 0.0) for w in set(tf) | set(tr)}


def _en_stop(w: str) -> bool:
    lw = w.lower()
    return (lw in EN_STOPWORDS or lw in EN_EXTRA_STOP or len(lw) < 3 and not any(c.isdigit() for c in lw)
            or lw.isdigit() or _CONTRACTION_RE.search(lw) is not None)


def _en_keywords(text: str, dfs: _DocFreq, forms: dict[str, Counter]) -> dict[str, float]:
    """TF-IDF of content words, plus two- and three-word phrases that repeat ("golden set v2")."""
    counts: Counter = Counter()
    phrases: Counter = Counter()
    for sent in _SENT_SPLIT_RE.split(text):
        run: list[tuple[str, str]] = []  # consecutive content words (lower, original)
        for m in _LATIN_WORD_RE.finditer(sent):
            w = m.group()
            if _en_stop(w):
                run = []
                continue
            lw = w.lower()
            counts[lw] += 1
            forms[lw][w] += 1
            run.append((lw, w))
            for n in (2, 3):
                if len(run) >= n:
                    key = " ".join(x[0] for x in run[-n:])
                    phrases[key] += 1
                    forms[key][" ".join(x[1] for x in run[-n:])] += 1
    out = {w: (1 + math.log(c)) * dfs.idf(w) for w, c in counts.items()}
    for ph, c in phrases.items():
        if c >= 2:  # a phrase said twice is a name ("golden set", "eval pipeline")
            out[ph] = (1 + math.log(c)) * dfs.idf(ph) * (1.3 if ph.count(" ") == 1 else 1.5)
    return out


# --------------------------------------------------------------------------------------------------- grouping


class _UF:
    def __init__(self, n: int) -> None:
        self.p = list(range(n))

    def find(self, i: int) -> int:
        while self.p[i] != i:
            self.p[i] = self.p[self.p[i]]
            i = self.p[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.p[max(ra, rb)] = min(ra, rb)


def _bigrams(w: str) -> set[str]:
    return {w[i:i + 2] for i in range(len(w) - 1)} if len(w) > 1 else {w}


def _near_duplicate(a: str, b: str) -> bool:
    la, lb = a.casefold(), b.casefold()
    if la == lb:
        return True
    short, long_ = (la, lb) if len(la) <= len(lb) else (lb, la)
    if _CJK_RE.search(short):
        if len(short) >= 2 and short in long_:
            return True
        ba, bb = _bigrams(la), _bigrams(lb)
        return len(ba & bb) / len(ba | bb) >= 0.5
    # Latin: a word of the longer starts with the shorter ("rerank" ~ "reranker", "eval" ~ "eval pipeline"), or
    # two phrases share a word ("golden set" ~ "set v2", "left knee" ~ "knee sore")
    if " " in short and _shares_word(short, long_):
        return True
    return len(short) >= 3 and any(tok.startswith(short) for tok in long_.split())


def _shares_word(a: str, b: str) -> bool:
    """Latin phrases with a word in common ("left knee" / "knee sore"): one title slot is enough."""
    wa = {w for w in a.casefold().split() if not _CJK_RE.search(w)}
    wb = {w for w in b.casefold().split() if not _CJK_RE.search(w)}
    return bool(wa & wb)


def _occurs(kw: str, unit_lc: str) -> bool:
    k = kw.casefold()
    if _CJK_RE.search(k):
        return k in unit_lc
    return re.search(r"(?<![a-z0-9])" + re.escape(k), unit_lc) is not None


@dataclass
class KeywordInput:
    """Changed notes (``files``), the ``daily_dir`` (cards vs day pages), the index ``store`` (document
    frequencies; None = plain TF), the ``embedder`` (near-duplicate merging; None = string rules only),
    ``state_dir`` (jieba's cache dir) and ``max_topics``."""

    files: list[DailyFile]
    daily_dir: str
    store: Any = None
    embedder: Any = None
    state_dir: Path | None = None
    max_topics: int = 10


@dataclass
class KeywordOutput:
    candidates: list[Candidate]
    warnings: list[str] = field(default_factory=list)


def _quote(unit: str, limit: int) -> str:
    u = unit.strip()
    return u if len(u) <= limit else u[: limit - 1].rstrip() + "…"


def run_keywords(inp: KeywordInput) -> KeywordOutput:
    """Keyword topic candidates of ``inp.files`` (see module doc)."""
    warnings: list[str] = []
    notes = [n for n in (_note(f, inp.daily_dir) for f in inp.files) if n.units]
    if not notes:
        return KeywordOutput([])
    analyse = _jieba(inp.state_dir)
    dfs = _DocFreq(inp.store)
    names = _Names(inp.store, [n.file.text for n in notes])
    forms: dict[str, Counter] = defaultdict(Counter)
    units: list[tuple[int, str]] = []  # (note index, lower-cased unit text)
    total: dict[str, float] = defaultdict(float)
    for ni, n in enumerate(notes):
        units += [(ni, unicodedata.normalize("NFKC", u).casefold()) for u in n.units]
        k = 6 if n.card else 12
        n_cjk = len(_CJK_RE.findall(n.text))
        n_lat = len(_LATIN_WORD_RE.findall(n.text))
        zh_units, en_units = n_cjk / 1.6, float(n_lat)  # ~1.6 characters per Chinese word
        share = zh_units / (zh_units + en_units) if zh_units + en_units else 0.0
        zh: dict[str, float] = {}
        for w, sc in _norm(_zh_keywords(n.text, analyse, k)).items():
            w = names.widen(w, n.text)
            zh[w] = max(zh.get(w, 0.0), sc * share)
            forms[w.casefold()][w] += 1
        en = {w: sc * (1 - share) for w, sc in _norm(_en_keywords(n.text, dfs, forms)).items()}
        title_lc = n.title.casefold()
        # a word of the note's own title (card name, first heading) is a strong topic signal
        scored = {w.casefold(): sc * dfs.damp(w) * (1.5 if w.casefold() in title_lc else 1.0)
                  for w, sc in {**en, **zh}.items()}
        for w, s in sorted(scored.items(), key=lambda x: -x[1])[:k]:
            total[w] += s
    ranked = [w for w, _ in sorted(total.items(), key=lambda x: -x[1])][:40]
    if not ranked:
        return KeywordOutput([])
    display = {w: forms[w].most_common(1)[0][0] if forms.get(w) else w for w in ranked}
    occ = [{ui for ui, (_, u) in enumerate(units) if _occurs(w, u)} for w in ranked]
    uf = _UF(len(ranked))
    for i in range(len(ranked)):
        for j in range(i + 1, len(ranked)):
            if _near_duplicate(ranked[i], ranked[j]):
                uf.union(i, j)
    if inp.embedder is not None:
        try:
            v = inp.embedder.embed([display[w] for w in ranked])
            sim = v @ v.T
            for i in range(len(ranked)):
                for j in range(i + 1, len(ranked)):
                    if float(sim[i, j]) >= 0.8:
                        uf.union(i, j)
        except Exception as exc:  # noqa: BLE001 - merging by string rules only
            warnings.append(f"embedder failed while merging keywords ({exc})")
    for i in range(len(ranked)):
        for j in range(i + 1, len(ranked)):
            a, b = occ[i], occ[j]
            if a and b and len(a & b) / len(a | b) > 0.5:
                uf.union(i, j)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(len(ranked)):
        groups[uf.find(i)].append(i)
    def gscore(g: list[int]) -> float:
        # the three strongest keywords: a long paragraph with many words must not drown short, sharp notes
        return sum(sorted((total[ranked[i]] for i in g), reverse=True)[:3])

    scored_groups = sorted(groups.values(), key=lambda g: -gscore(g))
    best = gscore(scored_groups[0])
    out: list[Candidate] = []
    for g in scored_groups:
        score = gscore(g)
        if score < 0.2 * best or len(out) >= inp.max_topics:
            break
        kws: list[str] = []
        for i in sorted(g, key=lambda i: -total[ranked[i]]):
            d = display[ranked[i]]
            if not any(_near_duplicate(d, x) or _shares_word(d, x) for x in kws):
                kws.append(d)
        gunits = set().union(*(occ[i] for i in g))
        per_note: Counter = Counter()
        for ui in gunits:
            per_note[units[ui][0]] += sum(1 for i in g if ui in occ[i])
        if not per_note:
            continue
        order = [ni for ni, _ in per_note.most_common()]
        paths = [notes[ni].file.path for ni in order]
        top_note = order[0]
        best_unit = max((ui for ui in gunits if units[ui][0] == top_note),
                        key=lambda ui: sum(1 for i in g if ui in occ[i]))
        note = notes[top_note]
        passage = note.units[[ui for ui, (ni, _) in enumerate(units) if ni == top_note].index(best_unit)]
        title = " · ".join(kws[:3])
        zh = bool(_CJK_RE.search(title))
        quote = _quote(passage, 60 if zh else 110)
        if zh:
            reason = (f"关键词提取（未使用 LLM）：{'、'.join(kws[:5])}，见于 {len(paths)} 篇日记。"
                      f"例如：“{quote}”")
        else:
            reason = (f"Keyword extraction (no LLM): {', '.join(kws[:5])} in {len(paths)} daily note(s). "
                      f"E.g. “{quote}”")
        out.append(Candidate(
            title=title, reason=reason, kind=KEYWORD_KIND,
            confidence=round(0.40 + 0.05 * (score / best), 2),
            evidence=paths[0], paths=paths[:10], keywords=kws[:8],
        ))
    return KeywordOutput(out, warnings)

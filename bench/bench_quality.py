#!/usr/bin/env python
"""Retrieval quality: per leg (keyword, vector) and fused, on sets the team did not write. Prints one JSON object.

Sets (built from ``../shared/data`` into a cache dir; the data itself is never copied into the repository):

* ``crossling`` — doocs-leetcode zh/en twins. 150 solution folders (every k-th, sorted); each README becomes a
  note ``<lang>/<number>.md`` = its tags + title + problem statement (the lines that name the twin — the
  "English Version" link, the leetcode URL, ``edit_url`` — are left out, or the keyword leg would match the
  other language's title through them). Vault ``en`` is queried with the Chinese title and first sentence,
  vault ``zh`` with the English ones; the target is the twin. Kinds: ``title zh→en``, ``sentence zh→en``,
  ``title en→zh``, ``sentence en→zh``.
* ``locomo`` — LoCoMo (CC BY-NC 4.0, evaluation only; Maharana et al. 2024, arXiv:2402.17753). Each conversation
  is its own vault; each session a daily card ``daily/<date>/<sample>-s<n>.md`` (one paragraph per turn:
  ``**Speaker**: text``, a shared photo as ``[shares a photo: caption]``; the session summary as the card's
  ``description``), and the app writes each day page (``daily/<date>.md``, its generated card list). Questions of categories 1–4; an
  evidence turn counts as found when its whole text lies inside a returned chunk. Kinds: ``cat1 multi-hop``,
  ``cat2 temporal``, ``cat3 open-domain``, ``cat4 single-hop``. Also recall within a 2,000-character budget.
  ``locomo-500``: the same at ``chunk_bytes: 500`` (not used to choose the fusion). ``locomo-chat``: the same
  conversations stored as the app's chat records (``session/dialog/*.jsonl``, chunked by turn); variants
  ``locomo-chat-lines`` (the earlier whole-line packing), ``-w250``, ``-w1000`` (other windows) on request.
* ``words`` — short Chinese words on knowledge-garden-zh: 瓶颈 (a user's example) + two-character words jieba
  knows, found in 5–40 notes, picked by hash; relevant = a top-5 note that contains the word (R@k here is the
  share of the top-k distinct notes that contain it).
* ``known`` — known-item queries: a note's file name (leading emoji/symbols dropped) or frontmatter alias → that
  note, on knowledge-garden-zh (``title zh``, ``alias zh``) and obsidian-tasks-docs-en (``title en``); names
  shared by two notes and date-like names are skipped.

Every query has a stable id; a third of them (crc32 % 3 == 0) is held out: the fusion is chosen on the rest and
the chosen one is reported on the held-out part too.

Per method: R@1/5/10, MRR, nDCG@10, characters in the top 10, hits returned. The legs are each leg's own
order (no field rules); fused methods are :class:`reme_engine.search.hybrid.FusionConfig` variants, ranked from the
same leg output (each query's legs are fetched once). Latency: warm ``engine.search(q, limit=10,
neighbors=False)`` with the default settings.

Usage: ``python bench/bench_quality.py [--quick] [--sets crossling,locomo,words,known] [--write-results]``;
``--lean --levers --sets locomo,locomo-chat``: the levers of the sixth round (:func:`levers`) beside the default.
``--misses <file>``: where each conversation question's evidence turns rank (:func:`miss_row`; LoCoMo text inside:
keep the file out of the repository).
``--quick``: 40 pairs, one conversation, 5 words, 60 known items (a few minutes once the caches exist).
Caches: ``REME_BENCH_CACHE`` (default ``<tmp>/reme-bench-cache``)/``quality-<set>-…``: the built vault and one
state dir per set (index + embedding cache), reused between runs.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import math
import re
import sys
import time
import zlib
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (REPO, SHARED_DATA, cache_root, emit, loadavg, log, machine, open_engine,  # noqa: E402
                     stats)

BUILD_VERSION = {"locomo": "2"}  # per set label (default "1"): bump when a builder's output changes
RESULTS_MD = REPO / "bench" / "RESULTS.md"
SECTION_START = "<!-- bench_quality:start -->"
SECTION_END = "<!-- bench_quality:end -->"


def held_out(qid: str) -> bool:
    return zlib.crc32(qid.encode()) % 3 == 0


def _cached_dir(label: str, key: str) -> Path:
    h = hashlib.sha256(f"{BUILD_VERSION.get(label, '1')}|{key}".encode()).hexdigest()[:12]
    d = cache_root() / f"quality-{label}-{h}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


# ------------------------------------------------------------------------------------------------ crossling
_TITLE_RE = re.compile(r"^#\s*\[(?:[\w.]+\.\s*)?(.+?)\]\(", re.M)
_TAG_RE = re.compile(r"<[^>]+>")


def _doocs_parts(text: str) -> dict | None:
    m = _TITLE_RE.search(text)
    if not m:
        return None
    title = m.group(1).strip()
    a, b = text.find("<!-- description:start -->"), text.find("<!-- description:end -->")
    if a < 0 or b < 0:
        return None
    desc = text[a + len("<!-- description:start -->"):b].strip()
    tags = []
    fm = text.split("---", 2)
    if text.startswith("---") and len(fm) == 3:
        tags = [ln.strip()[2:].strip() for ln in fm[1].splitlines() if ln.strip().startswith("- ")]
    plain = " ".join(html.unescape(_TAG_RE.sub(" ", desc)).split())
    cut = re.search(r"[。！？]|\.\s", plain)
    first = plain[: cut.end()].strip() if cut else plain[:200]
    return {"title": title, "desc": desc, "tags": tags, "first": first[:240]}


def build_crossling(quick: bool) -> tuple[dict[str, Path], list[dict]]:
    root = SHARED_DATA / "corpus" / "doocs-leetcode-md" / "solution"
    folders = sorted(p for p in root.glob("*/*") if (p / "README.md").is_file() and (p / "README_EN.md").is_file())
    n = 40 if quick else 150
    step = max(1, len(folders) // n)
    picked = folders[::step][:n]
    base = _cached_dir("crossling", f"{'quick' if quick else 'full'}|{n}|{len(folders)}")
    queries: list[dict] = []
    for f in picked:
        num = f.name.split(".", 1)[0]
        zh = _doocs_parts((f / "README.md").read_text(encoding="utf-8"))
        en = _doocs_parts((f / "README_EN.md").read_text(encoding="utf-8"))
        if not zh or not en:
            continue
        for lang, parts in (("zh", zh), ("en", en)):
            tags = "".join(f"  - {t}\n" for t in parts["tags"])
            _write(base / lang / "vault" / lang / f"{num}.md",
                   f"---\ntags:\n{tags}---\n\n# {parts['title']}\n\n{parts['desc']}\n")
        for vault_lang, q_parts, src in (("en", zh, "zh"), ("zh", en, "en")):
            target = f"{vault_lang}/{num}.md"
            for kind, text in (("title", q_parts["title"]), ("sentence", q_parts["first"])):
                qid = f"xl:{kind}:{src}:{num}"
                queries.append({"id": qid, "vault": vault_lang, "kind": f"{kind} {src}→{vault_lang}",
                                "text": text, "target": target})
    return {"en": base / "en", "zh": base / "zh"}, queries


# --------------------------------------------------------------------------------------------------- locomo
_EVID_RE = re.compile(r"D(\d+):(\d+)")
CATEGORIES = {1: "cat1 multi-hop", 2: "cat2 temporal", 3: "cat3 open-domain", 4: "cat4 single-hop"}


def _locomo_date(s: str) -> datetime | None:
    try:
        return datetime.strptime(s.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None


def build_locomo(quick: bool) -> tuple[dict[str, Path], list[dict]]:
    data = json.loads((SHARED_DATA / "locomo-dev" / "locomo-dev5.json").read_text(encoding="utf-8"))
    if quick:
        data = data[:1]
    roots, queries = {}, []
    for sample in data:
        sid = sample["sample_id"]
        base = _cached_dir("locomo", sid)
        conv = sample["conversation"]
        turns: dict[str, str] = {}
        dates: set[str] = set()
        for key, value in conv.items():
            if not (key.startswith("session_") and isinstance(value, list)):
                continue
            n = key.split("_")[1]
            when = _locomo_date(conv.get(f"session_{n}_date_time", "")) or datetime(2023, 1, 1)
            summary = " ".join(str(sample.get("session_summary", {}).get(f"session_{n}_summary", "")).split())
            desc = json.dumps(summary[:300], ensure_ascii=False)
            lines = [f"---\nname: \"{conv['speaker_a']} & {conv['speaker_b']}, session {n}\"\n"
                     f"description: {desc}\ndate: {when.date().isoformat()}\n---\n",
                     f"# {conv['speaker_a']} & {conv['speaker_b']} — {conv.get(f'session_{n}_date_time', '')}\n"]
            for t in value:
                text = str(t.get("text", ""))
                turns[t["dia_id"]] = text
                photo = f" [shares a photo: {t['blip_caption']}]" if t.get("blip_caption") else ""
                lines.append(f"**{t['speaker']}**: {text}{photo}\n")
            _write(base / "vault" / "daily" / when.date().isoformat() / f"{sid}-s{int(n):02d}.md", "\n".join(lines))
            dates.add(when.date().isoformat())
        from reme_engine.vault.daily import daily_reindex

        for day in sorted(dates):  # the app's generated day pages, listing that day's cards
            daily_reindex(base / "vault", day)
        for i, qa in enumerate(sample["qa"]):
            cat = qa.get("category")
            if cat not in CATEGORIES:
                continue
            ev = []
            for e in qa.get("evidence") or []:
                for m in _EVID_RE.finditer(str(e)):
                    did = f"D{m.group(1)}:{m.group(2)}"
                    if did in turns and turns[did].strip() and did not in ev:
                        ev.append(did)
            if not ev:
                continue
            qid = f"lc:{sid}:{i}"
            if quick and i % 2:
                continue
            queries.append({"id": qid, "vault": sid, "kind": CATEGORIES[cat], "text": str(qa["question"]),
                            "evidence": [" ".join(turns[d].split()) for d in ev]})
        roots[sid] = base
    return roots, queries


def build_locomo_chat(quick: bool) -> tuple[dict[str, Path], list[dict]]:
    """LoCoMo stored the way the app stores a chat: each session a record
    ``session/dialog/<sample>-s<n>.jsonl``, one message per turn (the first speaker as ``user``, the other as
    ``assistant``; content ``<Speaker>: <text>`` plus the photo caption), ``created_at`` = the session's time + 30 s
    per turn. Same questions and evidence as :func:`build_locomo` (same query ids)."""
    data = json.loads((SHARED_DATA / "locomo-dev" / "locomo-dev5.json").read_text(encoding="utf-8"))
    if quick:
        data = data[:1]
    roots = {}
    for sample in data:
        sid = sample["sample_id"]
        base = _cached_dir("locomo-chat", sid)
        conv = sample["conversation"]
        for key, value in conv.items():
            if not (key.startswith("session_") and isinstance(value, list)):
                continue
            n = key.split("_")[1]
            when = _locomo_date(conv.get(f"session_{n}_date_time", "")) or datetime(2023, 1, 1)
            msgs = []
            for j, t in enumerate(value):
                photo = f" [shares a photo: {t['blip_caption']}]" if t.get("blip_caption") else ""
                role = "user" if t["speaker"] == conv["speaker_a"] else "assistant"
                at = (when + timedelta(seconds=30 * j)).isoformat()
                msgs.append(json.dumps({"id": t["dia_id"], "role": role, "content": f"{t['speaker']}: {t['text']}{photo}",
                                        "created_at": at}, ensure_ascii=False))
            _write(base / "vault" / "session" / "dialog" / f"{sid}-s{int(n):02d}.jsonl", "\n".join(msgs) + "\n")
        roots[sid] = base
    _, queries = build_locomo(quick)
    return roots, queries


# ----------------------------------------------------------------------------------------- words and known
_DATE_NAME = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")
_LEAD = re.compile(r"^[\W_]+", re.UNICODE)


def _vault_copy(label: str, src: Path) -> Path:
    files = sorted(p for p in src.rglob("*") if p.is_file())
    key = hashlib.sha256("\n".join(f"{p.relative_to(src)}:{p.stat().st_size}" for p in files).encode()).hexdigest()
    base = _cached_dir(label, key)
    if not (base / "vault").is_dir():
        import shutil

        shutil.copytree(src, base / "tmp-vault", symlinks=True)
        (base / "tmp-vault").rename(base / "vault")
    return base


def _notes(vault: Path) -> dict[str, str]:
    out = {}
    for p in sorted(vault.rglob("*.md")):
        rel = p.relative_to(vault).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        try:
            out[rel] = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            pass
    return out


def build_words(quick: bool) -> tuple[dict[str, Path], list[dict]]:
    from reme_engine.index.tokenizer import default_tokenizer

    base = _vault_copy("kgzh", SHARED_DATA / "vaults" / "knowledge-garden-zh")
    notes = _notes(base / "vault")
    tok = default_tokenizer()
    df: dict[str, int] = {}
    for text in notes.values():
        for w in set(tok.tokenize(text[:20000])):
            if len(w) == 2 and all("\u4e00" <= ch <= "\u9fff" for ch in w):
                df[w] = df.get(w, 0) + 1
    # jieba's own words (not just bigrams): a word jieba cuts from itself
    cands = sorted(w for w, n in df.items() if 5 <= n <= 40 and tok.tokenize(w)[:1] == [w])
    cands.sort(key=lambda w: zlib.crc32(w.encode()))
    words = ["瓶颈"] + [w for w in cands if w != "瓶颈"][: (4 if quick else 19)]
    queries = []
    for w in words:
        rel = {p for p, t in notes.items() if w in t}
        queries.append({"id": f"w:{w}", "vault": "kgzh", "kind": "word zh", "text": w, "relevant": sorted(rel)})
    return {"kgzh": base}, queries


def build_known(quick: bool) -> tuple[dict[str, Path], list[dict]]:
    from reme_engine.markdown.frontmatter import parse_frontmatter

    roots, queries = {}, []
    for label, src, lang in (("kgzh", "knowledge-garden-zh", "zh"), ("tasks", "obsidian-tasks-docs-en", "en")):
        base = _vault_copy(label, SHARED_DATA / "vaults" / src)
        roots[label] = base
        notes = _notes(base / "vault")
        names: dict[str, list[tuple[str, str]]] = {}
        for rel, text in notes.items():
            stem = rel.rsplit("/", 1)[-1][:-3]
            fm = parse_frontmatter(text).meta or {}
            al = fm.get("aliases") or fm.get("alias") or []
            al = [al] if isinstance(al, str) else [str(a) for a in al if a] if isinstance(al, list) else []
            for kind, value in [("title", stem)] + [("alias", a) for a in al]:
                q = _LEAD.sub("", str(value)).strip()
                if len(q) >= 2 and not _DATE_NAME.match(q):
                    names.setdefault(q.casefold(), []).append((kind, rel, q))
        items = [v[0] for v in names.values() if len({r for _, r, _ in v}) == 1]
        items.sort(key=lambda x: zlib.crc32(f"{x[0]}{x[1]}{x[2]}".encode()))
        per_kind = {"title": 20 if quick else 120, "alias": 10 if quick else 60}
        taken: dict[str, int] = {}
        for kind, rel, q in items:
            if lang == "en" and kind == "alias":
                continue
            if taken.get(kind, 0) >= per_kind[kind]:
                continue
            taken[kind] = taken.get(kind, 0) + 1
            queries.append({"id": f"k:{label}:{kind}:{rel}:{q}", "vault": label, "kind": f"{kind} {lang}",
                            "text": q, "target": rel})
    return roots, queries


BUILDERS = {"crossling": build_crossling, "locomo": build_locomo, "words": build_words, "known": build_known,
            "locomo-500": build_locomo, "locomo-chat": build_locomo_chat, "locomo-chat-lines": build_locomo_chat,
            "locomo-chat-w250": build_locomo_chat, "locomo-chat-w1000": build_locomo_chat}
#: sets indexed with other settings than the defaults (own state dir): not used to choose the fusion
SET_SETTINGS = {"locomo-500": {"chunk_bytes": 500}}
#: chat-record variants: how records are chunked (own state dir). ``lines``: the earlier rule, whole lines packed
#: to ``chunk_bytes`` (chunk_plain); ``(window_bytes, window_turns)``: :func:`reme_engine.search.chats.chunk_dialog`.
SET_DIALOG = {"locomo-chat-lines": "lines", "locomo-chat-w250": (250, 2), "locomo-chat-w1000": (1000, 8)}
MAIN_SETS = ("crossling", "locomo", "words", "known")
#: title vectors in the dense leg (reme_engine.search.titles); --no-title-vectors measures without them
TITLE_VECTORS = True


# ---------------------------------------------------------------------------------------------------- scoring
def _norm(s: str) -> str:
    return " ".join(s.split())


def score_hits(q: dict, hits: list) -> dict:
    """Metrics of one query's hits (best first): r1/r5/r10, mrr, ndcg10, chars10, n, and for LoCoMo r_budget."""
    out: dict[str, float] = {"chars10": float(sum(len(h.text) for h in hits[:10])), "n": float(len(hits))}
    if "target" in q:
        rank = next((i for i, h in enumerate(hits[:10], 1) if h.path == q["target"]), None)
        for k in (1, 5, 10):
            out[f"r{k}"] = 1.0 if rank is not None and rank <= k else 0.0
        out["mrr"] = 1.0 / rank if rank else 0.0
        out["ndcg10"] = 1.0 / math.log2(rank + 1) if rank else 0.0
        return out
    if "relevant" in q:
        rel = set(q["relevant"])
        notes: list[str] = []
        for h in hits:
            if h.path not in notes:
                notes.append(h.path)
        gains = [1.0 if p in rel else 0.0 for p in notes[:10]]
        for k in (1, 5, 10):
            out[f"r{k}"] = sum(gains[:k]) / max(1, min(k, len(rel)))
        first = next((i for i, g in enumerate(gains, 1) if g), None)
        out["mrr"] = 1.0 / first if first else 0.0
        ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(10, len(rel)) + 1))
        out["ndcg10"] = sum(g / math.log2(i + 1) for i, g in enumerate(gains, 1)) / ideal if ideal else 0.0
        return out
    ev = q["evidence"]
    texts = [_norm(h.text) for h in hits[:10]]
    found_at: dict[int, int] = {}
    for j, e in enumerate(ev):
        for i, t in enumerate(texts, 1):
            if e in t:
                found_at[j] = i
                break
    for k in (1, 5, 10):
        out[f"r{k}"] = sum(1 for r in found_at.values() if r <= k) / len(ev)
    first = min(found_at.values(), default=None)
    out["mrr"] = 1.0 / first if first else 0.0
    gains = [0.0] * len(texts)
    for r in found_at.values():
        gains[r - 1] += 1.0
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(10, len(ev)) + 1))
    out["ndcg10"] = sum(g / math.log2(i + 1) for i, g in enumerate(gains, 1)) / ideal
    budget, left = [], 2000
    for h in hits:
        if left <= 0:
            break
        budget.append(_norm(h.text[:left]))
        left -= len(h.text)
    out["r_budget"] = sum(1 for e in ev if any(e in b for b in budget)) / len(ev)
    return out


def mean_metrics(rows: list[dict]) -> dict:
    if not rows:
        return {"n_queries": 0}
    keys = rows[0].keys()
    out = {k: round(sum(r[k] for r in rows) / len(rows), 3) for k in keys}
    out["n_queries"] = len(rows)
    return out


# -------------------------------------------------------------------------------------------------- candidates
def candidates(FusionConfig) -> dict:
    """name → (mode, FusionConfig). The legs and ``legacy`` (the reference RRF of ARCHITECTURE §11.3.3, the default
    before this harness) run without the field rules; every other fused candidate runs with them (title boost 0.5,
    day-index demotion) and without a floor, so the fusion is chosen on the pipeline it will run in; the floor is
    measured separately."""
    off = {"rerank_coverage": 0.0, "rerank_neighbour": 0.0, "rerank_spread": 0.0,  # the first stage alone
           "rerank_lines": 0.0, "rerank_lines_chat": 0.0}
    plain = dict(title_boost=0.0, demote_day_index=False, relative_floor=0.0, **off)
    rules = dict(title_boost=0.5, demote_day_index=True, relative_floor=0.0, **off)
    c = {
        "keyword": ("keyword", FusionConfig(**plain)),
        "vector": ("vector", FusionConfig(**plain)),
        "legacy rrf 0.7/0.3 k60": ("hybrid", FusionConfig(method="rrf", **plain)),
        "rrf 0.7/0.3 k60": ("hybrid", FusionConfig(method="rrf", **rules)),
        "rrf 0.5/0.5 k60": ("hybrid", FusionConfig(method="rrf", vector_weight=0.5, keyword_weight=0.5, **rules)),
        "rrf 0.5/0.5 k10": ("hybrid", FusionConfig(method="rrf", vector_weight=0.5, keyword_weight=0.5, rrf_k=10,
                                                   **rules)),
        "rrf 0.7/0.3 k60 cos≥0.2": ("hybrid", FusionConfig(method="rrf", cosine_floor=0.2, **rules)),
        "interleave": ("hybrid", FusionConfig(method="interleave", **rules)),
        "tmm α0.3": ("hybrid", FusionConfig(method="tmm", keyword_share=0.3, **rules)),
        "tmm α0.5": ("hybrid", FusionConfig(method="tmm", keyword_share=0.5, **rules)),
        "choose τ0.5": ("hybrid", FusionConfig(method="choose", choose_threshold=0.5, **rules)),
        "choose τ0.3": ("hybrid", FusionConfig(method="choose", choose_threshold=0.3, **rules)),
    }
    for a in (0.3, 0.4, 0.5, 0.6, 0.7):
        c[f"convex α{a} cos 0.1–0.6"] = ("hybrid", FusionConfig(method="convex", keyword_share=a, cosine_lo=0.1,
                                                               cosine_hi=0.6, **rules))
    for a, lo, hi in ((0.5, 0.05, 0.5), (0.5, 0.15, 0.6), (0.5, 0.1, 0.8), (0.5, 0.2, 0.7), (0.5, 0.1, 1.0),
                      (0.6, 0.1, 0.8), (0.6, 0.1, 1.0), (0.7, 0.1, 0.8)):
        c[f"convex α{a} cos {lo}–{hi}"] = ("hybrid", FusionConfig(method="convex", keyword_share=a, cosine_lo=lo,
                                                                 cosine_hi=hi, **rules))
    return c


def rule_variants(base) -> dict:
    """Ablations of the default: each field rule off, and other relative floors."""
    out = {"default − title boost": replace(base, title_boost=0.0),
           "default − day-index demotion": replace(base, demote_day_index=False),
           "default − day-index collapse": replace(base, collapse_day_index=False),
           "default − null floor": replace(base, null_floor_quantile=0.0),
           "default − date lift": replace(base, date_boost=0.0)}
    for b in (0, 1000, 2000):
        if b != base.chat_context_bytes:
            out[f"default, chat context {b}"] = replace(base, chat_context_bytes=b)
    for f in (0.0, 0.1, 0.15, 0.2, 0.3):
        if f != base.relative_floor:
            out[f"default, floor {f}"] = replace(base, relative_floor=f)
    return out


# ------------------------------------------------------------------------------------------------ experiments
def prf_legs(s, q: str, run: dict, fb: int = 5, nterms: int = 10, lam: float = 0.3) -> dict:
    """RM3-style pseudo-relevance feedback on the keyword leg: the ``nterms`` terms of the first pass's top ``fb``
    fused hits with the highest Σ tf/len · idf (query terms left out) are OR'ed to the query; a chunk's keyword
    share becomes ``(1−λ)·kn(query) + λ·kn(query + expansion)``. Returns a new :meth:`run_legs` output."""
    import collections

    from reme_engine.search.fusion import bm25_idf

    toks = s.tokenizer.query_tokens(q)
    texts = [h.text for h in s.rank(q, run, limit=fb)[0]]
    if not texts or not toks or not run["legs"].get("keyword"):
        return run
    qset, n_rows = set(toks), s._chunk_count()
    docs = []
    for t in texts:
        tt = [x for x in s.tokenizer.tokenize(t) if x not in qset and len(x) > 1]
        if tt:
            docs.append((collections.Counter(tt), len(tt)))
    df = s._doc_freqs(list({w for c, _ in docs for w in c}))
    weight: collections.Counter = collections.Counter()
    for c, n in docs:
        for w, f in c.items():
            weight[w] += f / n * bm25_idf(df.get(w, 0), n_rows)
    exp = [w for w, _ in weight.most_common(nterms)]
    if not exp:
        return run
    both = toks + exp
    kw2 = dict(s.keyword_leg(" ".join(both), 50, None, tokens=both))
    idf1 = run["idf_sum"] or 1e-9
    idf2 = idf1 + sum(bm25_idf(df.get(w, 0), n_rows) for w in exp)
    kw1 = dict(run["legs"]["keyword"])
    new = {d: ((1 - lam) * min(1.0, kw1.get(d, 0.0) / idf1) + lam * min(1.0, kw2.get(d, 0.0) / idf2)) * idf1
           for d in set(kw1) | set(kw2)}
    legs = {**run["legs"], "keyword": sorted(new.items(), key=lambda kv: -kv[1])[:50]}
    return {**run, "legs": legs}


def experiments() -> dict:
    """name → ``fn(searcher, query, run) -> hits`` (default ranking rules): levers measured, not adopted."""
    import reme_engine.search.hybrid as hy

    def title_weight(w):
        def fn(s, q, run):
            old = hy.BM25_WEIGHTS
            hy.BM25_WEIGHTS = (old[0], w)
            try:
                run2 = s.run_legs(q, 50, mode="hybrid")
            finally:
                hy.BM25_WEIGHTS = old
            return s.rank(q, run2, limit=10)[0]
        return fn

    return {"exp: PRF fb5 t10 λ0.3": lambda s, q, run: s.rank(q, prf_legs(s, q, run), limit=10)[0],
            "exp: PRF fb10 t10 λ0.2": lambda s, q, run: s.rank(q, prf_legs(s, q, run, 10, 10, 0.2), limit=10)[0],
            "exp: title field weight 0.5": title_weight(0.5)}


EXPERIMENTS = False
LEVERS = False


def _turn_index(s):
    """``(matrix (lines, dim), owner chunk ids)`` of every cached turn vector of the searcher's conversation-shaped
    chunks (chat records included when their vectors are in the cache), made once per searcher."""
    import numpy as np

    from reme_engine.search import linevec

    got = getattr(s, "_bench_turns", None)
    if got is None:
        lv = linevec.LineVectors(s.store.conn, s.vectors.embedder.space, s.vectors.dim)
        lv.CACHE = 1 << 30
        mats, owners = [], []
        ids = [cid for cid, path in s.store.conn.execute("SELECT c.id, f.path FROM chunks c JOIN files f"
                                                         " ON f.id = c.file_id") if linevec.wants_lines(path, chats=True)]
        texts = s.chunk_texts(ids) if ids else {}
        for cid in ids:
            if cid in texts:
                m = lv.matrices([texts[cid][2]])[0]
                mats.append(m)
                owners += [cid] * len(m)
        got = s._bench_turns = (np.vstack(mats) if mats else np.zeros((0, s.vectors.dim), np.float32),
                                np.array(owners, dtype=np.int64))
    return got


def levers() -> dict:
    """name → ``fn(searcher, query, run) -> hits``: the levers of issue 11's sixth round, each the default with one
    change (bench/RESULTS.md, "Issue 11, sixth round"): stemming off, the knobs of ``search/rerank.py`` left off,
    chat turn vectors (when the cache holds them), a turn-level dense leg in the first stage (each chunk's vector
    score = max(its own cosine, its best turn's), over the 200 best turns), a deeper first stage."""
    import numpy as np

    import reme_engine.search.rerank as rr

    def knob(**kv):
        def fn(s, q, run):
            old = {k: getattr(rr, k) for k in kv}
            for k, v in kv.items():
                setattr(rr, k, v)
            try:
                return s.rank(q, run, limit=10)[0]
            finally:
                for k, v in old.items():
                    setattr(rr, k, v)
        return fn

    def cfg(**kv):
        return lambda s, q, run: s.rank(q, run, limit=10, fusion=replace(s.fusion, **kv))[0]

    def turn_leg(s, q, run):
        got = getattr(s, "last_query_vec", None)
        if not run["legs"].get("vector") or got is None or got[0] != q:
            return s.rank(q, run, limit=10)[0]
        m, own = _turn_index(s)
        best = dict(run["legs"]["vector"])
        if len(m):
            c = m @ got[1]
            for i in np.argsort(-c)[:200]:
                cid = int(own[i])
                if c[i] > best.get(cid, -2.0):
                    best[cid] = float(c[i])
        vec = sorted(best.items(), key=lambda kv: -kv[1])[:len(run["legs"]["vector"])]
        return s.rank(q, {**run, "legs": {**run["legs"], "vector": vec}}, limit=10)[0]

    def names_kept(s, q, run):
        """The vector leg embeds the whole query, speaker names included (the default before session 22:
        :mod:`reme_engine.search.speakers` off), ranked with the default fusion."""
        if not getattr(s, "speakers_out", False) or s.vector_query(q) == q:
            return s.rank(q, run, limit=10)[0]
        s.speakers_out = False
        try:
            run2 = s.run_legs(q, 50, mode="hybrid")
        finally:
            s.speakers_out = True
        return s.rank(q, run2, limit=10)[0]

    def vector_prf(beta: float, k: int):
        """Rocchio feedback in the dense leg: the query vector plus ``beta`` × the mean vector of the default
        ranking's top ``k`` chunks, normalised, searched again (chunk and title vectors); then the default
        ranking over the new vector leg (the second stage keeps the original query vector)."""
        def fn(s, q, run):
            got = getattr(s, "last_query_vec", None)
            if not run["legs"].get("vector") or got is None or got[0] != q:
                return s.rank(q, run, limit=10)[0]
            from reme_engine.search.titles import merge_title_hits

            top, _ = s.rank(q, run, limit=k)
            idx = s.vectors.index._index
            vecs = []
            for h in top:
                try:
                    vecs.append(idx.reconstruct(int(h.chunk_id)))
                except RuntimeError:
                    pass
            if not vecs:
                return s.rank(q, run, limit=10)[0]
            qv = got[1] + beta * np.mean(vecs, axis=0)
            qv = (qv / np.linalg.norm(qv)).astype(np.float32)
            n = len(run["legs"]["vector"])
            hits, tids = s.vectors.search(qv, n), set()
            tv = s.titles()
            if tv is not None:
                th = tv.search(qv, n, None)
                if th:
                    hits, tids = merge_title_hits(hits, th, n)
            return s.rank(q, {**run, "legs": {**run["legs"], "vector": hits}, "title_ids": tids}, limit=10)[0]
        return fn

    def dates_flip(s, q, run):
        """The default with :attr:`HybridSearcher.dates_out` flipped (dates in / out of the vector query)."""
        from reme_engine.search.dates import query_dates

        if not query_dates(q):
            return s.rank(q, run, limit=10)[0]
        s.dates_out = not s.dates_out
        try:
            run2 = s.run_legs(q, 50, mode="hybrid")
            return s.rank(q, run2, limit=10)[0]
        finally:
            s.dates_out = not s.dates_out
            s.run_legs(q, 50, mode="hybrid")  # the query vector of the default again, for the levers after this

    def deeper(s, q, run):
        return s.rank(q, s.run_legs(q, 100, mode="hybrid"), limit=10,
                      fusion=replace(s.fusion, rerank_depth=50))[0]

    return {"exp: stemming off": knob(STEM=False), "exp: absent words by stem": knob(ABSENT_STEMMED=True),
            "exp: chat neighbour 0.05": knob(NEIGHBOUR_CHAT=0.05), "exp: chat neighbour 0.1": knob(NEIGHBOUR_CHAT=0.1),
            "exp: chat neighbour 0.2": knob(NEIGHBOUR_CHAT=0.2), "exp: chat neighbour 0.3": knob(NEIGHBOUR_CHAT=0.3),
            "exp: chat neighbour off": knob(NEIGHBOUR_CHAT=0.0), "exp: adjacent-line pair 0.5": knob(PAIR=0.5),
            "exp: chat turn vectors 0.1": cfg(rerank_lines_chat=0.1), "exp: turn-level dense leg": turn_leg,
            "exp: pool 100, depth 50": deeper,
            **({"exp: speakers off": knob(SPEAKERS=False)} if hasattr(rr, "SPEAKERS") else {}),
            "exp: vector PRF β0.15 top3": vector_prf(0.15, 3), "exp: vector PRF β0.3 top3": vector_prf(0.3, 3),
            "exp: vector PRF β0.3 top1": vector_prf(0.3, 1), "exp: vector PRF β0.6 top3": vector_prf(0.6, 3),
            "exp: dates in/out of the vector query flipped": dates_flip,
            "exp: speaker names kept in the vector query": names_kept}


def fusion_grid(base) -> dict:
    """The default (second stage included) at other ``convex`` α / cosine ranges for queries naming a speaker
    (``named_*``, :mod:`reme_engine.search.speakers`), and at the general α / range for the rest (``--fusion-grid``):
    with the vector leg changed in session 22 the fusion is chosen again over every set."""
    out = {"grid named = general (0.6, 0.1–0.8)": replace(base, named_keyword_share=base.keyword_share,
                                                           named_cosine_lo=base.cosine_lo,
                                                           named_cosine_hi=base.cosine_hi)}
    for a in (0.4, 0.5, 0.6):
        for lo, hi in ((0.0, 0.5), (0.05, 0.4), (0.05, 0.5), (0.05, 0.6), (0.1, 0.5), (0.1, 0.6)):
            if (a, lo, hi) != (base.named_keyword_share, base.named_cosine_lo, base.named_cosine_hi):
                out[f"grid named α{a} cos {lo}–{hi}"] = replace(base, named_keyword_share=a, named_cosine_lo=lo,
                                                               named_cosine_hi=hi)
    for b in (0.2, 0.5, 1.0):
        if b != base.date_boost:
            out[f"grid date boost {b}"] = replace(base, date_boost=b)
    for a, lo, hi in ((0.7, 0.05, 0.5), (0.7, 0.05, 0.6), (0.6, 0.05, 0.8)):
        out[f"grid general α{a} cos {lo}–{hi}"] = replace(base, keyword_share=a, cosine_lo=lo, cosine_hi=hi)
    return out


def second_stage_variants(base) -> dict:
    """The default without its second stage (:mod:`reme_engine.search.rerank`), and with the signals that are
    settings, not defaults (measured: bench/RESULTS.md, "Issue 11, fourth round")."""
    return {"default − second stage": replace(base, rerank_coverage=0.0, rerank_neighbour=0.0, rerank_spread=0.0,
                                              rerank_lines=0.0, rerank_lines_chat=0.0),
            "default + neighbour 0.1": replace(base, rerank_neighbour=0.1),
            "default + spread 0.1": replace(base, rerank_spread=0.1),
            "default − line vectors": replace(base, rerank_lines=0.0, rerank_lines_chat=0.0),
            "default, lines 0.1 (cards and chats)": replace(base, rerank_lines=0.1, rerank_lines_chat=0.1),
            "default, lines 0.3 (cards and chats)": replace(base, rerank_lines=0.3, rerank_lines_chat=0.3)}


STAGE_CPU_MS: list[float] = []  # CPU time of each second-stage call (process time, ms)
#: with ``--misses``: one :func:`miss_row` per conversation question, written to that file
MISSES: list[dict] | None = None


def miss_row(set_name: str, s, q: dict, run: dict) -> dict:
    """Where a conversation question's evidence went under the default ranking: per evidence turn, its rank in
    the returned top 10 (None = missed) and, in the same ranking without chat context over 100 hits, the rank,
    path and leg ranks of the chunk holding it (None = not among the candidates). For classifying misses
    (bench/RESULTS.md, "Issue 11, session 21 (C)"); the question's split and kind come along."""
    text = q["text"].strip()
    hits, _ = s.rank(text, run, limit=10)
    deep, _ = s.rank(text, run, limit=100, fusion=replace(s.fusion, chat_context_bytes=0))
    top = [_norm(h.text) for h in hits]
    low = [_norm(h.text) for h in deep]
    ev = []
    for e in q["evidence"]:
        r10 = next((i for i, t in enumerate(top, 1) if e in t), None)
        rd = next((i for i, t in enumerate(low, 1) if e in t), None)
        h = deep[rd - 1] if rd else None
        ev.append({"turn": e[:200], "rank10": r10, "rank100": rd, "path": h.path if h else None,
                   "keyword_rank": h.keyword_rank if h else None, "vector_rank": h.vector_rank if h else None})
    return {"set": set_name, "id": q["id"], "held_out": held_out(q["id"]), "kind": q["kind"], "question": text,
            "query_tokens": s.tokenizer.query_tokens(text), "evidence": ev,
            "top10": [{"path": h.path, "line": h.start_line, "keyword_rank": h.keyword_rank,
                       "vector_rank": h.vector_rank, "score": round(h.score, 4)} for h in hits]}


class second_stage:
    """``with second_stage(searcher):`` — the second ranking stage runs inside ``HybridSearcher.rank`` right after
    the field rules. When ``hybrid.py`` calls ``rerank_for`` itself this does nothing; otherwise it wraps the
    ``adjust`` that ``rank`` calls (this process only) so the harness measures the stage as it would run there.
    Records each call's CPU time in :data:`STAGE_CPU_MS`."""

    def __init__(self, searcher):
        self.s = searcher

    def __enter__(self):
        import reme_engine.search.hybrid as hy
        from reme_engine.search.rerank import enabled, rerank_for

        self.hy, self.orig = hy, hy.adjust
        import inspect

        if "rerank_for" in inspect.getsource(hy.HybridSearcher.rank):  # the hook is in: nothing to wrap
            return self
        orig, s = self.orig, self.s

        def adjust(fused, rows, query, cfg):
            orig(fused, rows, query, cfg)
            if enabled(cfg):
                t = time.process_time()
                rerank_for(s, fused, query, cfg)
                STAGE_CPU_MS.append((time.process_time() - t) * 1000)

        hy.adjust = adjust
        return self

    def __exit__(self, *exc):
        self.hy.adjust = self.orig
        return False


# ------------------------------------------------------------------------------------------------------- main
def run_set(name: str, quick: bool, emb, cands: dict, extra: dict, lat_n: int) -> dict:
    from reme_engine.search.hybrid import FusionConfig

    t0 = time.perf_counter()
    roots, queries = BUILDERS[name](quick)
    log(f"{name}: {len(queries)} queries, built in {time.perf_counter() - t0:.1f}s")
    engines, index_info = {}, {}
    import reme_engine.search.chats as chats

    real_chunk_dialog = chats.chunk_dialog
    variant = SET_DIALOG.get(name)
    if variant == "lines":
        from reme_engine.markdown.chunker import chunk_plain

        chats.chunk_dialog = lambda text, max_bytes=2000, **_: chunk_plain(text, max_bytes=max_bytes)
    elif variant:
        chats.chunk_dialog = lambda text, max_bytes=2000, **_: real_chunk_dialog(
            text, max_bytes=max_bytes, window_bytes=variant[0], window_turns=variant[1])
    for key, root in roots.items():
        t = time.perf_counter()
        over = SET_SETTINGS.get(name, {})
        state = root / ("state" + "".join(f"-{k}{v}" for k, v in over.items())
                        + (f"-{name}" if variant else ""))
        eng = open_engine(root / "vault", state, emb, **over)
        eng.index()
        index_info[key] = {"seconds": round(time.perf_counter() - t, 1),
                           "chunks": eng.store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]}
        eng.searcher.title_vectors = TITLE_VECTORS
        if eng.vectors is not None and not eng.vectors.ready:
            eng.vectors.open()
        if TITLE_VECTORS:
            eng.searcher.wait_titles(600)
        engines[key] = eng
    chats.chunk_dialog = real_chunk_dialog

    def engine_for(q):
        return engines[q["vault"]]

    exps = {**(experiments() if EXPERIMENTS else {}), **(levers() if LEVERS else {})}
    stage_from = len(STAGE_CPU_MS)
    per: dict[str, list[tuple[dict, dict]]] = {m: [] for m in list(cands) + list(extra) + list(exps)}
    for i, q in enumerate(queries):
        eng = engine_for(q)
        s = eng.searcher
        if s.vectors is not None and not s.vectors.ready:
            s.vectors.open()
        run = s.run_legs(q["text"].strip(), 50, mode="hybrid")
        with second_stage(s):
            for m, (mode, cfg) in list(cands.items()) + [(k, ("hybrid", v)) for k, v in extra.items()]:
                hits, _hidden = s.rank(q["text"].strip(), run, limit=10, mode=mode, fusion=cfg)
                per[m].append((q, score_hits(q, hits)))
            for m, fn in exps.items():
                per[m].append((q, score_hits(q, fn(s, q["text"].strip(), run))))
            if MISSES is not None and "evidence" in q:
                MISSES.append(miss_row(name, s, q, run))
        if i % 100 == 0:
            log(f"{name}: {i}/{len(queries)}")
    # latency (warm, 3 rounds) of the engine's default settings and of the legacy fusion, per vault
    legacy = cands["legacy rrf 0.7/0.3 k60"][1]
    first_stage = replace(next(iter(engines.values())).searcher.fusion, rerank_coverage=0.0, rerank_neighbour=0.0,
                          rerank_spread=0.0, rerank_lines=0.0, rerank_lines_chat=0.0)
    lat: dict[str, dict[str, list[float]]] = {}
    for vault in engines:
        qv = [q for q in queries if q["vault"] == vault][:lat_n]
        eng = engines[vault]
        runs = {"default": lambda t, e=eng: e.search(t, limit=10, neighbors=False),
                "legacy": lambda t, e=eng: e.searcher.search(t, limit=10, neighbors=False, fusion=legacy),
                "first_stage": lambda t, e=eng: e.searcher.search(t, limit=10, neighbors=False, fusion=first_stage)}
        names = list(runs)
        d = lat.setdefault(vault, {k: [] for k in names})
        for rnd in range(3):
            for i, q in enumerate(qv):
                # the order rotates per query: the first search of a query pays for what the next ones reuse
                k = (i + rnd) % len(names)
                with second_stage(eng.searcher):  # the default's second stage, as rank() would run it
                    for meth in names[k:] + names[:k]:
                        ts = time.perf_counter()
                        runs[meth](q["text"])
                        d[meth].append((time.perf_counter() - ts) * 1000)
    all_default = [x for d in lat.values() for x in d["default"]]
    all_first = [x for d in lat.values() for x in d["first_stage"]]
    out = {"queries": len(queries), "index": index_info, "latency_ms_default": stats(all_default),
           "second_stage_cpu_ms": stats(STAGE_CPU_MS[stage_from:]),
           "latency_ms_first_stage": stats(all_first),  # the default without its second stage, same rounds
           "latency_ms": {v: {k: stats(x) for k, x in d.items()} for v, d in lat.items()}, "methods": {}}
    for m, rows in per.items():
        kinds = sorted({q["kind"] for q, _ in rows})
        out["methods"][m] = {
            "all": mean_metrics([r for _, r in rows]),
            "dev": mean_metrics([r for q, r in rows if not held_out(q["id"])]),
            "held_out": mean_metrics([r for q, r in rows if held_out(q["id"])]),
            "kinds": {k: mean_metrics([r for q, r in rows if q["kind"] == k]) for k in kinds},
        }
    for e in engines.values():
        e.close()
    return out


def choose(results: dict, names: list[str]) -> dict:
    """The fused method with the best worst-case margin ``min over sets (R@5 − better leg's R@5)`` on the dev
    split (ties: higher mean R@5)."""
    table = {}
    for m in names:
        margins, r5s = [], []
        for sname, res in results.items():
            meth = res["methods"]
            best_leg = max(meth["keyword"]["dev"].get("r5", 0), meth["vector"]["dev"].get("r5", 0))
            r5 = meth[m]["dev"].get("r5", 0)
            margins.append(r5 - best_leg)
            r5s.append(r5)
        table[m] = {"worst_margin": round(min(margins), 3), "mean_r5": round(sum(r5s) / len(r5s), 3)}
    best = max(table, key=lambda m: (table[m]["worst_margin"], table[m]["mean_r5"]))
    return {"chosen": best, "table": table}


def write_results_md(out: dict, cmd: str) -> None:
    m = out["machine"]
    lines = [SECTION_START, "### Latest run — `" + cmd + "`", "",
             f"CPU {m.get('cpu')}, {m.get('cores')} cores; load {m.get('loadavg_start')} → {out.get('loadavg_end')}; "
             f"engine source `{m['engine_source'].get('sha256_16', '?')}`; {out['started_at']}. "
             "R@k/MRR/nDCG@10 over the top 10 hits (words: share of the top-k distinct notes that contain the word); "
             "chars = characters of the top 10 hits. Held-out = the third of each set not used to choose. "
             "The machine was shared (see the load): latencies are upper bounds.", ""]
    sets = list(out["sets"])
    head = "| method | " + " | ".join(f"{s} R@1 / R@5 / R@10 / MRR / nDCG" for s in sets) + " |"
    lines += [head, "|---|" + "---|" * len(sets)]
    shown = ["keyword", "vector", "legacy rrf 0.7/0.3 k60", "rrf 0.5/0.5 k10", "interleave", "tmm α0.5",
             "choose τ0.3", "convex α0.5 cos 0.1–0.6",
             out["choice"]["chosen"], "default (chosen + field rules)", "default − day-index collapse",
             "default − second stage"]
    shown += sorted({m for r in out["sets"].values() for m in r["methods"] if m.startswith("default + ")})
    shown += sorted({m for r in out["sets"].values() for m in r["methods"] if m.startswith("exp:")})
    for meth in dict.fromkeys(shown):
        cells = []
        for s in sets:
            a = out["sets"][s]["methods"].get(meth, {}).get("all", {})
            cells.append(" / ".join(f"{a.get(k, float('nan')):.2f}" for k in ("r1", "r5", "r10", "mrr", "ndcg10")))
        label = f"**{meth}**" if meth in (out["choice"]["chosen"], "default (chosen + field rules)") else meth
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "R@5 on the held-out third, and what the default returns:", "",
              "| set | keyword | vector | legacy | default | default chars (top 10) | hits | p50 ms (warm, default) |",
              "|---|---|---|---|---|---|---|---|"]
    for s in sets:
        mm = out["sets"][s]["methods"]
        d = mm["default (chosen + field rules)"]["all"]
        lines.append(f"| {s} | {mm['keyword']['held_out'].get('r5', 0):.2f} | {mm['vector']['held_out'].get('r5', 0):.2f}"
                     f" | {mm['legacy rrf 0.7/0.3 k60']['held_out'].get('r5', 0):.2f}"
                     f" | **{mm['default (chosen + field rules)']['held_out'].get('r5', 0):.2f}**"
                     f" | {d.get('chars10', 0):.0f} | {d.get('n', 0):.1f}"
                     f" | {out['sets'][s]['latency_ms_default'].get('p50', float('nan'))} |")
    lines += ["", "Per kind, R@5 (keyword / vector / legacy / default):", ""]
    for s in sets:
        mm = out["sets"][s]["methods"]
        parts = []
        for k in mm["keyword"]["kinds"]:
            vals = [mm[x]["kinds"][k].get("r5", 0) for x in ("keyword", "vector", "legacy rrf 0.7/0.3 k60",
                                                               "default (chosen + field rules)")]
            parts.append(f"{k} ({mm['keyword']['kinds'][k]['n_queries']}): " + " / ".join(f"{v:.2f}" for v in vals))
        lines.append(f"- **{s}**: " + "; ".join(parts))
    for lset in [x for x in out["sets"] if x.startswith("locomo")]:
        if lset not in out["sets"]:
            continue
        mm = out["sets"][lset]["methods"]
        lines += ["", f"{lset}: evidence recall within 2,000 characters returned: " + ", ".join(
            f"{x} {mm[x]['all'].get('r_budget', 0):.2f}" for x in ("keyword", "vector", "legacy rrf 0.7/0.3 k60",
                                                                   "default (chosen + field rules)")) + "."]
    stage = sorted({m for r in out["sets"].values() for m in r["methods"]
                    if m.startswith("default + ") or m == "default − second stage"})
    if stage:
        lines += ["", ("Second ranking stage (`search/rerank.py`), R@5 / R@10 on the dev split | the held-out third; "
                       "the stage's CPU ms per call (p50), and warm search p50 with it vs without it (same rounds):"),
                  "", "| set | " + " | ".join(["default", *stage]) + " | CPU ms |", "|---|" + "---|" * (len(stage) + 2)]
        for sname in sets:
            mm = out["sets"][sname]["methods"]
            cells = []
            for meth in ["default (chosen + field rules)"] + stage:
                dv, ho = mm.get(meth, {}).get("dev", {}), mm.get(meth, {}).get("held_out", {})
                cells.append(f"{dv.get('r5', 0):.3f} / {dv.get('r10', 0):.3f} \\| {ho.get('r5', 0):.3f} / "
                             f"{ho.get('r10', 0):.3f}")
            cpu = out["sets"][sname].get("second_stage_cpu_ms", {}).get("p50", float("nan"))
            w1 = out["sets"][sname].get("latency_ms_first_stage", {}).get("p50", float("nan"))
            w2 = out["sets"][sname].get("latency_ms_default", {}).get("p50", float("nan"))
            lines.append(f"| {sname} | " + " | ".join(cells) + f" | {cpu} (warm p50 {w2} vs {w1} ms without) |")
    lat_rows = [f"{s}/{v} {d['default'].get('p50')} (legacy {d['legacy'].get('p50')})"
                for s in sets for v, d in out["sets"][s].get("latency_ms", {}).items()]
    lines += ["", "Warm search p50 ms, default fusion (legacy RRF), 3 rounds, `engine.search(q, limit=10, "
              "neighbors=False)` incl. the query embedding: " + "; ".join(lat_rows) + "."]
    lines += ["", "Fusion choice (dev split; worst margin = min over sets of R@5 − the better leg's R@5):", "",
              "| method | worst margin | mean R@5 |", "|---|---|---|"]
    for meth, row in sorted(out["choice"]["table"].items(), key=lambda kv: -kv[1]["worst_margin"]):
        lines.append(f"| {meth} | {row['worst_margin']:+.3f} | {row['mean_r5']:.3f} |")
    lines += ["", SECTION_END]
    text = RESULTS_MD.read_text(encoding="utf-8")
    block = "\n".join(lines)
    if SECTION_START in text and SECTION_END in text:
        a, b = text.index(SECTION_START), text.index(SECTION_END) + len(SECTION_END)
        text = text[:a] + block + text[b:]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    RESULTS_MD.write_text(text, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sets", default="crossling,locomo,words,known,locomo-500,locomo-chat")
    ap.add_argument("--write-results", action="store_true", help="replace the quality section of bench/RESULTS.md")
    ap.add_argument("--latency-queries", type=int, default=50, help="queries per vault timed (3 rounds)")
    ap.add_argument("--json-out", help="also write the JSON here (e.g. bench/results/bench_quality.json)")
    ap.add_argument("--no-title-vectors", action="store_true", help="the dense leg without title vectors")
    ap.add_argument("--experiments", action="store_true",
                    help="also the levers measured and not adopted (pseudo-relevance feedback, title field weight)")
    ap.add_argument("--lean", action="store_true",
                    help="only the legs, the legacy RRF, the default and its second-stage variants (for lever runs)")
    ap.add_argument("--levers", action="store_true",
                    help="also the sixth round's levers (stemming off, turn-level dense leg, deeper pool, …)")
    ap.add_argument("--fusion-grid", action="store_true",
                    help="also the default at other keyword shares / cosine ranges, second stage included")
    ap.add_argument("--misses", help="write where each conversation question's evidence ranks (JSON) to this file")
    args = ap.parse_args()
    global TITLE_VECTORS, EXPERIMENTS, LEVERS, MISSES
    MISSES = [] if args.misses else None
    LEVERS = args.levers
    TITLE_VECTORS = not args.no_title_vectors
    EXPERIMENTS = args.experiments
    from reme_engine.search.hybrid import FusionConfig
    from _common import loaded_embedder

    out = {"machine": machine(), "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "quick": args.quick,
           "title_vectors": TITLE_VECTORS, "sets": {}}
    emb, load_s = loaded_embedder()
    out["embedder_load_s"] = round(load_s, 2)
    cands = candidates(FusionConfig)
    default = FusionConfig()
    extra = {"default (chosen + field rules)": default}
    if args.lean:
        cands = {k: cands[k] for k in ("keyword", "vector", "legacy rrf 0.7/0.3 k60")}
    else:
        extra.update(rule_variants(default))
    extra.update(second_stage_variants(default))
    if args.fusion_grid:
        extra.update(fusion_grid(default))
    for name in args.sets.split(","):
        out["sets"][name] = run_set(name, args.quick, emb, cands, extra, args.latency_queries)
        out["sets"][name]["loadavg"] = loadavg()
    fused = [m for m in cands if m not in ("keyword", "vector")]
    main_sets = {k: v for k, v in out["sets"].items() if k in MAIN_SETS}
    out["choice"] = choose(main_sets, fused) if main_sets else {"chosen": "default (chosen + field rules)",
                                                                "table": {}}
    out["loadavg_end"] = loadavg()
    if args.write_results:
        cmd = "$PY bench/bench_quality.py" + (" --quick" if args.quick else "") + \
              (f" --sets {args.sets}" if args.sets != ap.get_default("sets") else "") + " --write-results"
        write_results_md(out, cmd)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, ensure_ascii=False, indent=1, default=str) + "\n",
                                       encoding="utf-8")
    if args.misses:
        Path(args.misses).write_text(json.dumps(MISSES, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    emit(out)


if __name__ == "__main__":
    main()

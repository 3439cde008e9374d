"""Speaker names out of the vector leg's query: in a vault holding conversations (daily cards, chat records whose
lines open with a speaker label), a query's words that name one of the labelled speakers are dropped from the
text the dense leg embeds; the keyword leg and the second stage's line coverage keep them.

Why: every card, card title and chat window of a two-person conversation holds both names, so a name in the query
pulls its vector toward whatever mentions the name, i.e. toward every chunk alike, and away from the one turn the
rest of the question paraphrases. Measured on LoCoMo (bench/RESULTS.md, "Issue 11, session 21 (C)" and "Issue 11,
session 22 (A)"): the vector leg alone, cards R@5 0.37 → 0.63, chat records 0.63 → 0.73 (dev split). Which
person is meant still counts where it can be told apart: BM25 over the words, and the speaker rule of line
coverage (:data:`reme_engine.search.rerank.SPEAKERS`).

The names are the words of the labels :func:`reme_engine.search.linevec.speaker_labels` finds in the chunks of
conversation files (:func:`reme_engine.search.linevec.wants_lines`), kept per chunk and brought up to date when
the index changes (only new chunks are read). A vault without conversations has none, and its queries are
embedded unchanged. Query words are whitespace-separated: a name inside an unspaced CJK query is not dropped.
"""

from __future__ import annotations

import re

from .linevec import speaker_labels, wants_lines

#: A query word's core for comparing with names: the word lower-cased, without surrounding punctuation and a
#: trailing possessive ("Melanie's?" → "melanie").
_CORE_RE = re.compile(r"^\W*(.*?)(?:['’]s)?\W*$", re.S)


def word_core(word: str) -> str:
    """``word`` lower-cased without leading/trailing punctuation and a possessive ``'s``. Pure."""
    m = _CORE_RE.match(word.lower())
    return m.group(1) if m else word.lower()


def strip_names(query: str, names: frozenset[str] | set[str]) -> str:
    """``query`` without its whitespace-separated words whose :func:`word_core` is in ``names`` (lower-case name
    words), or ``query`` unchanged when none is a name or every word is one (the query is then only names: its
    vector has nothing else to go on). Pure."""
    if not names:
        return query
    words = query.split()
    kept = [w for w in words if word_core(w) not in names]
    if not kept or len(kept) == len(words):
        return query
    return " ".join(kept)


#: A file's labels count as speakers only when its turns go back and forth: at least this many changes of speaker
#: between consecutive labelled lines (Ana, Ben, Ana: 2). A daily card's one-off ``**Fix**:`` / ``**Cause**:``
#: lines (the demo vault has them: 1 change) name no one, and their words must stay in the query. Every LoCoMo
#: session (card or chat record) passes: 10–50 changes each.
MIN_SWITCHES = 2


class SpeakerNames:
    """The lower-case words of the speaker labels in a store's conversation files (those whose turns go back and
    forth, :data:`MIN_SWITCHES`), read per chunk and kept per chunk id.

    ``daily_dir`` / ``session_dir``: where the vault's daily cards and chat records are (as for turn vectors).
    :meth:`names` re-reads only when the index's postings changed (``key``), and then only chunks not seen
    before, so a chat record growing by one message costs one chunk's text."""

    def __init__(self, store) -> None:
        self.store = store
        self._key = None
        #: chunk id -> (file id, ordinal, its labels in line order, changes of speaker between them)
        self._per_chunk: dict[int, tuple[int, int, tuple[frozenset[str], ...], int]] = {}
        self._names: frozenset[str] = frozenset()

    def names(self, key, daily_dir: str = "daily", session_dir: str = "session") -> frozenset[str]:
        """The names as of ``key`` (any value that changes whenever the index's chunks do, e.g. the postings'
        generation; None = always re-check). One SQL listing of the conversation chunks when ``key`` moved."""
        if key is not None and key == self._key:
            return self._names
        c = self.store.conn
        d, s = daily_dir.strip("/"), session_dir.strip("/")
        rows: list[tuple[int, tuple[int, int]]] = []
        for prefix in (f"{d}/", f"{s}/dialog/"):
            # a range on the unique path index (files first, then their chunks): the cost follows the
            # conversation files, not the vault (``LIKE`` scanned every chunk: 0.55 ms on 4,237 chunks, none of them
            # a conversation's); ``/`` + 1 is ``0``
            rows += [(cid, (fid, o)) for cid, fid, o, path in c.execute(
                "SELECT c.id, f.id, c.ord, f.path FROM files f CROSS JOIN chunks c ON c.file_id = f.id"
                " WHERE f.path >= ? AND f.path < ?", (prefix, prefix[:-1] + "0")) if wants_lines(path, d, s, chats=True)]
        live = dict(rows)
        per = {cid: v for cid, v in self._per_chunk.items() if live.get(cid) == v[:2]}
        todo = [cid for cid in live if cid not in per]
        for i in range(0, len(todo), 500):
            part = todo[i:i + 500]
            for cid, text in c.execute(f"SELECT id, text FROM chunks WHERE id IN ({','.join('?' * len(part))})",
                                       part):
                labels = speaker_labels((text or "").lower())
                seq = [labels[ln] for ln in sorted(labels)]
                per[cid] = (*live[cid], tuple(seq), sum(1 for x, y in zip(seq, seq[1:]) if x != y))
        by_file: dict[int, list] = {}
        for fid, o, seq, switches in per.values():
            if seq:
                by_file.setdefault(fid, []).append((o, seq, switches))
        names: set[str] = set()
        for parts in by_file.values():
            parts.sort(key=lambda p: p[0])
            # changes inside each chunk, and from one chunk's last speaker to the next one's first (a chat
            # record's windows often hold a single turn)
            switches = sum(p[2] for p in parts) + sum(1 for a, b in zip(parts, parts[1:]) if a[1][-1] != b[1][0])
            if switches >= MIN_SWITCHES:
                for _, seq, _ in parts:
                    for w in seq:
                        names |= w
        self._per_chunk = per
        self._names = frozenset(names)
        self._key = key
        return self._names

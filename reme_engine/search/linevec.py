"""Turn-level vectors: one embedding per line (turn) of conversation-shaped chunks, built by the vector pass and
read by the second ranking stage (:mod:`.rerank`) without encoding anything at query time.

Why: a daily card's 2,000-byte chunk holds ~10 turns and its vector blurs them; a question's evidence is one turn
the question paraphrases (measured offline: bench/RESULTS.md, "Issue 11, fourth round" — the one lever worth
~+0.01 R@10 on LoCoMo as cards). Only files whose lines are turns get them: chat records
(``<session_dir>/dialog/*.jsonl``) and daily cards (``<daily_dir>/<date>/<card>.md``) — about one vector per
~100 bytes, so notes at large (knowledge-garden-zh: none) pay nothing in index size or vector-pass time.

Storage: the engine's embedding cache (``emb.embeddings``, keyed by embedding space and
:func:`line_key`), like title vectors (:mod:`.titles`). A line whose vector is missing (a pass interrupted, a
remote embedder failing) is simply not scored; the chunk keeps its other signals.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import TYPE_CHECKING

from ..vault.io import text_hash

if TYPE_CHECKING:
    import numpy as np

#: Lines shorter than this (characters, after the chat prefix is dropped) get no vector: "ok", "haha" match
#: anything and the chunk vector covers them.
MIN_CHARS = 16
#: Most lines of one chunk given a vector (a 2,000-byte chunk of one-line turns has ~40 at most).
MAX_LINES = 48
#: Version of the line rules (part of :func:`line_key`): a change re-embeds instead of reusing stale keys.
RULES = "lines-v1"
#: Chat records get turn vectors too (off: measured on LoCoMo as chat records, their ≤ 4-turn windows' own vectors
#: are already near turn level — R@5 / R@10 with turn vectors 0.801 / 0.864 vs 0.801 / 0.866 without, dev split —
#: while the turns were ~6× the vectors of a conversation-only vault; bench/RESULTS.md, "Issue 11, sixth round").
CHAT_LINES = False
_CHAT_PREFIX_RE = re.compile(r"^[a-z]+ · \d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}: ")
_DATE_DIR_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def wants_lines(path: str, daily_dir: str = "daily", session_dir: str = "session", *,
                chats: bool | None = None) -> bool:
    """True when the file at vault-relative ``path`` gets turn vectors: a daily card
    ``<daily_dir>/<YYYY-MM-DD>/<name>.md`` (not the day page ``<daily_dir>/<date>.md`` itself, which only lists
    cards), and, when ``chats`` (default :data:`CHAT_LINES`), a chat record ``<session_dir>/dialog/<id>.jsonl``.
    Pure."""
    if path.endswith(".jsonl"):
        if not (CHAT_LINES if chats is None else chats):
            return False
        return path.startswith(f"{session_dir.strip('/')}/dialog/")
    parts = path.split("/")
    return (len(parts) == 3 and parts[0] == daily_dir.strip("/") and bool(_DATE_DIR_RE.match(parts[1]))
            and parts[2].endswith(".md"))


def chunk_lines(text: str) -> list[str]:
    """The texts of ``text``'s lines that get a vector, in order: non-blank lines of at least :data:`MIN_CHARS`
    characters, a chat line without its ``role · date time:`` prefix (its words are what the question
    paraphrases), headings and frontmatter-like lines left out, at most :data:`MAX_LINES`. Pure."""
    out = []
    for raw in text.split("\n"):
        s = _CHAT_PREFIX_RE.sub("", raw.strip())
        if len(s) < MIN_CHARS or s.startswith("#") or s == "---":
            continue
        out.append(s)
        if len(out) >= MAX_LINES:
            break
    return out


#: A turn's speaker label at the start of a line: ``**Name**:`` (a transcript or conversation card in Markdown) or,
#: in a chat record's search line, ``Name:`` right after the ``role · date time:`` prefix (a message that names its
#: speaker, as imported group chats do). Applied to lower-cased text too (the ``T`` of the time may be ``t``).
_LABEL_RE = re.compile(r"^(?:\*\*([^*\n]{1,40})\*\*:|[a-z]+ · \d{4}-\d{2}-\d{2}[ Tt]\d{2}:\d{2}: ([^:\n]{1,40}):)",
                       re.M)
#: What a speaker's name looks like: one to three words of letters ("Melanie", "Tim Smith"; not "Step 2", "Q&A").
_NAME_RE = re.compile(r"[^\W\d_]+(?: [^\W\d_]+){0,2}")
_LABELS: dict[str, dict[int, frozenset[str]]] = {}


def speaker_labels(text: str) -> dict[int, frozenset[str]]:
    """``{0-based line number: the lower-cased words of its speaker's name}`` for the lines of ``text`` that open
    with a speaker label (:data:`_LABEL_RE`, a name as :data:`_NAME_RE`); lines without one are absent.
    Remembered by text (the same chunks are candidates of many queries). Pure.

    Why: in a conversation a question about one person is answered by what that person said — on LoCoMo 930 of
    the 967 evidence turns of questions naming one of the two speakers are that speaker's own turns
    (bench/RESULTS.md, "Issue 11, session 21 (C)")."""
    got = _LABELS.get(text)
    if got is None:
        got = {}
        for m in _LABEL_RE.finditer(text):
            name = " ".join((m.group(1) or m.group(2) or "").split()).lower()
            if _NAME_RE.fullmatch(name):
                got[text.count("\n", 0, m.start())] = frozenset(name.split())
        if len(_LABELS) > 4096:
            _LABELS.clear()
        _LABELS[text] = got
    return got


def line_key(line: str) -> str:
    """The cache key (``emb.embeddings.text_hash``) of one line's vector: distinct from any chunk's or title's
    hash of the same text (their embed texts differ anyway), and from other line-rule versions."""
    return text_hash(f"{RULES}\0{line}")


def missing_lines(conn, space: str, texts: list[str]) -> list[tuple[str, str]]:
    """``[(key, line)]`` of the lines of ``texts`` (chunk texts) whose vector is not in the cache yet, each once.
    ``conn``: the store's connection with ``emb`` attached. One query per 500 keys."""
    want: dict[str, str] = {}
    for t in texts:
        for ln in chunk_lines(t):
            want.setdefault(line_key(ln), ln)
    keys = list(want)
    have: set[str] = set()
    for i in range(0, len(keys), 500):
        part = keys[i:i + 500]
        have.update(r[0] for r in conn.execute(
            f"SELECT text_hash FROM emb.embeddings WHERE space = ? AND text_hash IN ({','.join('?' * len(part))})",
            [space, *part]))
    return [(k, want[k]) for k in keys if k not in have]


class LineVectors:
    """Reader of the line vectors of candidate chunks, remembered per chunk text (the same chunks are candidates
    of many queries). ``conn``: the store's connection (``emb`` attached); ``space``, ``dim``: the embedder's."""

    #: chunk texts remembered (each a ``(lines, 512)`` float32 matrix, ~20 KB for a 10-turn card)
    CACHE = 512

    def __init__(self, conn, space: str, dim: int) -> None:
        self.conn, self.space, self.dim = conn, space, dim
        self._mats: OrderedDict[str, np.ndarray] = OrderedDict()

    def matrices(self, texts: list[str]) -> list[np.ndarray]:
        """One ``(n, dim)`` matrix per chunk text of ``texts`` (its lines' vectors found in the cache, n ≥ 0),
        in order. Reads the cache once for all texts not remembered."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._mats]
        if todo:
            import numpy as np  # here: the second stage imports this module for keyword searches too
            per = {t: [line_key(ln) for ln in chunk_lines(t)] for t in todo}
            keys = list({k for ks in per.values() for k in ks})
            vecs: dict[str, np.ndarray] = {}
            for i in range(0, len(keys), 500):
                part = keys[i:i + 500]
                for h, blob in self.conn.execute(
                        f"SELECT text_hash, vec FROM emb.embeddings WHERE space = ? AND text_hash IN"
                        f" ({','.join('?' * len(part))})", [self.space, *part]):
                    if len(blob) == 4 * self.dim:
                        vecs[h] = np.frombuffer(blob, dtype=np.float32)
            for t, ks in per.items():
                rows = [vecs[k] for k in ks if k in vecs]
                self._mats[t] = np.vstack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)
                if len(self._mats) > self.CACHE:
                    self._mats.popitem(last=False)
        for t in texts:
            self._mats.move_to_end(t)
        return [self._mats[t] for t in texts]

    def best_cosines(self, texts: list[str], qv: np.ndarray) -> list[float | None]:
        """Per chunk text: the largest cosine between ``qv`` (``(dim,)``, L2-normalised) and one of its lines'
        vectors, or None when it has none."""
        out: list[float | None] = []
        for m in self.matrices(texts):
            out.append(float((m @ qv).max()) if len(m) else None)
        return out

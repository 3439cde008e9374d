"""A per-vault cosine floor for queries no keyword matches: what nonsense scores against *this* vault.

A dense index always has a nearest neighbour. When the keyword leg finds nothing (gibberish, a typo of a rare word,
a word no note uses), the vector leg still returns ten hits, and their cosines alone do not say whether they mean
anything: with the offline model, the best cosine of a random string is 0.13 (median) on a 300-note LeetCode vault
but 0.23 on knowledge-garden-zh, while right cross-lingual answers often score 0.15–0.30. So the floor is measured
per vault, as a null model: :data:`N_PROBES` deterministic nonsense strings (Latin letter runs, keyboard mash, random
CJK characters) are embedded and searched once per vector index (again when it has grown or shrunk by 10 %), and
the floor is the ``quantile`` of their best cosines. A vector hit of a query without keyword hits that scores below
what most nonsense reaches here is hidden (counted in ``SearchResult.hidden``, shown on request).

How the quantile (0.5, :class:`~reme_engine.search.fusion.FusionConfig`) was chosen (bench/RESULTS.md, "Gibberish
floor"): the largest quantile that costs at most 0.005 of hybrid R@5 on the cross-lingual dev split (its zh→en
title queries are the real queries with an empty keyword leg). Measured with title vectors on: quantile 0.5 leaves
40–44 of 80 fresh nonsense queries (another seed) with no hit at all on the two LeetCode vaults and
knowledge-garden-zh (19–20, 19 and 0 without the floor) at no R@5 cost on the dev or held-out split; 0.8 empties
62–63 of 80 for −0.007 on the dev split. (Before title vectors: 0.5 cost −0.002 dev / −0.016 held out.)
"""

from __future__ import annotations

import random
import string
import threading

#: Nonsense probes per vault (one batch embedding + that many flat searches: ~0.1 s once per index size).
N_PROBES = 48
_SEED = 20261201


def nonsense(n: int, seed: int = _SEED) -> list[str]:
    """``n`` deterministic nonsense strings, a quarter of each kind: one Latin letter run (5–13), three short
    Latin "words", keyboard mash with punctuation, 2–5 random CJK ideographs. Pure."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = i % 4
        if k == 0:
            s = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randrange(5, 14)))
        elif k == 1:
            s = " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randrange(3, 8)))
                         for _ in range(3))
        elif k == 2:
            s = "".join(rng.choice("asdfghjkl;qwertyuiop[]") for _ in range(rng.randrange(6, 12)))
        else:
            s = "".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(rng.randrange(2, 6)))
        out.append(s)
    return out


def quantile(xs: list[float], q: float) -> float:
    """The ``q`` quantile (0..1, nearest rank) of ``xs``; 0.0 for an empty list. Pure."""
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


_PROBE_VECS: dict[tuple[int, str], object] = {}
_PROBE_LOCK = threading.Lock()


def probe_vectors(embedder, n: int = None):
    """The :data:`N_PROBES` nonsense probes embedded by ``embedder``: ``(n, dim)`` float32, L2-normalised,
    embedded once per embedder and process (the probes never change; the title build and the floor share them).
    Raises what the embedder raises."""
    import numpy as np

    n = N_PROBES if n is None else n
    key = (id(embedder), f"{getattr(embedder, 'space', '')}|{n}")
    got = _PROBE_VECS.get(key)
    if got is None:
        with _PROBE_LOCK:
            got = _PROBE_VECS.get(key)
            if got is None:
                got = np.ascontiguousarray(embedder.embed(nonsense(n)), dtype=np.float32)
                _PROBE_VECS[key] = got
    return got


def probe_tops(embedder, top1, probes: list[str]) -> list[float]:
    """Best score of each probe: ``top1(query vector) -> float | None`` is the vector leg's best cosine (chunk
    and title vectors alike). Raises what the embedder raises."""
    tops = []
    for row in embedder.embed(probes):
        best = top1(row)
        if best is not None:
            tops.append(best)
    return tops

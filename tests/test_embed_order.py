"""The vector pass encodes recent notes and every note's opening before the long tail of a huge note, so a
pathological file (thousands of chunks) cannot keep the rest of the vault out of hybrid search for minutes."""

import os

from test_background import _engine_on


class RecordingEmbedder:
    """The real embedder, remembering the texts of each batch in the order the pass sent them."""

    def __init__(self, inner):
        self.inner, self.space, self.dim = inner, inner.space, inner.dim
        self.seen: list[str] = []

    def embed(self, texts):
        self.seen.extend(texts)
        return self.inner.embed(texts)


def test_big_note_tail_waits_for_the_other_notes(tmp_path, embedder, monkeypatch):
    from reme_engine.index import embed_step

    monkeypatch.setattr(embed_step, "FIRST_CHUNKS_PER_FILE", 4)  # a smaller "huge" note: a quicker test
    FIRST_CHUNKS_PER_FILE = 4

    paras = "\n\n".join(f"Paragraph {i} of the long log: measurement {i} of the pump, pressure {i * 3} kPa, "
                        f"valve {i % 5} checked and noted for the record." for i in range(400))
    notes = {"resource/big.md": "# Big log\n\n" + paras + "\n"}
    for i in range(6):
        notes[f"digest/wiki/small{i}.md"] = f"# Small {i}\n\nA short note about topic {i}, the thing to find.\n"
    rec = RecordingEmbedder(embedder)
    v, eng = _engine_on(tmp_path, rec, notes)
    try:
        # the small notes are newer than the big one (the order a user would want: what they just wrote first)
        for i in range(6):
            os.utime(v / f"digest/wiki/small{i}.md", (2_000_000_000 + i, 2_000_000_000 + i))
        eng.index(vectors=False)
        big_chunks = eng.store.conn.execute(
            "SELECT count(*) FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.path = 'resource/big.md'"
        ).fetchone()[0]
        assert big_chunks > FIRST_CHUNKS_PER_FILE * 2
        rep = eng.embed_pending()
        assert rep.embed_error is None
        small_at = [j for j, t in enumerate(rec.seen) if "short note about topic" in t]
        big_at = [j for j, t in enumerate(rec.seen) if "long log" in t or "Paragraph" in t]
        assert len(small_at) == 6 and len(big_at) == big_chunks
        # newest first: every small note before any chunk of the big one
        assert max(small_at) < min(big_at)
        # and everything got its vector in the end
        assert eng.store.conn.execute("SELECT count(*) FROM chunks WHERE has_vec = 0").fetchone()[0] == 0
    finally:
        eng.close()


def test_encode_order_puts_each_files_opening_first():
    from reme_engine.index.embed_step import FIRST_CHUNKS_PER_FILE, encode_order

    n = FIRST_CHUNKS_PER_FILE
    old = [(100 + k, "h", "t", "[]", k, 10.0) for k in range(n + 5)]  # an old file with a long tail
    new = [(1, "h", "t", "[]", 0, 20.0), (2, "h", "t", "[]", 1, 20.0)]
    order = [r[0] for r in encode_order(old + new)]
    assert order[:2] == [1, 2]  # the newest file's chunks first
    assert order[2:2 + n] == [100 + k for k in range(n)]  # then the old file's opening, in order
    assert order[2 + n:] == [100 + k for k in range(n, n + 5)]  # its tail last

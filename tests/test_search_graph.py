"""The hop-2 neighbour directory of a search, built for all hit files at once, equals the per-note directory."""

from reme_engine.search.graph import neighborhood, neighborhoods


def test_batched_directories_equal_the_per_note_ones(make_engine, demo_vault):
    e = make_engine(demo_vault, embed=False)
    e.index()
    paths = [r[0] for r in e.store.conn.execute("SELECT path FROM files ORDER BY path")]
    linked = [r[0] for r in e.store.conn.execute("SELECT DISTINCT virtual FROM links")]  # dangling targets too
    assert e.store.conn.execute("SELECT count(*) FROM links").fetchone()[0] > 0
    got = neighborhoods(e.store, paths + linked, limit_out=3, limit_in=2)
    for p in paths + linked:
        assert got[p] == neighborhood(e.store, p, 3, 2).to_dict(), p
    res = e.search("daily note", mode="keyword")
    assert res.hits and set(res.neighbors) == {h.path for h in res.hits}
    assert all(res.neighbors[h.path] == neighborhood(e.store, h.path).to_dict() for h in res.hits)

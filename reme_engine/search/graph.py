"""The wikilink graph over the store's ``links`` table: neighbour directories (hop 2) and BFS traversal.

Edges come from :mod:`reme_engine.markdown.links` (the one link parser) via the indexer; here they are only read.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field

#: Hop-2 directory limits per file (ARCHITECTURE §11.3.4: at most 10 outlinks + 10 inlinks, one line each).
MAX_OUTLINKS = 10
MAX_INLINKS = 10


@dataclass
class Neighbor:
    """One edge seen from a note. ``direction``: "out" or "in"; ``dangling`` when the target has no file
    (then ``path`` is the virtual node id). ``predicate`` is the Dataview key or None for a plain link."""

    path: str
    direction: str
    name: str
    description: str
    predicate: str | None
    embed: bool
    dangling: bool
    anchor: str | None = None
    line: int = 0
    ambiguous: bool = False

    def to_dict(self) -> dict:
        # field by field: ``dataclasses.asdict`` deep-copies every value and was most of a warm search's time
        return {"path": self.path, "direction": self.direction, "name": self.name, "description": self.description,
                "predicate": self.predicate, "embed": self.embed, "dangling": self.dangling, "anchor": self.anchor,
                "line": self.line, "ambiguous": self.ambiguous}


@dataclass
class Neighborhood:
    path: str
    outlinks: list[Neighbor] = field(default_factory=list)
    inlinks: list[Neighbor] = field(default_factory=list)
    outlinks_total: int = 0
    inlinks_total: int = 0

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "outlinks": [n.to_dict() for n in self.outlinks],
            "inlinks": [n.to_dict() for n in self.inlinks],
            "outlinks_total": self.outlinks_total,
            "inlinks_total": self.inlinks_total,
        }


def _names(store, paths: list[str]) -> dict[str, tuple[str, str]]:
    return store.names(sorted(set(paths)))


def outlinks(store, path: str, limit: int | None = MAX_OUTLINKS) -> tuple[list[Neighbor], int]:
    """Distinct outgoing edges of ``path`` (typed predicates first, then by line) and their total count."""
    rows = store.conn.execute(
        "SELECT l.resolved, l.virtual, l.predicate, l.embed, l.anchor, l.line, l.ambiguous FROM links l"
        " JOIN files f ON f.id = l.src_id WHERE f.path = ? ORDER BY (l.predicate IS NULL), l.line",
        (path,),
    ).fetchall()
    seen: dict[tuple, None] = {}
    uniq = []
    for resolved, virtual, pred, embed, anchor, line, amb in rows:
        dst = resolved or virtual
        if dst == path and resolved:  # same-note heading links are not graph edges
            continue
        key = (dst, pred)
        if key in seen:
            continue
        seen[key] = None
        uniq.append((dst, resolved is None, pred, bool(embed), anchor, line, bool(amb)))
    total = len(uniq)
    if limit is not None:
        uniq = uniq[:limit]
    names = _names(store, [u[0] for u in uniq if not u[1]])
    out = []
    for dst, dangling, pred, embed, anchor, line, amb in uniq:
        n, d = names.get(dst, (dst.rsplit("/", 1)[-1].rsplit(".", 1)[0], ""))
        out.append(Neighbor(dst, "out", n, d, pred, embed, dangling, anchor, line, amb))
    return out, total


def inlinks(store, path: str, limit: int | None = MAX_INLINKS) -> tuple[list[Neighbor], int]:
    """Distinct notes linking to ``path`` (backlinks), typed first, and their total count."""
    rows = store.conn.execute(
        "SELECT f.path, l.predicate, l.embed, l.line FROM links l JOIN files f ON f.id = l.src_id"
        " WHERE (l.resolved = ? OR (l.resolved IS NULL AND l.virtual = ?)) AND f.path != ?"
        " ORDER BY (l.predicate IS NULL), f.path, l.line",
        (path, path, path),
    ).fetchall()
    seen: dict[tuple, None] = {}
    uniq = []
    for src, pred, embed, line in rows:
        if (src, pred) in seen:
            continue
        seen[(src, pred)] = None
        uniq.append((src, pred, bool(embed), line))
    total = len(uniq)
    if limit is not None:
        uniq = uniq[:limit]
    names = _names(store, [u[0] for u in uniq])
    return [Neighbor(src, "in", *names.get(src, (src, "")), pred, embed, False, None, line)
            for src, pred, embed, line in uniq], total


def neighborhood(store, path: str, limit_out: int | None = MAX_OUTLINKS,
                 limit_in: int | None = MAX_INLINKS) -> Neighborhood:
    """Hop-2 directory of one note: at most ``limit_out`` outlinks and ``limit_in`` inlinks."""
    o, ot = outlinks(store, path, limit_out)
    i, it = inlinks(store, path, limit_in)
    return Neighborhood(path, o, i, ot, it)


#: per connection: ``(connection, database version, {(path, limit_out, limit_in): directory})``
_DIRS: dict[int, tuple] = {}
#: directories kept per connection (a few KB each)
MAX_CACHED_DIRS = 2_000


def db_version(conn) -> tuple[int, int]:
    """A key that changes whenever the database ``conn`` reads may have changed: SQLite's ``PRAGMA data_version``
    (moves when another connection commits) and ``conn.total_changes`` (this connection's own writes, which
    ``data_version`` does not count). One pragma, a few µs."""
    return conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes


def neighborhoods(store, paths: list[str], limit_out: int = MAX_OUTLINKS,
                  limit_in: int = MAX_INLINKS) -> dict[str, dict]:
    """``{path: Neighborhood.to_dict()}`` for several notes at once (a search's hit files): the same directories as
    :func:`neighborhood`, from one outlink query, one inlink query and one name lookup instead of three per note.

    Each note's directory depends only on its own links and its neighbours' names, so it is remembered per
    connection while :func:`db_version` is unchanged (any commit, by this connection or another, drops them all):
    the same notes are hits of many searches, and the three queries were ~25 % of a warm keyword search printed as
    ``job search`` prints it. The dicts are shared by the results of those searches: read them, do not change
    them."""
    paths = list(dict.fromkeys(paths))
    if not paths:
        return {}
    c = store.conn
    version = db_version(c)
    got = _DIRS.get(id(c))
    if got is None or got[0] is not c or got[1] != version:
        got = (c, version, {})
        if len(_DIRS) > 64:  # connections of finished threads
            _DIRS.clear()
        _DIRS[id(c)] = got
    cache = got[2]
    hit = {p: cache.get((p, limit_out, limit_in)) for p in paths}
    todo = [p for p, d in hit.items() if d is None]
    if todo:
        fresh = _neighborhoods(c, store, todo, limit_out, limit_in)
        if len(cache) + len(fresh) > MAX_CACHED_DIRS:
            cache.clear()
        for p, d in fresh.items():
            cache[(p, limit_out, limit_in)] = d
            hit[p] = d
    return hit


def _neighborhoods(c, store, paths: list[str], limit_out: int, limit_in: int) -> dict[str, dict]:
    """The body of :func:`neighborhoods` (no cache): ``paths`` distinct and non-empty."""
    marks = ",".join("?" * len(paths))
    out_rows: dict[str, list] = {p: [] for p in paths}
    for src, resolved, virtual, pred, embed, anchor, line, amb in c.execute(
            "SELECT f.path, l.resolved, l.virtual, l.predicate, l.embed, l.anchor, l.line, l.ambiguous FROM links l"
            f" JOIN files f ON f.id = l.src_id WHERE f.path IN ({marks}) ORDER BY (l.predicate IS NULL), l.line",
            paths):
        out_rows[src].append((resolved, virtual, pred, embed, anchor, line, amb))
    in_rows: dict[str, list] = {p: [] for p in paths}
    # two indexed lookups (links_resolved, links_virtual) rather than one OR, which SQLite answers by a scan; the
    # unary + keeps the planner off links_resolved for "resolved IS NULL" (every dangling link: 1.1 → 0.1 ms)
    for dst, src, pred, embed, line in c.execute(
            "SELECT dst, path, predicate, embed, line FROM ("
            "SELECT l.resolved AS dst, f.path AS path, l.predicate AS predicate, l.embed AS embed, l.line AS line"
            f" FROM links l JOIN files f ON f.id = l.src_id WHERE l.resolved IN ({marks})"
            " UNION ALL SELECT l.virtual, f.path, l.predicate, l.embed, l.line FROM links l"
            f" JOIN files f ON f.id = l.src_id WHERE l.virtual IN ({marks}) AND +l.resolved IS NULL)"
            " ORDER BY (predicate IS NULL), path, line",
            paths + paths):
        if dst in in_rows and src != dst:
            in_rows[dst].append((src, pred, embed, line))
    picked: dict[str, tuple[list, int, list, int]] = {}
    want: set[str] = set()
    for p in paths:
        seen: set = set()
        outs = []
        for resolved, virtual, pred, embed, anchor, line, amb in out_rows[p]:
            dst = resolved or virtual
            if (dst == p and resolved) or (dst, pred) in seen:
                continue
            seen.add((dst, pred))
            outs.append((dst, resolved is None, pred, bool(embed), anchor, line, bool(amb)))
        seen = set()
        ins = []
        for src, pred, embed, line in in_rows[p]:
            if (src, pred) in seen:
                continue
            seen.add((src, pred))
            ins.append((src, pred, bool(embed), line))
        picked[p] = (outs[:limit_out], len(outs), ins[:limit_in], len(ins))
        want.update(o[0] for o in outs[:limit_out] if not o[1])
        want.update(i[0] for i in ins[:limit_in])
    names = _names(store, list(want))
    result = {}
    for p, (outs, n_out, ins, n_in) in picked.items():
        o_list = []
        for dst, dangling, pred, embed, anchor, line, amb in outs:
            n, d = names.get(dst, (dst.rsplit("/", 1)[-1].rsplit(".", 1)[0], "")) if not dangling else \
                (dst.rsplit("/", 1)[-1].rsplit(".", 1)[0], "")
            o_list.append({"path": dst, "direction": "out", "name": n, "description": d, "predicate": pred,
                           "embed": embed, "dangling": dangling, "anchor": anchor, "line": line, "ambiguous": amb})
        i_list = []
        for src, pred, embed, line in ins:
            n, d = names.get(src, (src, ""))
            i_list.append({"path": src, "direction": "in", "name": n, "description": d, "predicate": pred,
                           "embed": embed, "dangling": False, "anchor": None, "line": line, "ambiguous": False})
        result[p] = {"path": p, "outlinks": o_list, "inlinks": i_list, "outlinks_total": n_out,
                     "inlinks_total": n_in}
    return result


@dataclass
class TraverseResult:
    """BFS result: ``nodes`` in visit order with ``depth``; ``edges`` as ``{src, dst, predicate, embed}``."""

    start: str
    depth: int
    direction: str
    nodes: list[dict]
    edges: list[dict]
    truncated: bool

    def to_dict(self) -> dict:
        return asdict(self)


def traverse(store, start: str, depth: int = 1, direction: str = "both", max_nodes: int = 200) -> TraverseResult:
    """Breadth-first walk over links from ``start`` up to ``depth`` hops.

    ``direction``: "out" (follow outlinks), "in" (follow backlinks) or "both". Dangling targets appear as
    nodes with ``dangling: true`` and are not expanded. Stops after ``max_nodes`` nodes (``truncated``).
    Raises ValueError for a bad direction or negative depth.
    """
    if direction not in ("out", "in", "both"):
        raise ValueError("direction must be out, in or both")
    if depth < 0:
        raise ValueError("depth must be >= 0")
    if max_nodes < 1:
        raise ValueError("max_nodes must be >= 1")
    info = store.file_info(start)
    nodes: dict[str, dict] = {start: {"path": start, "depth": 0, "name": info["name"] if info else start,
                                      "description": info["description"] if info else "",
                                      "dangling": info is None}}
    edges: list[dict] = []
    queue = deque([start])
    truncated = False
    while queue:
        cur = queue.popleft()
        d = nodes[cur]["depth"]
        if d >= depth or nodes[cur]["dangling"]:
            continue
        nbrs: list[Neighbor] = []
        if direction in ("out", "both"):
            nbrs += outlinks(store, cur, None)[0]
        if direction in ("in", "both"):
            nbrs += inlinks(store, cur, None)[0]
        for n in nbrs:
            src, dst = (cur, n.path) if n.direction == "out" else (n.path, cur)
            edges.append({"src": src, "dst": dst, "predicate": n.predicate, "embed": n.embed})
            if n.path not in nodes:
                if len(nodes) >= max_nodes:
                    truncated = True
                    continue
                nodes[n.path] = {"path": n.path, "depth": d + 1, "name": n.name, "description": n.description,
                                 "dangling": n.dangling}
                queue.append(n.path)
    return TraverseResult(start, depth, direction, list(nodes.values()), edges, truncated)

"""Plain-text rendering of a search answer in the format of ARCHITECTURE §11.3.4 (hop 1 chunks, hop 2 directory)."""

from __future__ import annotations

from .hybrid import SearchResult


def _quote(s: str) -> str:
    return '"' + " ".join(s.replace('"', "'").split()) + '"'


def render_neighbor(n: dict) -> str:
    """One directory line: ``→ path  name="…"  description="…"  via predicate=P`` (or ``via plain``)."""
    arrow = "→" if n["direction"] == "out" else "←"
    via = f"predicate={n['predicate']}" if n.get("predicate") else "plain"
    extra = ""
    if n.get("embed"):
        extra += "  embed"
    if n.get("dangling"):
        extra += "  (dangling)"
    return f"    {arrow} {n['path']}  name={_quote(n['name'])}  description={_quote(n['description'])}  via {via}{extra}"


def render_search(result: SearchResult, *, max_chars: int | None = None) -> str:
    """The whole answer as text: one block per hit, its scores in the header, then its file's neighbours
    (listed once per file, under the file's first hit). ``max_chars`` trims each chunk body."""
    if not result.hits:
        note = f" ({result.degraded})" if result.degraded else ""
        return f"No results for {result.query!r}{note}."
    out: list[str] = []
    if result.degraded:
        out.append(f"note: {result.degraded}")
    shown: set[str] = set()
    for h in result.hits:
        out.append(
            f"========== {h.path}:{h.start_line}-{h.end_line} "
            f"[score={h.score:.4f} vector={h.vector_rrf:.4f} keyword={h.keyword_rrf:.4f}] =========="
        )
        body = h.text if max_chars is None or len(h.text) <= max_chars else h.text[:max_chars] + "…"
        out.append(body.rstrip("\n"))
        nb = result.neighbors.get(h.path)
        if nb and h.path not in shown:
            shown.add(h.path)
            out.append("")
            if nb["outlinks"]:
                out.append(f"  outlinks ({nb['outlinks_total']}):")
                out.extend(render_neighbor(n) for n in nb["outlinks"])
            if nb["inlinks"]:
                out.append(f"  inlinks ({nb['inlinks_total']}):")
                out.extend(render_neighbor(n) for n in nb["inlinks"])
        out.append("")
    return "\n".join(out).rstrip() + "\n"

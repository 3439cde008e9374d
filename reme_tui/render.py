"""Pure text helpers for the views: wikilinks → Markdown links, one-line summaries, cell-width truncation.

No Textual imports here, so these are cheap to test. Widths are terminal *cells* (CJK and most emoji take two),
measured with Rich's ``cell_len`` — never ``len()``.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from rich.cells import cell_len, set_cell_size

#: Link scheme of rewritten wikilinks; the note view turns a click on one into a FollowLink request.
WIKILINK_SCHEME = "wikilink:"

_MD_ESCAPE_RE = re.compile(r"([\\`*_\[\]<>#|~])")
_LINE_ANCHOR_RE = re.compile(r"^L(\d+)(?:-L?(\d+))?$")


def _escape(text: str) -> str:
    return _MD_ESCAPE_RE.sub(r"\\\1", text)


def _shown(link) -> str:
    """Link text: the alias, else the target's last path segment (full paths are noise in a narrow pane)."""
    if link.alias is not None and link.alias.strip():
        return link.alias.strip()
    name = link.target.rsplit("/", 1)[-1] if link.target else ""
    if link.anchor:
        anchor = link.anchor.lstrip("^").replace("#", " › ")
        name = f"{name} › {anchor}" if name else anchor
    return name or link.original


#: A Dataview field line (``key:: value``, optionally a list item): shown on a line of its own.
_FIELD_LINE_RE = re.compile(r"^\s{0,3}(?:[-*+] +)?[^\s`:|\[][^`:|\n]{0,99}::(?:\s|$)")


def field_lines_as_breaks(body: str) -> str:
    """End each ``key:: value`` line with a hard break (two spaces) so consecutive fields do not run together
    into one paragraph, as they would in plain CommonMark. Trailing spaces at a paragraph's end are dropped by
    the parser, so this never adds visible text."""
    if "::" not in body:
        return body
    lines = body.split("\n")
    for i, line in enumerate(lines):
        if "::" in line and _FIELD_LINE_RE.match(line) and not line.endswith("  "):
            lines[i] = line + "  "
    return "\n".join(lines)


def _map_wikilinks(text: str, render) -> str:
    """``text`` with each wikilink replaced by ``render(link)``. Links are found by the one link parser
    (``reme_engine.markdown.links``), so code spans, fenced code and comments are skipped exactly as the index
    skips them; its scan is linear (no regex backtracking on ``[[[[…``)."""
    from reme_engine.engine import Engine

    parse_links = Engine.parse_links

    if "[[" not in text:
        return text
    out: list[str] = []
    pos = 0
    for link in parse_links(text):
        if link.kind != "wikilink" or link.start < pos:
            continue
        out.append(text[pos : link.start])
        out.append(render(link))
        pos = link.end
    out.append(text[pos:])
    return "".join(out)


def _markdown_link(link) -> str:
    shown = _shown(link)
    if link.embed:
        shown = f"⎘ {shown}"
    return f"[{_escape(shown)}]({WIKILINK_SCHEME}{quote(link.link, safe='')})"


def wikilinks_to_markdown(body: str) -> str:
    """Turn ``[[T]]``, ``[[T#h]]``, ``[[T|alias]]`` and ``![[T]]`` into ``[text](wikilink:T#h)`` links, and end
    Dataview field lines with a hard break.

    A wikilink never spans lines, so the line structure is kept (block source lines still map to file lines).
    Embeds are shown as links marked ⎘, not inlined.
    """
    return field_lines_as_breaks(_map_wikilinks(body, _markdown_link))


def parse_href(href: str) -> tuple[str, str | None] | None:
    """``(target, anchor)`` of a clicked link that should open a vault note, or None for web/mail links.

    ``href`` is as ``Markdown.LinkClicked`` reports it: already URL-decoded once, which undoes our quoting, so
    it is not decoded again. Accepts our ``wikilink:`` scheme and plain relative links such as ``other.md`` or
    ``../x.md#Heading``.
    """
    if href.startswith(WIKILINK_SCHEME):
        raw = href[len(WIKILINK_SCHEME):]
    elif re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", href) or href.startswith("//"):
        return None
    else:
        raw = href
    target, _, anchor = raw.partition("#")
    return target.strip(), (anchor.strip() or None)


def line_anchor(anchor: str | None) -> tuple[int, int | None] | None:
    """``L9`` / ``L9-L12`` anchors as ``(start, end)`` file lines, else None."""
    if not anchor:
        return None
    m = _LINE_ANCHOR_RE.match(anchor)
    if not m:
        return None
    return int(m[1]), (int(m[2]) if m[2] else None)


# -- one-line text --------------------------------------------------------------------------------------------


def one_line(text: str) -> str:
    """Collapse whitespace (newlines included) to single spaces."""
    return " ".join(str(text).split())


def truncate_cells(text: str, width: int, ellipsis: str = "…") -> str:
    """``text`` cut to at most ``width`` terminal cells, ending in ``ellipsis`` when cut (CJK/emoji aware)."""
    if width <= 0:
        return ""
    if len(text) > 4 * width + 16:
        # only the first ``width`` cells matter: measuring a whole 4 KB chunk's graphemes was ~5 ms a search hit
        head = text[: 4 * width + 16]
        if cell_len(head) > width:  # it is cut within ``head`` (the rest cannot change that)
            text = head
    if cell_len(text) <= width:
        return text
    keep = width - cell_len(ellipsis)
    if keep <= 0:
        return ellipsis[:width]
    # set_cell_size pads with a space when a wide character straddles the edge; drop that pad
    return set_cell_size(text, keep).rstrip(" ") + ellipsis


def fit_text(text, width: int, ellipsis: str = "…"):
    """A Rich ``Text`` cut to ``width`` cells with ``ellipsis``, keeping its styles (CJK/emoji aware; unlike
    ``Text.truncate`` it never pads a wide character cut in half with a space)."""
    if text.cell_len <= width:
        return text
    keep = max(0, width - cell_len(ellipsis))
    used = 0
    idx = 0
    for ch in text.plain:
        w = cell_len(ch)
        if used + w > keep:
            break
        used += w
        idx += 1
    out = text[:idx]
    out.append(ellipsis)
    return out


def _as_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(_as_text(v) for v in value if v is not None)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_as_text(v)}" for k, v in value.items())
    return one_line(str(value))


def frontmatter_summary(meta: dict) -> str:
    """``name — description · #tag #tag`` from a note's frontmatter ('' when none of these keys exist)."""
    if not meta:
        return ""
    name = _as_text(meta.get("name") or meta.get("title"))
    desc = _as_text(meta.get("description"))
    tags_v = meta.get("tags")
    tags = tags_v if isinstance(tags_v, (list, tuple)) else ([tags_v] if tags_v else [])
    tag_text = " ".join("#" + one_line(str(t)).lstrip("#") for t in tags if t is not None and str(t).strip())
    parts = [p for p in (name, desc) if p]
    head = " — ".join(parts)
    if tag_text:
        head = f"{head} · {tag_text}" if head else tag_text
    return head


_MD_NOISE_RE = re.compile(r"^\s{0,3}(#{1,6}\s+|[-*+]\s+(\[[ xX]\]\s+)?|\d+[.)]\s+|>\s*)")
_COMMENT_RE = re.compile(r"<!--.*?-->|%%.*?%%")
_EMPHASIS_RE = re.compile(r"(\*\*|__|~~|`)")
#: Characters of a chunk a snippet looks at (chunks are ~2 KB; this bounds the regex work).
SNIPPET_SCAN = 4000


def plain_inline(text: str) -> str:
    """One line of Markdown as plain text: wikilinks as their shown text, emphasis marks and comments dropped."""
    flat = _map_wikilinks(one_line(text), _shown)
    flat = _COMMENT_RE.sub(" ", flat)
    return one_line(_EMPHASIS_RE.sub("", flat))


def _query_terms(query: str) -> list[str]:
    """Terms to center a snippet on: the query's words, longest first; long CJK words also by their first two
    characters (the tokenizer may have matched a shorter word)."""
    words = [w for w in query.split() if w]
    extra = [w[:2] for w in words if len(w) > 2 and not w.isascii()]
    return sorted(set(words + extra), key=len, reverse=True)


def snippet(text: str, width: int = 200, query: str = "") -> str:
    """One line of a chunk for a result row: heading lines, Markdown markers, comments and wikilink brackets
    dropped; when the first query term found would fall outside ``width`` cells, the line starts shortly before
    it instead; cut to ``width`` cells."""
    lines = []
    for raw in text[:SNIPPET_SCAN].splitlines():
        s = raw.strip()
        if not s or s.startswith(("#", "```", "~~~", "---", "|---", "| ---")):
            continue
        lines.append(_MD_NOISE_RE.sub("", s))
    flat = plain_inline(" ".join(lines))
    if query:
        low = flat.casefold()
        for term in _query_terms(query):
            pos = low.find(term.casefold())
            if pos >= 0:
                if cell_len(flat[: pos + len(term)]) > width - 2:  # the term would be cut off: move the window
                    lead = flat[:pos]
                    # keep about a quarter of the width of context before the term
                    keep = ""
                    for ch in reversed(lead):
                        if cell_len(keep) + cell_len(ch) > max(4, width // 4):
                            break
                        keep = ch + keep
                    flat = "…" + keep + flat[pos:]
                break
    return truncate_cells(flat, width)


def why_line(hit) -> str:
    """Why a hit ranked: each leg's rank and raw score (``title`` when the vector score is the note title's
    cosine), and the fused score."""
    parts = []
    if hit.keyword_rank is not None:
        # FTS5 clamps the IDF of terms in over half the chunks to ~1e-6: such scores say nothing, the rank does
        score = hit.keyword_score or 0.0
        parts.append(f"kw #{hit.keyword_rank}" + (f" ({score:.3g})" if abs(score) >= 1e-3 else ""))
    else:
        parts.append("kw —")
    if hit.vector_rank is not None:
        # the note's title vector stood for it (its first chunk): say so, the cosine is not this chunk's
        title = " title" if getattr(hit, "vector_title", False) else ""
        parts.append(f"vec #{hit.vector_rank} ({hit.vector_score:.3f}{title})")
    elif getattr(hit, "vector_imputed", False):
        parts.append("vec n/a (no vector yet: ranked as kw)")
    else:
        parts.append("vec —")
    parts.append(f"fused {hit.score:.4g}")
    return " · ".join(parts)


def human_size(n: int) -> str:
    for unit in ("B", "KB", "MB"):
        if n < 1024 or unit == "MB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


#: Frontmatter keys that say where a note came from (ARCHITECTURE §4), in display order.
PROVENANCE_KEYS = ("source_conversation", "source_resource", "derived_from", "session_id")


def _link_targets(value) -> list[str]:
    """Wikilink targets (``T`` or ``T#anchor``) in a frontmatter value: ``"[[T]]"``, ``[[T|a]]``, lists of them,
    or a bare path."""
    from reme_engine.engine import Engine

    parse_links = Engine.parse_links

    out: list[str] = []
    values = value if isinstance(value, (list, tuple)) else [value]
    for v in values:
        if v is None or isinstance(v, (dict, list, tuple)):
            continue
        s = str(v).strip()
        links = [lk for lk in parse_links(s) if lk.kind == "wikilink"] if "[[" in s else []
        if links:
            out.extend(lk.link for lk in links)
        elif s and ("/" in s or s.lower().endswith(".md")):
            out.append(s)
    return out


def provenance_links(meta: dict, session_dir: str = "session") -> list[tuple[str, str]]:
    """``[(key, target)]`` for a note's provenance keys. A bare ``session_id`` links to its session record
    unless ``source_conversation`` already names one."""
    if not meta:
        return []
    out: list[tuple[str, str]] = []
    for key in PROVENANCE_KEYS:
        if key not in meta:
            continue
        if key == "session_id":
            sid = str(meta.get("session_id") or "").strip()
            if sid and "source_conversation" not in meta and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", sid):
                out.append(("session", f"{session_dir}/dialog/{sid}.jsonl"))
            continue
        out.extend((key, t) for t in _link_targets(meta[key]))
    return out


_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
#: Headings of the section that lists a digest node's sources (ARCHITECTURE §6: ``## Sources``).
SOURCES_HEADINGS = {"sources", "source", "来源", "出处", "参考来源"}


def sources_targets(body: str) -> list[str]:
    """Wikilink targets inside the note's ``## Sources`` section (up to the next heading of the same or a higher
    level), in order, without duplicates."""
    from reme_engine.engine import Engine

    parse_links = Engine.parse_links

    if "[[" not in body:
        return []
    lines = body.split("\n")
    start = end = None
    level = 0
    in_fence = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        m = _HEADING_RE.match(line)
        if not m:
            continue
        if start is None:
            if m[2].strip().casefold() in SOURCES_HEADINGS:
                start, level = i + 1, len(m[1])
        elif len(m[1]) <= level:
            end = i
            break
    if start is None:
        return []
    out: list[str] = []
    for link in parse_links("\n".join(lines[start:end])):
        if link.kind == "wikilink" and link.target and link.target not in out:
            out.append(link.target)
    return out


def note_links(meta: dict, body: str) -> list[tuple[str, str, str | None]]:
    """``(shown text, target, anchor)`` of the frontmatter's and body's wikilinks, in order, deduplicated."""
    from reme_engine.engine import Engine

    parse_links = Engine.parse_links

    out: list[tuple[str, str, str | None]] = []
    seen: set[tuple[str, str | None]] = set()
    for key, target in provenance_links(meta):
        t, _, a = target.partition("#")
        if (t, a or None) not in seen:
            seen.add((t, a or None))
            out.append((f"{key}: {t.rsplit('/', 1)[-1]}", t, a or None))
    if "[[" in body:
        for link in parse_links(body):
            if link.kind != "wikilink" or not link.target:
                continue
            key = (link.target, link.anchor)
            if key in seen:
                continue
            seen.add(key)
            shown = _shown(link)
            out.append((("⎘ " if link.embed else "") + shown, link.target, link.anchor))
    return out


#: Width rows are cut to while their pane is hidden (it is re-cut when shown).
HIDDEN_PANE_WIDTH = 40


def row_width(region_width: int, minimum: int = 8) -> int:
    """Cells a list row may use in a content region ``region_width`` wide (one kept free for the scrollbar);
    :data:`HIDDEN_PANE_WIDTH` while the pane is hidden (zero width)."""
    if region_width <= 1:
        return HIDDEN_PANE_WIDTH
    return max(minimum, region_width - 1)


# -- callouts and footnotes -----------------------------------------------------------------------------------

#: Obsidian callout types → (label icon, style group). Unknown types are shown as notes.
CALLOUT_ICONS = {
    "note": ("✎", "note"), "info": ("ℹ", "note"), "todo": ("☐", "note"),
    "abstract": ("≡", "tip"), "summary": ("≡", "tip"), "tldr": ("≡", "tip"),
    "tip": ("✦", "tip"), "hint": ("✦", "tip"), "important": ("✦", "tip"),
    "success": ("✔", "success"), "check": ("✔", "success"), "done": ("✔", "success"),
    "question": ("?", "question"), "help": ("?", "question"), "faq": ("?", "question"),
    "warning": ("⚠", "warning"), "caution": ("⚠", "warning"), "attention": ("⚠", "warning"),
    "failure": ("✖", "error"), "fail": ("✖", "error"), "missing": ("✖", "error"),
    "danger": ("✖", "error"), "error": ("✖", "error"), "bug": ("✖", "error"),
    "example": ("▸", "note"), "quote": ("❝", "note"), "cite": ("❝", "note"),
}
#: Link scheme of a footnote reference; the note view scrolls to the definition's file line on a click.
FOOTNOTE_SCHEME = "footnote:"

_CALLOUT_RE = re.compile(r"^(\s{0,3}(?:>[ \t]?)+)\[!([A-Za-z][\w-]*)\]([+-]?)[ \t]*(.*)$")
_FOOTDEF_RE = re.compile(r"^ {0,3}\[\^([^\]\s]+)\]:[ \t]?(.*)$")
_FOOTREF_RE = re.compile(r"\[\^([^\]\s]+)\](?!:)")
_CODE_SPAN_RE = re.compile(r"(`+).+?\1")
_FENCE_LINE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def footnote_mark(label: str) -> str:
    """How footnote ``label`` is shown: superscript digits for numbers (``1`` → ``¹``), else ``^label``."""
    return label.translate(_SUPERSCRIPT) if label.isdigit() else f"^{label}"


def _footnote_refs(line: str) -> str:
    """``[^1]`` references in one line (outside code spans) as clickable superscripts."""
    if "[^" not in line:
        return line
    out, pos = [], 0
    for m in _CODE_SPAN_RE.finditer(line):
        out.append(_FOOTREF_RE.sub(_footref, line[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_FOOTREF_RE.sub(_footref, line[pos:]))
    return "".join(out)


def _footref(m: re.Match) -> str:
    return f"[{_escape(footnote_mark(m[1]))}]({FOOTNOTE_SCHEME}{quote(m[1], safe='')})"


def callouts_and_footnotes(body: str) -> tuple[str, dict[int, str], dict[str, int]]:
    """Obsidian callouts and footnotes in ``body`` made readable by a CommonMark renderer, line for line (the
    result has exactly the lines of ``body``, so block source lines still map to file lines).

    Returns ``(body, callouts, footnotes)``: a callout's first line ``> [!warning]- Title`` becomes
    ``> **⚠ Title**`` and a hard break (the type's name when there is no title); a reference ``[^1]`` becomes a ``footnote:``
    link shown ``¹``; a definition line ``[^1]: text`` becomes ``¹ text`` ending in a hard break. ``callouts``
    maps the 0-based body line of each callout to its style group (note/tip/success/question/warning/error);
    ``footnotes`` maps each definition's label to its 0-based body line. Fenced code is left alone.
    """
    if "[!" not in body and "[^" not in body:
        return body, {}, {}
    lines = body.split("\n")
    callouts: dict[int, str] = {}
    notes: dict[str, int] = {}
    fence = ""
    for i, line in enumerate(lines):
        fm = _FENCE_LINE_RE.match(line)
        if fence:
            if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence):
                fence = ""
            continue
        if fm:
            fence = fm.group(1)
            continue
        if "[!" in line and (m := _CALLOUT_RE.match(line)):
            kind = m[2].lower()
            icon, group = CALLOUT_ICONS.get(kind, ("✎", "note"))
            title = m[4].strip() or kind.replace("-", " ").capitalize()
            lines[i] = f"{m[1]}**{icon} {_footnote_refs(title)}**  "  # a hard break: the body starts below
            callouts[i] = group
            continue
        if "[^" not in line:
            continue
        if d := _FOOTDEF_RE.match(line):
            notes.setdefault(d[1], i)
            lines[i] = f"{_escape(footnote_mark(d[1]))} {_footnote_refs(d[2])}  "
        else:
            lines[i] = _footnote_refs(line)
    return "\n".join(lines), callouts, notes


# -- ownership ------------------------------------------------------------------------------------------------


def ownership_label(owner: str) -> str:
    """The short owner word shown in the note pane's title: ``yours`` or ``reme's``."""
    return "reme's" if owner == "app" else "yours"


def ownership_line(owner: str, stamp: str, intact: int, edited: int) -> str:
    """The note pane's one-line owner header, or ``""`` when there is nothing beyond "yours" to say (a note you
    wrote with no reme block in it). ``stamp``: the provenance stamp's state (current/stale/none); ``intact``
    and ``edited``: reme blocks/sections in the note still as reme wrote them, and ones the user edited inside.
    Short on purpose (it must fit a narrow pane); the engine's longer ``reason`` goes in its tooltip."""
    if owner == "app":
        return "⚙ reme's: written by reme, not edited since (any edit makes it yours)"
    parts = ["written by reme, edited by you"] if stamp == "stale" else []
    # "section", not "block": a day page's card index and a proposed block are both a marked part of the note
    if intact:
        parts.append(f"reme maintains {intact} section{'s' if intact > 1 else ''} here (marked ▎)")
    if edited:
        parts.append(f"you edited {edited} reme section{'s' if edited > 1 else ''}")
    return "✎ yours: " + "; ".join(parts) if parts else ""

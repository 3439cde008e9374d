"""Digest node text: render a new node and apply additive updates (pure functions, no I/O).

Anatomy of a node the app writes (ARCHITECTURE §11.3.1, §11.3.2; §4)::

    ---
    name: …                      description: …      tags: […]      (user keys kept on every update)
    derived_from: ["[[daily/…]]", …]
    ---

    # Name

    relates_to:: [[digest/…]]    one line per related digest node

    body …

    ## Update 2026-11-28          only on nodes the user owns (see integrate's merge rule)

    ## Evidence                   one line per later CORROBORATE/REFINE/CORRECT, newest last
    - 2026-11-28 (corroborate): …

    ## Sources
    - [[daily/…]]

That anatomy is for nodes the app owns (:mod:`reme_engine.vault.provenance`: created by the app and not edited
since; :func:`reme_engine.vault.provenance.stamp` marks them). In a note the **user** owns, the app writes only
inside its block at the end of the note (:func:`block_update` builds its content)::

    <!-- reme:begin … -->
    ## Updates proposed by reme
    *…how to accept or dismiss…*
    relates_to:: [[digest/…]]
    ### Update 2026-11-28 (refine)     the new or corrected material, then "Sources: [[daily/…]]"
    ### Evidence                       one line per action, newest last
    ### Sources                        every daily note the block cites
    <!-- reme:end -->

``## Evidence`` and ``## Sources`` are owned by code and only ever grow. Links written here use the full
vault-relative path without ``.md`` (:func:`reme_engine.markdown.links.format_link`). Callers validate every path
before it reaches these functions; :func:`sanitize_body` additionally unlinks daily/digest wikilinks in LLM text
that the caller's checks reject.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

from ..markdown.frontmatter import FrontmatterError, parse_frontmatter, render_frontmatter, update_frontmatter
from ..markdown.links import format_link, parse_links
from ..markdown.sections import code_mask, headings, is_sources_title, section_span
from .safety import clean_llm_path, link_key

SOURCES = "Sources"
EVIDENCE = "Evidence"
UPDATE = "Update"
_OWN_FIELD = re.compile(r"^\s*(?:[-*+]\s+)?(relates_to|derived_from)::", re.IGNORECASE)


# -- small text helpers ------------------------------------------------------------------------------------
def _split_fm(text: str) -> tuple[str, str]:
    """``(frontmatter block text incl. fences, body)``; the block is "" when absent."""
    fm = parse_frontmatter(text)
    return text[: fm.body_offset], text[fm.body_offset :]


def _lines(body: str) -> list[str]:
    return body.splitlines()


def _join(lines: list[str], nl: str = "\n") -> str:
    return nl.join(lines).rstrip() + nl


def _nl(body: str) -> str:
    """The body's newline style, so an update of a CRLF note stays CRLF."""
    return "\r\n" if "\r\n" in body else "\n"


def _heads(lines: list[str]) -> dict[int, tuple[int, str]]:
    """``{line index: (level, title)}`` of the top-level headings outside code (:mod:`..markdown.sections`)."""
    return {h.line: (h.level, h.title) for h in headings(lines)}


def _section(lines: list[str], match: Callable[[str], bool], level: int = 2) -> tuple[int, int] | None:
    """``[start, end)`` line span of the last level-``level`` section whose title satisfies ``match``."""
    return section_span(lines, match, level)


def _is_title(name: str) -> Callable[[str], bool]:
    return lambda t: t.strip().casefold() == name.casefold()


def _is_sources(t: str) -> bool:
    return is_sources_title(t)


def _trim_end(lines: list[str], start: int, end: int) -> int:
    """Index after the last non-blank line in ``lines[start:end]`` (at least ``start + 1``)."""
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return end


_UPDATE_TITLE = re.compile(rf"^{UPDATE} \d{{4}}-\d{{2}}-\d{{2}}$", re.IGNORECASE)


def _is_update(t: str) -> bool:
    return bool(_UPDATE_TITLE.match(t.strip()))


def _tail_start(lines: list[str], with_updates: bool = False) -> int:
    """Where code-owned tail sections (Evidence, Sources; with ``with_updates`` also ``## Update …``) begin;
    ``len(lines)`` when there are none."""
    spans = [s for s in (_section(lines, _is_title(EVIDENCE)), _section(lines, _is_sources)) if s]
    if with_updates:
        spans += [(h.line, h.line) for h in headings(lines) if h.level == 2 and _is_update(h.title)]
    return min((s[0] for s in spans), default=len(lines))


# -- LLM body clean-up -----------------------------------------------------------------------------------------
def demote_headings(md: str, top: int = 3) -> str:
    """Shift headings so the highest one is level ``top``: appended material nests under its ``## Update``.
    A setext heading that moves is written as an ATX heading (its underline dropped)."""
    lines = md.splitlines()
    heads = headings(lines)
    shift = max(0, top - min(h.level for h in heads)) if heads else 0
    if not shift:
        return md
    at = {h.line: h for h in heads}
    out, i = [], 0
    while i < len(lines):
        h = at.get(i)
        if h is None:
            out.append(lines[i])
            i += 1
            continue
        out.append("#" * min(6, h.level + shift) + " " + h.title)
        i = h.end
    return "\n".join(out)


def sanitize_body(body: str, link_ok: Callable[[str], bool]) -> str:
    """LLM body → Markdown the app may write.

    Drops a frontmatter block, any Sources section and ``relates_to::``/``derived_from::`` lines (code writes
    those from validated paths), and turns every wikilink whose target ``link_ok`` rejects into its display
    text. ``link_ok`` receives the cleaned vault path (``…md``) of every wikilink; unsafe targets are unlinked
    without asking.
    """
    body = body.replace("\r\n", "\n").lstrip("\ufeff")
    fm = parse_frontmatter(body)
    if fm.has_block:
        body = body[fm.body_offset :]
    lines = body.splitlines()
    while (span := _section(lines, _is_sources)) is not None:
        del lines[span[0] : span[1]]
    for lvl in (1, 3):  # a model may use another level for its own Sources heading
        while (span := _section(lines, _is_sources, level=lvl)) is not None:
            del lines[span[0] : span[1]]
    lines = [ln for ln in lines if not _OWN_FIELD.match(ln)]
    text = "\n".join(lines).strip("\n")
    edits = []
    for lk in parse_links(text):
        if lk.kind != "wikilink" or not lk.target:
            continue
        p = clean_llm_path(lk.target)
        if p is None or not link_ok(p):
            edits.append((lk.start, lk.end, lk.alias or lk.target))
    for start, end, rep in sorted(edits, reverse=True):
        text = text[:start] + rep + text[end:]
    return text.strip() + "\n" if text.strip() else ""


# -- reading a node --------------------------------------------------------------------------------------------
def sources_of(text: str) -> list[str]:
    """Link targets listed in the node's Sources section (as written)."""
    _, body = _split_fm(text)
    lines = _lines(body)
    span = _section(lines, _is_sources)
    if span is None:
        return []
    return [lk.target for lk in parse_links("\n".join(lines[span[0] : span[1]])) if lk.target]


def related_of(text: str) -> list[str]:
    """Targets of ``relates_to::`` links in the body."""
    _, body = _split_fm(text)
    return [lk.target for lk in parse_links(body) if lk.target and (lk.predicate or "").lower() == "relates_to"]


# -- writing ---------------------------------------------------------------------------------------------------
Resolve = Callable[[str], "str | None"]


def _key(target: str, resolve: Resolve | None) -> str:
    """Identity of a link target: the path it resolves to when a resolver is given (``[[hybrid-retrieval]]`` and
    ``[[digest/wiki/hybrid-retrieval]]`` are the same node), else its normalised text."""
    return link_key((resolve(target) if resolve else None) or target)

def _relates_lines(related: Iterable[str]) -> list[str]:
    return [f"relates_to:: {format_link(p)}" for p in related]


def _source_lines(sources: Iterable[str]) -> list[str]:
    return [f"- {format_link(p)}" for p in sources]


def _merge_links(existing: object, new: Iterable[str], resolve: Resolve | None = None) -> list[str]:
    """Frontmatter list of ``[[…]]`` strings: existing entries kept as written, new paths appended once."""
    if isinstance(existing, str):
        out = [existing]
    elif isinstance(existing, list):
        out = [x for x in existing if isinstance(x, str)]
    else:
        out = []
    keys = {_key(clean_llm_path(x, add_md=False) or x, resolve) for x in out}
    for p in new:
        if link_key(p) not in keys:
            keys.add(link_key(p))
            out.append(format_link(p))
    return out


def render_new_node(*, name: str, description: str, tags: list[str], body: str, related: list[str],
                    sources: list[str]) -> str:
    """A complete new node (frontmatter, ``# name`` unless the body has its H1, relates_to lines, body, Sources)."""
    meta: dict = {"name": name, "description": description}
    if tags:
        meta["tags"] = list(dict.fromkeys(tags))
    meta["derived_from"] = _merge_links(None, sources)
    lines = _lines(body.strip("\n"))
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None or _heads(lines).get(first, (0,))[0] != 1:
        lines = [f"# {name}", ""] + lines
        first = 0
    head, rest = lines[: first + 1], lines[first + 1 :]
    while rest and not rest[0].strip():
        rest.pop(0)
    rel = _relates_lines(related)
    out = head + [""] + (rel + [""] if rel else []) + rest
    out = [*out[: _trim_end(out, 0, len(out))], "", f"## {SOURCES}", "", *_source_lines(sources)]
    return render_frontmatter(meta) + "\n" + _join(out)


def add_sources(text: str, sources: Iterable[str], resolve: Resolve | None = None) -> tuple[str, list[str]]:
    """Append ``sources`` missing from the Sources section (created at the end when absent). → (text, added)."""
    fm, body = _split_fm(text)
    lines = _lines(body)
    have = {_key(t, resolve) for t in sources_of(text)}
    new = []
    for p in sources:
        if link_key(p) not in have:
            have.add(link_key(p))
            new.append(p)
    if not new:
        return text, []
    span = _section(lines, _is_sources)
    if span is None:
        end = _trim_end(lines, -1, len(lines)) if lines else 0
        lines = lines[:end] + ["", f"## {SOURCES}", ""] + _source_lines(new)
    else:
        end = _trim_end(lines, span[0], span[1])
        if end == span[0] + 1:
            lines[end:end] = [""] + _source_lines(new)
        else:
            lines[end:end] = _source_lines(new)
    return fm + _join(lines, _nl(body)), new


def add_evidence(text: str, line: str) -> str:
    """Append ``- line`` to the Evidence section (created just before Sources, or at the end)."""
    fm, body = _split_fm(text)
    lines = _lines(body)
    entry = "- " + " ".join(line.split())
    span = _section(lines, _is_title(EVIDENCE))
    if span is not None:
        end = _trim_end(lines, span[0], span[1])
        lines[end:end] = ([""] if end == span[0] + 1 else []) + [entry]
    else:
        src = _section(lines, _is_sources)
        at = src[0] if src else len(lines)
        before = lines[: _trim_end(lines, -1, at)] if at else []
        lines = before + ["", f"## {EVIDENCE}", "", entry, ""] + lines[at:]
    return fm + _join(lines, _nl(body))


def add_relates(text: str, related: Iterable[str], resolve: Resolve | None = None, *,
                at_tail: bool = False) -> tuple[str, list[str]]:
    """Insert ``relates_to::`` lines for ``related`` not linked that way yet. → (text, added).

    Placement: after the last existing relates_to line, else after the first H1, else at the top of the body;
    with ``at_tail`` (nodes the user owns, whose text must stay a verbatim prefix) just above the code-owned
    tail (Update/Evidence/Sources sections) instead.
    """
    have = {_key(t, resolve) for t in related_of(text)}
    new = []
    for p in related:
        if link_key(p) not in have:
            have.add(link_key(p))
            new.append(p)
    if not new:
        return text, []
    fm, body = _split_fm(text)
    lines = _lines(body)
    if at_tail:
        at = _tail_start(lines, with_updates=True)
        before = lines[: _trim_end(lines, -1, at)] if at else []
        lines = before + [""] + _relates_lines(new) + ([""] if at < len(lines) else []) + lines[at:]
        return fm + _join(lines, _nl(body)), new
    mask = code_mask(lines)
    at = None
    for i, ln in enumerate(lines):
        if not mask[i] and ln.lstrip().lower().startswith("relates_to::"):
            at = i + 1
    block = _relates_lines(new)
    if at is None:
        h1 = next((h.line for h in headings(lines) if h.level == 1), None)
        if h1 is not None:
            block = [""] + block
            at = h1 + 1
            if at < len(lines) and lines[at].strip():
                block.append("")
        else:
            at = 0
            while at < len(lines) and not lines[at].strip():
                at += 1
            block = block + [""]
    lines[at:at] = block
    return fm + _join(lines, _nl(body)), new


def replace_body(text: str, new_body: str, resolve: Resolve | None = None) -> str:
    """Rewrite the main body (REFINE/CORRECT of an app-owned node): frontmatter, existing ``relates_to::`` lines,
    ``## Evidence`` and ``## Sources`` are kept; everything else becomes ``new_body``."""
    fm, body = _split_fm(text)
    lines = _lines(body)
    old_related = related_of(text)
    tail = lines[_tail_start(lines) :]
    new_lines = _lines(new_body.strip("\n"))
    out = new_lines + ([""] if tail else []) + tail
    result = fm + ("\n" if fm else "") + _join(out)
    keep = [(resolve(t) if resolve else None) or clean_llm_path(t) for t in old_related]
    result, _ = add_relates(result, [p for p in keep if p], resolve)
    return result


def append_update(text: str, date: str, material: str) -> str:
    """Append ``material`` under ``## Update <date>`` before the code-owned tail (Evidence, Sources); a section
    of the same date gets the material appended instead of a second heading. The body above is untouched."""
    fm, body = _split_fm(text)
    lines = _lines(body)
    md = demote_headings(material.strip("\n"))
    block = _lines(md)
    title = f"{UPDATE} {date}"
    span = _section(lines, _is_title(title))
    if span is not None:
        end = _trim_end(lines, span[0], span[1])
        lines[end:end] = [""] + block
    else:
        at = _tail_start(lines)
        before = lines[: _trim_end(lines, -1, at)] if at else []
        lines = before + ["", f"## {title}", ""] + block + ([""] if at < len(lines) else []) + lines[at:]
    return fm + _join(lines, _nl(body))


def update_meta(text: str, *, derived_from: list[str], tags: list[str] | None = None, name: str = "",
                description: str = "", resolve: Resolve | None = None) -> str:
    """Merge provenance/tags (additive) and, when given, name/description into the frontmatter; every other key
    and its layout are kept. A broken frontmatter block is left alone (never overwritten)."""
    meta = parse_frontmatter(text).meta
    updates: dict = {}
    merged = _merge_links(meta.get("derived_from"), derived_from, resolve)
    if merged != meta.get("derived_from"):
        updates["derived_from"] = merged
    if tags:
        old = meta.get("tags")
        old_list = [old] if isinstance(old, str) else [t for t in (old or []) if isinstance(t, (str, int, float))]
        union = list(dict.fromkeys([*old_list, *tags]))
        if union != old_list:
            updates["tags"] = union
    if name and name != meta.get("name"):
        updates["name"] = name
    if description and description != meta.get("description"):
        updates["description"] = description
    if not updates:
        return text
    try:
        return update_frontmatter(text, updates)
    except FrontmatterError:
        return text


# -- the app's block in a note the user owns ----------------------------------------------------------------------
#: Title and hint of the block, by ``settings.language`` (the sub-headings stay English: code reads them back).
BLOCK_TEXT = {
    "en": ("Updates proposed by reme",
           "*Proposed by reme from your daily notes, not part of your note yet. To accept, edit it into your text; "
           "to dismiss, delete this section.*"),
    "zh": ("reme 建议的更新",
           "*reme 根据你的日记提出，尚未并入你的笔记。接受：把它改写进你的正文；不要：删除这一节。*"),
}


def _block_parts(inner: str | None) -> tuple[list[str], list[str], list[str], list[str]]:
    """``(relates_to lines, update entry lines, evidence lines, source lines)`` of the app's own block text."""
    if not inner:
        return [], [], [], []
    lines = inner.split("\n")
    h3 = [h.line for h in headings(lines) if h.level == 3]
    first = h3[0] if h3 else len(lines)
    relates = [ln for ln in lines[:first] if ln.lstrip().lower().startswith("relates_to::")]
    ev = _section(lines, _is_title(EVIDENCE), level=3)
    src = _section(lines, _is_sources, level=3)
    tail = min([x[0] for x in (ev, src) if x] or [len(lines)])
    entries = lines[first : _trim_end(lines, first, tail)] if tail > first else []
    evidence = [ln for ln in lines[ev[0] + 1 : ev[1]] if ln.strip()] if ev else []
    sources = [ln for ln in lines[src[0] + 1 : src[1]] if ln.strip()] if src else []
    return relates, entries, evidence, sources


def _has_run(lines: list[str], run: list[str]) -> bool:
    """``run`` occurs in ``lines`` as consecutive whole lines."""
    n = len(run)
    return any(lines[i : i + n] == run for i in range(len(lines) - n + 1)) if n else True


def block_update(note_text: str, inner: str | None, *, date: str, action: str, material: str, evidence: str,
                 sources: list[str], related: list[str], resolve: Resolve | None = None,
                 language: str = "en") -> str:
    """The new content of the app's block in a note the user owns (the text between its markers; see
    :func:`reme_engine.vault.provenance.set_block`). ``inner``: the block's current content, None for a new block.

    Adds, keeping everything already in the block: ``relates_to::`` lines for ``related`` not linked that way
    anywhere in ``note_text``; an ``### Update <date> (<action>)`` entry with ``material`` (headings demoted below
    it) and its ``Sources:`` links, when ``material`` is not blank and not in the block already; an Evidence
    line; and the ``sources`` neither the block's Sources nor the note's own ``## Sources`` section list yet.
    Paths must be validated by the caller. ``language`` picks the title and hint (:data:`BLOCK_TEXT`).
    """
    relates, entries, ev_lines, src_lines = _block_parts(inner)
    have_rel = {_key(t, resolve) for t in related_of(note_text)}
    for p in related:
        if link_key(p) not in have_rel:
            have_rel.add(link_key(p))
            relates += _relates_lines([p])
    md = demote_headings(material.strip("\n"), top=4).strip("\n") if material.strip() else ""
    if md and not _has_run(entries, _lines(md)):  # the same material twice (two units, one fact): one entry
        entry = [f"### {UPDATE} {date} ({action.lower()})", "", *_lines(md)]
        if sources:
            entry += ["", "Sources: " + " · ".join(format_link(p) for p in sources)]
        entries = entries + ([""] if entries else []) + entry
    if evidence.strip():
        ev_lines = ev_lines + [f"- {date} ({action.lower()}): " + " ".join(evidence.split())]
    listed = {_key(t, resolve) for t in sources_of(note_text)}
    listed |= {_key(lk.target, resolve) for lk in parse_links("\n".join(src_lines)) if lk.target}
    for p in sources:
        if link_key(p) not in listed:
            listed.add(link_key(p))
            src_lines += _source_lines([p])
    title, hint = BLOCK_TEXT.get(language, BLOCK_TEXT["en"])
    out = [f"## {title}", "", hint, ""]
    if relates:
        out += relates + [""]
    if entries:
        out += entries + [""]
    if ev_lines:
        out += [f"### {EVIDENCE}", "", *ev_lines, ""]
    if src_lines:
        out += [f"### {SOURCES}", "", *src_lines]
    return "\n".join(out).rstrip("\n")


def strip_title(body: str) -> str:
    """``body`` without its leading H1 line (a CREATE's title, which a node that exists already has)."""
    lines = _lines(body.strip("\n"))
    if lines and _heads(lines).get(0, (0,))[0] == 1:
        lines = lines[1:]
        while lines and not lines[0].strip():
            lines.pop(0)
    return "\n".join(lines)

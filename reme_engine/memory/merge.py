"""Merging a :class:`~.reply.CardReply` into a daily card: in place for the app's card (:func:`merge_card`), in
reme's marked block for a card the user owns (:func:`merge_into_block`)."""

from __future__ import annotations

import re
from typing import Iterable

from ..markdown.frontmatter import parse_frontmatter, update_frontmatter
from ..markdown.links import format_link
from ..markdown.sections import headings, is_sources_title, split_sections
from ..vault import provenance as P
from ..vault.io import WriteConflict
from .prompts import prompt_language
from .reply import CardReply

SECTION_ALIASES = {
    "current": ("current state", "当前状态"),
    "timeline": ("timeline", "时间线"),
    "notes": ("notes", "要点", "笔记"),
}
SECTION_LABELS = {
    "en": {"current": "Current state", "timeline": "Timeline", "notes": "Notes"},
    "zh": {"current": "当前状态", "timeline": "时间线", "notes": "要点"},
}


_TIME_PREFIX_RE = re.compile(r"^(\*\*)?\d{1,2}:\d{2}(\*\*)?(\s*[—–-]\s*|\s+)")


def _section_kind(title: str) -> str | None:
    t = " ".join(title.strip().casefold().split())
    for kind, aliases in SECTION_ALIASES.items():
        if t in aliases:
            return kind
    return None


def _split_sections(body: str) -> tuple[list[str], list[dict]]:
    """``(preamble lines, [{heading, kind, lines}])`` split at level-2 headings outside code
    (:func:`~reme_engine.markdown.sections.split_sections`; ``heading`` is the heading's text as written)."""
    pre, secs = split_sections(body, 2)
    return pre, [{"heading": "\n".join(s.heading), "kind": _section_kind(s.title), "lines": s.lines} for s in secs]


def normalize_item(line: str) -> str:
    """A line reduced for duplicate detection: no bullet, checkbox or leading time, case-folded, single-spaced."""
    s = line.strip()
    s = re.sub(r"^([-*+]|\d+[.)])\s+", "", s)
    s = re.sub(r"^\[[ xX]\]\s+", "", s)
    s = _TIME_PREFIX_RE.sub("", s)
    s = " ".join(s.casefold().split())
    return s.rstrip(" .。!！;；,，")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _safe_block(text: str) -> str:
    """Model text placed in a section: headings (ATX, and setext: a line over ``---``/``===``) become bold lines so
    they cannot split the card's sections (:mod:`~reme_engine.markdown.sections` decides what is a heading)."""
    lines = text.split("\n")
    at = {h.line: h for h in headings(lines)}
    out, i = [], 0
    while i < len(lines):
        h = at.get(i)
        if h is None:
            out.append(lines[i].rstrip())
            i += 1
            continue
        if h.title:
            out.append(f"**{h.title}**")
        i = h.end
    return "\n".join(out).strip()


def _append_items(lines: list[str], new: list[str]) -> list[str]:
    """Section lines with ``new`` bullet lines inserted after the last non-blank line."""
    end = len(lines)
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    head = lines[:end]
    if not head:
        head = [""]
    return head + new + [""]


def merge_card(text: str, reply: CardReply, *, time_label: str, language: str = "en",
               frontmatter: dict | None = None) -> str:
    """Merge ``reply`` into card ``text`` (BOM-less) and return the new text.

    Rules: ``## Timeline`` gets the reply's timeline items appended as ``- <time_label> <item>`` (items already
    in the section are skipped); ``## Current state`` is replaced by ``reply.current_state`` when that is non-empty;
    ``## Notes`` gets reply notes that do not already occur anywhere in the card. Missing sections are appended in
    the order current state, timeline, notes (headings in ``language``). Other sections and the preamble are kept
    line for line. ``frontmatter`` keys are merged into the block with :func:`update_frontmatter` (other keys, their
    order and comments kept). CRLF cards stay CRLF. Raises FrontmatterError when the frontmatter block is invalid.
    Only for a card the app owns (it rewrites the current state and the description); the caller re-stamps the
    result. A card the user owns goes through :func:`merge_into_block`.
    """
    crlf = "\r\n" in text
    if crlf:  # work on LF lines (headings must match) and give the card its CRLF style back at the end
        text = text.replace("\r\n", "\n")
    fm = parse_frontmatter(text)
    head, body = text[: fm.body_offset], text[fm.body_offset :]
    if frontmatter:
        head = update_frontmatter(head, frontmatter)
        if not head.endswith("\n"):
            head += "\n"
    pre, sections = _split_sections(body)
    labels = SECTION_LABELS[prompt_language(language)]
    existing_norm = {normalize_item(x) for x in body.split("\n") if x.strip()}
    by_kind: dict[str, dict] = {}
    for s in sections:
        if s["kind"] and s["kind"] not in by_kind:
            by_kind[s["kind"]] = s

    def section(kind: str) -> dict:
        if kind not in by_kind:
            s = {"heading": f"## {labels[kind]}", "kind": kind, "lines": [""], "new": True}
            by_kind[kind] = s
            sections.append(s)
        return by_kind[kind]

    if reply.current_state:
        section("current")["lines"] = ["", *_safe_block(reply.current_state).split("\n"), ""]
    timeline_new: list[str] = []
    seen = {normalize_item(x) for x in by_kind["timeline"]["lines"]} if "timeline" in by_kind else set()
    for item in reply.timeline:
        item = _one_line(item)
        key = normalize_item(item)
        if not key or key in seen:
            continue
        seen.add(key)
        timeline_new.append(f"- {item}" if _TIME_PREFIX_RE.match(item) else f"- {time_label} {item}")
    if timeline_new:
        s = section("timeline")
        s["lines"] = _append_items(s["lines"], timeline_new)
    notes_new: list[str] = []
    for item in reply.notes:
        item = _one_line(item)
        key = normalize_item(item)
        if not key or key in existing_norm:
            continue
        existing_norm.add(key)
        notes_new.append(f"- {item}")
    if notes_new:
        s = section("notes")
        s["lines"] = _append_items(s["lines"], notes_new)
    lines = list(pre)
    for s in sections:
        if s.get("new") and lines and lines[-1].strip():
            lines.append("")  # a blank line before a heading we add; existing layout stays as the user wrote it
        lines.append(s["heading"])
        lines.extend(s["lines"])
    out = head + "\n".join(lines).rstrip("\n") + "\n"
    return out.replace("\n", "\r\n") if crlf else out


# --------------------------------------------------------------------------------------------------- user's cards

#: Title and hint of the app's block in a card the user owns (the title is auto_dream's, so one look for both).
BLOCK_TEXT = {
    "en": ("Updates proposed by reme",
           "*Proposed by reme, not part of your card yet. To accept, edit it into your text; to dismiss, delete "
           "this section.*"),
    "zh": ("reme 建议的更新", "*reme 提出，尚未并入你的卡片。接受：把它改写进你的正文；不要：删除这一节。*"),
}
SOURCES_LABEL = {"en": "Sources", "zh": "来源"}
DESCRIPTION_LABEL = {"en": "Description", "zh": "描述"}
_DESC_LINE_RE = re.compile(r"^\*\*(?:Description|描述):\*\*[ \t]*(.*)$")


def block_parts(inner: str | None) -> dict:
    """The app block of a card (:func:`render_block_parts`'s output, as :func:`~reme_engine.vault.provenance.
    live_block` returns it) read back: ``{description: str, current: [lines], timeline: [lines], notes: [lines],
    sources: [lines]}``, section lines without surrounding blank lines. None or "" gives empty parts."""
    parts: dict = {"description": "", "current": [], "timeline": [], "notes": [], "sources": []}
    kind = None
    lines = (inner or "").split("\n")
    h3 = {h.line: h for h in headings(lines) if h.level == 3 and not h.setext}
    for i, line in enumerate(lines):
        h = h3.get(i)
        if h:
            kind = _section_kind(h.title) or ("sources" if is_sources_title(h.title) else "other")
            continue
        if kind is None:
            d = _DESC_LINE_RE.match(line)
            if d:
                parts["description"] = d.group(1).strip()
        elif kind in parts:
            parts[kind].append(line)
    for k in ("current", "timeline", "notes", "sources"):
        ls = parts[k]
        while ls and not ls[0].strip():
            ls.pop(0)
        while ls and not ls[-1].strip():
            ls.pop()
    return parts


def render_block_parts(parts: dict, language: str = "en") -> str:
    """The inner text of the app's block (LF lines): title, hint, the proposed description, then ``### Current
    state`` / ``### Timeline`` / ``### Notes`` / ``### Sources`` for the non-empty parts (headings in
    ``language``)."""
    lang = prompt_language(language)
    title, hint = BLOCK_TEXT.get(lang, BLOCK_TEXT["en"])
    labels = SECTION_LABELS[lang]
    out = [f"## {title}", "", hint, ""]
    if parts.get("description"):
        out += [f"**{DESCRIPTION_LABEL[lang]}:** {parts['description']}", ""]
    for kind, label in (("current", labels["current"]), ("timeline", labels["timeline"]),
                        ("notes", labels["notes"]), ("sources", SOURCES_LABEL[lang])):
        if parts.get(kind):
            out += [f"### {label}", "", *parts[kind], ""]
    return "\n".join(out).rstrip("\n")


def merge_into_block(text: str, reply: CardReply, *, time_label: str, language: str = "en",
                     sources: Iterable[str] = ()) -> str:
    """Merge ``reply`` into the app's block of a card the **user** owns and return the new text (``text``
    unchanged when there is nothing new to propose).

    Only the block changes (:func:`~reme_engine.vault.provenance.set_block`: the last intact reme block is
    rewritten in place, else a new one is appended at the end): a description different from the card's own is
    proposed; ``reply.current_state`` replaces the block's current state (unless the card already says exactly
    that); timeline items (``- <time_label> <item>``) and notes are appended unless a line of the card (the
    user's or the block's) already says the same (:func:`normalize_item`); ``sources`` (vault paths, e.g. the
    session record) are listed as links, old ones kept. Every other byte of ``text`` is kept, CRLF and BOM
    included (an invalid frontmatter block too: it is never touched). Never raises.
    """
    lf = text.replace("\r\n", "\n")
    parts = block_parts(P.live_block(text))
    before = render_block_parts(parts, language)
    seen = {normalize_item(x) for x in lf.split("\n") if x.strip()}
    desc = _one_line(reply.description)
    if desc and desc != _one_line(str(parse_frontmatter(lf).meta.get("description") or "")):
        parts["description"] = desc
    current = _safe_block(reply.current_state) if reply.current_state else ""
    # A new current state replaces the block's, unless the card (the user's text or the block) says it already.
    if current and not all(normalize_item(ln) in seen for ln in current.split("\n") if ln.strip()):
        parts["current"] = current.split("\n")
    for kind, items in (("timeline", reply.timeline), ("notes", reply.notes)):
        for item in items:
            item = _one_line(item)
            key = normalize_item(item)
            if not key or key in seen:
                continue
            seen.add(key)
            if kind == "timeline" and not _TIME_PREFIX_RE.match(item):
                item = f"{time_label} {item}"
            parts[kind].append(f"- {item}")
    for rel in sources:
        link = "- " + format_link(rel)
        if link not in parts["sources"]:
            parts["sources"].append(link)
    inner = render_block_parts(parts, language)
    has_news = any(parts[k] for k in ("description", "current", "timeline", "notes"))
    if inner == before or not has_news:
        return text
    return P.set_block(text, inner)


def _checked_block_write(old: str, new: str, rel: str) -> str:
    """``new`` if writing it over ``old`` keeps every user line and leaves the note the user's; else raises
    WriteConflict (nothing is written: the pipeline reports the card and retries next run)."""
    if not P.keeps_user_lines(old, new) or P.note_ownership(new).app_owned:
        raise WriteConflict(f"{rel}: the update would change your lines; not written")
    return new

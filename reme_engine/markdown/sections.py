"""Headings, fenced code and named sections of a Markdown body: the one place that decides them (ARCHITECTURE §4).

Built on markdown-it-py's block token line maps (the parser the chunker uses), so every caller agrees with the
chunker and with CommonMark on what is code and what is a heading: a fence closes only on a run of the same
character at least as long as its opening (a ```` ```` ```` example may contain ```` ``` ```` and ``## Sources``),
an unclosed fence runs to the end of its container, indented code blocks are code, headings inside blockquotes and
list items are not section boundaries, and setext headings (``Title`` over ``---``) are headings.

Inputs are a body without frontmatter (a leading YAML block would parse as a setext heading), as text or as a
list of lines. Line numbers are 0-based indexes into those lines; spans are ``[start, end)``. A line that holds a
lone ``\\r`` (a CRLF text split on ``\\n``) is handled: markdown-it would count the ``\\r`` as a line break, so it
is blanked before parsing and line numbers stay the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

from markdown_it import MarkdownIt

#: Titles of the section that lists a note's sources, case-folded (the engine and the TUI read the same set).
SOURCES_TITLES = frozenset({"sources", "source", "来源", "出处", "参考来源", "参考资料"})


@dataclass(frozen=True)
class Heading:
    """A top-level heading: ``line`` its first line, ``end`` the line after it (``line + 1`` for ATX, after the
    underline for setext), ``level`` 1–6, ``title`` its text without ``#`` marks or closing sequence, stripped."""

    line: int
    end: int
    level: int
    title: str
    setext: bool = False


@dataclass(frozen=True)
class Outline:
    """What :func:`outline` found: ``headings`` in order (top level only: not in lists, blockquotes, code or
    HTML blocks) and ``code``, one bool per line, True for lines of fenced code (fence lines included) and
    indented code blocks at any nesting depth."""

    headings: tuple[Heading, ...]
    code: tuple[bool, ...]

    def heading_at(self) -> dict[int, Heading]:
        """``{first line: Heading}``."""
        return {h.line: h for h in self.headings}


@lru_cache(maxsize=1)
def block_parser() -> MarkdownIt:
    """The shared block-structure parser: CommonMark, tables on, inline parsing off (the chunker's configuration;
    one instance per process, reused)."""
    return MarkdownIt("commonmark").enable("table").disable(["inline", "text_join"])


_parser = block_parser


def _lines(src: str | Sequence[str]) -> tuple[str, ...]:
    return tuple(src.split("\n")) if isinstance(src, str) else tuple(src)


#: Texts up to this many characters are cached (callers parse the same note several times per update); larger
#: ones are parsed each time, so the cache never holds more than ~64 × this.
CACHE_MAX_CHARS = 256 * 1024


def outline(src: str | Sequence[str]) -> Outline:
    """The :class:`Outline` of ``src`` (a body as text, split on ``\\n``, or its lines). Never raises."""
    return _outline(_lines(src))


def _outline(lines: tuple[str, ...]) -> Outline:
    if sum(map(len, lines)) <= CACHE_MAX_CHARS:
        return _outline_cached(lines)
    return _compute(lines)


@lru_cache(maxsize=64)
def _outline_cached(lines: tuple[str, ...]) -> Outline:
    return _compute(lines)


def _compute(lines: tuple[str, ...]) -> Outline:
    n = len(lines)
    text = "\n".join(ln.replace("\r", " ") for ln in lines)
    tokens = _parser().parse(text)
    code = [False] * n
    heads: list[Heading] = []
    for i, tok in enumerate(tokens):
        if tok.map is None:
            continue
        a, b = tok.map[0], min(tok.map[1], n)
        if tok.type in ("fence", "code_block"):
            for j in range(a, b):
                code[j] = True
        elif tok.type == "heading_open" and tok.level == 0:
            inline = tokens[i + 1] if i + 1 < len(tokens) else None
            title = inline.content.strip() if inline is not None and inline.type == "inline" else ""
            setext = tok.markup in ("=", "-")
            heads.append(Heading(a, b if setext else a + 1, int(tok.tag[1:]), title, setext))
    return Outline(tuple(heads), tuple(code))


def code_mask(src: str | Sequence[str]) -> list[bool]:
    """One bool per line of ``src``: True inside code (see :class:`Outline`), where markers and headings are
    plain text."""
    lines = _lines(src)
    # Fast path (the parse costs ~2 ms per KB): no fence characters and no indented line means no code.
    if not any("```" in ln or "~~~" in ln or ln.startswith(("    ", "\t", " \t", "  \t", "   \t"))
               for ln in lines):
        return [False] * len(lines)
    return list(_outline(lines).code)


def headings(src: str | Sequence[str]) -> list[Heading]:
    """The top-level headings of ``src`` in order (see :class:`Outline`)."""
    return list(outline(src).headings)


def norm_title(title: str) -> str:
    """A heading title compared by name: case-folded, whitespace collapsed, trailing ``:``/``：`` dropped."""
    return " ".join(title.casefold().split()).rstrip(":：").rstrip()


def is_sources_title(title: str) -> bool:
    """True when ``title`` names a Sources section (:data:`SOURCES_TITLES`; ``## Sources``, ``## 参考来源``…)."""
    return norm_title(title) in SOURCES_TITLES


def section_span(src: str | Sequence[str], match: Callable[[str], bool], level: int | None = 2, *,
                 last: bool = True) -> tuple[int, int] | None:
    """``[start, end)`` lines of the section whose heading title satisfies ``match``: from its heading line to the
    next heading of the same or a higher level (or the end). ``level`` None accepts any level. The last such
    section when ``last`` (the code-owned tail sections are appended at the end), else the first. None if none."""
    heads = outline(src).headings
    n = len(_lines(src))
    found = None
    for k, h in enumerate(heads):
        if (level is None or h.level == level) and match(h.title):
            end = next((g.line for g in heads[k + 1:] if g.level <= h.level), n)
            found = (h.line, end)
            if not last:
                break
    return found


@dataclass
class Section:
    """One section of :func:`split_sections`: ``heading`` the heading's lines as written, ``title`` its text,
    ``level``, and ``lines`` the lines up to the next split heading."""

    heading: list[str]
    title: str
    level: int
    lines: list[str]


def split_sections(src: str | Sequence[str], level: int = 2) -> tuple[list[str], list[Section]]:
    """``(preamble lines, sections)``: ``src`` cut at every top-level heading of exactly ``level`` (headings of
    other levels stay inside the lines). Joining the preamble and each section's heading and lines gives the
    lines back unchanged."""
    lines = list(_lines(src))
    cuts = [h for h in outline(lines).headings if h.level == level]
    pre = lines[: cuts[0].line] if cuts else lines
    out = []
    for k, h in enumerate(cuts):
        stop = cuts[k + 1].line if k + 1 < len(cuts) else len(lines)
        out.append(Section(lines[h.line:h.end], h.title, h.level, lines[h.end:stop]))
    return pre, out

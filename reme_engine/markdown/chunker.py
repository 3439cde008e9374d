"""AST-aware chunking of notes into search/embedding units (ARCHITECTURE §4 "Chunking", §11.3.1).

Shapes and units
----------------
* Line numbers in a :class:`Chunk` are 1-based, inclusive, and count *file* lines: body line 1 is file line
  ``line_offset + 1`` (``line_offset`` = number of frontmatter lines the caller stripped).
* Lines are delimited by ``\\n``, ``\\r\\n`` or a lone ``\\r`` (what markdown-it and Python's universal-newline
  ``open()`` both use). Chunk text joins its lines with ``\\n`` and has no trailing newline.
* ``max_bytes`` is a budget in UTF-8 bytes of ``Chunk.text`` (the breadcrumb added by :meth:`Chunk.embed_text` is
  not counted). Every chunk fits the budget, with one unavoidable exception: when ``max_bytes`` is smaller than a
  single character's UTF-8 encoding (e.g. ``max_bytes=3`` and an emoji), that character is emitted whole rather
  than cut in half.

What ``Chunk.text`` holds
-------------------------
Normally exactly the body lines ``start_line..end_line``. Three documented exceptions, all from splitting a block
that alone exceeds the budget:

1. *Table pieces*: every piece after the first is the header row + delimiter row followed by its body rows;
   ``start_line..end_line`` is the range of those body rows only (the header lines are covered by the first piece).
2. *Fenced-code pieces*: each piece is re-wrapped in the opening fence line and (if the fence is closed) the closing
   fence line; ``start_line..end_line`` is the range of its code lines, extended to the real fence line on the first
   and last piece where that line is part of the text anyway.
3. *One oversized line*: cut into slices at UTF-8 character boundaries (preferring whitespace / CJK punctuation);
   each slice is a chunk with ``start_line == end_line`` and its text is a slice of that line. Whitespace-only
   slices are dropped; the other slices concatenate back to the line.

Invariants: chunks come in line order, ranges never overlap (slices of one line share it), no chunk is empty or
blank, and every non-blank body line lies inside some chunk's range. Blank lines between blocks never start or end a
chunk. A leading UTF-8 BOM is dropped from the text (it would hide a first-line heading from the parser).

How it splits
-------------
markdown-it-py (CommonMark + tables) decides the top-level blocks and their line maps (a linear scanner applies its
rules to the common blocks and hands it the rest, with identical results: :func:`_scan_exact`); headings nest them into
sections (a heading owns everything up to the next heading of the same or higher level). The note is flattened
into units in line order: a section that fits the budget is one unit; a bigger one contributes its heading line,
its own blocks and then its subsections (recursively). A block over budget is split: list → whole items (an
oversized item → its lines), table/fence → wrapped pieces as above, anything else → its lines. One greedy pass
then joins consecutive plain units while the joined lines fit the budget, so small siblings share a chunk and a
short intro is not left alone. ``Chunk.headings`` is the innermost section containing the whole chunk. A chunk may
run *into* deeper sections (their headings are then in the text) but never *out of* a split section into a
shallower one, unless it began with that section's heading — otherwise the tail of a deep section would be filed
under a breadcrumb that no longer explains it.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate, repeat
from operator import add
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # imported by _parser(): opening an engine (the chunking fingerprint) needs no parser
    from markdown_it import MarkdownIt

__all__ = ["DEFAULT_MAX_BYTES", "Chunk", "chunk_id", "chunk_markdown", "chunk_plain", "split_lines"]

DEFAULT_MAX_BYTES = 2000

# Preferred cut points inside an oversized line (cut *after* them), so slices end on a word or clause.
_BREAKS = tuple(s.encode() for s in (" ", "\t", "。", "，", "、", "；", "！", "？", "）"))
_ATX_RE = re.compile(r" {0,3}#{1,6}(?=[ \t]|$)(.*)")
_SETEXT_UNDERLINE_RE = re.compile(r" {0,3}(?:=+|-+)[ \t]*")
_MAX_TITLE = 200  # characters of one breadcrumb entry


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrievable piece of a note.

    start_line / end_line: 1-based inclusive file lines. text: see module docstring. headings: titles of the
    innermost section containing the whole chunk, outermost first (e.g. ``("光伏产业链", "上游：硅料", "多晶硅工艺")``);
    ``()`` for text before the first heading or packed across top-level sections.
    """

    start_line: int
    end_line: int
    text: str
    headings: tuple[str, ...] = ()

    def embed_text(self) -> str:
        """Text for embeddings and BM25: breadcrumb lines (``"# A\\n## B\\n"``, depth = position in the
        breadcrumb) followed by ``text``. When the chunk begins with the innermost heading itself, that heading is
        not repeated."""
        hs = self.headings
        if hs and _leading_heading(self.text) == hs[-1]:
            hs = hs[:-1]
        if not hs:
            return self.text
        crumb = "".join(f"{'#' * min(i + 1, 6)} {h}\n" for i, h in enumerate(hs))
        return crumb + self.text


def chunk_id(path: str, text: str) -> str:
    """Stable 32-hex-char id of a chunk: blake2b-128 of (vault-relative path, chunk text).

    Line numbers are deliberately excluded, so a chunk that only moves within its file keeps its id (and its
    cached embedding)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(path.encode("utf-8", "surrogatepass"))
    h.update(b"\0")  # separator: ("ab", "c") and ("a", "bc") must differ
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def split_lines(text: str) -> list[str]:
    """Split like markdown-it / universal newlines (``\\r\\n``, ``\\r``, ``\\n``); ``""`` → ``[""]``."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def chunk_markdown(body: str, *, line_offset: int = 0, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Chunk]:
    """Chunk a Markdown body (frontmatter already removed) by its heading/section structure.

    body: Markdown text; line_offset: file lines before the body; max_bytes: UTF-8 byte budget per chunk text.
    Returns chunks in line order; ``[]`` for empty or blank input.
    """
    doc = _Doc(body, max_bytes)
    if doc.empty:
        return []
    if doc.prefix[-1] - 1 <= doc.budget:  # the whole body fits one chunk (most notes of a real vault)
        one = _single_chunk(doc, line_offset)
        if one is not None:
            return [one]
    return _chunk_doc(doc, line_offset)


def _chunk_doc(doc: _Doc, line_offset: int) -> list[Chunk]:
    """The full path of :func:`chunk_markdown`: markdown-it blocks → sections → units → packed chunks."""
    units: list[_Piece] = []
    _flatten(doc, _build_sections(_parse_blocks(doc)), units)
    return doc.to_chunks(doc.pack(units), line_offset)


def _single_chunk(doc: _Doc, line_offset: int) -> Chunk | None:
    """The one chunk of a body that fits the budget, without markdown-it, or None when that needs the parser.

    When everything fits, the full path packs every unit into one chunk spanning the first to the last non-blank
    line, filed under the innermost section holding all of it: the first line's section when that line is an ATX
    heading and no later top-level heading has its level or a shallower one; none when the body opens with
    anything but a heading (text before the first heading belongs to no section). Any line that could break those
    conditions (an ATX ``#``… of that level or shallower, the first line looking like a heading, a setext underline
    of ``=``/``-`` right under a non-blank line; at any indent: nested ones are not told apart here) sends the
    body to the full path, so the answer is always the parser's."""
    lines = doc.lines
    a, b = 0, len(lines) - 1
    while _blank(lines[a]):
        a += 1
    while _blank(lines[b]):
        b -= 1
    m = _ATX_RE.fullmatch(lines[a])
    level = len(lines[a].lstrip(" ")) - len(lines[a].lstrip(" ").lstrip("#")) if m else 0
    for i in range(a + 1 if m else a, b + 1):
        s = lines[i].lstrip(" \t")
        if not s:
            continue
        c = s[0]
        if c == "#":
            h = len(s) - len(s.lstrip("#"))
            if h <= 6 and s[h : h + 1] in ("", " ", "\t") and (i == a or h <= level):
                return None  # may open the body with a heading, or end the first line's section
        elif (c == "=" or c == "-") and i > a and not _blank(lines[i - 1]):  # an underline needs text above
            r = s.rstrip(" \t")
            if r.count(c) == len(r) and (c == "=" or level != 1):
                return None
    headings = (_norm_title(_strip_closing_hashes(m.group(1).strip(" \t"))),) if m else ()
    base = line_offset + 1
    return Chunk(a + base, b + base, doc.join(a, b), headings)


def chunk_plain(text: str, *, line_offset: int = 0, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Chunk]:
    """Chunk non-Markdown text (.txt, .json, .csv, …): pack whole lines greedily up to ``max_bytes`` UTF-8 bytes;
    a line over budget is cut into slices. Units and invariants as for :func:`chunk_markdown`; headings are ``()``.
    """
    doc = _Doc(text, max_bytes)
    if doc.empty:
        return []
    return doc.to_chunks(doc.pack(doc.line_pieces(0, len(doc.lines) - 1, _Section(0, None, None))), line_offset)


# --------------------------------------------------------------------------------------------------- internals


class _Piece(NamedTuple):
    """A chunk in the making. start/end: 0-based inclusive body lines. owner: innermost section holding it.
    text None → the lines themselves. mergeable: a plain line range that pack() may join with its neighbours.
    head: the piece begins with ``owner``'s own heading line (a whole section, or the heading itself)."""

    start: int
    end: int
    owner: _Section
    text: str | None
    mergeable: bool
    head: bool = False


class _Block(NamedTuple):
    kind: str  # markdown-it block type without "_open" ("paragraph", "table", "fence", "heading", "other", …)
    start: int  # 0-based inclusive, trimmed of blank lines
    end: int
    level: int = 0  # heading level 1..6
    title: str = ""  # heading title, whitespace-normalised
    items: tuple[tuple[int, int], ...] = ()  # list items (start, end), contiguous over the list
    closed: bool = False  # fence has a closing fence line (= its last line)


class _Section:
    __slots__ = ("level", "depth", "path", "parent", "heading", "blocks", "children", "start", "end")

    def __init__(self, level: int, parent: _Section | None, heading: _Block | None) -> None:
        self.level = level  # heading level 1..6; 0 for the root
        self.parent = parent
        self.depth = parent.depth + 1 if parent else 0  # nesting depth, for the LCA walk in pack()
        self.path: tuple[str, ...] = parent.path + (heading.title,) if parent and heading else ()
        self.heading = heading
        self.blocks: list[_Block] = []  # content before the first subsection
        self.children: list[_Section] = []
        self.start = heading.start if heading else 0
        self.end = heading.end if heading else -1


#: Bodies bigger than this (UTF-8 bytes, estimated as characters) are split into blocks by
#: :func:`_scan_blocks` (ATX headings, fences, paragraphs; one pass) instead of markdown-it, whose block parser
#: costs up to ~8 s per MB on list- or table-dense text. No note of the real vaults comes near it (largest 180 KB).
LINEAR_PARSE_BYTES = 256 * 1024


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    # Only block structure and line maps are needed: skipping inline parsing saves ~40% of parse time.
    md = MarkdownIt("commonmark").enable("table").disable(["inline", "text_join"])
    # Table cells become tokens we never read (8 per row); the lean rule keeps the table's extent only.
    alt = next((r.alt for r in md.block.ruler.__rules__ if r.name == "table"), ["paragraph", "reference"])
    md.block.ruler.at("table", _lean_table, {"alt": list(alt)})
    if any(r.name == "normalize" for r in md.core.ruler.__rules__):
        md.core.ruler.at("normalize", _normalize)
    _dispatch_by_first_char(md)
    state_cls = _fast_state_block(md)
    if state_cls is not None:
        tokenize = md.block.tokenize

        def parse(src, md, env, out_tokens):  # ParserBlock.parse with the faster line markers
            if not src:
                return None
            state = state_cls(src, md, env, out_tokens)
            tokenize(state, state.line, state.lineMax)
            return state.tokens

        md.block.parse = parse  # this private instance only
    return md


def _fast_state_block(md: MarkdownIt):
    """A ``StateBlock`` subclass whose line markers come from ``str.split`` and list comprehensions instead of
    markdown-it's per-line loop (a third of its block-parse time on the code-heavy corpus). Returned only when it
    builds exactly the state of markdown-it's own class on probe texts (tabs, blank and final lines), else None."""
    from itertools import accumulate as _acc

    try:
        from markdown_it.rules_block.state_block import StateBlock
    except ImportError:
        return None

    class _FastStateBlock(StateBlock):
        def __init__(self, src, md, env, tokens) -> None:  # same state as StateBlock.__init__
            self.src, self.md, self.env, self.tokens = src, md, env, tokens
            self.blkIndent = 0
            self.line = 0
            self.tight = False
            self.ddIndent = -1
            self.listIndent = -1
            self.parentType = "root"
            self.level = 0
            self.result = ""
            lines = src.split("\n")
            if not lines[-1].strip(" \t"):
                lines.pop()  # markdown-it gives a last line of only blanks without a newline no marker
            lens = [len(x) for x in lines]
            starts = list(_acc([n + 1 for n in lens], initial=0))
            starts.pop()
            shift = [n - len(x.lstrip(" \t")) for x, n in zip(lines, lens)]
            count = shift[:]
            if "\t" in src:
                for i in [i for i, (x, t) in enumerate(zip(lines, shift)) if t and "\t" in x[:t]]:
                    off = 0
                    for ch in lines[i][: shift[i]]:  # tabs expand to the next multiple of 4
                        off += 4 - off % 4 if ch == "\t" else 1
                    count[i] = off
            length = len(src)
            self.bMarks = starts + [length]
            self.eMarks = [a + n for a, n in zip(starts, lens)] + [length]
            self.tShift = shift + [0]
            self.sCount = count + [0]
            self.bsCount = [0] * (len(lines) + 1)
            self.lineMax = len(lines)
            self._code_enabled = "code" in self.md["block"].ruler.get_active_rules()

        def getLines(self, begin: int, end: int, indent: int, keepLastLF: bool) -> str:
            # StateBlock.getLines strips up to ``indent`` columns from each line, one character at a time; with no
            # indent to strip (top-level blocks: every paragraph, fence and HTML block of most notes) each line is
            # the plain slice from its start marker, so they are cut in one comprehension
            if indent or begin >= end:
                return StateBlock.getLines(self, begin, end, indent, keepLastLF)
            src, bm, em = self.src, self.bMarks, self.eMarks
            last = end - 1
            parts = [src[bm[i] : em[i] + 1] for i in range(begin, last)]
            parts.append(src[bm[last] : em[last] + 1 if keepLastLF else em[last]])
            return "".join(parts)

    probes = ("a\n\n  b\n\tc\n \t d\n  ", "x\n", "x\n  \n", "  ", "# h\n\n- a\n  - b\n\n\t\t```\ncode\n```",
              "\n\n\ny", " \t\t x\n\t \ty\n")
    try:
        for src in probes:
            if vars(_FastStateBlock(src, md, {}, [])) != vars(StateBlock(src, md, {}, [])):
                return None
    except Exception:  # noqa: BLE001 - another markdown-it version: keep its own class
        return None
    return _FastStateBlock


_NEWLINES_RE = re.compile(r"\r\n?|\n")  # markdown_it/rules_core/normalize.py


def _normalize(state) -> None:
    """markdown-it's core ``normalize`` rule (line endings to ``\\n``, NUL to U+FFFD) without its two regex passes
    over text that has neither a ``\\r`` nor a NUL (the chunker's: lines are split first), where they change nothing
    but cost a substitution per line."""
    src = state.src
    if "\r" in src:
        src = _NEWLINES_RE.sub("\n", src)
    if "\0" in src:
        src = src.replace("\0", "\ufffd")
    state.src = src


#: Block rules of markdown-it-py that return False, before anything else (after their indented-code test), unless
#: the line's first non-blank character (``src[bMarks[line] + tShift[line]]``) is one of these: read from the rules
#: in ``markdown_it/rules_block`` (fence.py, blockquote.py, hr.py, list.py: bullet or digit, reference.py,
#: html_block.py, heading.py). ``table`` needs ``|``, ``-`` or ``:`` first on the *next* line; ``code`` an
#: indented-code line; the others (``lheading``, ``paragraph``, unknown ones) may match any line.
_RULE_FIRST_CHARS = {"fence": "~`", "blockquote": ">", "hr": "*-_", "list": "*-+0123456789", "reference": "[",
                     "html_block": "<", "heading": "#"}
_TABLE_DELIMITER_FIRST = "|-:"
_FIRST_CHARS = frozenset("".join(_RULE_FIRST_CHARS.values()))


def _token_signature(tokens) -> list[tuple]:
    return [(t.type, t.tag, t.nesting, t.map, t.level, t.markup, t.info, t.content, t.block, t.hidden)
            for t in tokens]


def _dispatch_by_first_char(md: MarkdownIt) -> bool:
    """Make this private parser try, at each line, only the block rules that can match its first character.

    markdown-it tries every block rule in turn at each block start, and a paragraph tries every terminator rule at
    each of its lines (~10 calls a line, nearly all returning False at their first-character test): on the
    code-heavy corpus most of its block-parse time. Here the block loop (``md.block.tokenize``, the same loop as
    ``ParserBlock.tokenize``) and the terminator chains (``ruler.getRules(chain)``, which the rules call) use,
    per line, the rules in their order minus those :data:`_RULE_FIRST_CHARS` rules out: the same calls that can
    return True in the same order, so the same tokens. Indented-code lines get every rule. Installed only when
    the tokens equal markdown-it's own on probe texts; returns whether it was."""
    ruler = md.block.ruler
    try:
        active = [(r.name, r.fn, tuple(r.alt)) for r in ruler.__rules__ if r.enabled]
        stock_tokenize = md.block.tokenize
        stock_get_rules = ruler.getRules
    except AttributeError:  # another markdown-it version
        return False
    chains: dict[str, list[tuple[str, object]]] = {"": [(n, f) for n, f, _ in active]}
    for n, f, alt in active:
        for c in alt:
            chains.setdefault(c, []).append((n, f))
    full = {c: [f for _, f in rules] for c, rules in chains.items()}
    picked: dict[tuple, list] = {}

    def pick(chain: str, ch: str, table_ok: bool) -> list:
        got = [f for n, f in chains[chain] if n != "code" and (n != "table" or table_ok)
               and (n not in _RULE_FIRST_CHARS or ch in _RULE_FIRST_CHARS[n])]
        picked[(chain, ch, table_ok)] = got
        return got

    def candidates(chain: str, state, line: int, end: int) -> list:
        if state.is_code_block(line):
            return full[chain]
        src, bmarks, tshift, emarks = state.src, state.bMarks, state.tShift, state.eMarks
        pos = bmarks[line] + tshift[line]
        ch = src[pos] if pos < emarks[line] else ""
        if ch not in _FIRST_CHARS:
            ch = ""
        nxt = line + 1
        table_ok = False
        if nxt + 1 <= end:
            p = bmarks[nxt] + tshift[nxt]
            table_ok = p < emarks[nxt] and src[p] in _TABLE_DELIMITER_FIRST
        got = picked.get((chain, ch, table_ok))
        return got if got is not None else pick(chain, ch, table_ok)

    def tokenize(state, startLine: int, endLine: int) -> None:  # ParserBlock.tokenize, rules from candidates()
        line = startLine
        max_nesting = state.md.options.maxNesting
        has_empty = False
        while line < endLine:
            state.line = line = state.skipEmptyLines(line)
            if line >= endLine:
                break
            if state.sCount[line] < state.blkIndent:
                break
            if state.level >= max_nesting:
                state.line = endLine
                break
            ok = False
            for rule in candidates("", state, line, endLine):
                ok = rule(state, line, endLine, False)
                if ok:
                    if state.line <= line:
                        raise RuntimeError("block rule didn't increment state.line")
                    break
            if not ok:
                raise RuntimeError("none of the block rules matched")
            state.tight = not has_empty
            line = state.line
            if (line - 1) < endLine and state.isEmpty(line - 1):
                has_empty = True
            if line < endLine and state.isEmpty(line):
                has_empty = True
                line += 1
                state.line = line

    def terminator(chain: str):
        def any_terminates(state, line: int, end: int, silent: bool) -> bool:
            for rule in candidates(chain, state, line, end):
                if rule(state, line, end, silent):
                    return True
            return False

        return [any_terminates]

    terminators = {c: terminator(c) for c in chains if c}

    def get_rules(chainName: str = "") -> list:
        got = terminators.get(chainName)
        return got if got is not None else stock_get_rules(chainName)

    probes = ("# h\n\npara\n- a\n  - b\n\n  c\n> q\n> > r\nlazy\n\n1. x\n2) y\n\n| a | b |\n|---|:-:|\n| 1 | 2 |\n",
              "text\n***\n___\n- - -\n<div>\nx\n</div>\n\n[ref]: /u \"t\"\n[x]\n\n    code\n  ```js\n  f\n  ```\n",
              "a\n=\nb\n---\n~~~\nunclosed\n", "* a\n\n      code in item\n+ b\n\n10. z\n<!-- c\n\n-->\n#no\n#  h2 ##\n",
              "> - q\n>   ```\n> x\n\tt\n  \t- tab\n|x|\n-|-\n")
    try:
        want = [_token_signature(md.parse(s)) for s in probes]
        md.block.tokenize = tokenize
        ruler.getRules = get_rules
        if [_token_signature(md.parse(s)) for s in probes] == want:
            return True
    except Exception:  # noqa: BLE001 - another markdown-it version: keep its own loop
        pass
    md.block.tokenize = stock_tokenize
    ruler.getRules = stock_get_rules
    return False


_TABLE_HELPERS: tuple | None = None


def _table_helpers() -> tuple:
    global _TABLE_HELPERS
    if _TABLE_HELPERS is None:  # imported once: this rule runs at nearly every line start
        from markdown_it.common.utils import mdTrim
        from markdown_it.rules_block.table import MAX_AUTOCOMPLETED_CELLS, escapedSplit, getLine, table

        _TABLE_HELPERS = (mdTrim, MAX_AUTOCOMPLETED_CELLS, escapedSplit, getLine, table)
    return _TABLE_HELPERS


def _lean_table(state, startLine: int, endLine: int, silent: bool) -> bool:
    """markdown-it's GFM table rule with the same extent decisions but only ``table_open``/``table_close``."""
    mdTrim, MAX_AUTOCOMPLETED_CELLS, escapedSplit, getLine, table = _TABLE_HELPERS or _table_helpers()

    if not table(state, startLine, endLine, True):  # header and delimiter rows: markdown-it's own checks
        return False
    if silent:
        return True

    def cells(line: int) -> int:
        cols = escapedSplit(mdTrim(getLine(state, line)))
        if cols and cols[0] == "":
            cols.pop(0)
        if cols and cols[-1] == "":
            cols.pop()
        return len(cols)

    column_count = cells(startLine)
    old_parent = state.parentType
    state.parentType = "table"
    terminators = state.md.block.ruler.getRules("blockquote")
    tok = state.push("table_open", "table", 1)
    tok.map = lines = [startLine, 0]
    autocompleted = 0
    nxt = startLine + 2
    while nxt < endLine:
        if state.sCount[nxt] < state.blkIndent:
            break
        if any(rule(state, nxt, endLine, True) for rule in terminators):
            break
        if not mdTrim(getLine(state, nxt)) or state.is_code_block(nxt):
            break
        autocompleted += column_count - cells(nxt)
        if autocompleted > MAX_AUTOCOMPLETED_CELLS:
            break
        nxt += 1
    state.push("table_close", "table", -1)
    lines[1] = nxt
    state.parentType = old_parent
    state.line = nxt
    return True


class _Doc:
    """The body as lines plus O(1) byte sizes of any line range."""

    def __init__(self, text: str, max_bytes: int) -> None:
        if not isinstance(max_bytes, int) or max_bytes < 1:
            raise ValueError(f"max_bytes must be a positive int, got {max_bytes!r}")
        self.budget = max_bytes
        lines = split_lines(text)
        if lines[0].startswith("\ufeff"):  # a BOM would turn "# Title" into a paragraph
            lines[0] = lines[0][1:]
        self.lines = lines
        #: blanks[i]: line i is blank (only spaces and tabs), asked ~once per line by the splitting below
        self.blanks = [not s.strip(" \t") for s in lines]
        self.empty = all(self.blanks)
        # prefix[i] = UTF-8 bytes of lines[:i], each counted with its "\n"; isascii() skips most encodes
        if text.isascii():
            sizes = [len(s) + 1 for s in lines]
        else:
            sizes = [(len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))) + 1 for s in lines]
        self.prefix = list(accumulate(sizes, initial=0))

    def size(self, a: int, b: int) -> int:
        """UTF-8 bytes of lines a..b (inclusive) joined with "\\n"."""
        return self.prefix[b + 1] - self.prefix[a] - 1

    def join(self, a: int, b: int) -> str:
        return "\n".join(self.lines[a : b + 1])

    def blank(self, i: int) -> bool:
        return self.blanks[i]

    # -- splitting ---------------------------------------------------------------------------------------------

    def line_pieces(self, a: int, b: int, owner: _Section) -> list[_Piece]:
        """Each non-blank line a..b as a mergeable piece; a line over budget becomes frozen slices."""
        out: list[_Piece] = []
        blanks = self.blanks
        for i in range(a, b + 1):
            if blanks[i]:
                continue
            if self.size(i, i) <= self.budget:
                out.append(_Piece(i, i, owner, None, True))
            else:
                out.extend(_Piece(i, i, owner, s, False) for s in _split_line(self.lines[i], self.budget))
        return out

    def block_pieces(self, blk: _Block, owner: _Section) -> list[_Piece]:
        if self.size(blk.start, blk.end) <= self.budget:
            return [_Piece(blk.start, blk.end, owner, None, True)]
        if blk.kind in ("bullet_list", "ordered_list"):
            out: list[_Piece] = []
            for s, e in blk.items:  # whole items stay mergeable, so pack() groups them greedily
                if self.size(s, e) <= self.budget:
                    out.append(_Piece(s, e, owner, None, True))
                else:
                    out.extend(self.line_pieces(s, e, owner))
            return out
        if blk.kind == "table" and blk.end >= blk.start + 2:
            return self._wrapped(blk.start, blk.start + 1, blk.end + 1, blk.end, owner)
        if blk.kind == "fence" and blk.end >= blk.start + 1:
            post = blk.end if blk.closed else blk.end + 1
            return self._wrapped(blk.start, blk.start, post, blk.end, owner)
        return self.line_pieces(blk.start, blk.end, owner)

    def _wrapped(self, a: int, pre_end: int, post_start: int, b: int, owner: _Section) -> list[_Piece]:
        """Split lines a..b whose prefix a..pre_end (table header+delimiter, opening fence) and optional suffix
        post_start..b (closing fence) are repeated around each piece of the body in between."""
        body_s, body_e = pre_end + 1, post_start - 1
        has_post = post_start <= b
        pre_bytes = self.size(a, pre_end)
        post_bytes = self.size(post_start, b) if has_post else -1
        avail = self.budget - (pre_bytes + 1) - (post_bytes + 1)
        if body_s > body_e or avail <= 0:
            return self.line_pieces(a, b, owner)

        # Greedy groups of body lines (s, e); e == -1 marks a single line too big to wrap.
        groups: list[tuple[int, int]] = []
        cur_s = cur_e = -1
        blanks = self.blanks
        for i in range(body_s, body_e + 1):
            if blanks[i]:
                continue  # blank code lines ride along inside a group, never start or end one
            if cur_s >= 0 and self.size(cur_s, i) <= avail:
                cur_e = i
                continue
            if cur_s >= 0:
                groups.append((cur_s, cur_e))
                cur_s = -1
            if self.size(i, i) <= avail:
                cur_s = cur_e = i
            else:
                groups.append((i, -1))
        if cur_s >= 0:
            groups.append((cur_s, cur_e))
        if not groups:  # body only blank lines
            return self.line_pieces(a, b, owner)

        pre_text = self.join(a, pre_end)
        post_text = self.join(post_start, b) if has_post else ""
        out: list[_Piece] = []
        last = len(groups) - 1
        for k, (s, e) in enumerate(groups):
            if e < 0:
                if k == 0:
                    out.extend(self.line_pieces(a, pre_end, owner))
                out.extend(self.line_pieces(s, s, owner))
                if k == last and has_post:
                    out.extend(self.line_pieces(post_start, b, owner))
                continue
            start, lead = s, True
            end, trail = e, has_post
            # First/last piece: take in the real prefix/suffix lines (and blank lines between) if that still fits,
            # so the text is plain file lines there.
            if k == 0 and self.size(a, e) + (post_bytes + 1 if has_post else 0) <= self.budget:
                start, lead = a, False
            if k == last and has_post and self.size(start, b) + (pre_bytes + 1 if lead else 0) <= self.budget:
                end, trail = b, False
            if k == 0 and lead:
                out.extend(self.line_pieces(a, pre_end, owner))  # cover the prefix lines themselves
            text = self.join(start, end)
            if lead:
                text = pre_text + "\n" + text
            if trail:
                text = text + "\n" + post_text
            out.append(_Piece(start, end, owner, text, False))
            if k == last and trail:
                out.extend(self.line_pieces(post_start, b, owner))
        return out

    # -- packing -----------------------------------------------------------------------------------------------

    def pack(self, units: list[_Piece]) -> list[_Piece]:
        """One greedy left-to-right pass: join consecutive mergeable units while the joined line range fits the
        budget. A group is attributed to the lowest common ancestor (LCA) section of its units. It may descend
        into sections freely (their heading lines are then part of the text), but must not climb above the
        section it started in unless it started with that section's heading: otherwise the tail of a deep
        section would be filed under a shallower breadcrumb that no longer explains it."""
        out: list[_Piece] = []
        first: _Piece | None = None
        lca: _Section | None = None
        end = 0
        for u in units:
            if not u.mergeable:
                if first is not None:
                    out.append(_Piece(first.start, end, lca, None, True))  # type: ignore[arg-type]
                    first = None
                out.append(u)
                continue
            if first is not None and self.size(first.start, u.end) <= self.budget:
                up = _lca(lca, u.owner)  # type: ignore[arg-type]
                if up is lca or first.owner is up or (first.head and first.owner.parent is up):
                    lca, end = up, u.end
                    continue
            if first is not None:
                out.append(_Piece(first.start, end, lca, None, True))  # type: ignore[arg-type]
            first, lca, end = u, u.owner, u.end
        if first is not None:
            out.append(_Piece(first.start, end, lca, None, True))  # type: ignore[arg-type]
        return out

    def to_chunks(self, pieces: list[_Piece], line_offset: int) -> list[Chunk]:
        base = line_offset + 1
        return [
            Chunk(p.start + base, p.end + base, self.join(p.start, p.end) if p.text is None else p.text, p.owner.path)
            for p in pieces
        ]


def _blank(s: str) -> bool:
    # CommonMark's notion of a blank line: only spaces and tabs.
    return not s.strip(" \t")


def _norm_title(s: str) -> str:
    # Whitespace-normalised and capped: every chunk of a section repeats its breadcrumb (in embed_text and in the
    # index), so a pathological 1 MB heading line must not be copied into each of them.
    t = " ".join(s.split())
    return t if len(t) <= _MAX_TITLE else t[: _MAX_TITLE - 1] + "…"


def _strip_closing_hashes(title: str) -> str:
    """Drop an ATX closing sequence (``# T ##`` → ``T``) in linear time; the regex form
    ``(?:^|[ \t]+)#+$`` backtracks quadratically on long runs of spaces."""
    body = title.rstrip("#")
    if body == title:
        return title
    if body == "" or body[-1] in " \t":
        return body.rstrip(" \t")
    return title


def _leading_heading(text: str) -> str | None:
    """Title of the heading the text starts with (ATX, or one-line setext), else None."""
    first, _, rest = text.partition("\n")
    m = _ATX_RE.fullmatch(first)
    if m:
        return _norm_title(_strip_closing_hashes(m.group(1).strip(" \t")))
    second = rest.partition("\n")[0]
    if rest and _SETEXT_UNDERLINE_RE.fullmatch(second) and not _blank(first):
        return _norm_title(first)
    return None


def _split_line(line: str, max_bytes: int) -> list[str]:
    """Cut one line into slices of at most max_bytes UTF-8 bytes, never inside a character, preferring to cut
    after whitespace/CJK punctuation in the slice's second half. Whitespace-only slices are dropped."""
    data = line.encode("utf-8", "surrogatepass")
    n = len(data)
    out: list[str] = []
    pos = 0
    while pos < n:
        end = pos + max_bytes
        if end >= n:
            end = n
        else:
            while end > pos and (data[end] & 0xC0) == 0x80:  # back off continuation bytes
                end -= 1
            if end == pos:  # one character wider than the budget: emit it whole (documented exception)
                end = pos + 1
                while end < n and (data[end] & 0xC0) == 0x80:
                    end += 1
            else:
                floor = pos + max_bytes // 2
                best = -1
                for sep in _BREAKS:
                    at = data.rfind(sep, floor, end)
                    if at >= 0 and at + len(sep) > best:
                        best = at + len(sep)
                if best > pos:
                    end = best
        piece = data[pos:end].decode("utf-8", "surrogatepass")
        if not _blank(piece):
            out.append(piece)
        pos = end
    return out


def _parse_blocks(doc: _Doc) -> list[_Block]:
    """Top-level blocks, trimmed of blank lines, in line order: from :func:`_scan_exact` when it can vouch for the
    whole body, else from markdown-it's token maps (bodies over :data:`LINEAR_PARSE_BYTES`: :func:`_scan_blocks`).
    Non-blank lines no token claims (link reference definitions, anything past the nesting limit) become "other"
    blocks, so nothing is lost."""
    if doc.prefix[-1] > LINEAR_PARSE_BYTES:
        return _scan_blocks(doc)
    try:
        blocks = _scan_exact(doc)
    except Exception:  # noqa: BLE001 - a scanner bug must not cost the note its index: markdown-it decides
        blocks = None
    if blocks is not None:
        return blocks
    out: list[_Block] = []
    _token_blocks(doc, _parser().parse("\n".join(doc.lines)), 0, len(doc.lines), out)
    return out


def _token_blocks(doc: _Doc, tokens: list, lo: int, hi: int, out: list[_Block]) -> None:
    """Append the blocks of body lines ``lo..hi-1`` to ``out``, from ``tokens``: markdown-it's parse of exactly
    those lines (its line maps count from ``lo``)."""
    lines = doc.lines
    pos = lo  # first line not yet assigned to a block
    blanks = doc.blanks

    def gap(a: int, b: int) -> None:  # runs of non-blank lines in [a, b)
        i = a
        while i < b:
            if blanks[i]:
                i += 1
                continue
            j = i
            while j + 1 < b and not blanks[j + 1]:
                j += 1
            out.append(_Block("other", i, j))
            i = j + 1

    ntok = len(tokens)
    for idx, tok in enumerate(tokens):
        if tok.level != 0 or tok.nesting < 0 or tok.map is None:
            continue
        a, b = max(tok.map[0] + lo, pos), min(tok.map[1] + lo, hi)  # clamp: never overlap, never past the end
        if a >= b:
            continue
        gap(pos, a)
        pos = b
        b -= 1
        while a <= b and blanks[a]:
            a += 1
        while b >= a and blanks[b]:
            b -= 1
        if a > b:
            continue
        kind = tok.type.removesuffix("_open")
        if kind == "heading":
            inline = tokens[idx + 1] if idx + 1 < ntok else None
            title = inline.content if inline is not None and inline.type == "inline" else ""
            out.append(_Block(kind, a, b, level=int(tok.tag[1:]), title=_norm_title(title)))
        elif kind in ("bullet_list", "ordered_list"):
            out.append(_Block(kind, a, b, items=_list_items(doc, tokens, idx, a, b, lo)))
        elif kind == "fence":
            out.append(_Block(kind, a, b, closed=b > a and _closes_fence(lines[b], tok.markup)))
        else:
            out.append(_Block(kind, a, b))
    gap(pos, hi)


#: A line that may open an ordered list (markdown-it's list rule wants digits then ``.`` or ``)``); a superset.
_ORDERED_RE = re.compile(r"[0-9]+[.)](?:[ \t]|$)")
#: markdown-it's nesting limit is 20 (commonmark preset); past it a rule swallows the rest of its *container*,
#: which for a region parsed alone would be the region, not the body. Regions this deep go to the full parse.
_REGION_MAX_LEVEL = 12


@lru_cache(maxsize=1)
def _md_helpers() -> tuple:
    """markdown-it's own HTML-block sequences (start, end, may interrupt a paragraph), its CommonMark trim, and
    one regex trying the start patterns in their order (group ``h<k>`` = sequence k; all are anchored at the line
    start, so the first alternative that matches is the first sequence that does) or None if one of them carries
    flags that cannot be scoped inside it."""
    from markdown_it.common.utils import mdTrim
    from markdown_it.rules_block.html_block import HTML_SEQUENCES

    alts = []
    for k, (start, _, _) in enumerate(HTML_SEQUENCES):
        flags = start.flags & ~re.UNICODE
        if flags not in (0, re.IGNORECASE) or not start.pattern.startswith("^"):
            return HTML_SEQUENCES, mdTrim, None
        alts.append(f"(?P<h{k}>{'(?i:' if flags else '(?:'}{start.pattern}))")
    return HTML_SEQUENCES, mdTrim, re.compile("|".join(alts))


#: A line of a paragraph that may end it or change it (blank, or a first character some rule starts with after
#: at most 3 spaces: _RULE_FIRST_CHARS, the table delimiter's and setext's); the lines between are plain text.
_PARA_STOP_RE = re.compile(r"^(?:[ \t]*$| {0,3}[-#`~<>*+_=|:0-9])", re.M)
_BLANK_LINE_RE = re.compile(r"^[ \t]*$", re.M)
#: A list item at column 0 with content on its line, 1–4 spaces after the marker (list.py: the content column is
#: then right after those spaces; 5+ or a tab, an empty item, more than 9 digits are left to list.py).
_LIST_ITEM_RE = re.compile(r"(?:([-*+])|([0-9]{1,9})([.)]))( {1,4})(?=[^ \t])")
#: Characters of container markers and indentation; a line of a simple list whose run of them spans this many
#: columns could nest lists and blockquotes towards markdown-it's nesting limit (20 token levels; a list costs 2
#: levels and ≥ 2 columns, a blockquote 1 level and 1 column), so list.py decides instead.
_CONTAINER_CHARS = " \t>-*+.)0123456789"
_SIMPLE_LIST_MAX_PREFIX = 14


def _hr_like(line: str) -> bool:
    """Might ``line`` (no indent) be a thematic break (hr.py: 3+ of one of ``*-_`` and only spaces or tabs)?"""
    c = line[0]
    r = line.rstrip(" \t")
    return c in "-*_" and r.count(c) >= 3 and not r.replace(c, "").strip(" \t")


@lru_cache(maxsize=64)
def _fence_close_re(marker: str, length: int) -> re.Pattern:
    # the closing line of a fence opened by ``length`` × ``marker``: what _closes_fence accepts, as a line regex
    return re.compile(rf"^ {{0,3}}{re.escape(marker)}{{{length},}}[ \t]*$", re.M)


def _scan_exact(doc: _Doc) -> list[_Block] | None:
    """The blocks :func:`_parse_blocks` would get from markdown-it, in one pass over the lines, or None.

    The common top-level blocks are found here with markdown-it's own rules, read from ``markdown_it/rules_block``
    (4.x): ATX headings (heading.py, title trimmed by its ``mdTrim``), fenced code (fence.py: the closing line is
    :func:`_closes_fence`), HTML blocks (html_block.py, with its ``HTML_SEQUENCES``) and paragraphs (paragraph.py /
    lheading.py: a paragraph runs to a blank line or the first line a terminator rule could open). Everything else
    — lists, blockquotes, tables, indented code, setext headings, thematic breaks, link reference definitions, and
    any paragraph holding a line that might be one of them (the tests here are supersets of the rules') — is a
    *region*: from that block's first line to the next line that must start a top-level block whatever came
    before (a line at column 0 after a blank line that cannot continue a list or blockquote), parsed by markdown-it
    alone. A region whose last top-level block is a fence or HTML block still open at its end, or that nests deep
    enough to meet markdown-it's nesting limit, is not cut there (the rest of the body becomes the region, or None
    is returned), so the blocks are always markdown-it's. None also for text with NUL (markdown-it's normalize
    rewrites it, which changes titles)."""
    lines = doc.lines
    blanks = doc.blanks
    n = len(lines)
    src = "\n".join(lines)
    if "\0" in src:
        return None
    html_seqs, md_trim, html_start = _md_helpers()
    if html_start is None:
        return None
    starts = list(accumulate(map(add, map(len, lines), repeat(1)), initial=0))  # offset of each line in src
    out: list[_Block] = []
    no_ref_until = 0  # lines before this one up to a blank line hold no "]:"
    new_block = tuple.__new__  # a _Block from all its fields, without NamedTuple's Python-level __new__

    def line_at(off: int) -> int:
        return bisect_right(starts, off) - 1

    html_blank_end = [bool(q[1].search("")) for q in html_seqs]  # types 6 and 7: a blank line ends them

    def html_seq(s: str) -> int:  # index of the first HTML sequence starting ``s``, or -1
        m = html_start.match(s)
        return -1 if m is None else int(m.lastgroup[1:])

    def table_below(j: int) -> bool:  # superset of table.py's test of lines j, j + 1 as header and delimiter rows
        if j + 1 >= n or blanks[j + 1] or "|" not in lines[j]:
            return False
        t = lines[j + 1].strip(" \t")
        return t[0] in "|-:" and not t.strip("|-: \t")

    def kind_of(s: str, para: bool) -> str:
        """What the rules may make of a line (``s``: after its ≤ 3 leading spaces, non-empty, no tab first):
        "fence", "heading", "html", "hr" (a thematic break), "quote" (blockquote), "region" (might be a list item
        or a reference definition: markdown-it decides) or "para". ``para``: the line follows a paragraph line
        (only terminators count there; the caller tests setext underlines first)."""
        c = s[0]
        if c == "#":
            h = len(s) - len(s.lstrip("#"))
            return "heading" if h <= 6 and s[h : h + 1] in ("", " ", "\t") else "para"
        if c == "`" or c == "~":
            if len(s) >= 3 and s.startswith(c * 3):
                h = len(s) - len(s.lstrip(c))
                if c == "~" or "`" not in s[h:]:
                    return "fence"
            return "para"
        if c == "<":
            k = html_seq(s)
            return "html" if k >= 0 and (html_seqs[k][2] or not para) else "para"
        if c == ">":
            return "quote"
        if c in "-*+_" or c.isdigit():
            if c in "-*_" and _hr_like(s):
                return "hr"  # hr.py comes before list.py
            if c in "-*+" and s[1:2] in ("", " ", "\t"):
                return "region"  # bullet item
            if c.isdigit() and _ORDERED_RE.match(s):
                return "region"  # ordered item
            return "para"
        if c == "[" and not para:
            # a reference definition's label may run over lines up to a blank one; a stretch found without "]:"
            # is remembered, so blocks opening with "[" one after another do not rescan it
            nonlocal no_ref_until
            if i < no_ref_until:
                return "para"
            j = i
            while j < n and not blanks[j]:
                if "]:" in lines[j]:
                    return "region"
                j += 1
            no_ref_until = j
        return "para"

    def region(a: int) -> int:
        """Parse lines a.. as markdown-it would at a block start, up to the first safe cut; returns the cut."""
        k = a + 1
        while True:
            while k < n and not (blanks[k - 1] and not blanks[k] and lines[k][0] not in " \t-*+>0123456789"):
                k += 1
            tokens = _parser().parse("\n".join(lines[a:k]))
            if k >= n:
                break
            if max((t.level for t in tokens), default=0) >= _REGION_MAX_LEVEL:
                raise _Unscannable
            last = next((t for t in reversed(tokens) if t.level == 0 and t.map is not None), None)
            if last is None or not _still_open(last, a):
                break
            k = n  # a fence or HTML block open at the cut: the rest of the body is the region
        _token_blocks(doc, tokens, a, k, out)
        return k

    def _still_open(tok, a: int) -> bool:
        if tok.type not in ("fence", "html_block"):
            return False
        last = a + tok.map[1] - 1
        while last > a + tok.map[0] and blanks[last]:
            last -= 1
        if tok.type == "fence":
            return not (last > a + tok.map[0] and _closes_fence(lines[last], tok.markup))
        k = html_seq(lines[a + tok.map[0]].lstrip(" \t"))
        seq = html_seqs[k] if k >= 0 else None
        if seq is None or seq[1].search(""):  # ends at a blank line (types 6, 7): closed by the cut's blank line
            return False
        return not seq[1].search(lines[last].lstrip(" \t"))

    def simple_list(a: int) -> int:
        """A top-level list at line a (column 0) whose every line is blank, an item of its kind at column 0, or
        indented to its item's content: its block is appended and the line after it returned; -1 when some line
        needs list.py itself (lazy continuation, a shallower indent, tabs, deep nesting, a thematic break)."""
        m = _LIST_ITEM_RE.match(lines[a])
        if m is None or _hr_like(lines[a]):
            return -1
        kind = "bullet_list" if m.group(1) else "ordered_list"
        mark = m.group(1) or m.group(3)  # the bullet, or the ordered delimiter: another one starts a new list
        width = m.end()  # the item's content column: list.py's indent for its lines
        items = [a]
        last = a  # last non-blank line of the list
        prev_blank = False
        j = a + 1
        while j < n:
            if blanks[j]:
                prev_blank = True
                j += 1
                continue
            ln = lines[j]
            c = ln[0]
            if c == " " or c == "\t":
                t = ln.lstrip(" \t")
                ws = ln[: len(ln) - len(t)]
                if len(ws.expandtabs(4) if "\t" in ws else ws) < width:  # column of its text: StateBlock.sCount
                    return -1
                pre = ln[: len(ln) - len(ln.lstrip(_CONTAINER_CHARS))]
                if len(pre.expandtabs(4) if "\t" in pre else pre) >= _SIMPLE_LIST_MAX_PREFIX:
                    return -1  # might nest towards markdown-it's limit
            else:
                m = _LIST_ITEM_RE.match(ln)
                if m is not None and (m.group(1) or m.group(3)) == mark and not _hr_like(ln):
                    items.append(j)
                    width = m.end()
                elif prev_blank and not (c in "-*+" and ln[1:2] in ("", " ", "\t")) and not _ORDERED_RE.match(ln):
                    break  # a new top-level block (not an item of any list: those list.py decides)
                else:
                    return -1  # lazy continuation, a terminator, or a list of another kind: list.py decides
            last = j
            prev_blank = False
            j += 1
        spans = []
        for k, s0 in enumerate(items):
            e = items[k + 1] - 1 if k + 1 < len(items) else last
            while blanks[e]:
                e -= 1
            spans.append((s0, e))
        out.append(_Block(kind, a, last, items=tuple(spans)))
        return j

    i = 0
    try:
        while i < n:
            if blanks[i]:
                i += 1
                continue
            line = lines[i]
            s = line.lstrip(" ") if line[0] == " " else line
            nb = i + 1 < n and not blanks[i + 1]  # the next line is not blank
            if (s is not line and len(line) - len(s) >= 4) or s[0] == "\t" or (nb and table_below(i)):
                i = region(i)  # indented code (a tab before any text reaches column 4 at top level), or a table
                continue
            if s[0] == "<":  # most blocks of HTML-heavy notes: one lookup serves the test and the block's end
                hk = html_seq(s)
                if hk >= 0 and not nb and html_blank_end[hk]:  # one line, ended by the blank one below it
                    out.append(new_block(_Block, ("html_block", i, i, 0, "", (), False)))
                    i += 1
                    continue
                kind = "html" if hk >= 0 else "para"
            else:
                kind = kind_of(s, False)
            if kind == "heading":
                h = len(s) - len(s.lstrip("#"))
                rest = s[h:]
                m = len(rest.rstrip(" \t"))  # heading.py: trailing spaces, then a closing run of # after a space
                t = len(rest[:m].rstrip("#"))
                if 0 < t < m and rest[t - 1] in " \t":
                    m = t
                out.append(new_block(_Block, ("heading", i, i, h, _norm_title(md_trim(rest[:m])), (), False)))
                i += 1
            elif kind == "fence":
                c = s[0]
                run = len(s) - len(s.lstrip(c))
                m = _fence_close_re(c, run).search(src, starts[i + 1]) if i + 1 < n else None
                j = line_at(m.start()) if m else n - 1
                b = j
                while b > i and blanks[b]:
                    b -= 1
                # closed: the regex is _closes_fence as a line pattern, and it found line b
                out.append(new_block(_Block, ("fence", i, b, 0, "", (), m is not None)))
                i = j + 1
            elif kind == "html":
                end_re = html_seqs[hk][1]
                if html_blank_end[hk]:  # ends before the first blank line
                    if i + 1 >= n or blanks[i + 1]:
                        j = i + 1
                    else:
                        m = _BLANK_LINE_RE.search(src, starts[i + 1])
                        j = line_at(m.start()) if m else n
                elif end_re.search(s):
                    j = i + 1
                else:  # ends after the first line holding its end sequence (never the blank-line kind)
                    m = end_re.search(src, starts[i + 1]) if i + 1 < n else None
                    j = line_at(m.start()) + 1 if m else n
                b = j - 1
                while b > i and blanks[b]:
                    b -= 1
                out.append(_Block("html_block", i, b))
                i = j
            elif kind == "para":
                # Only the lines _PARA_STOP_RE stops at can end the paragraph (a terminator rule or a blank line)
                # or change it (a setext underline; a table's delimiter row under its line); deeper-indented
                # lines are lazy text (not even tested), so they never stop it.
                j = i + 1
                split = False
                while j < n:
                    m = _PARA_STOP_RE.search(src, starts[j])
                    j = line_at(m.start()) if m else n
                    if j >= n or blanks[j]:
                        break
                    t = lines[j].lstrip(" ")
                    if t[0] in "=-":  # lheading.py tests the underline before any terminator
                        r = t.rstrip(" \t")
                        if r.count(r[0]) == len(r):
                            break
                    k = kind_of(t, True)
                    if k == "region" or table_below(j - 1):
                        split = True  # might be a setext heading, or run into a list or table
                        break
                    if k != "para":
                        break
                    j += 1
                if split or table_below(j - 1):
                    i = region(i)
                    continue
                if j < n and not blanks[j] and lines[j].lstrip(" ")[0] in "=-":
                    t = lines[j].lstrip(" ").rstrip(" \t")
                    if t.count(t[0]) == len(t):  # a setext heading: its text is the paragraph's (lheading.py)
                        title = _norm_title("\n".join(lines[i:j]))
                        out.append(_Block("heading", i, j, level=1 if t[0] == "=" else 2, title=title))
                        i = j + 1
                        continue
                out.append(_Block("paragraph", i, j - 1))
                i = j
            elif kind == "hr":
                out.append(_Block("hr", i, i))
                i += 1
            else:  # "quote", "region"
                j = simple_list(i) if kind == "region" and line is s else -1
                i = j if j > 0 else region(i)
    except _Unscannable:
        return None
    return out


class _Unscannable(Exception):
    """A region of the body that only markdown-it's parse of the whole body can settle."""


_FENCE_OPEN_RE = re.compile(r" {0,3}(`{3,}|~{3,})")


def _scan_blocks(doc: _Doc) -> list[_Block]:
    """Blocks of a big body in one linear pass: ATX headings, fenced code (an unclosed fence runs to the end) and
    paragraphs (runs of other non-blank lines; lists and tables among them are split by lines when oversized).
    Setext headings, blockquote and list nesting are not recognised: a coarser but bounded structure."""
    lines = doc.lines
    n = len(lines)
    out: list[_Block] = []
    i = 0
    para = -1  # first line of the paragraph being collected

    def end_para(j: int) -> None:
        nonlocal para
        if para >= 0:
            out.append(_Block("paragraph", para, j))
            para = -1

    while i < n:
        line = lines[i]
        if _blank(line):
            end_para(i - 1)
            i += 1
            continue
        c = line.lstrip(" ")[:1]
        if c == "#":
            m = _ATX_RE.fullmatch(line)
            if m:
                end_para(i - 1)
                level = len(line.lstrip(" ")) - len(line.lstrip(" ").lstrip("#"))
                out.append(_Block("heading", i, i, level=level,
                                  title=_norm_title(_strip_closing_hashes(m.group(1).strip(" \t")))))
                i += 1
                continue
        elif c in ("`", "~"):
            m = _FENCE_OPEN_RE.match(line)
            if m and not (c == "`" and "`" in line[m.end():]):
                end_para(i - 1)
                markup = m.group(1)
                j = i + 1
                while j < n and not _closes_fence(lines[j], markup):
                    j += 1
                closed = j < n
                end = j if closed else n - 1
                while end > i and _blank(lines[end]):
                    end -= 1
                out.append(_Block("fence", i, end, closed=closed))
                i = end + 1 if not closed else j + 1
                if not closed:
                    i = n
                continue
        if para < 0:
            para = i
        i += 1
    end_para(n - 1)
    return out


def _list_items(doc: _Doc, tokens: list, idx: int, a: int, b: int, lo: int = 0) -> tuple[tuple[int, int], ...]:
    """Item ranges of the top-level list opening at tokens[idx], made contiguous over a..b (so every list line
    belongs to an item) and trimmed of blank lines. ``lo``: body line of the tokens' line 0."""
    starts = [a]
    for j in range(idx + 1, len(tokens)):  # by index: slicing tokens per list would be quadratic
        tok = tokens[j]
        if tok.level == 0:  # the list's closing token
            break
        if tok.type == "list_item_open" and tok.level == 1 and tok.map and a < tok.map[0] + lo <= b:
            if tok.map[0] + lo > starts[-1]:
                starts.append(tok.map[0] + lo)
    items = []
    for k, s in enumerate(starts):
        e = starts[k + 1] - 1 if k + 1 < len(starts) else b
        while s <= e and doc.blank(s):
            s += 1
        while e >= s and doc.blank(e):
            e -= 1
        if s <= e:
            items.append((s, e))
    return tuple(items)


def _closes_fence(line: str, markup: str) -> bool:
    if not markup:
        return False
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return False
    stripped = stripped.rstrip(" \t")
    return len(stripped) >= len(markup) and stripped == markup[0] * len(stripped)


def _build_sections(blocks: list[_Block]) -> _Section:
    """Nest blocks into sections: a heading owns everything up to the next heading of the same or higher level."""
    root = _Section(0, None, None)
    stack = [root]
    for blk in blocks:
        if blk.kind == "heading":
            while stack[-1].level >= blk.level:
                stack.pop()
            sec = _Section(blk.level, stack[-1], blk)
            stack[-1].children.append(sec)
            stack.append(sec)
        else:
            stack[-1].blocks.append(blk)
    _set_extent(root)
    return root


def _set_extent(sec: _Section) -> None:
    for child in sec.children:  # depth ≤ 7 (root + H1..H6)
        _set_extent(child)
    if sec.children:
        sec.end = sec.children[-1].end
    elif sec.blocks:
        sec.end = sec.blocks[-1].end


def _lca(a: _Section, b: _Section) -> _Section:
    while a.depth > b.depth:
        a = a.parent  # type: ignore[assignment]
    while b.depth > a.depth:
        b = b.parent  # type: ignore[assignment]
    while a is not b:
        a, b = a.parent, b.parent  # type: ignore[assignment]
    return a


def _flatten(doc: _Doc, sec: _Section, out: list[_Piece]) -> None:
    """Units of a section too big to be one unit (or of the root), in line order: its heading, its own blocks,
    then each subsection — as one whole unit if it fits the budget, else recursively flattened."""
    if sec.heading is not None:
        units = doc.block_pieces(sec.heading, sec)
        if len(units) == 1 and units[0].mergeable:
            units[0] = units[0]._replace(head=True)
        out.extend(units)
    for blk in sec.blocks:
        out.extend(doc.block_pieces(blk, sec))
    for child in sec.children:
        if doc.size(child.start, child.end) <= doc.budget:
            out.append(_Piece(child.start, child.end, child, None, True, True))
        else:
            _flatten(doc, child, out)

"""The one wikilink module: parse, resolve, format and rewrite links the way Obsidian does.

Parsing (:func:`parse_links`) follows Obsidian's metadata cache (checked against real Obsidian output in
``tests/test_obsidian_oracle.py``):

* ``[[T]]``, ``[[T#Heading]]``, ``[[T#H#Sub]]``, ``[[T#^block]]``, ``[[T#L9-L12]]``, ``[[T|alias]]``,
  ``![[T]]`` embeds, ``[[T\\|alias]]`` (the escaped pipe Obsidian writes inside table rows). The alias separator
  is the first ``|`` after a non-empty link part, so ``[[|alias]]`` is a link to ``"|alias"`` and
  ``[[T||a]]`` has alias ``"|a"`` (Obsidian's own results). ``[[]]`` is not a link, ``[[ T ]]`` targets ``T``; a
  wikilink never spans lines and its link part never contains ``[`` or ``]`` (so ``[[1,2],[3,4]]`` matrices are
  not links).
* Internal Markdown links ``[text](path.md#h)`` / ``[text](<a b.md>)`` / ``![alt](img.png)``, URL-decoded;
  anything with a scheme (``https:``, ``mailto:``, ``obsidian:``) and empty destinations are not links.
  Reference-style links (``[t][ref]``) are not reported.
* Not links: anything in fenced code (``` and ~~~, any length, any indent, inside lists and blockquotes, an
  unclosed fence runs to the end), inline code spans (backtick runs of equal length, within a paragraph), HTML
  comments, raw ``<pre>``/``<code>``/``<script>``/``<style>``/``<textarea>`` elements, ``%% Obsidian comments %%``
  and backslash-escaped brackets. Indented code blocks are not detected (4-space indents are list continuations
  far more often in vaults). Unlike Obsidian's cache we drop links inside ``%% %%`` (they are hidden
  from the reader); an unclosed ``%%`` is not a comment, so one stray ``%%`` cannot hide every later link.
* Dataview semantic links: a line ``key:: [[A]], [[B]]`` (optionally a list item or task) and inline
  ``[key:: [[A]]]`` / ``(key:: [[A]])`` put ``key`` in :attr:`Link.predicate`.

Every scan is linear in the input: ``str.find``, a single-character-class regex and cached forward searches,
never a backtracking pattern (a typical wikilink regex takes ~10 s on 40,000 ``[``, see ARCHITECTURE §10.8).

Resolution (:class:`LinkResolver`) implements ARCHITECTURE §4 Decision: exact vault path, then the path relative to
the linking note, then the stem / path suffix / alias match (case-insensitive after NFC). When several files
match, Obsidian's order picks one: an exact-case match of the name first, then the candidate nearest the
linking note (its own folder, then the closest ancestor folder), then the shortest path, then the path's code
points; the link is marked ambiguous and :attr:`Resolution.candidates` lists every match in that order. Else a
dangling virtual node. Matching a bare ``[[alias]]`` through the ``aliases`` frontmatter is our decision; Obsidian
itself leaves such a link unresolved.
"""

from __future__ import annotations

import bisect
import posixpath
import re
import string
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from urllib.parse import unquote

__all__ = [
    "Link",
    "LinkResolver",
    "Resolution",
    "format_link",
    "frontmatter_links",
    "normalize_name",
    "parse_links",
    "rewrite_links",
]


@dataclass(frozen=True)
class Link:
    """One link occurrence.

    ``target``: path part, unescaped and stripped (``""`` for same-note ``#heading`` links); ``anchor``: text after
    the first ``#`` (``"H"``, ``"^block"``, ``"L9-L12"``, ``"H#Sub"``) or ``None``; ``alias``: display text after
    ``|`` (the link text for Markdown links) or ``None``; ``embed``: ``![[…]]`` / ``![…](…)``; ``predicate``:
    Dataview field name or frontmatter key; ``kind``: ``"wikilink"`` or ``"markdown"``; ``line``: 1-based file line
    (0 for frontmatter links); ``start``/``end``: offsets of ``original`` in the parsed text (plus
    ``start_offset``); ``display``: Obsidian's ``displayText``.
    """

    target: str
    anchor: str | None
    alias: str | None
    embed: bool
    predicate: str | None
    kind: str
    line: int
    start: int
    end: int
    original: str
    display: str

    @property
    def link(self) -> str:
        """Obsidian's ``link`` string: target plus ``#anchor``."""
        return self.target if self.anchor is None else f"{self.target}#{self.anchor}"


# --------------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------------

_PUNCT = frozenset(string.punctuation)
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)  # keeps offsets, unlike str.lower
_SPECIAL = re.compile(r"[\\`\[\]<%]")
_BACKTICKS = re.compile(r"`+")
_OPEN_BRACKETS = re.compile(r"\[+")
_BLANK_LINE = re.compile(r"\n[ \t]*\r?(?=\n)")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{1,31}:")
_RAW_TAGS = ("pre", "script", "style", "textarea")  # CommonMark type-1 HTML blocks
_INLINE_RAW_TAGS = ("code", "pre")
# Case-insensitive literal searches (no lowered copy of the text, no backtracking).
_CLOSE_TAG = {name: re.compile(f"</{name}>", re.IGNORECASE) for name in (*_RAW_TAGS, *_INLINE_RAW_TAGS)}
_MAX_KEY = 100


def _display(target: str, anchor: str | None, alias: str | None) -> str:
    """Obsidian's displayText: the alias, else ``target > heading > sub-heading``."""
    if alias is not None:
        return alias
    parts = [target] if target else []
    if anchor is not None:
        parts += [p for p in anchor.split("#") if p]
    return " > ".join(parts)


def _split_wikilink(inner: str) -> tuple[str, int, bool]:
    """(link part without escape, index of the alias ``|`` or -1, pipe was written ``\\|``)."""
    sep = inner.find("|", 1)  # Obsidian: the link part is never empty, so a leading '|' belongs to it
    if sep < 0:
        return inner, -1, False
    link_part = inner[:sep]
    if link_part.endswith("\\"):
        return link_part[:-1], sep, True
    return link_part, sep, False


def _target_anchor(link_part: str) -> tuple[str, str | None]:
    h = link_part.find("#")
    if h < 0:
        return link_part.strip(), None
    return link_part[:h].strip(), link_part[h + 1 :].strip()


def _unescape_md(s: str) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s) and s[i + 1] in _PUNCT:
            out.append(s[i + 1])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


# --------------------------------------------------------------------------------------------------------
# Block pass: character ranges where no link can be (code fences, raw HTML, comment blocks)
# --------------------------------------------------------------------------------------------------------


def _container(line: str) -> tuple[int, int]:
    """(blockquote depth, index after the ``>`` markers) of one line."""
    depth = 0
    i = 0
    n = len(line)
    while True:
        j = i
        while j < n and j - i < 3 and line[j] == " ":
            j += 1
        if j < n and line[j] == ">":
            depth += 1
            i = j + 1
            if i < n and line[i] in " \t":
                i += 1
            continue
        return depth, i


def _skip_ws(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in " \t":
        i += 1
    return i


def _fence_open(s: str, i: int) -> tuple[str, int] | None:
    """Fence char and length when ``s[i:]`` opens a fenced code block (after list markers), else None."""
    n = len(s)
    i = _skip_ws(s, i)
    while i < n:  # list item markers before the fence: "- ```", "1. ```"
        c = s[i]
        if c in "-*+" and i + 1 < n and s[i + 1] in " \t":
            i = _skip_ws(s, i + 1)
            continue
        if c.isdigit():
            j = i
            while j < n and j - i < 9 and s[j].isdigit():
                j += 1
            if j < n - 1 and s[j] in ".)" and s[j + 1] in " \t":
                i = _skip_ws(s, j + 1)
                continue
        break
    if i + 3 > n or s[i] not in "`~":
        return None
    c = s[i]
    j = i
    while j < n and s[j] == c:
        j += 1
    if j - i < 3:
        return None
    if c == "`" and "`" in s[j:]:
        return None  # ```a``` is inline code, not a fence
    return c, j - i


def _fence_close(s: str, i: int, c: str, length: int) -> bool:
    i = _skip_ws(s, i)
    j = i
    n = len(s)
    while j < n and s[j] == c:
        j += 1
    return j - i >= length and not s[j:].strip()


#: A line :func:`_block_exclusions` may act on: after quote markers, blanks and list markers, a fence, ``%%``, an
#: HTML comment or a raw element's opening tag (ASCII case-insensitive, then a blank, ``>`` or the line's end: what
#: it tests) — a superset of what it recognises; every other line (``<p>`` and other HTML among them) is skipped.
#: Line starts only (``pos`` always is one).
_EXCLUSION_LINE = re.compile(
    r"^[ \t>*+\-.)0-9]*(?:```|~~~|%%|<!--|<(?:"
    + "|".join("".join(f"[{c.upper()}{c}]" for c in name) for name in _RAW_TAGS)
    + r")(?:[ \t\r>]|$))",
    re.MULTILINE,
)
#: A line that may close a fence of that character (after quote markers and blanks).
_FENCE_CLOSE_LINE = {c: re.compile(rf"^[ \t>]*{re.escape(c * 3)}", re.MULTILINE) for c in "`~"}


def hide_comments(text: str) -> str:
    """``text`` with each ``%% Obsidian comment %%`` that opens a line blanked, as Obsidian's reading view hides
    it: its characters dropped, its newlines kept (so line numbers after it stay). Fenced code, HTML comments and
    raw elements are left as they are; an unclosed ``%%`` is not a comment (the rule the link scan uses, see
    the module docstring). Pure, linear in the text."""
    if "%%" not in text:
        return text
    spans = [(a, b) for a, b in _block_exclusions(text) if text.startswith("%%", a)]
    if not spans:
        return text
    out, pos = [], 0
    for a, b in spans:
        out.append(text[pos:a])
        out.append("\n" * text.count("\n", a, b))
        pos = b
    out.append(text[pos:])
    return "".join(out)


def _block_exclusions(text: str, stop: int | None = None) -> list[tuple[int, int]]:
    """Sorted, disjoint ``(start, end)`` ranges of ``text`` that hold no links. ``stop``: the scan ends after the
    first range that starts beyond this offset (the ranges up to it are those of the whole text's scan, which
    only moves forward)."""
    out: list[tuple[int, int]] = []
    n = len(text)
    if stop is None:
        stop = n
    no_more_pct = False  # no "%%" after some point: later unclosed openers need no new search
    pos = 0
    while pos < n:
        if not _EXCLUSION_LINE.match(text, pos):
            # Lines that cannot open a fence, a comment or a raw element are skipped in C, not one by one.
            m = _EXCLUSION_LINE.search(text, pos)
            if m is None:
                break
            pos = m.start()
        eol = text.find("\n", pos)
        line_end = n if eol < 0 else eol
        nxt = n if eol < 0 else eol + 1
        line = text[pos:line_end]
        depth, ci = _container(line)
        fence = _fence_open(line, ci)
        if fence is not None:
            c, length = fence
            end = n
            q = nxt
            close_line = _FENCE_CLOSE_LINE[c]
            while q < n:  # find the closing fence; a shallower blockquote also ends the block
                if depth == 0:  # no shallower quote can end it: jump to the next line that may close it
                    m = close_line.search(text, q)
                    if m is None:
                        break
                    q = m.start()
                e2 = text.find("\n", q)
                le = n if e2 < 0 else e2
                ln = text[q:le].rstrip("\r")
                d2, ci2 = _container(ln)
                if d2 < depth:
                    end = q
                    break
                if _fence_close(ln, ci2, c, length):
                    end = n if e2 < 0 else e2 + 1
                    break
                q = n if e2 < 0 else e2 + 1
            out.append((pos, end))
            if pos > stop:
                break
            pos = end
            continue
        i = _skip_ws(line, ci)
        start = pos + i
        close_end = -1
        if line.startswith("<!--", i):
            k = text.find("-->", start + 4)
            close_end = n if k < 0 else k + 3  # unclosed comment block: raw to the end (CommonMark)
        elif line.startswith("%%", i) and not no_more_pct:
            k = text.find("%%", start + 2)
            no_more_pct = k < 0
            close_end = -1 if k < 0 else k + 2  # unclosed %%: not a comment (see module docstring)
        elif line.startswith("<", i):
            tag = line[i + 1 : i + 12].translate(_ASCII_LOWER)
            for name in _RAW_TAGS:
                if tag.startswith(name) and (len(tag) == len(name) or tag[len(name)] in " \t\r>"):
                    m = _CLOSE_TAG[name].search(text, start)
                    close_end = n if m is None else m.end()
                    break
        if close_end >= 0:
            out.append((start, close_end))
            if close_end >= n or start > stop:
                break
            # The rest of the closing line is ordinary text; block constructs start on the next line.
            e3 = text.find("\n", close_end)
            if e3 < 0:
                break
            pos = e3 + 1
            continue
        pos = nxt
    return out


# --------------------------------------------------------------------------------------------------------
# Inline pass
# --------------------------------------------------------------------------------------------------------


class _Segment:
    """Inline scanner over ``text[a:b]`` (a stretch between excluded blocks). Appends link tuples to ``out``:
    ``(start, end, kind, embed, target, anchor, alias)``."""

    def __init__(self, text: str, a: int, b: int, out: list, limit: int = -1) -> None:
        self.t = text
        self.limit = limit  # stop once ``out`` holds this many links (-1: no limit)
        self.a = a
        self.b = b
        self.out = out
        self._blanks: list[int] | None = None
        self._runs: dict[int, list[int]] | None = None
        # cached forward searches: (query position, result); positions only grow, so each is linear overall
        self._cache: dict[str, tuple[int, int]] = {}
        self._dest_fail_until = -1

    # -- cached helpers ----------------------------------------------------------------------------------
    def _next(self, needle: str, pos: int) -> int:
        """``t.find(needle, pos, b)`` remembered: valid while later queries start at or before the hit."""
        q, r = self._cache.get(needle, (-1, -2))
        if q != -1 and q <= pos and (r == -1 or r >= pos):
            return r
        if needle.startswith("</"):
            m = _CLOSE_TAG[needle[2:-1]].search(self.t, pos, self.b)
            r = -1 if m is None else m.start()
        else:
            r = self.t.find(needle, pos, self.b)
        self._cache[needle] = (pos, r)
        return r

    def _blank_positions(self) -> list[int]:
        if self._blanks is None:
            self._blanks = [m.start() for m in _BLANK_LINE.finditer(self.t, self.a, self.b)]
        return self._blanks

    def _para_end(self, pos: int) -> int:
        bl = self._blank_positions()
        k = bisect.bisect_left(bl, pos)
        return bl[k] if k < len(bl) else self.b

    def _crosses_blank(self, lo: int, hi: int) -> bool:
        bl = self._blank_positions()
        k = bisect.bisect_left(bl, lo)
        return k < len(bl) and bl[k] < hi

    def _code_span_end(self, p: int, n: int) -> int:
        """End of the code span opened by the ``n`` backticks at ``p``, or -1 (then the run is literal)."""
        if self._runs is None:
            runs: dict[int, list[int]] = {}
            for m in _BACKTICKS.finditer(self.t, self.a, self.b):
                runs.setdefault(m.end() - m.start(), []).append(m.start())
            self._runs = runs
        starts = self._runs.get(n)
        if not starts:
            return -1
        k = bisect.bisect_right(starts, p)
        if k < len(starts) and starts[k] < self._para_end(p):
            return starts[k] + n
        return -1

    # -- main loop ---------------------------------------------------------------------------------------
    def scan(self) -> None:
        t, b = self.t, self.b
        stack: list[list[int]] = []  # '[' openers for Markdown links: [start of run, count]
        no_wikilinks = False
        pos = self.a
        search = _SPECIAL.search
        out, limit = self.out, self.limit
        while pos < b:
            if len(out) == limit:
                return
            m = search(t, pos, b)
            if m is None:
                return
            p = m.start()
            c = t[p]
            if c == "\\":
                pos = p + 2 if p + 1 < b and t[p + 1] in _PUNCT else p + 1
            elif c == "`":
                run_end = _BACKTICKS.match(t, p, b).end()  # type: ignore[union-attr]
                close = self._code_span_end(p, run_end - p)
                pos = close if close >= 0 else run_end
            elif c == "%":
                if t.startswith("%%", p):
                    k = self._next("%%", p + 2)
                    pos = k + 2 if k >= 0 else p + 2
                else:
                    pos = p + 1
            elif c == "<":
                pos = self._html(p)
            elif c == "[":
                run_end = _OPEN_BRACKETS.match(t, p, b).end()  # type: ignore[union-attr]
                if self._next("]", run_end) < 0:
                    return  # no ']' left: no link of any kind can close
                if run_end - p >= 2 and not no_wikilinks:
                    res = self._wikilink(p, run_end)
                    if res == -2:
                        no_wikilinks = True
                    elif res >= 0:
                        stack.clear()  # a Markdown link's text cannot contain a wikilink
                        if run_end - 2 > p:
                            stack.append([p, run_end - 2 - p])
                        pos = res
                        continue
                stack.append([p, run_end - p])
                pos = run_end
            else:  # ']'
                pos = p + 1
                if not stack:
                    continue
                top = stack[-1]
                o = top[0] + top[1] - 1
                top[1] -= 1
                if top[1] == 0:
                    stack.pop()
                if p + 1 < b and t[p + 1] == "(" and not self._crosses_blank(o, p):
                    end = self._markdown_link(o, p)
                    if end >= 0:
                        stack.clear()  # links cannot nest (CommonMark)
                        pos = end

    def _html(self, p: int) -> int:
        t = self.t
        if t.startswith("<!--", p):
            k = self._next("-->", p + 4)
            return k + 3 if k >= 0 else p + 4
        tag = t[p + 1 : p + 10].translate(_ASCII_LOWER)
        for name in _INLINE_RAW_TAGS:
            if tag.startswith(name) and len(tag) > len(name) and tag[len(name)] in " \t\r\n>":
                k = self._next(f"</{name}>", p)
                if k >= 0:
                    return k + len(name) + 3
        return p + 1

    def _wikilink(self, p: int, run_end: int) -> int:
        """Try the wikilink opened by the last two '[' of the run ``t[p:run_end]``.
        Returns the end offset on success, -1 on failure, -2 when no ']]' follows at all."""
        t = self.t
        o = run_end - 2
        cs = run_end
        j = self._next("]]", cs)
        if j < 0:
            return -2
        nl = self._next("\n", cs)
        if 0 <= nl < j:
            return -1  # a wikilink never spans lines
        inner_open = self._next("[[", cs)
        if 0 <= inner_open < j:
            return -1  # "[[a [[b]]": the inner one is the link
        inner = t[cs:j]
        link_part, sep, _ = _split_wikilink(inner)
        if "[" in link_part or "]" in link_part:
            return -1
        target, anchor = _target_anchor(link_part)
        if not target and not anchor:
            return -1  # [[]], [[ ]], [[#]]
        alias = inner[sep + 1 :] if sep >= 0 else None
        embed = o == p and o > self.a and t[o - 1] == "!" and not (o - 2 >= 0 and t[o - 2] == "\\")
        start = o - 1 if embed else o
        self.out.append((start, j + 2, "wikilink", embed, target, anchor, alias))
        return j + 2

    def _markdown_link(self, o: int, p: int) -> int:
        """``[text](dest)`` with text ``t[o+1:p]``; returns the end offset when a link (internal or external) was
        formed (the destination is then skipped), else -1."""
        parsed = self._destination(p + 2)
        if parsed is None:
            return -1
        dest, end = parsed
        t = self.t
        if not dest:
            return -1  # "[alias]()" is not a link (Obsidian)
        if _SCHEME.match(dest) or dest.startswith("//"):
            return end  # external URL: a link, but not to a note
        h = dest.find("#")
        path, anchor = (dest, None) if h < 0 else (dest[:h], unquote(dest[h + 1 :]))
        target = unquote(path).strip()
        if not target and not anchor:
            return -1
        embed = o > self.a and t[o - 1] == "!" and not (o - 2 >= 0 and t[o - 2] == "\\")
        start = o - 1 if embed else o
        self.out.append((start, end, "markdown", embed, target, anchor, t[o + 1 : p]))
        return end

    def _destination(self, q: int) -> tuple[str, int] | None:
        """Parse ``dest [title])`` starting after the ``(``; returns (unescaped destination, end offset)."""
        if q <= self._dest_fail_until:
            return None  # this stretch already failed once: keeps pathological "](](](" input linear
        t, b = self.t, self.b
        i = _skip_ws(t, q)
        if i < b and t[i] == "<":
            k = i + 1
            while k < b and t[k] not in "<>\n":
                k += 2 if t[k] == "\\" else 1
            if k >= b or t[k] != ">":
                return self._fail(k)
            dest = t[i + 1 : k]
            i = k + 1
        else:
            depth = 0
            k = i
            while k < b:
                ch = t[k]
                if ch == "\\" and k + 1 < b and t[k + 1] in _PUNCT:
                    k += 2
                    continue
                if ch in " \t\r\n" or ord(ch) < 0x20:
                    break
                if ch == "(":
                    depth += 1
                    if depth > 32:
                        return self._fail(k)
                elif ch == ")":
                    if depth == 0:
                        break
                    depth -= 1
                k += 1
            if depth:
                return self._fail(k)
            dest = t[i:k]
            i = k
        after_dest = i
        i = _skip_ws(t, i)
        if i < b and t[i] in "\"'(" and i > after_dest:
            closer = ")" if t[i] == "(" else t[i]
            line_end = self._next("\n", i)
            k = t.find(closer, i + 1, b if line_end < 0 else line_end)
            if k < 0:
                return self._fail(i)
            i = _skip_ws(t, k + 1)
        if i >= b or t[i] != ")":
            return self._fail(i)
        return _unescape_md(dest), i + 1

    def _fail(self, k: int) -> None:
        self._dest_fail_until = max(self._dest_fail_until, k)
        return None


# --------------------------------------------------------------------------------------------------------
# Dataview fields
# --------------------------------------------------------------------------------------------------------

_KEY_BAD = frozenset("[]()<>`|:\r\n")


def _clean_key(key: str) -> str | None:
    key = key.strip().strip("*_").strip()  # "**key**::" → "key" (Dataview strips formatting)
    if not key or len(key) > _MAX_KEY or key[0] == "#" or any(ch in _KEY_BAD for ch in key):
        return None
    return key


def _line_field(line: str) -> tuple[str, int] | None:
    """``(key, value column)`` when the line is ``key:: value`` (optionally a list item / task / quote)."""
    _, i = _container(line)
    i = _skip_ws(line, i)
    n = len(line)
    if i < n and line[i] in "-*+" and i + 1 < n and line[i + 1] in " \t":
        i = _skip_ws(line, i + 1)
    elif i < n and line[i].isdigit():
        j = i
        while j < n and line[j].isdigit():
            j += 1
        if j < n - 1 and line[j] in ".)" and line[j + 1] in " \t":
            i = _skip_ws(line, j + 1)
    if line.startswith("[", i) and i + 3 < n and line[i + 2] == "]" and line[i + 3] in " \t":
        i = _skip_ws(line, i + 3)  # task checkbox
    k = line.find("::", i)
    if k < 0:
        return None
    key = _clean_key(line[i:k])
    return (key, k + 2) if key else None


def _inline_fields(line: str) -> list[tuple[int, int, str]]:
    """``(value start, value end, key)`` of Dataview inline fields ``[key:: v]`` / ``(key:: v)`` in ``line``."""
    out: list[tuple[int, int, str]] = []
    match: dict[int, int] | None = None
    k = line.find("::")
    while k >= 0:
        s = k - 1
        while s >= 0 and k - s <= _MAX_KEY and line[s] not in "[(" and line[s] not in _KEY_BAD:
            s -= 1
        if s >= 0 and line[s] in "[(":
            key = _clean_key(line[s + 1 : k])
            if key:
                if match is None:
                    match = _bracket_pairs(line)
                close = match.get(s)
                if close is not None and close > k:
                    out.append((k + 2, close, key))
        k = line.find("::", k + 2)
    return out


def _bracket_pairs(line: str) -> dict[int, int]:
    pairs: dict[int, int] = {}
    stacks: dict[str, list[int]] = {"[": [], "(": []}
    for i, ch in enumerate(line):
        if ch in "[(":
            stacks[ch].append(i)
        elif ch == "]" and stacks["["]:
            pairs[stacks["["].pop()] = i
        elif ch == ")" and stacks["("]:
            pairs[stacks["("].pop()] = i
    return pairs


# --------------------------------------------------------------------------------------------------------
# Public parsing API
# --------------------------------------------------------------------------------------------------------


def parse_links(text: str, *, start_line: int = 1, start_offset: int = 0, limit: int | None = None) -> list[Link]:
    """All links in ``text`` (a note body or a whole note) in document order.

    ``line`` is ``start_line`` + the number of newlines before the link; ``start``/``end`` are offsets into
    ``text`` plus ``start_offset`` (pass the frontmatter's ``body_start_line`` / ``body_offset`` when ``text`` is
    the body that follows it). ``limit``: return only the first ``limit`` links (the scan stops there, so the work
    is bounded by the links kept, not the links written). Never raises; linear time.
    """
    if "[[" not in text and "](" not in text:
        return []  # every link kind needs one of them (the scans below would find nothing)
    raw: list[tuple] = []
    pos = 0
    cap = -1 if limit is None else max(0, limit)
    # Every link holds a "[[" or a "](": the block scan can end after the last of them (doocs: one link near the top
    # of 7 KB of code), and a stretch without either holds no link.
    last = max(text.rfind("[["), text.rfind("]("))
    find = text.find
    for a, b in [*_block_exclusions(text, last), (len(text), len(text))]:
        if len(raw) == cap:
            break
        if pos < a and (find("[[", pos, a) >= 0 or find("](", pos, a) >= 0):
            _Segment(text, pos, a, raw, cap).scan()
        pos = max(pos, b)
    raw.sort(key=lambda r: r[0])
    links: list[Link] = []
    line_no = start_line
    counted = 0  # newlines are counted up to here
    ls = 0  # start of the line holding the current link
    fields: tuple | None = None  # Dataview fields of line `ls`: (line field, inline fields, inline starts)
    fields_ls = -1
    for start, end, kind, embed, target, anchor, alias in raw:
        nl = text.rfind("\n", counted, start)
        if nl >= 0:
            line_no += text.count("\n", counted, start)
            ls = nl + 1
        counted = start
        if fields_ls != ls:
            fields_ls = ls
            line = text[ls:_line_end(text, ls)]
            if "::" in line:
                inline = sorted(_inline_fields(line))
                fields = (_line_field(line), inline, [f[0] for f in inline])
            else:
                fields = None
        predicate = None
        if fields is not None:
            line_field, inline, starts = fields
            col, col_end = start - ls, end - ls
            k = bisect.bisect_right(starts, col) - 1
            if k >= 0 and col_end <= inline[k][1]:
                predicate = inline[k][2]
            elif line_field is not None and col >= line_field[1]:
                predicate = line_field[0]
        links.append(Link(target=target, anchor=anchor, alias=alias, embed=embed, predicate=predicate, kind=kind,
                          line=line_no, start=start + start_offset, end=end + start_offset,
                          original=text[start:end], display=_display(target, anchor, alias)))
    return links


def _line_end(text: str, pos: int) -> int:
    e = text.find("\n", pos)
    return len(text) if e < 0 else e


def frontmatter_links(meta: dict) -> list[Link]:
    """Wikilinks inside frontmatter string values (Obsidian's ``frontmatterLinks``), in key order.

    ``predicate`` is the key path (nested mapping keys joined with ``.``; list positions are left out, unlike
    Obsidian's ``key.0``), ``line`` is 0 and ``start == end == 0``.
    """
    out: list[Link] = []
    stack: list[tuple[object, str]] = [(meta, "")]
    while stack:
        value, key = stack.pop()
        if isinstance(value, str):
            if "[[" in value:
                out.extend(replace(lk, line=0, start=0, end=0, predicate=key or None)
                           for lk in parse_links(value) if lk.kind == "wikilink")
        elif isinstance(value, dict):
            stack.extend(reversed([(v, f"{key}.{k}" if key else str(k)) for k, v in value.items()]))
        elif isinstance(value, (list, tuple)):
            stack.extend(reversed([(v, key) for v in value]))
    return out


# --------------------------------------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------------------------------------


def normalize_name(s: str) -> str:
    """Comparison key for names and paths: Unicode NFC, then casefold (NFC again: casefold may decompose)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", s).casefold())


@dataclass(frozen=True)
class Resolution:
    """``path``: vault-relative path of the file, ``None`` when dangling. ``ambiguous``: several files matched
    (by stem/suffix/alias, or by a path that differs only in case) and the resolution order picked ``path``.
    ``virtual``: node id for a dangling link (normalised target, ``.md`` added when it has no extension), ``""``
    when resolved. ``candidates``: when ambiguous, every matching path in resolution order (``path`` first),
    else ``()``."""

    path: str | None
    ambiguous: bool
    virtual: str
    candidates: tuple[str, ...] = ()


_EXT = re.compile(r"\.([A-Za-z0-9]{1,8})$")


def _has_ext(name: str) -> bool:
    m = _EXT.search(name.rsplit("/", 1)[-1])
    return bool(m) and any(ch.isalpha() for ch in m.group(1))


def _pick(cands: Iterable[str]) -> list[str]:
    """Case-variants of one path: shortest, then code points (deterministic)."""
    return sorted(set(cands), key=lambda p: (len(p), p))


def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


def _name_is_exact(path: str, target: str) -> bool:
    """``path`` (NFC) ends with the link's name ``target`` (NFC) spelled in the same case, ``.md`` optional."""
    p = _nfc(path)
    for t in (target, target + ".md"):
        if p == t or p.endswith("/" + t):
            return True
    return False


_FAR = 1 << 30


def _proximity(cand_folder: str, source_folder: str) -> int:
    """0 in the linking note's folder, k for its k-th ancestor folder, ``_FAR`` elsewhere (folders normalised)."""
    if cand_folder == source_folder:
        return 0
    if cand_folder == "":
        return source_folder.count("/") + 1
    if source_folder.startswith(cand_folder + "/"):
        return source_folder.count("/") - cand_folder.count("/")
    return _FAR


def _resolved(ranked: list[str]) -> Resolution:
    if len(ranked) > 1:
        return Resolution(ranked[0], True, "", tuple(ranked))
    return Resolution(ranked[0], False, "")


class LinkResolver:
    """Obsidian-compatible resolution cascade (ARCHITECTURE §4 Decision).

    1. the exact vault-relative path, as written or with ``.md`` added (a case-exact hit wins; otherwise the
       case-insensitive NFC match);
    2. the path relative to the linking note's folder (``./`` and ``../`` allowed while they stay inside the
       vault; a link escaping the vault or starting with ``/`` is dangling);
    3. files whose name (``stem`` for notes, full name for attachments) or trailing partial path
       (``folder/note``) matches case-insensitively after NFC; when none, notes whose ``aliases`` entry equals
       the target. Several candidates are ranked (Obsidian's order): the name spelled in the same case first,
       then the nearest to the linking note (same folder, then the closest ancestor folder; other folders
       after), then the shortest path, then code-point order; ``ambiguous=True`` and ``candidates`` lists them;
    4. dangling: :attr:`Resolution.virtual` names the node.

    Steps 1 and 2 take a bare or partial name only when its case matches exactly; a case-insensitive hit there
    is a step-3 candidate, so ``[[Note]]`` prefers ``b/Note.md`` over ``note.md`` at the root.
    An empty target (``[[#heading]]``) is the linking note itself.
    """

    def __init__(self, paths: Iterable[str] = (), aliases: Mapping[str, Iterable[str]] | None = None) -> None:
        self._files: set[str] = set()
        self._by_path: dict[str, set[str]] = {}  # normalised path → paths
        self._by_name: dict[str, set[str]] = {}  # normalised file name (with extension) → paths
        self._by_alias: dict[str, set[str]] = {}
        self._aliases: dict[str, list[str]] = {}
        aliases = aliases or {}
        for p in paths:  # aliases of paths not listed are ignored: a stale alias must not resurrect a file
            self.add(p, aliases.get(p, ()))

    def add(self, path: str, aliases: Iterable[str] = ()) -> None:
        """Register a file (re-adding replaces its aliases)."""
        if path in self._files:
            self.remove(path)
        self._files.add(path)
        key = normalize_name(path)
        self._by_path.setdefault(key, set()).add(path)
        self._by_name.setdefault(key.rsplit("/", 1)[-1], set()).add(path)
        if isinstance(aliases, str):  # "aliases: foo" in frontmatter is a single string
            aliases = [aliases]
        kept = [a for a in aliases if isinstance(a, str) and a.strip()]
        self._aliases[path] = kept
        for a in kept:
            self._by_alias.setdefault(normalize_name(a.strip()), set()).add(path)

    def remove(self, path: str) -> None:
        if path not in self._files:
            return
        self._files.discard(path)
        key = normalize_name(path)
        for index, k in ((self._by_path, key), (self._by_name, key.rsplit("/", 1)[-1])):
            s = index.get(k)
            if s is not None:
                s.discard(path)
                if not s:
                    del index[k]
        for a in self._aliases.pop(path, []):
            k = normalize_name(a.strip())
            s = self._by_alias.get(k)
            if s is not None:
                s.discard(path)
                if not s:
                    del self._by_alias[k]

    def __contains__(self, path: object) -> bool:
        return path in self._files

    def _exact(self, path: str, *, case_exact: bool = False) -> Resolution | None:
        tries = [path] if path.lower().endswith(".md") else [path + ".md", path]
        for p in tries:
            if p in self._files:
                return Resolution(p, False, "")
            n = _nfc(p)
            if n != p and n in self._files:
                return Resolution(n, False, "")
        if case_exact:
            return None
        for p in tries:
            cands = self._by_path.get(normalize_name(p))
            if cands:
                return _resolved(_pick(cands))
        return None

    def _rank(self, cands: set[str], target: str, source_path: str, by_alias: bool) -> list[str]:
        """``cands`` in resolution order (see the class docstring, step 3)."""
        t = _nfc(target)
        src = posixpath.dirname(normalize_name(source_path))

        def key(p: str) -> tuple:
            if by_alias:
                exact = any(_nfc(a.strip()) == t for a in self._aliases.get(p, ()))
            else:
                exact = _name_is_exact(p, t)
            return (not exact, _proximity(posixpath.dirname(normalize_name(p)), src), len(p), p)

        return sorted(cands, key=key)

    def resolve(self, target: str, source_path: str) -> Resolution:
        t = target.strip()
        if not t:
            return Resolution(source_path, False, "")
        virtual = normalize_name(t) + ("" if _has_ext(t) else ".md")
        if t.startswith("/"):
            # "/folder/note.md" is vault-root-relative (Obsidian; common in published Markdown such as docs
            # sites). Only an exact path counts: a leading slash never falls back to name matching.
            rooted = posixpath.normpath(t.lstrip("/"))
            if t.startswith("//") or rooted in (".", "..") or rooted.startswith("../"):
                return Resolution(None, False, virtual)
            hit = self._exact(rooted)
            if hit:
                return hit
            return Resolution(None, False, normalize_name(rooted) + ("" if _has_ext(rooted) else ".md"))
        segments = t.split("/")
        relative = any(s in (".", "..") for s in segments)
        if not relative:
            hit = self._exact(t, case_exact=True)
            if hit:
                return hit
        folder = posixpath.dirname(source_path)
        joined = posixpath.normpath(posixpath.join(folder, t)) if folder else posixpath.normpath(t)
        if joined == ".." or joined.startswith("../") or joined.startswith("/"):
            return Resolution(None, False, virtual)  # never outside the vault
        if folder or relative:
            # A bare name in the linking note's folder: case-exact here; other spellings are ranked below.
            hit = self._exact(joined, case_exact=not relative)
            if hit:
                return hit
        if relative:
            return Resolution(None, False, normalize_name(joined) + ("" if _has_ext(joined) else ".md"))
        nt = normalize_name(t)
        name = nt.rsplit("/", 1)[-1]
        cands = set(self._by_name.get(name, ())) | set(self._by_name.get(name + ".md", ()))
        if "/" in nt:  # partial path: match path suffixes on folder boundaries
            suffixes = ("/" + nt, "/" + nt + ".md")
            cands = {p for p in cands
                     if (k := normalize_name(p)) in (nt, nt + ".md") or k.endswith(suffixes)}
        by_alias = not cands
        if by_alias:
            cands = set(self._by_alias.get(nt, ()))
        if cands:
            return _resolved(self._rank(cands, t, source_path, by_alias))
        return Resolution(None, False, virtual)


# --------------------------------------------------------------------------------------------------------
# Writing links
# --------------------------------------------------------------------------------------------------------


def _link_path(path: str, keep_md: bool) -> str:
    return path[:-3] if path.lower().endswith(".md") and not keep_md else path


def format_link(path: str, *, anchor: str | None = None, alias: str | None = None, embed: bool = False) -> str:
    """A wikilink as the app writes it: full vault-relative path, ``.md`` dropped for notes.

    ``format_link("digest/wiki/foo.md", anchor="H", alias="Foo")`` → ``"[[digest/wiki/foo#H|Foo]]"``.
    """
    s = _link_path(path, keep_md=False)
    if anchor:
        s += "#" + anchor
    if alias:
        s += "|" + alias
    return ("!" if embed else "") + "[[" + s + "]]"


_MD_UNSAFE = frozenset(" %()<>#?[]^|`\"\\")


def _encode_md_path(path: str) -> str:
    return "".join(f"%{ord(ch):02X}" if ch in _MD_UNSAFE or ord(ch) < 0x20 else ch for ch in path)


def _retarget(lk: Link, new_path: str, short: str | None = None) -> str:
    """``lk.original`` pointing at ``new_path`` (a wikilink: at ``short`` when given, a bare name that resolves
    to it); anchor, alias, ``\\|`` escape, embed bang and form kept."""
    o = lk.original
    bang = "!" if lk.embed else ""
    if lk.kind == "wikilink":
        inner = o[len(bang) + 2 : -2]
        link_part, sep, escaped = _split_wikilink(inner)
        h = link_part.find("#")
        tail = link_part[h:] if h >= 0 else ""
        keep_md = lk.target.lower().endswith(".md")
        new = ((short + ".md" if keep_md else short) if short else _link_path(new_path, keep_md)) + tail
        if sep >= 0:
            new += ("\\|" if escaped else "|") + inner[sep + 1 :]
        return bang + "[[" + new + "]]"
    # Markdown: "[text](dest ...)" – replace the path part of dest, keep everything else byte for byte.
    head = len(bang) + 1 + len(lk.alias or "") + 2  # up to and including "]("
    i = _skip_ws(o, head)
    angle = o.startswith("<", i)
    ds = i + 1 if angle else i
    if angle:
        de = o.index(">", ds)
    else:  # the destination ends at whitespace or at its unbalanced ')' (the link's closing paren)
        depth = 0
        de = ds
        while de < len(o) and o[de] not in " \t\r\n":
            ch = o[de]
            if ch == "\\":
                de += 2
                continue
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    break
                depth -= 1
            de += 1
    dest = o[ds:de]
    h = dest.find("#")
    old_path_part = dest if h < 0 else dest[:h]
    tail = "" if h < 0 else dest[h:]
    decoded = unquote(old_path_part)
    keep_ext = _has_ext(decoded) or not new_path.lower().endswith(".md")
    new = _link_path(new_path, keep_md=keep_ext)
    new = new if angle else _encode_md_path(new)
    return o[:ds] + new + tail + o[de:]


def rewrite_links(text: str, source_path: str, resolver: LinkResolver, old_path: str,
                  new_path: str, after: LinkResolver | None = None,
                  source_after: str | None = None) -> tuple[str, int]:
    """Point every link of ``text`` (the note at ``source_path``) that resolves to ``old_path`` at ``new_path``.

    Covers body links (wikilinks and Markdown links, embeds included) and wikilinks inside frontmatter values.
    Anchor, alias, the ``\\|`` table escape, the embed bang and the link form are kept; the new target is the full
    vault-relative path (``.md`` kept only where the old link spelled an extension). Same-note ``[[#h]]`` links are
    left alone. ``resolver`` must still know ``old_path``. Returns ``(new_text, number of links rewritten)``.

    With ``after`` (a resolver of the vault *after* the move; ``source_after``: the linking note's path then, by
    default ``source_path``), links are changed only where they would break, as Obsidian does: a link that
    still resolves to ``new_path`` (e.g. through an alias of the moved note, ``[[Alpha Note]]``) is kept as
    written, and a wikilink written as a bare name becomes the new bare name (``[[alpha]]`` → ``[[gamma]]``)
    when that resolves to ``new_path`` unambiguously; otherwise the full path.
    """
    from .frontmatter import parse_frontmatter  # local: frontmatter does not depend on links

    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom):]
    fm = parse_frontmatter(body)
    links = parse_links(body[fm.body_offset:], start_line=fm.body_start_line, start_offset=fm.body_offset)
    if fm.raw:
        raw_start = body.find("\n") + 1
        links += [lk for lk in parse_links(fm.raw, start_offset=raw_start) if lk.kind == "wikilink"]
    edits: list[tuple[int, int, str]] = []
    for lk in links:
        if not lk.target:
            continue
        if resolver.resolve(lk.target, source_path).path != old_path:
            continue
        short = None
        if after is not None:
            src2 = source_after or source_path
            if after.resolve(lk.target, src2).path == new_path:
                continue  # still resolves (an alias, a name that did not change): keep it as written
            if lk.kind == "wikilink" and "/" not in lk.target:
                stem = posixpath.basename(new_path)
                stem = stem[:-3] if stem.lower().endswith(".md") else stem
                r = after.resolve(stem, src2)
                if r.path == new_path and not r.ambiguous:
                    short = stem
        edits.append((lk.start, lk.end, _retarget(lk, new_path, short)))
    if not edits:
        return text, 0
    out = body
    for start, end, rep in sorted(edits, reverse=True):
        out = out[:start] + rep + out[end:]
    return bom + out, len(edits)

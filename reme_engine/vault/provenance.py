"""Who owns a note, and which of its bytes are the app's (ARCHITECTURE §8 "Ownership"). The one home of the rule.

The rule is read from the note's own text — never from the journal or the state dir — so it survives restarts,
renames, a pruned journal, a deleted state dir and a vault synced to another machine.

1. **App-owned note.** Every note a pipeline *creates* carries one frontmatter line::

       reme_provenance: app 1f0c…e2      (16 hex: hash of the note as the app wrote it, this line's value blanked)

   The note is the app's while that hash equals the hash of the note as it is now (a UTF-8 BOM and CRLF/LF
   line endings are ignored, so a sync tool converting newlines is not an edit). The app re-stamps it on each of
   its own writes; it may then rewrite the whole note.
2. **Everything else is the user's, forever**: a note without the line (the user created it, or an older app
   version did), and a note whose hash no longer matches — the user changed any byte of it after the app wrote
   it, frontmatter included. The app never stamps a note it does not own, so such a note cannot turn back into
   the app's (only an exact undo to the app's bytes, which holds none of the user's words, does). The stale line
   stays where it is: it is part of the user's note now.
3. **The app's bytes in a user's note** are only its blocks, delimited by two HTML-comment lines::

       <!-- reme:begin 7a3e…c9 -->         (16 hex: hash of the lines between the markers)
       …what the app proposes…
       <!-- reme:end -->

   A block is the app's while its hash matches. The app may rewrite such a block in place, or append a new one
   at the end of the note; it never changes a byte outside its blocks (:func:`set_block` guarantees it, and
   :func:`keeps_user_lines` lets a writer prove it before publishing). A block the user edited inside is the
   user's: it is left as it is and new material goes to a new block. A block the user emptied (markers left,
   nothing between) may be reused. Markers inside fenced code are not markers.
   HTML comments are invisible in Obsidian's reading view, kept verbatim by any editor, and as a CommonMark
   HTML block they end at their own line, so the Markdown inside the block renders normally.
4. **Accepting** what the app proposed is the user editing it in: move or copy the lines into your text, or
   delete the two marker lines (the lines between become plain text of yours). **Dismissing** is deleting the
   block. Either way the app never puts old material back; later runs only add new material.

:func:`note_ownership` is the read side (owner, reason, the line ranges that are the app's) for any caller,
e.g. a note pane showing who owns what. Pure functions on ``str``; no I/O.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ..markdown.sections import code_mask

KEY = "reme_provenance"
BEGIN_PREFIX = "<!-- reme:begin "
END_MARKER = "<!-- reme:end -->"
_HASH_LEN = 16
_PLACEHOLDER = "0" * _HASH_LEN
_STAMP_RE = re.compile(rf"^{KEY}:[ \t]*app[ \t]+([0-9a-f]{{{_HASH_LEN}}})[ \t]*$")
_KEY_LINE_RE = re.compile(rf"^{KEY}[ \t]*:")
_BEGIN_RE = re.compile(rf"^<!-- reme:begin ([0-9a-f]{{{_HASH_LEN}}}) -->[ \t]*$")
_END_RE = re.compile(r"^<!-- reme:end -->[ \t]*$")
#: The generated card index of a day page (reme_engine.vault.daily): the same rule, its own marker names. The
#: hash is optional: pages written before it was added are judged by :func:`_looks_generated` instead.
DAY_INDEX_START = "<!-- reme:day-index:start"
DAY_INDEX_END = "<!-- reme:day-index:end -->"
_DAY_BEGIN_RE = re.compile(rf"^[ \t]*<!-- reme:day-index:start(?: ([0-9a-f]{{{_HASH_LEN}}}))? -->[ \t]*$")
_DAY_END_RE = re.compile(r"^[ \t]*<!-- reme:day-index:end -->[ \t]*$")
_BOM = "\ufeff"

APP = "app"
USER = "user"


@dataclass(frozen=True)
class AppBlock:
    """A ``reme:begin``/``reme:end`` pair. ``start``/``end``: 1-based file lines of the two markers (inclusive).
    ``intact``: the lines between are exactly what the app wrote (or nothing at all), so the block is the app's;
    False: the user edited inside, so it is the user's."""

    start: int
    end: int
    intact: bool


@dataclass(frozen=True)
class Ownership:
    """Result of :func:`note_ownership`.

    ``owner``: ``"app"`` (the whole note is the app's) or ``"user"``. ``stamp``: ``"current"`` (the provenance
    line matches), ``"stale"`` (it exists but the note changed since: the user edited it) or ``"none"``.
    ``reason``: one line for people. ``blocks``: every marker pair, intact or not. ``lines``: the note's line
    count.
    """

    owner: str
    stamp: str
    reason: str
    blocks: tuple[AppBlock, ...]
    lines: int

    @property
    def app_owned(self) -> bool:
        return self.owner == APP

    @property
    def app_ranges(self) -> list[tuple[int, int]]:
        """1-based inclusive line ranges that are the app's: the whole note when it is app-owned, else its intact
        blocks (markers included). Every other line is the user's."""
        if self.owner == APP:
            return [(1, self.lines)] if self.lines else []
        return [(b.start, b.end) for b in self.blocks if b.intact]


# -- lines -------------------------------------------------------------------------------------------------------
def _pieces(text: str) -> list[str]:
    """``text`` cut after every ``\\n`` (terminators kept), so ``"".join`` gives it back byte for byte. Line
    numbers follow ``\\n`` like editors and the index do (``str.splitlines`` would also cut at U+2028 etc.)."""
    out = text.split("\n")
    pieces = [p + "\n" for p in out[:-1]]
    if out[-1]:
        pieces.append(out[-1])
    return pieces


def _content(piece: str) -> str:
    return piece[:-1].rstrip("\r") if piece.endswith("\n") else piece.rstrip("\r")


def _digest(s: str) -> str:
    return hashlib.blake2b(s.encode("utf-8"), digest_size=_HASH_LEN // 2).hexdigest()


def _fenced(lines: list[str]) -> list[bool]:
    """True for lines inside (or fencing) code, where markers are plain text (the one rule:
    :func:`~reme_engine.markdown.sections.code_mask`)."""
    return code_mask(lines)


# -- the note-level stamp ---------------------------------------------------------------------------------------
def _fm_span(lines: list[str]) -> tuple[int, int] | None:
    """``(first, closing)`` 0-based line indexes of the frontmatter fences (same rule as the frontmatter parser:
    ``---`` first line, closed by ``---`` or ``...``)."""
    if not lines or lines[0].rstrip(" \t") != "---":
        return None
    for i in range(1, len(lines)):
        if lines[i].rstrip(" \t") in ("---", "..."):
            return 0, i
    return None


def _canonical(text: str) -> tuple[str, str | None]:
    """``(text the note hash is taken of, the stamped hash or None)``: BOM dropped, LF newlines, the provenance
    line's value blanked."""
    t = text[1:] if text.startswith(_BOM) else text
    lines = [_content(p) for p in _pieces(t)]
    span = _fm_span(lines)
    found = None
    if span:
        for i in range(span[0] + 1, span[1]):
            m = _STAMP_RE.match(lines[i])
            if m:
                found = m.group(1)
                lines[i] = f"{KEY}: app {_PLACEHOLDER}"
                break
    return "\n".join(lines) + ("\n" if t.endswith("\n") else ""), found


def stamp(text: str) -> str:
    """``text`` marked as written by the app: the provenance line set (added before the closing frontmatter fence,
    or in a new frontmatter block) to the hash of the result. Call it last, on the exact text about to be
    written, and only for a note that is new or :func:`note_ownership` says is the app's. Keeps the BOM and the
    newline style; every other byte is unchanged."""
    bom = _BOM if text.startswith(_BOM) else ""
    t = text[len(bom):]
    nl = "\r\n" if "\r\n" in t else "\n"
    pieces = _pieces(t)
    lines = [_content(p) for p in pieces]
    span = _fm_span(lines)
    placeholder = f"{KEY}: app {_PLACEHOLDER}"
    at = None
    if span:
        for i in range(span[0] + 1, span[1]):
            if _KEY_LINE_RE.match(lines[i]):
                at = i
                break
        if at is None:  # insert just before the closing fence
            at = span[1]
            pieces.insert(at, placeholder + nl)
        else:
            end = pieces[at][len(pieces[at].rstrip("\r\n")):] or nl
            pieces[at] = placeholder + end
    else:
        pieces[0:0] = ["---" + nl, placeholder + nl, "---" + nl]
        at = 1
    draft = "".join(pieces)
    h = _digest(_canonical(draft)[0])
    end = pieces[at][len(pieces[at].rstrip("\r\n")):]
    pieces[at] = f"{KEY}: app {h}" + end
    return bom + "".join(pieces)


# -- blocks -----------------------------------------------------------------------------------------------------
def block_digest(inner: str) -> str:
    """The hash a begin marker carries for the lines ``inner`` (LF or CRLF, no trailing newline needed)."""
    return _digest("\n".join(_content(p) for p in _pieces(inner.strip("\r\n"))))


def _looks_generated(inner: list[str]) -> bool:
    """A day index written before its marker carried a hash: intact while every line is a generated card bullet
    (``- [[path|name]] — description``, as :func:`reme_engine.vault.daily.render_day_index` writes it) or blank."""
    from ..markdown.links import parse_links  # links are parsed in one place

    for ln in inner:
        if not ln.strip():
            continue
        links = parse_links(ln) if ln.startswith("- ") else []
        if not links or links[0].kind != "wikilink" or links[0].alias is None or links[0].start != 2:
            return False
        rest = ln[links[0].end:]
        if rest and not rest.startswith(" — "):
            return False
    return True


def _blocks(lines: list[str], *, day_index: bool = True) -> list[tuple[int, int, bool]]:
    """``(begin index, end index, intact)`` 0-based, for every well-formed marker pair outside fenced code (reme
    blocks and day-index sections). A begin with no end before the next begin is not a block (the user deleted its
    end: everything there is theirs). ``day_index=False``: reme blocks only (the ones :func:`set_block` writes)."""
    if not any(ln.lstrip(" \t").startswith("<!-- reme:") for ln in lines):
        return []  # no marker line at all: skip the CommonMark parse (~2 ms per KB)
    mask = _fenced(lines)
    out, open_at, want, kind = [], None, "", ""
    for i, ln in enumerate(lines):
        if mask[i]:
            continue
        m = _BEGIN_RE.match(ln)
        d = None if m else _DAY_BEGIN_RE.match(ln)
        if m or d:
            open_at, want, kind = i, (m or d).group(1), "block" if m else "day"
            continue
        if open_at is not None and (_END_RE if kind == "block" else _DAY_END_RE).match(ln):
            inner = lines[open_at + 1 : i]
            if want is None:  # a day index without a hash (older pages)
                intact = _looks_generated(inner)
            else:
                intact = _digest("\n".join(inner)) == want or not "".join(inner).strip()
            if day_index or kind == "block":
                out.append((open_at, i, intact))
            open_at = None
    return out


def day_index_state(text: str) -> tuple[int, int, bool] | None:
    """The first day-index section of a day page: ``(begin line, end line, intact)`` (0-based line indexes of the
    two markers), or None when there is none. ``intact`` False: the user edited inside it, so it is theirs."""
    body = text[1:] if text.startswith(_BOM) else text
    lines = [_content(p) for p in _pieces(body)]
    for a, b, ok in _blocks(lines):
        if _DAY_BEGIN_RE.match(lines[a]):
            return a, b, ok
    return None


def note_ownership(text: str) -> Ownership:
    """Who owns ``text`` (a note's full content, BOM allowed) and which lines are the app's (module doc).

    Never raises. Line numbers are 1-based file lines (frontmatter included), as in the index and the note pane.
    """
    body = text[1:] if text.startswith(_BOM) else text
    pieces = _pieces(body)
    lines = [_content(p) for p in pieces]
    canon, stamped = _canonical(text)
    blocks = tuple(AppBlock(a + 1, b + 1, ok) for a, b, ok in _blocks(lines))
    if stamped is not None and _digest(canon) == stamped:
        return Ownership(APP, "current", "written by reme and not edited since", blocks, len(lines))
    if stamped is not None:
        reason = "written by reme, then edited by you: yours now"
        state = "stale"
    else:
        reason = "written by you"
        state = "none"
    n = sum(b.intact for b in blocks)
    if n:
        reason += f"; {n} block{'s' if n > 1 else ''} between reme:begin/end proposed by reme"
    if len(blocks) > n:
        reason += f"; {len(blocks) - n} reme block{'s' if len(blocks) - n > 1 else ''} edited by you"
    return Ownership(USER, state, reason, blocks, len(lines))


def live_block(text: str) -> str | None:
    """The lines between the markers of the note's last intact app block (LF newlines, no trailing newline), or
    None when it has none. For an emptied block: ``""``."""
    body = text[1:] if text.startswith(_BOM) else text
    lines = [_content(p) for p in _pieces(body)]
    intact = [(a, b) for a, b, ok in _blocks(lines, day_index=False) if ok]
    if not intact:
        return None
    a, b = intact[-1]
    inner = lines[a + 1 : b]
    return "\n".join(inner) if "".join(inner).strip() else ""


def render_block(inner: str, nl: str = "\n") -> str:
    """The full block (both markers, hash of ``inner``) for ``inner`` (LF or CRLF lines), ending with ``nl``."""
    lines = [_content(p) for p in _pieces(inner.strip("\r\n"))]
    return nl.join([f"{BEGIN_PREFIX}{_digest(chr(10).join(lines))} -->", *lines, END_MARKER]) + nl


def set_block(text: str, inner: str) -> str:
    """``text`` with the app's block holding ``inner``: the last intact block is rewritten in place, else a new
    block is appended at the end of the note (after a blank line). Bytes outside that block are kept exactly; at
    most a missing final newline and one blank separator line are added before a new block. Newline style and BOM
    are kept."""
    bom = _BOM if text.startswith(_BOM) else ""
    t = text[len(bom):]
    nl = "\r\n" if "\r\n" in t else "\n"
    pieces = _pieces(t)
    lines = [_content(p) for p in pieces]
    intact = [(a, b) for a, b, ok in _blocks(lines, day_index=False) if ok]
    if intact:
        a, b = intact[-1]
        end_nl = pieces[b][len(pieces[b].rstrip("\r\n")):]
        block = render_block(inner, nl)
        if not end_nl:  # the end marker was the last line, without a newline: keep it so
            block = block[: -len(nl)]
        return bom + "".join(pieces[:a]) + block + "".join(pieces[b + 1 :])
    head = t
    if head and not head.endswith("\n"):
        head += nl
    if head.strip() and lines and lines[-1].strip():
        head += nl
    return bom + head + render_block(inner, nl)


def user_lines(text: str) -> list[str]:
    """The note's lines that are the user's (line content without terminators; BOM dropped): every line of a user
    note outside its intact app blocks; none of an app-owned note."""
    own = note_ownership(text)
    if own.app_owned:
        return []
    body = text[1:] if text.startswith(_BOM) else text
    lines = [_content(p) for p in _pieces(body)]
    skip = {i for a, b in own.app_ranges for i in range(a - 1, b)}
    return [ln for i, ln in enumerate(lines) if i not in skip]


def keeps_user_lines(old: str, new: str) -> bool:
    """True when every user line of ``old`` is, in order and unchanged, a user line of ``new`` (so a write of
    ``new`` over ``old`` loses or alters none of the user's words). Blank lines count like any other."""
    want = user_lines(old)
    have = iter(user_lines(new)) if not note_ownership(new).app_owned else iter(())
    return all(any(w == h for h in have) for w in want)

"""What of a note is indexed: the one rule for opaque data and for Excalidraw drawings (issue 12).

A person never searches for a base64 blob, a data URI's payload, a minified JSON line or an Excalidraw drawing's
compressed scene, yet such text used to become chunks, BM25 tokens and vectors (a fresh-user trial found the vector
leg's best match for nonsense was a base64 blob). :func:`searchable_body` returns the body the chunker, the
tokenizer and the vector pass see, with those runs removed; the note itself is untouched (the note pane reads
the file), and links are still parsed from the real body (:mod:`.links` already ignores fenced code).

Shape: the result has exactly the body's lines (same count, same order), so chunk line numbers stay true file
lines; a removed run leaves the rest of its line, a line of nothing else becomes blank. Linear in the body's
length: C-level regex scans with no backtracking across lines, then per-candidate checks.

The rules (all on one line; a wrapped block is a run of such lines):

* **base64-like run**: ≥ :data:`B64_RUN_MIN` characters of ``[A-Za-z0-9+/_-]`` (plus ``=`` padding) holding
  upper-case letters, lower-case letters and digits, each at least :data:`B64_MIX` of the run (words, paths and
  URLs fail this: they are mostly lower-case).
* **wrapped base64 block**: ≥ :data:`B64_BLOCK_LINES` consecutive lines (blank lines between them allowed) that
  are each only base64 characters, ≥ :data:`B64_LINE_MIN` long, mixed as above; the block's short last line
  (``aA==``) goes with it.
* **data URI payload**: ``data:<type>[;…],`` followed by ≥ :data:`DATA_URI_MIN` characters without whitespace,
  quotes, ``)`` or ``>``; the ``data:<type>,`` prefix stays.
* **minified JSON**: a line of ≥ :data:`JSON_LINE_MIN` characters that opens with ``{`` or ``[{``/``["``, with at
  most 2 % whitespace and a quote at least every 25 characters.
* **Excalidraw drawing** (:func:`is_excalidraw`: ``*.excalidraw.md`` or frontmatter ``excalidraw-plugin``): only
  the text before its data sections, the ``Text Elements`` (without their ``^id`` anchors) and the ``Element
  Links`` are kept; the plugin's "Switch to EXCALIDRAW VIEW" banner, section headings, ``Embedded files`` and
  everything from ``Drawing`` on (``compressed-json``/``json`` scene) are not. The name and frontmatter are
  indexed as for any note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Searchable", "is_excalidraw", "searchable_body", "OPAQUE_ONLY_REASON"]

#: Characters of one base64-like run that make it opaque.
B64_RUN_MIN = 200
#: Minimum share of each of upper-case letters, lower-case letters and digits in a base64-like run.
B64_MIX = 0.04
#: A wrapped base64 block: lines of at least this many characters …
B64_LINE_MIN = 40
#: … and at least this many of them.
B64_BLOCK_LINES = 3
#: Characters of a data URI's payload that make it opaque.
DATA_URI_MIN = 64
#: Characters of a line that can be minified JSON.
JSON_LINE_MIN = 1000

#: Skip reason of a file that holds nothing searchable besides opaque data (and no frontmatter).
OPAQUE_ONLY_REASON = "opaque data only (base64, compressed or minified): nothing to search"

# Candidates only: every match is checked by _mixed(). No nested quantifiers, so each scan is linear.
_B64_CAND_RE = re.compile(rf"[A-Za-z0-9+/_\-]{{{B64_LINE_MIN},}}={{0,2}}")
_B64_LINE_RE = re.compile(rf"[ \t]*([A-Za-z0-9+/_\-]+={{0,2}})[ \t]*")
# payload: up to whitespace, a quote, <, > or an unbalanced ")" (percent-encoded SVG keeps "rotate(360deg)")
_DATA_URI_RE = re.compile(r"data:[\w.+\-]+/[\w.+\-]+(?:;[\w.+\-]+(?:=[\w.+\-]+)?)*,"
                          r"([^\s\"'<>()]*(?:\([^\s\"'<>()]*\)[^\s\"'<>()]*)*)")
_JSON_CAND_RE = re.compile(r"[ \t]*(?:\{|\[[{\"])")
_JSON_NL_RE = re.compile(r"\n[ \t]*(?:\{|\[[{\"])")  # a literal first character: a fast scan
#: byte → "a" for the base64-like alphabet (``=`` padding excluded), " " for anything else
_B64_BYTES = bytes(0x61 if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "+/_-") else 0x20 for c in range(256))
_B64_PROBE = b"a" * B64_LINE_MIN

_EXCALIDRAW_HEAD_RE = re.compile(
    r"#{1,6}[ \t]+(Excalidraw Data|Text Elements|Element Links|Embedded files|Embedded Files|Drawing)[ \t]*")
_TEXT_ELEMENT_ID_RE = re.compile(r"[ \t]*\^[A-Za-z0-9_\-]{6,16}[ \t]*$")
_ELEMENT_LINK_ID_RE = re.compile(r"^[ \t]*\^?[A-Za-z0-9_\-]{6,16}:[ \t]*")


@dataclass(frozen=True, slots=True)
class Searchable:
    """What :func:`searchable_body` made of a body.

    text: the body with opaque runs removed (same line count); removed: characters taken out (0: ``text`` is the
    body itself); drawing: the body was read as an Excalidraw drawing; only_opaque: the body had non-blank text
    and none of it is left."""

    text: str
    removed: int = 0
    drawing: bool = False
    only_opaque: bool = False


def is_excalidraw(rel: str, meta: dict | None) -> bool:
    """True for an Obsidian Excalidraw drawing: ``*.excalidraw.md``, or a note whose frontmatter has the plugin's
    ``excalidraw-plugin`` key (``parsed``/``raw``), as the plugin's own files in a vault of any name have."""
    if rel.lower().endswith(".excalidraw.md"):
        return True
    return bool(meta) and meta.get("excalidraw-plugin") not in (None, "", False)


_UPPER = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = _UPPER.lower()
_DIGITS = b"0123456789"


def _mixed_bytes(b: bytes) -> bool:
    """Upper, lower and digits each at least B64_MIX of an ASCII run: base64's ~40/40/15 %, not words or paths."""
    n = len(b)
    floor = max(1, int(n * B64_MIX))
    return (n - len(b.translate(None, _UPPER)) >= floor and n - len(b.translate(None, _LOWER)) >= floor
            and n - len(b.translate(None, _DIGITS)) >= floor)


def _mixed(run: str) -> bool:
    """:func:`_mixed_bytes` of a run of the base64-like alphabet (ASCII)."""
    return _mixed_bytes(run.encode("ascii", "replace"))


def _is_minified_json(line: str) -> bool:
    s = line.strip()
    n = len(s)
    if n < JSON_LINE_MIN:
        return False
    spaces = n - len("".join(s.split()))
    return spaces <= n * 0.02 and s.count('"') * 25 >= n


def _mask_lines(lines: list[str]) -> int:
    """Remove opaque runs from ``lines`` in place; returns the characters removed."""
    removed = 0
    n = len(lines)
    # wrapped base64 blocks: maximal runs of whole base64 lines (blank lines between them allowed)
    i = 0
    while i < n:
        m = _B64_LINE_RE.fullmatch(lines[i]) if len(lines[i]) >= B64_LINE_MIN else None
        if m is None or len(m.group(1)) < B64_LINE_MIN:
            i += 1
            continue
        block = [i]
        j = i + 1
        while j < n:
            s = lines[j]
            if not s.strip(" \t"):
                j += 1
                continue
            m2 = _B64_LINE_RE.fullmatch(s)
            if m2 is None:
                break
            block.append(j)
            j += 1
            if len(m2.group(1)) < B64_LINE_MIN:
                break  # a short line ends the block (the padding line)
        full = [k for k in block if len(lines[k].strip(" \t")) >= B64_LINE_MIN]
        if len(full) >= B64_BLOCK_LINES and _mixed("".join(lines[k].strip(" \t") for k in full)):
            for k in block:
                removed += len(lines[k])
                lines[k] = ""
        i = j if j > i + 1 else i + 1
    for k, line in enumerate(lines):
        if len(line) < B64_LINE_MIN:
            continue
        new = line
        if "data:" in new:
            new = _DATA_URI_RE.sub(lambda m: m.group(0) if len(m.group(1)) < DATA_URI_MIN
                                   else m.group(0)[: m.start(1) - m.start(0)], new)
        if len(new) >= B64_RUN_MIN:
            new = _B64_CAND_RE.sub(lambda m: "" if len(m.group(0)) >= B64_RUN_MIN and _mixed(m.group(0))
                                   else m.group(0), new)
        if len(new) >= JSON_LINE_MIN and _JSON_CAND_RE.match(new) and _is_minified_json(new):
            new = ""
        if new is not line and new != line:
            if not new.strip(" \t"):
                new = ""
            removed += len(line) - len(new)
            lines[k] = new
    return removed


def _drawing_lines(lines: list[str]) -> int:
    """Keep only what a person reads in an Excalidraw drawing (see the module docstring); in place, returns the
    characters removed."""
    removed = 0
    section = None  # None: before the data sections; else the current section's name
    for k, line in enumerate(lines):
        s = line.strip()
        m = _EXCALIDRAW_HEAD_RE.fullmatch(s)
        keep: str | None
        if m:
            section = m.group(1).lower()
            keep = ""
        elif section == "drawing":
            keep = ""
        elif s.startswith("==⚠") or s == "%%":
            keep = ""
        elif section is None or section == "excalidraw data":
            keep = line
        elif section == "text elements":
            keep = _TEXT_ELEMENT_ID_RE.sub("", line)
        elif section == "element links":
            keep = _ELEMENT_LINK_ID_RE.sub("", line)
        else:  # embedded files: hashes and file links (still links in the graph)
            keep = ""
        if keep != line:
            removed += len(line) - len(keep)
            lines[k] = keep
    return removed


def _has_mixed_run(body: str) -> bool:
    """A base64-like run of at least B64_LINE_MIN characters that is mixed (:func:`_mixed`)? C-level passes over
    the UTF-8 bytes (translate + find), ~6x faster than a regex scan over the text."""
    raw = body.encode("utf-8", "surrogatepass")
    marks = raw.translate(_B64_BYTES)
    i = marks.find(_B64_PROBE)
    while i >= 0:
        j = marks.find(b" ", i + B64_LINE_MIN)
        if j < 0:
            j = len(marks)
        if _mixed_bytes(raw[i:j]):
            return True
        i = marks.find(_B64_PROBE, j)
    return False


def _might_be_opaque(body: str) -> bool:
    """Cheap prefilter: a mixed base64-like candidate, a data URI, or a long line opening like JSON in a body
    that has ``":``."""
    if "data:" in body or _has_mixed_run(body):
        return True
    if len(body) < JSON_LINE_MIN or '":' not in body:
        return False
    starts = [0] if _JSON_CAND_RE.match(body) else []
    starts += [m.start() + 1 for m in _JSON_NL_RE.finditer(body)]
    for a in starts:
        end = body.find("\n", a)
        if (len(body) if end < 0 else end) - a >= JSON_LINE_MIN:
            return True
    return False


def searchable_body(body: str, *, rel: str = "", meta: dict | None = None) -> Searchable:
    """The part of ``body`` worth indexing (module docstring): same lines, opaque runs removed.

    body: the note's body (frontmatter removed) or a text file's text; rel: vault-relative path (``.excalidraw.md``
    detection); meta: the parsed frontmatter. Never raises; linear in ``len(body)``."""
    drawing = is_excalidraw(rel, meta)
    if not drawing and not _might_be_opaque(body):
        return Searchable(body)
    # the chunker's line splitting (\r\n, \r, \n): the result joins with \n and keeps the line count
    lines = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    removed = _drawing_lines(lines) if drawing else 0
    removed += _mask_lines(lines)
    if not removed:
        return Searchable(body, drawing=drawing)
    text = "\n".join(lines)
    only = not text.strip() and bool(body.strip())
    return Searchable(text, removed, drawing, only)

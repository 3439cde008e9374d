"""Checks on every path an LLM names in auto_dream (ARCHITECTURE §6 "paths an LLM names are checked", §8).

The LLM only *proposes*; code decides. :func:`clean_llm_path` turns what a model wrote (a plain path, a
wikilink, a path without ``.md``) into a vault-relative POSIX path or ``None`` when it is unsafe (absolute, drive
letter, ``.``/``..`` components, NUL, control characters). Callers then check membership in an allowed set
(the unit's inputs, the candidate nodes) and :func:`reme_engine.vault.paths.resolve` proves the file stays inside
the vault. :func:`slugify` makes the file name of a new digest node.
"""

from __future__ import annotations

import re
import unicodedata

from ..markdown.links import parse_links
from ..text import slugify as _slugify

_DRIVE = re.compile(r"^[A-Za-z]:")
_DASHES = re.compile(r"-{2,}")
_EXT = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
#: Names Windows refuses as file stems (vaults get synced to Windows machines).
_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)), *(f"lpt{i}" for i in range(1, 10))}
MAX_SLUG = 60


class UnsafePath(ValueError):
    """The LLM named a path that leaves its allowed area (absolute, ``..``, drive letter…)."""


def clean_llm_path(raw: object, *, add_md: bool = True) -> str | None:
    """Normalise an LLM-written path; ``None`` when it is empty or unsafe.

    Accepts ``[[daily/x]]``, ``[[daily/x|alias]]``, ``[[daily/x#H]]``, `` `daily/x.md` ``, backslashes; adds
    ``.md`` when the name has no extension and ``add_md``. Never resolves against the disk.
    """
    try:
        return checked_llm_path(raw, add_md=add_md)
    except UnsafePath:
        return None


def checked_llm_path(raw: object, *, add_md: bool = True) -> str:
    """Like :func:`clean_llm_path` but raises :class:`UnsafePath` (with the reason) instead of returning None."""
    s = str(raw or "").strip().strip("`'\"").strip()
    if "[[" in s:  # a wikilink: its target, as the one link parser reads it
        links = [lk for lk in parse_links(s) if lk.kind == "wikilink"]
        if links:
            s = links[0].target
    s = s.strip().replace("\\", "/")
    if not s:
        raise UnsafePath("empty path")
    if "\x00" in s or any(unicodedata.category(ch) == "Cc" for ch in s):
        raise UnsafePath(f"control characters in path {s!r}")
    if s.startswith("/") or _DRIVE.match(s) or s.startswith("~"):
        raise UnsafePath(f"absolute path refused: {s!r}")
    parts = s.split("/")
    if any(p in (".", "..") for p in parts):
        raise UnsafePath(f"'.'/'..' path refused: {s!r}")
    s = unicodedata.normalize("NFC", "/".join(p for p in parts if p))
    if add_md and not _EXT.search(s.rsplit("/", 1)[-1]):
        s += ".md"
    return s


def slugify(text: str) -> str:
    """A file stem for a new node (:func:`reme_engine.text.slugify`: letters/digits of any script kept, so Chinese
    names stay readable; at most :data:`MAX_SLUG` characters; ``"note"`` when nothing is left); a Windows device
    name gets ``-note`` so the vault syncs to Windows."""
    slug = _slugify(text, "note", MAX_SLUG)
    return slug + "-note" if slug in _RESERVED else slug


def link_key(target: str) -> str:
    """Comparison key of a link target or path: NFC, casefolded, ``.md`` dropped (``[[daily/x]]`` ≡ ``daily/x.md``)."""
    t = unicodedata.normalize("NFC", target.strip().replace("\\", "/")).casefold()
    return t[:-3] if t.endswith(".md") else t

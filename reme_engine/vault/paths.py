"""Safe path resolution inside a vault (ARCHITECTURE §8).

Every path that reaches the file system from a job, an LLM reply or a link goes through :func:`resolve`.
Vault-relative paths are POSIX strings in Unicode NFC (so NFD names from macOS compare equal).
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


class VaultPathError(ValueError):
    """A path is empty, absolute, escapes the vault, or names something it must not."""


@dataclass(frozen=True)
class VaultPath:
    """A checked path: ``rel`` is the vault-relative POSIX path ("" for the root), ``abs`` the absolute path."""

    rel: str
    abs: Path


def is_valid_name(name: str) -> bool:
    """False for names holding undecodable bytes (surrogate escapes) or line breaks: they cannot be stored,
    linked or shown safely."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\n" not in name and "\r" not in name


#: characters Obsidian refuses in a file name ("File name cannot contain any of the following characters"), which
#: Windows and most sync services refuse too; ``/`` is the separator
FORBIDDEN_NAME_CHARS = '*"\\<>:|?'
#: what a ``[[wikilink]]`` to a name cannot spell: a link stops at ``]]``, and ``|`` ``#`` ``^`` start its alias,
#: heading and block parts, so a note named with them can never be linked to (Obsidian warns the same)
LINK_BREAKING = ("[[", "]]", "|", "#", "^")
#: names Windows reserves for devices, with any extension (``CON.md`` cannot be created or synced there)
RESERVED_NAMES = frozenset({"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)),
                            *(f"lpt{i}" for i in range(1, 10))})
#: bidirectional embedding/override/isolate controls (U+202A–U+202E, U+2066–U+2069): invisible, and they make a
#: name display as something else (``report\u202egpj.md`` shows as ``reportdm.jpg``)
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: invisible characters with no use in a name (zero width space, word joiner, BOM) and the Unicode line and
#: paragraph separators (a line break to some renderers): ``a\u200b.md`` looks exactly like ``a.md``
INVISIBLE_CHARS = frozenset("\u200b\u2060\ufeff\u2028\u2029")
#: short names of the C0 controls a person may meet (BEL, ESC, …) for the refusal message
_C0_NAMES = {0: "NUL", 7: "BEL", 8: "BS", 9: "TAB", 10: "LF", 13: "CR", 27: "ESC", 127: "DEL"}


def control_chars(name: str) -> list[str]:
    """The control characters in ``name``, each as ``U+XXXX`` (with its short name where it has a common one:
    ``U+001B ESC``), in order of first appearance; [] when none.

    Controls are C0 (U+0000–U+001F), DEL (U+007F), C1 (U+0080–U+009F), :data:`BIDI_CONTROLS` and
    :data:`INVISIBLE_CHARS`. A terminal
    runs them instead of showing them (ESC starts an escape sequence that can rewrite the screen), they cannot be
    typed back into a link, and most sync services and other OSes refuse or mangle them."""
    out: list[str] = []
    for ch in name:
        o = ord(ch)
        if o < 0x20 or 0x7F <= o <= 0x9F or ch in BIDI_CONTROLS or ch in INVISIBLE_CHARS:
            label = f"U+{o:04X}" + (f" {_C0_NAMES[o]}" if o in _C0_NAMES else "")
            if label not in out:
                out.append(label)
    return out


def shown_name(name: str) -> str:
    """``name`` with each control character (see :func:`control_chars`) written as an escape (``\\x1b``,
    ``\\u202e``) and the rest as it is, so a message can quote a name without the name acting on the terminal."""
    return "".join((f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
                   if control_chars(ch) else ch for ch in name)


def new_name_problem(vault: Path, rel: str) -> str | None:
    """Why a *new* file at the vault-relative ``rel`` would cause trouble in Obsidian or on another OS, or None.

    Checked for every path segment: a control character (:func:`control_chars`: BEL, ESC, NUL, DEL, C1, bidi
    overrides), a character Obsidian refuses (:data:`FORBIDDEN_NAME_CHARS`), what a link
    cannot spell (:data:`LINK_BREAKING`), a Windows device
    name (:data:`RESERVED_NAMES`), a trailing space or dot; and for the file name: a space around its stem (a link
    trims it), another entry of its folder with
    the same name in another case (one file on macOS and Windows: a sync would overwrite one with the other).
    Existing files are never judged (a vault keeps whatever names it has)."""
    parts = rel.split("/")
    for part in parts:
        ctrl = control_chars(part)
        if ctrl:  # first: the name itself is shown escaped, never raw (it would act on the terminal)
            return (f"'{shown_name(part)}' has a control character ({', '.join(ctrl)}), which cannot be shown, typed "
                    "or synced safely; choose another name")
        bad = sorted({ch for ch in part if ch in FORBIDDEN_NAME_CHARS})
        if bad:
            return f"{part!r} has {' '.join(bad)}, which Obsidian does not allow in a file name"
        breaking = [s for s in LINK_BREAKING if s in part]
        if breaking:
            return f"{part!r} has {' '.join(breaking)}, so no [[link]] can reach it; choose another name"
        if part.split(".", 1)[0].strip().lower() in RESERVED_NAMES:
            return f"{part!r} is a name Windows reserves for a device"
        if part != part.rstrip(" ."):
            return f"{part!r} ends with a space or a dot, which Windows and sync services drop"
    stem = parts[-1].rsplit(".", 1)[0] if "." in parts[-1].lstrip(".") else parts[-1]
    if stem != stem.strip():
        return f"{parts[-1]!r} has a space at the end or start of its name, which a [[link]] to it loses"
    folder = vault.joinpath(*parts[:-1])
    want = parts[-1].casefold()
    try:
        clash = next((n for n in os.listdir(folder) if n.casefold() == want and n != parts[-1]), None)
    except OSError:  # the folder does not exist yet: nothing can clash
        return None
    if clash is not None:
        return f"{clash!r} already exists with another case (the same file on macOS and Windows)"
    return None


#: Most components a vault path may have. No real vault comes near it (Obsidian vaults nest a handful of folders;
#: Linux's PATH_MAX of 4,096 bytes allows ~2,000 one-letter ones): a path that deep walks a loop the symlink check
#: cannot see (a bind mount of a folder into itself) or was built by a program going round one.
MAX_PATH_DEPTH = 64


def normalize_rel(rel: str) -> str:
    """NFC-normalise and convert separators; does not check safety (use :func:`resolve`)."""
    return unicodedata.normalize("NFC", rel.replace("\\", "/")).strip("/")


def resolve(vault: Path, rel: str | os.PathLike[str], *, allow_root: bool = False,
            for_write: bool = False) -> VaultPath:
    """Resolve ``rel`` against ``vault`` and prove it stays inside.

    Refuses (``VaultPathError``): NUL bytes, absolute paths, drive letters, ``.``/``..`` components, the root
    itself unless ``allow_root``, any path whose real location (after symlinks) leaves the vault, any path
    through a folder symlink that points back at a folder containing it (a loop: ``a/loop -> ..``) or at a folder
    the path already went through (a loop of several links: ``a/x -> ../b``, ``b/y -> ../a``, so ``a/x/y/…``), and
    any path of more than :data:`MAX_PATH_DEPTH` components.
    With ``for_write``, also any dot-file or dot-folder component (``.obsidian/``, ``.git/``, ``.trash/``): those
    belong to other tools. The file need not exist.
    """
    raw = os.fspath(rel)
    if "\x00" in raw:
        raise VaultPathError("path contains a NUL byte")
    if not is_valid_name(raw):
        raise VaultPathError("path is not valid UTF-8 text")
    text = raw.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":" and text[0].isalpha()
                                and (len(text) == 2 or text[2] == "/")):  # "C:", "C:/x", "C:\\x"
        raise VaultPathError(f"absolute paths are not allowed: {raw!r}")
    parts = [p for p in text.split("/") if p != ""]
    for p in parts:
        if p in (".", ".."):
            raise VaultPathError(f"'.' and '..' are not allowed in vault paths: {raw!r}")
    if for_write and any(p.startswith(".") for p in parts):
        raise VaultPathError(f"dot-files and dot-folders are not writable: {raw!r}")
    if len(parts) > MAX_PATH_DEPTH:
        raise VaultPathError(f"path is {len(parts)} folders deep, over the limit of {MAX_PATH_DEPTH} (a symlink or "
                             f"mount loop?): {'/'.join(parts[:3])}/…/{parts[-1]}")
    norm = unicodedata.normalize("NFC", "/".join(parts))
    if not norm and not allow_root:
        raise VaultPathError("the vault root itself is not a valid target")
    root = Path(vault).resolve()
    target = root.joinpath(*PurePosixPath(norm).parts) if norm else root
    given = "/".join(parts)
    if given != norm and target.exists():
        # Two files whose names differ only in Unicode form (possible on Linux): the caller named the other one,
        # which no vault path (NFC) can address; acting on the NFC file would read or change the wrong note.
        spelled = root.joinpath(*PurePosixPath(given).parts)
        try:
            twins = spelled.exists() and not os.path.samefile(spelled, target)
        except OSError:
            twins = False
        if twins:
            raise VaultPathError(f"two files are named {norm!r} in different Unicode forms (NFC and NFD); "
                                 "rename one of them")
    # On disk the name may be NFD (macOS) — prefer an existing variant so reads find the file.
    if norm and not target.exists():
        alt = root.joinpath(*PurePosixPath(unicodedata.normalize("NFD", norm)).parts)
        if alt.exists():
            target = alt
    try:
        real = target.resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop (RuntimeError on 3.11), an unreadable folder
        raise VaultPathError(f"cannot resolve {raw!r}: symlink loop or unreadable path ({exc})") from None
    if real != root and not real.is_relative_to(root):
        raise VaultPathError(f"path leaves the vault (symlink?): {raw!r}")
    if norm and real != target:  # a symlink on the way: is it a folder symlink back into its own ancestry?
        loop = _loop_link(root, norm)
        if loop is not None:
            link, again = loop
            own = to_rel(root, real) if real != root else ""
            name = f": {own}" if own and real.exists() else ""
            if again is None:
                raise VaultPathError(f"{link!r} is a folder symlink to a folder that contains it (a loop); not "
                                     f"followed: name the note by its own path{name}")
            raise VaultPathError(f"{link!r} is a folder symlink back to {again or 'the vault root'!r}, a folder this "
                                 f"path already went through (a symlink loop); not followed: name the note by its "
                                 f"own path{name}")
    if for_write and real != root and any(p.startswith(".") for p in real.relative_to(root).parts):
        raise VaultPathError(f"dot-files and dot-folders are not writable (through a symlink): {raw!r}")
    return VaultPath(norm, target)


def _loop_link(root: Path, norm: str) -> tuple[str, str | None] | None:
    """``(link, again)`` for the first vault-relative prefix ``link`` of ``norm`` that is a folder symlink into a
    loop, or None: ``again`` is None when it points at one of its own ancestors (the vault root included), else
    the vault-relative real folder it leads back to, which an earlier prefix of the path was already in (a loop
    of several links). A path through such a link names a note that also has a shorter, real path
    (``a/loop/a/n.md`` is ``a/n.md``); the index, the watcher and links know only the real one. ``root`` is
    resolved; one ``lstat`` per component, one ``resolve`` per symlink."""
    real = root  # the real folder the walk is in
    seen = {root}  # every real folder the path has been in so far
    parts = PurePosixPath(norm).parts
    for i, part in enumerate(parts):
        entry = real / part
        try:
            if not entry.is_symlink():
                if not entry.exists():
                    return None
                real = entry
                seen.add(real)
                continue
            target = entry.resolve()
        except (OSError, RuntimeError):
            return "/".join(parts[: i + 1]), None
        if target.is_dir():
            if real == target or real.is_relative_to(target):
                return "/".join(parts[: i + 1]), None
            if target in seen:
                return "/".join(parts[: i + 1]), to_rel(root, target) if target != root else ""
        real = target
        seen.add(real)
    return None


def to_rel(vault: Path, path: Path) -> str:
    """The vault-relative NFC POSIX path of an absolute ``path`` inside ``vault`` (no symlink resolution)."""
    rel = Path(path).relative_to(vault).as_posix()
    return unicodedata.normalize("NFC", rel)


def is_hidden(rel: str) -> bool:
    """True for dot-files/folders anywhere in the path (``.obsidian``, ``.trash``, ``.git``)."""
    return any(part.startswith(".") for part in rel.split("/"))

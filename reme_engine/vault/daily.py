"""Daily-layer helpers: day folders, day index pages and their generated card index (ARCHITECTURE §2).

A day is ``<daily_dir>/<date>/`` (its cards: ``*.md`` files, ``interests.yaml`` …) plus the day page
``<daily_dir>/<date>.md``. The app owns only the section between :data:`INDEX_START` and :data:`INDEX_END` in a day
page; everything outside the markers is the user's and is kept byte-for-byte (BOM and CRLF included).

The app never inserts the index section into a day page that has no markers (for example an existing Obsidian daily
note) unless the caller passes ``insert_markers=True``.

All paths in results are vault-relative POSIX strings; all result types are dataclasses that
``dataclasses.asdict`` turns into JSON-serialisable dicts.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from reme_engine.config import LayerSettings
from reme_engine.markdown.frontmatter import parse_frontmatter
from reme_engine.markdown.links import format_link
from reme_engine.text import yaml_text
from reme_engine.vault.app_folder import card_dirs, writes_daily_notes
from reme_engine.vault.io import SkipFile, WriteConflict, atomic_write, read_text
from reme_engine.vault.paths import is_hidden, resolve, to_rel
from reme_engine.vault.provenance import (
    DAY_INDEX_END,
    DAY_INDEX_START,
    block_digest,
    day_index_state,
)

#: The generated section of a day page opens with ``<!-- reme:day-index:start <hash> -->`` (hash of the lines
#: between the markers, :func:`~reme_engine.vault.provenance.block_digest`; pages from before the hash have the
#: bare form) and closes with :data:`INDEX_END`. A section whose lines no longer match its hash was edited by the
#: user and is theirs (the provenance rule): it is never regenerated. Locate it with :func:`day_index_span`.
INDEX_START = DAY_INDEX_START + " -->"  # the bare form, as pages before the hash have it
INDEX_END = DAY_INDEX_END
_START_LINE_RE = re.compile(r"^[ \t]*<!-- reme:day-index:start(?: [0-9a-f]{16})? -->[ \t]*\r?$", re.M)
#: skip reason for a section the user edited
SKIP_USER_EDITED = ("the generated day index was edited by you, so it is yours and left as it is (remove the lines "
                    "you added there, or the whole section, to have it generated again)")

#: Default size limit for reading cards and day pages (matches ``Settings.max_file_bytes``).
DEFAULT_MAX_BYTES = 8 * 1024 * 1024

SKIP_NO_MARKERS = "page has no reme index markers"
#: In a vault with an app folder the app creates no day page by itself (``insert_markers=True`` opts in).
SKIP_NOT_CREATED = "no day page; the app does not create daily notes in this vault (insert_markers=true to opt in)"

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_BOM = b"\xef\xbb\xbf"


# --------------------------------------------------------------------------------------------------- results


@dataclass
class DailyCard:
    """One card of a day.

    ``path``: vault-relative path (``daily/2026-11-28/foo.md``); ``stem``: file name without ``.md``;
    ``name``/``description``: from frontmatter (``name`` falls back to the stem, ``description`` to "");
    ``kind``: ``session`` (has ``session_id``), ``resource`` (has ``source_resource``) or ``note``;
    ``size`` in bytes, ``mtime`` as POSIX seconds; ``warning``: why the card could not be read (then name = stem).
    """

    path: str
    stem: str
    name: str
    description: str
    kind: str
    size: int
    mtime: float
    warning: str | None = None


@dataclass
class DailyCreateResult:
    """Outcome of :func:`daily_create`: ``page``/``folder`` are vault-relative; the flags say what was created now."""

    date: str
    page: str
    folder: str
    page_created: bool
    folder_created: bool


@dataclass
class DailyReindexResult:
    """Outcome of :func:`daily_reindex`.

    ``path``: the day page (vault-relative); ``changed``: the page was written; ``created``: the page was created;
    ``cards``: number of cards indexed; ``skipped``: a reason when nothing was written on purpose
    (e.g. :data:`SKIP_NO_MARKERS`), else None; ``sha``: content hash of the page after the call (None if absent).
    """

    date: str
    path: str
    changed: bool
    created: bool
    cards: int
    skipped: str | None = None
    sha: str | None = None


# --------------------------------------------------------------------------------------------------- helpers


def _marker_at_line(text: str, marker: str, start: int = 0) -> int:
    """Offset of ``marker`` standing alone on a line (surrounding spaces allowed) at or after ``start``; -1."""
    pos = start
    while True:
        i = text.find(marker, pos)
        if i < 0:
            return -1
        line_start = text.rfind("\n", 0, i) + 1
        line_end = text.find("\n", i)
        line_end = len(text) if line_end < 0 else line_end
        if text[line_start:i].strip() == "" and text[i + len(marker):line_end].strip() == "":
            return i
        pos = i + len(marker)


def valid_date(date: Any) -> str:
    """Return ``date`` as ``YYYY-MM-DD`` if it is a real calendar date, else raise ``ValueError``.

    Accepts a string (surrounding whitespace ignored) or a ``datetime.date`` (YAML 1.1 loaders produce those).
    """
    if isinstance(date, _dt.datetime):
        raise ValueError(f"invalid date {date!r}: expected YYYY-MM-DD, not a timestamp")
    if isinstance(date, _dt.date):
        return date.isoformat()
    if not isinstance(date, str):
        raise ValueError(f"invalid date {date!r}: expected a YYYY-MM-DD string")
    text = date.strip()
    if not _DATE_RE.match(text):
        raise ValueError(f"invalid date {date!r}: expected YYYY-MM-DD")
    try:
        _dt.date.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"invalid date {date!r}: not a calendar date ({exc})") from exc
    return text


def _layers(layers: LayerSettings | None) -> LayerSettings:
    return layers if layers is not None else LayerSettings()


def _daily_dir(layers: LayerSettings | None) -> str:
    return _layers(layers).daily_dir.strip("/") or "daily"


def _frontmatter_meta(text: str) -> dict:
    """The note's frontmatter mapping, by the one frontmatter parser (YAML 1.2 core scalars, ARCHITECTURE §4;
    it never raises: invalid YAML gives {})."""
    return parse_frontmatter(text).meta


_as_text = yaml_text  # the one coercion of frontmatter values to display text


def _md_files(folder: Path) -> list[Path]:
    out: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            if not f.startswith(".") and f.lower().endswith(".md"):
                out.append(Path(root) / f)
    return out


# --------------------------------------------------------------------------------------------------- listing


def daily_list(
    vault: Path, date: str, layers: LayerSettings | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> list[DailyCard]:
    """Cards of ``date``: every ``*.md`` under ``<daily_dir>/<date>/`` and, in app-folder mode, under
    ``<app_dir>/daily/<date>/`` (recursive, hidden entries skipped), sorted by vault-relative path. No folder
    gives ``[]``.

    Raises ``ValueError`` for an invalid date and ``VaultPathError`` for a daily dir outside the vault.
    Unreadable cards (binary, oversized, undecodable) are listed with ``warning`` set and ``name`` = stem.
    """
    date = valid_date(date)
    vault = Path(vault)
    files: list[Path] = []
    for d in card_dirs(_layers(layers)):
        folder = resolve(vault, f"{d}/{date}")
        if folder.abs.is_dir():
            files += _md_files(folder.abs)
    if not files:
        return []
    root = resolve(vault, "", allow_root=True).abs
    cards: list[DailyCard] = []
    for p in files:
        try:
            rel = to_rel(root, p)
        except ValueError:
            continue
        if is_hidden(rel):
            continue
        stem = p.name[: -len(".md")]
        warning = None
        meta: dict = {}
        try:
            tf = read_text(p, max_bytes)
            size, mtime = tf.size, tf.mtime
            meta = _frontmatter_meta(tf.text)
        except SkipFile as exc:
            warning = exc.reason
            st = p.stat()
            size, mtime = st.st_size, st.st_mtime
        except FileNotFoundError:
            continue  # vanished meanwhile
        except OSError as exc:
            warning = f"cannot read: {exc.strerror or exc}"
            size, mtime = 0, 0.0
        if meta.get("session_id") is not None:
            kind = "session"
        elif meta.get("source_resource") is not None:
            kind = "resource"
        else:
            kind = "note"
        cards.append(
            DailyCard(
                path=rel,
                stem=stem,
                name=_as_text(meta.get("name")) or stem,
                description=_as_text(meta.get("description")),
                kind=kind,
                size=size,
                mtime=mtime,
                warning=warning,
            )
        )
    cards.sort(key=lambda c: c.path)
    return cards


def list_days(vault: Path, layers: LayerSettings | None = None) -> list[str]:
    """Dates (``YYYY-MM-DD``) that have a day page ``<daily_dir>/<date>.md`` or a day folder (in the daily folder
    or, in app-folder mode, the app's ``<app_dir>/daily``), newest first.

    Other entries of the daily folder are ignored; a missing daily folder gives ``[]``.
    """
    days: set[str] = set()
    for d in reversed(card_dirs(_layers(layers))):  # the daily folder, then the app's card folder
        folder = resolve(Path(vault), d)
        if not folder.abs.is_dir():
            continue
        for entry in os.scandir(folder.abs):
            name = entry.name
            if entry.is_dir():
                cand = name
            elif entry.is_file() and name.lower().endswith(".md"):
                cand = name[:-3]
            else:
                continue
            try:
                days.add(valid_date(cand))
            except ValueError:
                continue
    return sorted(days, reverse=True)


# --------------------------------------------------------------------------------------------------- rendering


def _alias(text: str) -> str:
    text = " ".join(text.split())
    return text.replace("|", "/").replace("[", "(").replace("]", ")").replace("<!--", "<!-")


def render_day_index(date: str, cards: list[DailyCard]) -> str:
    """The generated text that goes between the markers (markers not included), ``\\n`` line endings.

    One bullet per card: ``- [[<card path without .md>|<name>]] — <description>`` (`` — description`` omitted
    when empty). Each line ends with a newline; no cards gives "". ``date`` is validated (``ValueError``).
    """
    valid_date(date)
    lines = []
    for c in cards:
        line = "- " + format_link(c.path, alias=_alias(c.name or c.stem))
        desc = " ".join((c.description or "").split()).replace("<!--", "<!-")
        if desc:
            line += f" — {desc}"
        lines.append(line + "\n")
    return "".join(lines)


def _section(inner: str, nl: str) -> str:
    return f"{DAY_INDEX_START} {block_digest(inner)} -->" + nl + inner.replace("\n", nl) + INDEX_END


def day_index_span(text: str) -> tuple[int, int] | None:
    """``(start, end)`` offsets of a day page's generated section, both markers included (``end`` just after
    :data:`INDEX_END`), or None when the page has no complete section. Markers count only on a line of their own
    and outside fenced code; a start marker with no end before the next start is not a section (the pairing
    rule of :func:`~reme_engine.vault.provenance.day_index_state`, the one home of it)."""
    state = day_index_state(text)
    if state is None:
        return None
    a, b, _ = state
    offsets = [0]
    for ln in text.split("\n"):
        offsets.append(offsets[-1] + len(ln) + 1)
    start = offsets[a] + (len(text[offsets[a]:]) - len(text[offsets[a]:].lstrip(" \t")))
    end = text.index(INDEX_END, offsets[b]) + len(INDEX_END)
    return start, end


def _legacy_section_is_generated(section: str, date: str, cards: list[DailyCard], daily_dir: str) -> bool:
    """True when every line between a hashless section's markers is one :func:`render_day_index` writes for a
    card of ``date`` now, or a bullet linking to a card of ``date`` that no longer exists (a deleted card)."""
    current = set(render_day_index(date, cards).splitlines())
    existing = {c.path[:-3] if c.path.lower().endswith(".md") else c.path for c in cards}
    prefix = f"{daily_dir}/{date}/"
    from reme_engine.markdown.links import parse_links

    for ln in section.replace("\r\n", "\n").split("\n")[1:-1]:
        if not ln.strip() or ln in current:
            continue
        links = parse_links(ln) if ln.startswith("- ") else []
        gone = (len(links) == 1 and links[0].start == 2 and links[0].target.startswith(prefix)
                and links[0].target not in existing)
        if not gone:
            return False
    return True


def _has_start_marker(text: str) -> bool:
    return _START_LINE_RE.search(text) is not None


def strip_day_index(text: str) -> str:
    """``text`` without its generated card index (it only repeats the cards' names, which are inputs themselves)."""
    span = day_index_span(text)
    return text if span is None else text[: span[0]] + text[span[1]:]


def _new_page(date: str, inner: str) -> str:
    return f'---\nname: "{date}"\ndate: {date}\n---\n\n# {date}\n\n{_section(inner, chr(10))}\n'


# --------------------------------------------------------------------------------------------------- writing


def daily_create(
    vault: Path, date: str, layers: LayerSettings | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> DailyCreateResult:
    """Idempotently create ``<daily_dir>/<date>/`` and the day page ``<daily_dir>/<date>.md``.

    A new page gets frontmatter (``name``, ``date``), a ``# <date>`` heading and the marker section listing the
    cards already in the folder. Existing folders/pages are never touched; the flags report what was created by
    this call. Raises ``ValueError`` (invalid date), ``VaultPathError``, ``OSError``.
    """
    date = valid_date(date)
    vault = Path(vault)
    d = _daily_dir(layers)
    folder = resolve(vault, f"{d}/{date}")
    page = resolve(vault, f"{d}/{date}.md")
    folder_created = False
    if not folder.abs.is_dir():
        folder.abs.mkdir(parents=True, exist_ok=True)
        folder_created = True
    page_created = False
    if not page.abs.exists():
        inner = render_day_index(date, daily_list(vault, date, layers, max_bytes=max_bytes))
        try:
            atomic_write(page.abs, _new_page(date, inner), expected_sha=None)
            page_created = True
        except WriteConflict:
            page_created = False  # someone else created it meanwhile: keep theirs
    return DailyCreateResult(
        date=date, page=page.rel, folder=folder.rel, page_created=page_created, folder_created=folder_created
    )


def _encode_like(text: str, encoding: str) -> bytes:
    data = text.encode("utf-8")
    return _BOM + data if encoding == "utf-8-sig" else data


def daily_reindex(
    vault: Path,
    date: str,
    layers: LayerSettings | None = None,
    *,
    create_if_missing: bool = True,
    insert_markers: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    on_write: Callable[[str, str | None, str | None, str, str], None] | None = None,
) -> DailyReindexResult:
    """Regenerate the card index between the markers of ``<daily_dir>/<date>.md``.

    ``on_write(rel, before_text, before_sha, after_text, after_sha)`` is called after the page is written, with
    exactly what the write replaced (``None, None`` when it created the page): a journal records it from there.

    - Page missing: created (as :func:`daily_create` would) when ``create_if_missing``, else
      ``skipped="day page does not exist"``; in an existing vault (app folder in use,
      :mod:`reme_engine.vault.app_folder`) only with ``insert_markers=True``, else ``skipped`` =
      :data:`SKIP_NOT_CREATED`.
    - Page with markers: only the text between ``INDEX_START`` and the first following ``INDEX_END`` is replaced;
      all bytes outside are kept (a UTF-8 BOM and CRLF line endings too — the generated lines use the page's
      newline style). Unchanged content is not rewritten (``changed=False``).
    - Page without markers: nothing is written, ``skipped`` = :data:`SKIP_NO_MARKERS`, unless
      ``insert_markers=True``, which appends the section at the end of the page.
    - A start marker without an end marker (or the reverse), an unreadable page (binary, oversized, UTF-16):
      nothing is written, ``skipped`` names the reason.

    The write is checked against the content hash that was read (``atomic_write(expected_sha=…)``); if the user
    edited the page in between, the page is re-read and the update retried once; a second conflict raises
    :class:`WriteConflict` and the user's version stays on disk. Raises ``ValueError`` (invalid date),
    ``VaultPathError``, ``OSError``.
    """
    date = valid_date(date)
    vault = Path(vault)
    d = _daily_dir(layers)
    page = resolve(vault, f"{d}/{date}.md")

    def result(**kw: Any) -> DailyReindexResult:
        base = dict(date=date, path=page.rel, changed=False, created=False, cards=len(cards))
        base.update(kw)
        return DailyReindexResult(**base)

    attempts = 2
    for attempt in range(attempts):
        last = attempt == attempts - 1
        cards = daily_list(vault, date, layers, max_bytes=max_bytes)
        inner = render_day_index(date, cards)
        if not page.abs.exists():
            if not create_if_missing:
                return result(skipped="day page does not exist")
            if not insert_markers and not writes_daily_notes(layers or LayerSettings()):
                # an existing vault's daily notes are the user's: the app creates none unless asked
                return result(skipped=SKIP_NOT_CREATED)
            try:
                new_page = _new_page(date, inner)
                sha = atomic_write(page.abs, new_page, expected_sha=None)
            except WriteConflict:
                if last:
                    raise
                continue
            if on_write is not None:
                on_write(page.rel, None, None, new_page, sha)
            return result(changed=True, created=True, sha=sha)
        try:
            tf = read_text(page.abs, max_bytes)
        except FileNotFoundError:
            if last:
                raise
            continue
        except SkipFile as exc:
            return result(skipped=f"day page not readable: {exc.reason}")
        if tf.encoding not in ("utf-8", "utf-8-sig"):
            return result(skipped=f"day page is {tf.encoding}; only UTF-8 pages are rewritten", sha=tf.sha)
        text = tf.text
        nl = "\r\n" if "\r\n" in text else "\n"
        # Markers count only on a line of their own: a quoted marker (inline code, prose) is user text.
        span = day_index_span(text)
        has_start = _has_start_marker(text)
        if span is None and not has_start and _marker_at_line(text, INDEX_END) < 0:
            if not insert_markers:
                return result(skipped=SKIP_NO_MARKERS, sha=tf.sha)
            sep = "" if text == "" else (nl if text.endswith("\n") else nl + nl)
            new = text + sep + _section(inner, nl) + nl
        elif span is None:
            return result(skipped="page has malformed reme index markers (start and end do not pair up)", sha=tf.sha)
        else:
            state = day_index_state(text)
            if state is not None and not state[2]:
                return result(skipped=SKIP_USER_EDITED, sha=tf.sha)
            marker_line = text[span[0]:text.find("\n", span[0])] if "\n" in text[span[0]:] else text[span[0]:]
            if not re.search(r"start [0-9a-f]{16} -->", marker_line):
                # a section from before the hash: the app's only if every line is what it generates for a card of
                # this day now, or a bullet for a card of this day that is gone
                if not _legacy_section_is_generated(text[span[0]:span[1]], date, cards, d):
                    return result(skipped=SKIP_USER_EDITED, sha=tf.sha)
            new = text[: span[0]] + _section(inner, nl) + text[span[1]:]
        if new == text:
            return result(sha=tf.sha)
        try:
            sha = atomic_write(page.abs, _encode_like(new, tf.encoding), expected_sha=tf.sha)
        except WriteConflict:
            if last:
                raise
            continue
        if on_write is not None:
            on_write(page.rel, text.lstrip("\ufeff"), tf.sha, new.lstrip("\ufeff"), sha)
        return result(changed=True, sha=sha)
    raise AssertionError("unreachable")  # pragma: no cover


_DAY_NOTE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}\.md$")


def detect_daily_dir(vault: Path, *, max_depth: int = 3, min_notes: int = 3) -> str | None:
    """Where an existing Obsidian vault keeps its daily notes, for vaults without a ``daily/`` folder.

    In order: the core Daily notes plugin's ``.obsidian/daily-notes.json`` (``folder``), the Periodic Notes
    plugin's ``.obsidian/plugins/periodic-notes/data.json`` (``daily.folder``) — a folder inside the vault, whether
    or not it exists yet; an absolute, ``..`` or hidden one is ignored — then the folder (at most
    ``max_depth`` deep, hidden ones skipped) holding the most ``YYYY-MM-DD.md`` notes, at least ``min_notes``.
    Returns a vault-relative POSIX folder or None. Never raises for unreadable files.
    """
    import json as _json

    vault = Path(vault)
    for cfg, keys in ((".obsidian/daily-notes.json", ("folder",)),
                      (".obsidian/plugins/periodic-notes/data.json", ("daily", "folder"))):
        try:
            data = _json.loads((vault / cfg).read_text(encoding="utf-8"))
            for k in keys:
                data = data[k]
            raw = str(data).strip().replace("\\", "/")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        folder = raw.strip("/")
        parts = folder.split("/")
        if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":") or any(p in ("", ".", "..") or p.startswith(".")
                                                                         for p in parts):
            continue  # not a folder inside the vault (absolute, "..", hidden): the plugin's setting is ignored
        # the plugin's folder wins even before it exists: Obsidian creates it with the first daily note
        return folder
    direct: dict[str, int] = {}  # folder -> day notes directly in it
    root_depth = len(vault.parts)
    for dirpath, dirnames, filenames in os.walk(vault):
        depth = len(Path(dirpath).parts) - root_depth
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")) if depth < max_depth else []
        n = sum(1 for f in filenames if _DAY_NOTE_RE.match(f))
        if n and depth > 0:
            direct[Path(dirpath).relative_to(vault).as_posix()] = n
    # A candidate holds min_notes day notes itself; the one whose subtree holds the most wins (an archive
    # subfolder such as "Daily notes/2022" never beats the folder Obsidian writes new days to), shallowest on ties.
    def subtree(folder: str) -> int:
        return sum(n for f, n in direct.items() if f == folder or f.startswith(folder + "/"))

    cands = [f for f, n in direct.items() if n >= min_notes]
    if not cands:
        return None
    return max(cands, key=lambda f: (subtree(f), -f.count("/"), f))

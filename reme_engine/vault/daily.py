"""Daily-layer helpers: day folders, day index pages and their generated card index (ARCHITECTURE §2).

A day is ``<daily_dir>/<date>/`` (its cards: ``*.md`` files, ``interests.yaml`` …) plus the day page
``<daily_dir>/<date>.md`` — or, in an Obsidian vault whose Daily notes plugin names notes otherwise, the path that
plugin creates (``layers.daily_format``, moment.js tokens, nested folders included: :func:`day_page_rel`). The
app owns only the section between :data:`INDEX_START` and :data:`INDEX_END` in a day page; everything outside the
markers is the user's and is kept byte-for-byte (BOM and CRLF included).

The app never inserts the index section into a day page that has no markers (for example an existing Obsidian daily
note) unless the caller passes ``insert_markers=True``.

All paths in results are vault-relative POSIX strings; all result types are dataclasses that
``dataclasses.asdict`` turns into JSON-serialisable dicts.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from reme_engine.config import LayerSettings
from reme_engine.markdown.frontmatter import parse_frontmatter
from reme_engine.markdown.links import format_link
from reme_engine.text import yaml_text
from reme_engine.vault.app_folder import card_dirs, cards_dir, writes_daily_notes
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


# ------------------------------------------------------------------------------------- day note names (moment.js)

#: The day page name reme writes, and Obsidian's Daily notes default format (moment.js tokens).
DEFAULT_DAY_FORMAT = "YYYY-MM-DD"
#: ``layers.daily_format`` value that takes the format from Obsidian's Daily notes (or Periodic Notes) settings.
AUTO_DAY_FORMAT = "auto"

# moment.js's own formatting-token pattern (moment 2.29, `formattingTokens`): a [bracketed] literal, or a token
# (an optional backslash escapes it), or any other single character, which is written as it is.
_MOMENT_TOKEN_RE = re.compile(
    r"(\[[^\[]*\])|(\\)?([Hh]mm(ss)?|Mo|MM?M?M?|Do|DDDo|DD?D?D?|ddd?d?|do?|w[o|w]?|W[o|W]?|Qo?|N{1,5}|YYYYYY|"
    r"YYYYY|YYYY|YY|y{2,4}|yo?|gg(ggg?)?|GG(GGG?)?|e|E|a|A|hh?|HH?|kk?|mm?|ss?|S{1,9}|x|X|zz?|ZZ?|.)", re.S)
# moment's long date formats of the English locale (expanded before formatting, as moment does); LT, LTS, LLL and
# LLLL carry a time of day and are not day names.
_LONG_FORMATS = {"L": "MM/DD/YYYY", "LL": "MMMM D, YYYY", "l": "M/D/YYYY", "ll": "MMM D, YYYY"}
_LONG_RE = re.compile(r"(\[[^\]]*\])|(\\)?(LTS|LT|LL?L?L?|l{1,4})")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")  # moment: 0 = Sunday
#: Tokens of a time of day, an era or a timezone: Obsidian fills them from the clock when it creates the note, so
#: the name of a day's note cannot be known from its date.
_CLOCK_TOKENS = ("H", "h", "k", "m", "s", "S", "a", "A", "x", "X", "Z", "z", "N", "y")


class DayFormatError(ValueError):
    """A daily-note format reme cannot turn into a path (a token of a time of day, a path leaving the daily folder
    or into a hidden folder); ``str(exc)`` is one line naming the format, the token and what to do."""


def _ordinal(n: int) -> str:
    """moment's English ordinal (1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st)."""
    suffix = "th" if (n % 100) // 10 == 1 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _first_week_offset(year: int, dow: int, doy: int) -> int:
    fwd = 7 + dow - doy  # the January day always in the first week
    fwdlw = (7 + (_dt.date(year, 1, fwd).isoweekday() % 7) - dow) % 7
    return -fwdlw + fwd - 1


def _weeks_in_year(year: int, dow: int, doy: int) -> int:
    days = 366 if _dt.date(year, 12, 31).timetuple().tm_yday == 366 else 365
    return (days - _first_week_offset(year, dow, doy) + _first_week_offset(year + 1, dow, doy)) // 7


def _week_of_year(day: _dt.date, dow: int, doy: int) -> tuple[int, int]:
    """``(week, week-year)`` as moment's ``weekOfYear`` (dow: first day of the week, 0 = Sunday; doy: the
    January day that fixes week 1, as ``7 + dow - janX``). English locale: dow 0, doy 6; ISO: dow 1, doy 4."""
    week = (day.timetuple().tm_yday - _first_week_offset(day.year, dow, doy) - 1) // 7 + 1
    if week < 1:
        return week + _weeks_in_year(day.year - 1, dow, doy), day.year - 1
    if week > _weeks_in_year(day.year, dow, doy):
        return week - _weeks_in_year(day.year, dow, doy), day.year + 1
    return week, day.year


def _yday(d: _dt.date) -> int:
    return d.toordinal() - _dt.date(d.year, 1, 1).toordinal() + 1


def _wd(d: _dt.date) -> int:
    return d.isoweekday() % 7  # 0 = Sunday, as moment's d


def _quarter(d: _dt.date) -> int:
    return (d.month - 1) // 3 + 1


#: moment's date tokens (English locale): token -> its text for a date.
_DATE_TOKENS: dict[str, Callable[[_dt.date], str]] = {
    "YYYY": lambda d: f"{d.year:04d}" if d.year <= 9999 else f"+{d.year}",
    "YY": lambda d: f"{d.year % 100:02d}", "YYYYY": lambda d: f"{d.year:05d}",
    "YYYYYY": lambda d: f"+{d.year:06d}",
    "Q": lambda d: str(_quarter(d)), "Qo": lambda d: _ordinal(_quarter(d)),
    "M": lambda d: str(d.month), "MM": lambda d: f"{d.month:02d}", "Mo": lambda d: _ordinal(d.month),
    "MMM": lambda d: _MONTHS[d.month - 1][:3], "MMMM": lambda d: _MONTHS[d.month - 1],
    "D": lambda d: str(d.day), "DD": lambda d: f"{d.day:02d}", "Do": lambda d: _ordinal(d.day),
    "DDD": lambda d: str(_yday(d)), "DDDD": lambda d: f"{_yday(d):03d}", "DDDo": lambda d: _ordinal(_yday(d)),
    "d": lambda d: str(_wd(d)), "do": lambda d: _ordinal(_wd(d)), "dd": lambda d: _WEEKDAYS[_wd(d)][:2],
    "ddd": lambda d: _WEEKDAYS[_wd(d)][:3], "dddd": lambda d: _WEEKDAYS[_wd(d)],
    "e": lambda d: str(_wd(d)), "E": lambda d: str(d.isoweekday()),
    # weeks: w/g the English locale's (weeks from Sunday, week 1 holds 1 January), W/G ISO 8601's
    "w": lambda d: str(_week_of_year(d, 0, 6)[0]), "ww": lambda d: f"{_week_of_year(d, 0, 6)[0]:02d}",
    "wo": lambda d: _ordinal(_week_of_year(d, 0, 6)[0]), "gg": lambda d: f"{_week_of_year(d, 0, 6)[1] % 100:02d}",
    "gggg": lambda d: f"{_week_of_year(d, 0, 6)[1]:04d}", "ggggg": lambda d: f"{_week_of_year(d, 0, 6)[1]:05d}",
    "W": lambda d: str(d.isocalendar()[1]), "WW": lambda d: f"{d.isocalendar()[1]:02d}",
    "Wo": lambda d: _ordinal(d.isocalendar()[1]), "GG": lambda d: f"{d.isocalendar()[0] % 100:02d}",
    "GGGG": lambda d: f"{d.isocalendar()[0]:04d}", "GGGGG": lambda d: f"{d.isocalendar()[0]:05d}",
}
_DATE_TOKENS["Y"] = _DATE_TOKENS["YYYY"]


def _token_text(tok: str, day: _dt.date) -> str | None:
    """The text of one moment token for ``day`` (English locale), or None when it is not a date token."""
    fn = _DATE_TOKENS.get(tok)
    return fn(day) if fn is not None else None


def _expand_long(fmt: str) -> str:
    def sub(m: re.Match) -> str:
        if m.group(1) or m.group(2):
            return m.group(0)
        tok = m.group(3)
        if tok not in _LONG_FORMATS:
            raise DayFormatError(f"daily note format {fmt!r}: {tok!r} includes a time of day, so the name of a "
                                 "day's note cannot be known from its date")
        return _LONG_FORMATS[tok]

    return _LONG_RE.sub(sub, fmt)


@functools.lru_cache(maxsize=32)
def _tokens(fmt: str) -> tuple[tuple[str, str | None], ...]:
    """``fmt`` split as moment splits it: ``(token, None)`` for a token, ``("", text)`` for literal text
    (``[bracketed]`` or backslash-escaped). Cached: listing a daily folder formats each of its notes."""
    out = []
    for m in _MOMENT_TOKEN_RE.finditer(_expand_long(fmt)):
        whole, literal, escaped, tok = m.group(0), m.group(1), m.group(2), m.group(3)
        if literal:
            out.append(("", literal[1:-1]))
        elif escaped:
            out.append(("", whole.replace("\\", "")))
        else:
            out.append((tok, None))
    return tuple(out)


def format_day(fmt: str, date: str | _dt.date) -> str:
    """``date`` written in the moment.js format ``fmt``, exactly as Obsidian's Daily notes names the note (its
    file path inside the daily folder, without ``.md``; a ``/`` in the format makes folders: ``YYYY/MM/DD`` →
    ``2026/12/02``). English month and weekday names (moment's default locale). ``[text]`` is literal, a
    backslash escapes one token, other characters are kept. Raises :class:`DayFormatError` for a token of a
    time of day, an era or a timezone, and ValueError for an invalid date."""
    day = date if isinstance(date, _dt.date) else _dt.date.fromisoformat(valid_date(date))
    out = []
    for tok, fixed in _tokens(fmt):
        if fixed is not None:
            out.append(fixed)
            continue
        text = _token_text(tok, day)
        if text is None and len(tok) == 1 and tok not in _CLOCK_TOKENS:
            text = tok  # any other single character is written as it is
        if text is None:
            raise DayFormatError(f"daily note format {fmt!r}: {tok!r} is a time-of-day, era or timezone token, so "
                                 "the name of a day's note cannot be known from its date (set layers.daily_format "
                                 "to a date-only moment.js format such as YYYY-MM-DD or YYYY/MM/YYYY-MM-DD)")
        out.append(text)
    return "".join(out)


def check_day_format(fmt: str) -> str:
    """``fmt`` (a moment.js format) checked as a daily-note name: it formats, names a file inside the daily
    folder (no empty, ``.``/``..`` or hidden part, no absolute path) and tells days apart (two dates a day apart,
    and a year apart, give two names). Returns ``fmt``; raises :class:`DayFormatError` saying why."""
    if not isinstance(fmt, str) or not fmt.strip():
        raise DayFormatError("daily note format is empty (Obsidian's default is YYYY-MM-DD)")
    samples = [_dt.date(2026, 12, 2), _dt.date(2026, 12, 3), _dt.date(2027, 12, 2), _dt.date(2026, 11, 2)]
    names = [format_day(fmt, d) for d in samples]
    for name in names:
        parts = name.replace("\\", "/").split("/")
        if name.startswith("/") or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
            raise DayFormatError(f"daily note format {fmt!r} gives {name!r}, which is not a note inside the daily "
                                 "folder (no empty, '.', '..' or hidden part)")
    if len(set(names)) != len(names):
        raise DayFormatError(f"daily note format {fmt!r} gives the same name to different days ({names[0]!r})")
    return fmt


def day_format(layers: LayerSettings | None) -> str:
    """The moment.js format of the day pages' names (``layers.daily_format``; ``auto`` or unset: YYYY-MM-DD)."""
    fmt = str(getattr(_layers(layers), "daily_format", "") or "").strip()
    return DEFAULT_DAY_FORMAT if fmt in ("", AUTO_DAY_FORMAT) else fmt


def day_page_rel(layers: LayerSettings | None, date: str) -> str:
    """Vault-relative path of the day page of ``date``: ``<daily_dir>/<date in the daily format>.md`` — the path
    Obsidian's Daily notes creates (``daily/2026-12-02.md``; ``Journal/2026/12/2026-12-02-Wed.md`` with
    ``YYYY/MM/YYYY-MM-DD-ddd``). Raises DayFormatError for a format reme cannot follow, ValueError for a bad date."""
    return f"{_daily_dir(layers)}/{format_day(check_day_format(day_format(layers)), date)}.md"



def day_page_path(layers: LayerSettings | None, daily_dir: str, date: str) -> str | None:
    """:func:`day_page_rel` for the pipelines that read a window of days: ``<daily_dir>/<date>.md`` when no
    ``layers`` are given; None when the format cannot name a page (:class:`DayFormatError`, already reported as
    ``Engine.daily_format_warning``) or ``date`` is not a date — the day then has cards only, never a wrong page."""
    if layers is None:
        return f"{daily_dir.strip('/') or 'daily'}/{date}.md"
    try:
        return day_page_rel(layers, date)
    except ValueError:  # DayFormatError is a ValueError
        return None

#: Where Obsidian keeps its daily-note settings: the core Daily notes plugin, then the Periodic Notes plugin (the
#: keys leading to its ``folder`` and ``format``).
_OBSIDIAN_DAILY_SETTINGS = ((".obsidian/daily-notes.json", ()), (".obsidian/plugins/periodic-notes/data.json",
                                                                 ("daily",)))


def obsidian_daily_settings(vault: Path) -> list[tuple[str, str, str]]:
    """``[(settings file, folder, format)]`` of Obsidian's daily-note plugins found in ``vault`` (core Daily notes
    first, then Periodic Notes), folder stripped of slashes ("" = the vault root), format as saved ("" = the
    plugin's default, YYYY-MM-DD). Unreadable or malformed files are left out; never raises."""
    import json as _json

    out = []
    for cfg, keys in _OBSIDIAN_DAILY_SETTINGS:
        try:
            data = _json.loads((Path(vault) / cfg).read_text(encoding="utf-8"))
            for k in keys:
                data = data[k]
            if not isinstance(data, dict):
                continue
            folder = str(data.get("folder") or "").strip().replace("\\", "/").strip("/")
            fmt = str(data.get("format") or "").strip()
        except (OSError, ValueError, KeyError, TypeError):
            continue
        out.append((cfg, folder, fmt))
    return out


def resolve_day_format(vault: Path, layers: LayerSettings) -> str | None:
    """Settle ``layers.daily_format`` for ``vault`` in place (call once, when the engine opens, after the daily
    folder is known) and return a warning line, or None.

    ``auto`` (the default) takes the ``format`` of the Obsidian plugin whose ``folder`` is the daily folder in use
    (Daily notes first, then Periodic Notes; no format saved: YYYY-MM-DD), else YYYY-MM-DD. A format from Obsidian
    that reme cannot follow (a time-of-day token…) is kept, so that every day-page path raises DayFormatError
    instead of naming a wrong file, and the warning says why. An explicit ``layers.daily_format`` that cannot be
    followed raises DayFormatError (the caller makes it a ConfigError naming the setting)."""
    value = str(getattr(layers, "daily_format", "") or "").strip()
    if value and value != AUTO_DAY_FORMAT:
        check_day_format(value)
        layers.daily_format = value
        return None
    daily = _daily_dir(layers)
    fmt, source = DEFAULT_DAY_FORMAT, ""
    for cfg, folder, saved in obsidian_daily_settings(vault):
        if folder == daily:
            fmt, source = saved or DEFAULT_DAY_FORMAT, cfg
            break
    layers.daily_format = fmt
    try:
        check_day_format(fmt)
    except DayFormatError as exc:
        return (f"{exc} — from {source}; reme finds no day page of this vault until layers.daily_format is set "
                "(cards and search still work)")
    return None


@functools.lru_cache(maxsize=32)
def _format_regex(fmt: str) -> re.Pattern:
    """A regex matching what :func:`format_day` writes for some date, capturing year (``Y``), month (``M``), day
    (``D``), day of year (``J``) where the format has them."""
    num = {"YYYY": r"\d{4}", "Y": r"\d{4}", "YY": r"\d{2}", "YYYYY": r"\d{5}", "YYYYYY": r"\+\d{6}",
           "M": r"\d{1,2}", "MM": r"\d{2}", "D": r"\d{1,2}", "DD": r"\d{2}", "DDD": r"\d{1,3}", "DDDD": r"\d{3}"}
    groups = {"YYYY": "Y", "Y": "Y", "YYYYY": "Y", "YYYYYY": "Y", "YY": "y", "GGGG": "G", "W": "W", "WW": "W",
              "Wo": "W", "E": "E", "M": "M", "MM": "M", "Mo": "M", "MMM": "M",
              "MMMM": "M", "D": "D", "DD": "D", "Do": "D", "DDD": "J", "DDDD": "J", "DDDo": "J"}
    out, used = [], set()
    for tok, fixed in _tokens(fmt):
        if fixed is not None:
            out.append(re.escape(fixed))
            continue
        if tok in num:
            pat = num[tok]
        elif tok in ("Mo", "Do", "DDDo", "Qo", "wo", "Wo", "do"):
            pat = r"\d{1,3}(?:st|nd|rd|th)"
        elif tok in ("MMM", "MMMM"):
            pat = "|".join(n[:3] if tok == "MMM" else n for n in _MONTHS)
        elif tok in ("dd", "ddd", "dddd"):
            pat = "|".join(n[: {"dd": 2, "ddd": 3}.get(tok, 9)] for n in _WEEKDAYS)
        elif _token_text(tok, _dt.date(2026, 1, 1)) is not None:
            pat = r"\d{1,5}"  # a week, quarter, weekday number or week-year: checked by the round trip
        else:
            out.append(re.escape(tok))
            continue
        key = groups.get(tok)
        if key and key not in used:
            used.add(key)
            out.append(f"(?P<{key}>{pat})")
        else:
            out.append(f"(?:{pat})")
    return re.compile("".join(out))


def parse_day(fmt: str, name: str) -> str | None:
    """The date (YYYY-MM-DD) whose day note :func:`format_day` names ``name`` (a path inside the daily folder,
    without ``.md``), or None: the reverse of the format, checked by formatting the date again. A format without
    year and month and day (nor year and day of year) reads no date."""
    m = _format_regex(fmt).fullmatch(name)
    if not m:
        return None
    g = m.groupdict()
    try:
        if g.get("G") and g.get("W") and g.get("E") and not g.get("Y"):  # an ISO week date: 2026-W49-3
            day = _dt.date.fromisocalendar(int(g["G"]), int(re.match(r"\d+", g["W"]).group()), int(g["E"]))
            return day.isoformat() if format_day(fmt, day) == name else None
        year = int(g["Y"].lstrip("+")) if g.get("Y") else None
        if year is None and g.get("y"):
            year = int(g["y"]) + (2000 if int(g["y"]) < 69 else 1900)  # moment's two-digit year rule
        if year is None:
            return None
        if g.get("J") and not (g.get("M") and g.get("D")):
            day = _dt.date(year, 1, 1) + _dt.timedelta(days=int(re.match(r"\d+", g["J"]).group()) - 1)
        elif g.get("M") and g.get("D"):
            mon = g["M"]
            month = int(re.match(r"\d+", mon).group()) if mon[0].isdigit() else \
                [n[: len(mon)] for n in _MONTHS].index(mon) + 1
            day = _dt.date(year, month, int(re.match(r"\d+", g["D"]).group()))
        else:
            return None
        if day.year != year:
            return None
        return day.isoformat() if format_day(fmt, day) == name else None
    except (ValueError, DayFormatError):
        return None


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

    Day pages are found by the daily format (:func:`day_page_rel`): with a nested one (``YYYY/MM/DD``) in the
    folders it makes, at most as deep as it goes (hidden folders skipped); a format reme cannot follow finds only
    day folders. Other entries of the daily folder are ignored; a missing daily folder gives ``[]``.
    """
    days: set[str] = set()
    fmt = day_format(layers)
    if fmt != DEFAULT_DAY_FORMAT:
        days |= _formatted_days(Path(vault), _daily_dir(layers), fmt)
    for d in reversed(card_dirs(_layers(layers))):  # the daily folder, then the app's card folder
        folder = resolve(Path(vault), d)
        if not folder.abs.is_dir():
            continue
        for entry in os.scandir(folder.abs):
            name = entry.name
            if entry.is_dir():
                cand = name
            elif entry.is_file() and name.lower().endswith(".md") and (fmt == DEFAULT_DAY_FORMAT
                                                                        or d != _daily_dir(layers)):
                cand = name[:-3]
            else:
                continue
            try:
                days.add(valid_date(cand))
            except ValueError:
                continue
    return sorted(days, reverse=True)


def _formatted_days(vault: Path, daily: str, fmt: str) -> set[str]:
    """Dates of the day pages named by ``fmt`` under ``vault/daily`` ({} for a format reme cannot follow)."""
    try:
        depth = format_day(check_day_format(fmt), "2026-12-02").count("/")
    except DayFormatError:
        return set()
    folder = resolve(vault, daily)
    if not folder.abs.is_dir():
        return set()
    days: set[str] = set()
    base = len(folder.abs.parts)
    for root, dirs, files in os.walk(folder.abs):
        level = len(Path(root).parts) - base
        dirs[:] = [x for x in dirs if not x.startswith(".")] if level < depth else []
        if level != depth:
            continue
        prefix = Path(root).relative_to(folder.abs).as_posix()
        for f in files:
            if f.lower().endswith(".md") and not f.startswith("."):
                got = parse_day(fmt, f"{prefix}/{f[:-3]}" if level else f[:-3])
                if got:
                    days.add(got)
    return days


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
    """Idempotently create the day's card folder ``<cards dir>/<date>/`` (the app folder's ``daily/`` in an
    existing vault, so nothing empty appears among the person's own daily notes; else ``<daily_dir>/<date>/``) and
    the day page (:func:`day_page_rel`).

    A new page gets frontmatter (``name``, ``date``), a ``# <date>`` heading and the marker section listing the
    cards already in the folder. Existing folders/pages are never touched; the flags report what was created by
    this call. Raises ``ValueError`` (invalid date), ``VaultPathError``, ``OSError``.
    """
    date = valid_date(date)
    vault = Path(vault)
    folder = resolve(vault, f"{cards_dir(_layers(layers))}/{date}")
    page = resolve(vault, day_page_rel(layers, date))
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
    page = resolve(vault, day_page_rel(layers, date))

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

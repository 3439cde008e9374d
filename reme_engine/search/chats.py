"""Chat records (``<session_dir>/dialog/<id>.jsonl``) as searchable text.

A record holds one JSON message per line (``{"id", "role", "content", "created_at"}``, ARCHITECTURE §6). For search
each line becomes one readable line — ``user · 2026-11-25 21:12: <content on one line>`` — so the keyword and
vector legs see the words, not JSON escapes, and every chunk line still maps 1:1 to the file line it came from
(hit line numbers stay right). Assistant turns keep their ``assistant`` prefix: search shows them as such, and
the memory pipelines never take them as evidence (they read the records themselves, not search results).
The file itself carries no date (a record can span days); each chunk does: :func:`chunk_dialog` cuts a record
into small windows of whole turns that never cross a day, so a chunk's first line names its date, which the date
filters read (:meth:`reme_engine.search.results.SearchFilters.sql` through :func:`chunk_date_sql`).
"""

from __future__ import annotations

import json
import re

#: Roles written as they are; anything else is shown as ``other``.
ROLES = ("user", "assistant", "system")


def dialog_line(raw: str) -> tuple[str, str | None, str | None]:
    """``(search line, role or None, created_at or None)`` of one JSONL line. A line that is not a message
    object is kept as it is (blank stays blank). Pure."""
    s = raw.strip()
    if not s:
        return "", None, None
    try:
        msg = json.loads(s)
    except ValueError:
        return raw, None, None
    if not isinstance(msg, dict) or "content" not in msg:
        return raw, None, None
    role = str(msg.get("role") or "")
    role = role if role in ROLES else "other"
    content = msg.get("content")
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False)
    at = msg.get("created_at")
    at = str(at) if at else None
    when = f" · {at[:16].replace('T', ' ')}" if at else ""
    return f"{role}{when}: {' '.join(content.split())}", role, at


def dialog_text(text: str) -> tuple[str, str | None, str]:
    """``(search text, date of the first dated message as YYYY-MM-DD or None, first user message)`` of a
    whole record. The search text has exactly as many lines as ``text`` (line *i* ↔ line *i*). Pure."""
    out, first_date, first_user = [], None, ""
    for raw in text.split("\n"):
        line, role, at = dialog_line(raw.rstrip("\r"))
        out.append(line)
        if at and first_date is None and len(at) >= 10 and at[4] == "-" and at[7] == "-":
            first_date = at[:10]
        if role == "user" and not first_user:
            first_user = line.split(": ", 1)[-1][:300]
    return "\n".join(out), first_date, first_user


#: Version of :func:`chunk_dialog`'s rules: the indexer re-chunks chat records when it changes.
CHUNKING = "turns-v1"
#: Target UTF-8 size of one window of turns. Measured on LoCoMo stored as chat records (bench/bench_quality.py,
#: set ``locomo-chat``): see bench/RESULTS.md. A turn is never cut unless it alone exceeds the index's
#: ``chunk_bytes``.
WINDOW_BYTES = 500
#: Most turns in one window (a run of one-word turns must not become one 40-turn chunk).
WINDOW_TURNS = 4
_LINE_DATE_RE = re.compile(r"^[a-z]+ · (\d{4}-\d{2}-\d{2})[ T]")


def line_date(line: str) -> str | None:
    """``YYYY-MM-DD`` of a search line made by :func:`dialog_line` (``role · 2026-11-25 21:12: …``), else None."""
    m = _LINE_DATE_RE.match(line)
    return m.group(1) if m else None


def chunk_dialog(text: str, *, max_bytes: int = 2000, window_bytes: int = WINDOW_BYTES,
                 window_turns: int = WINDOW_TURNS) -> list:
    """Chunks (:class:`reme_engine.markdown.chunker.Chunk`, 1-based file lines) of a record's *search text*
    (:func:`dialog_text`, one line per message): consecutive whole turns packed while the window stays within
    ``window_bytes`` UTF-8 bytes and ``window_turns`` turns, never across a change of day (so the first line of a
    chunk dates it), never across a blank line's neighbours in a way that starts or ends on one. A turn larger
    than ``max_bytes`` is sliced as :func:`~reme_engine.markdown.chunker.chunk_plain` slices a line. Pure."""
    from ..markdown.chunker import Chunk, chunk_plain

    lines = text.split("\n")
    out: list = []
    cur: list[int] = []  # 0-based line numbers of the window's turns
    size = 0
    day = None

    def flush() -> None:
        nonlocal cur, size
        if cur:
            a, b = cur[0], cur[-1]
            out.append(Chunk(a + 1, b + 1, "\n".join(lines[a:b + 1])))
        cur, size = [], 0

    for i, line in enumerate(lines):
        if not line.strip():
            continue
        n = len(line.encode("utf-8"))
        d = line_date(line)
        if n > max_bytes:
            flush()
            out.extend(chunk_plain(line, line_offset=i, max_bytes=max_bytes))
            day = d or day
            continue
        gap = sum(len(lines[j].encode("utf-8")) + 1 for j in range(cur[-1] + 1, i)) if cur else 0
        if cur and (size + gap + 1 + n > window_bytes or len(cur) >= window_turns
                    or (d is not None and day is not None and d != day)):
            flush()
            gap = 0
        size += (gap + 1 if cur else 0) + n
        cur.append(i)
        day = d or day
    flush()
    return out


def chunk_date_sql() -> str:
    """SQL expression (over ``files f`` and ``chunks c``) of a chat chunk's date — the ``YYYY-MM-DD`` after the
    role on its first line (:func:`chunk_dialog` never lets a chunk cross a day) — or NULL for any other chunk.
    Chat records are the only ``.jsonl`` files the indexer takes (``<session_dir>/dialog/``), so no settings are
    needed here."""
    d = "substr(c.text, instr(c.text, ' · ') + 3, 10)"
    return (f"(CASE WHEN f.date IS NULL AND substr(f.path, -6) = '.jsonl' AND instr(c.text, ' · ') BETWEEN 2 AND 12"
            f" AND {d} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]' THEN {d} END)")

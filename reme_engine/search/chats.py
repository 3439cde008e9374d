"""Chat records (``<session_dir>/dialog/<id>.jsonl``) as searchable text.

A record holds one JSON message per line (``{"id", "role", "content", "created_at"}``, ARCHITECTURE §6). For search
each line becomes one readable line — ``user · 2026-11-25 21:12: <content on one line>`` — so the keyword and
vector legs see the words, not JSON escapes, and every chunk line still maps 1:1 to the file line it came from
(hit line numbers stay right). Assistant turns keep their ``assistant`` prefix: search shows them as such, and
the memory pipelines never take them as evidence (they read the records themselves, not search results).
Records carry no date for the date filters (those match ``daily/<date>``/``resource/<date>`` path segments,
ARCHITECTURE §5); :func:`dialog_text` returns the first message's date for a caller that wants one.
"""

from __future__ import annotations

import json

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

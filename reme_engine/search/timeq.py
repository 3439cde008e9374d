"""Time words in a query → a date range: "what did I talk about last week", "yesterday", "上周聊了什么".

:func:`parse_time_query` finds one relative time expression (English or Chinese), returns the query without it and
the inclusive ``YYYY-MM-DD`` range it names, relative to a given ``today``. The searcher turns the range into
``SearchFilters(date_from, date_to)``, which match a note's date path segment (``daily/<date>/…``) or, for a chat
record, the day of each window of turns (:mod:`.chats`). When nothing but the time and a "what did I talk about"
phrase is left, there is nothing to rank by: the searcher lists what is dated in the range, newest first.

Weeks run Monday–Sunday (ISO 8601, and the Chinese 周一…周日): "last week" on a Wednesday is the Monday nine days
before to the Sunday three days before; "this week" is Monday to today. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

_CN_NUM = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
_EN_NUM = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
           "ten": 10, "a": 1, "an": 1}
_WEEKDAYS_CN = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_WEEKDAYS_EN = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6}
_NUM = r"(\d{1,3}|[一两二三四五六七八九十]|one|two|three|four|five|six|seven|eight|nine|ten|a|an)"

#: "what did I talk about" phrases: once the time is taken out, a query of only these has no words to rank by.
_TALK_RE = re.compile(
    r"\b(?:what|which|anything)\s+(?:did|have|had|was|were)\s+(?:i|we|you)\s+(?:been\s+)?"
    r"(?:talk(?:ed|ing)?|chat(?:ted|ting)?|discuss(?:ed|ing)?|say|said|saying|ask(?:ed)?|write|wrote|writ(?:ten|ing)"
    r"|do|did|doing|note|noted)(?:\s+(?:about|of|on|to you|with you))?\b"
    r"|\b(?:my|our)\s+(?:chats?|conversations?|notes?)\b|\b(?:chats?|conversations?|talks?)\b"
    r"|(?:我们|我|咱们)?(?:都|还)?(?:聊|说|谈|讨论|问|写|记)(?:了|过)(?:些)?(?:什么|啥|哪些)(?:东西|内容|话题)?"
    r"|(?:聊天|对话|会话)(?:记录|内容)?",
    re.IGNORECASE,
)
_FILLER_RE = re.compile(r"\b(?:in|on|during|from|the|of|over|for|me|show|list|tell)\b|[\s\W_]+",
                        re.IGNORECASE | re.UNICODE)


@dataclass(frozen=True)
class TimeRange:
    """An inclusive day range named by words of a query. ``date_from``/``date_to``: ``YYYY-MM-DD``; ``phrase``:
    the words as the user wrote them (e.g. ``"last week"``, ``"上周"``)."""

    date_from: str
    date_to: str
    phrase: str

    def to_dict(self) -> dict:
        return {"date_from": self.date_from, "date_to": self.date_to, "phrase": self.phrase}


def _n(s: str) -> int:
    s = s.lower()
    if s.isdigit():
        return int(s)
    return _CN_NUM.get(s) or _EN_NUM.get(s, 1)


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _month(d: date, back: int) -> tuple[date, date]:
    y, m = d.year, d.month - back
    while m < 1:
        y, m = y - 1, m + 12
    first = date(y, m, 1)
    nxt = date(y + (m == 12), m % 12 + 1, 1)
    return first, nxt - timedelta(days=1)


def _rule_table():
    """(compiled pattern, (match, today, Monday of today's week, one day) → (from, to)) in priority order (longer
    phrases first). Compiled once, at import: a search asks every rule, and compiling them per query (through
    ``re``'s cache) and building their closures was most of this module's ~30 µs per search."""
    rules = [
        (r"\bthe\s+day\s+before\s+yesterday\b|前天", lambda m, t, mon, day: (t - 2 * day, t - 2 * day)),
        (r"\byesterday\b|昨天|昨日|昨晚", lambda m, t, mon, day: (t - day, t - day)),
        (r"\btoday\b|\btonight\b|\bthis\s+morning\b|今天|今日|今早|今晚", lambda m, t, mon, day: (t, t)),
        (r"上(?:个)?(?:周|星期|礼拜)([一二三四五六日天])",
         lambda m, t, mon, day: (mon - 7 * day + _WEEKDAYS_CN[m.group(1)] * day,) * 2),
        (r"\blast\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
         lambda m, t, mon, day: ((t - ((t.weekday() - _WEEKDAYS_EN[m.group(1).lower()] - 1) % 7 + 1) * day),) * 2),
        (rf"\b(?:in\s+the\s+)?(?:last|past)\s+{_NUM}\s+days?\b|(?:最近|过去|近)\s*{_NUM}\s*天",
         lambda m, t, mon, day: (t - (_n(m.group(1) or m.group(2)) - 1) * day, t)),
        (rf"\b{_NUM}\s+days?\s+ago\b|{_NUM}\s*天前",
         lambda m, t, mon, day: ((t - _n(m.group(1) or m.group(2)) * day),) * 2),
        (rf"\b{_NUM}\s+weeks?\s+ago\b|{_NUM}\s*(?:周|个星期|星期)前",
         lambda m, t, mon, day: (mon - 7 * _n(m.group(1) or m.group(2)) * day,
                                 mon - 7 * _n(m.group(1) or m.group(2)) * day + 6 * day)),
        ((r"\b(?:in\s+the\s+)?(?:past|last)\s+(?:7\s+days|seven\s+days)\b|\b(?:in\s+the\s+)?past\s+week\b"
          r"|最近一周|过去一周|近一周"),
         lambda m, t, mon, day: (t - 6 * day, t)),
        (r"\blast\s+week(?:end)?\b|\bprevious\s+week\b|上(?:个|一)?(?:周|星期|礼拜)(?:末)?",
         lambda m, t, mon, day: ((mon - 2 * day, mon - day) if m.group(0).lower().endswith(("weekend", "末"))
                                 else (mon - 7 * day, mon - day))),
        (r"\bthis\s+week\b|本周|这周|这个?星期|这礼拜|本星期", lambda m, t, mon, day: (mon, t)),
        (r"\blast\s+month\b|\bprevious\s+month\b|上(?:个)?月", lambda m, t, mon, day: _month(t, 1)),
        (r"\bthis\s+month\b|本月|这个月", lambda m, t, mon, day: (date(t.year, t.month, 1), t)),
        (r"\blast\s+year\b|去年", lambda m, t, mon, day: (date(t.year - 1, 1, 1), date(t.year - 1, 12, 31))),
        (r"\bthis\s+year\b|今年", lambda m, t, mon, day: (date(t.year, 1, 1), t)),
    ]
    return [(re.compile(p, re.IGNORECASE), f) for p, f in rules]


_RULES = _rule_table()
_DAY = timedelta(days=1)


def parse_time_query(query: str, today: date) -> tuple[str, TimeRange | None]:
    """``(query without its time words, range or None)``. The first (longest-rule) time expression wins; the
    rest of the query keeps its words, whitespace-normalised. ``today``: the user's local date. Pure."""
    for pat, span in _RULES:
        m = pat.search(query)
        if not m:
            continue
        a, b = span(m, today, _monday(today), _DAY)
        if a > b:
            a, b = b, a
        rest = " ".join((query[: m.start()] + " " + query[m.end():]).split())
        return rest, TimeRange(a.isoformat(), b.isoformat(), m.group(0))
    return query, None


def is_recall_only(rest: str) -> bool:
    """True when ``rest`` (a query without its time words) asks only "what did I talk about / 聊了什么": no word
    is left to rank by once those phrases and fillers (in, the, 的…) are removed. Pure."""
    left = _TALK_RE.sub(" ", rest)
    left = _FILLER_RE.sub("", left)
    left = re.sub(r"我们|咱们|[我的了吗呢吧啊都在里中]", "", left)
    return not left


def content_words(rest: str) -> str:
    """``rest`` without its "what did I talk about" phrases: the words to rank by (whitespace-normalised). Pure."""
    return " ".join(_TALK_RE.sub(" ", rest).split())

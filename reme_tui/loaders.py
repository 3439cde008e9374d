"""Small loaders: what each pane shows, read from the engine façade. Pure functions of ``(engine, arguments)``
returning plain data (the message payloads of ``messages.py``); no widget, no Textual call, so they run in
thread workers and in tests alike. Each raises what the façade raises (``EngineError`` for a user-facing
problem); the panes turn that into a message with :func:`error_text`.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Callable

from reme_engine.engine import EngineError

from .messages import DayInfo, NoteDocument, OpenNote, TreeEntry
from .render import callouts_and_footnotes, note_links, sources_targets, wikilinks_to_markdown
from .widgets.note_view import MAX_MARKDOWN_BYTES

MARKDOWN_EXTS = (".md", ".markdown")
#: Entries of one folder shown in the tree (a huge attachments folder must not freeze it).
MAX_FOLDER_ENTRIES = 2000
DIGEST_BUCKETS = ("personal", "procedure", "wiki")
#: Outlinks / backlinks listed per note (the pane scrolls; the engine's hop-2 default of 10 is for prompts).
NEIGHBOUR_LIMIT = 200
#: A plain-text view holds at most this many lines of a long file at once (a window that moves with alt+↓/↑ or
#: an "open at line" request): loading a whole 1 MB file into the text view would hold the UI for most of a second.
PLAIN_WINDOW_LINES = 1500
#: Above this many Markdown blocks a note is shown as plain text: every block is a widget, and each frame lays
#: them all out (about 110 ms a frame at 1,700 blocks on the test machines).
MAX_MARKDOWN_BLOCKS = 600
#: Characters of one line handed to the renderer: soft-wrapping one huge line (a 5 MB single-line note) holds the
#: UI for seconds on every key, so a longer line is cut and ends in :func:`cut_marker`.
MAX_LINE_CHARS = 4000


def cut_marker(rest_bytes: int) -> str:
    """The visible end of a line cut at :data:`MAX_LINE_CHARS`; ``rest_bytes``: UTF-8 bytes not shown."""
    from .render import human_size

    return f" … {human_size(rest_bytes)} more on this line; press e to open it in $EDITOR"


def bound_lines(text: str, limit: int = MAX_LINE_CHARS) -> tuple[str, int]:
    """``(text, lines cut)``: ``text`` with every line longer than ``limit`` characters cut there and ended with
    :func:`cut_marker`. Line count and line ends are kept, so file lines still map to view lines."""
    if len(text) <= limit:
        return text, 0
    out: list[str] = []
    cut = 0
    pos, n = 0, len(text)
    while pos < n:
        nl = text.find("\n", pos)
        end = n if nl < 0 else nl
        if end - pos > limit:
            rest = text[pos + limit : end]
            trail = "\r" if rest.endswith("\r") else ""
            out.append(text[pos : pos + limit])
            out.append(cut_marker(len(rest.encode("utf-8", "replace")) - len(trail)) + trail)
            cut += 1
        else:
            out.append(text[pos:end])
        if nl < 0:
            break
        out.append("\n")
        pos = nl + 1
    return ("".join(out), cut) if cut else (text, 0)


def error_text(exc: BaseException) -> str:
    """A one-line message for ``exc``: the engine's own wording, else ``Type: message``."""
    return str(exc) if isinstance(exc, EngineError) else f"{type(exc).__name__}: {exc}"


def _leaf_label(name: str) -> str:
    return name[:-3] if name.lower().endswith(".md") else name


def _is_texty(name: str) -> bool:
    low = name.lower()
    return low.endswith(MARKDOWN_EXTS + (".txt", ".json", ".jsonl", ".csv", ".yaml", ".yml", ".html", ".htm"))


def tree_entry(e: dict) -> TreeEntry:
    """A tree row for one ``Engine.list`` entry (``{"path", "is_dir", …}``)."""
    name = e["path"].rsplit("/", 1)[-1]
    if e["is_dir"]:
        return TreeEntry("dir", e["path"], name, True)
    return TreeEntry("file", e["path"], _leaf_label(name), dim=not _is_texty(name))


def tree_root(engine, layers) -> tuple[list[TreeEntry], dict[str, list[TreeEntry]]]:
    """Daily (days newest first), Digest (buckets), then the vault's other top-level entries: ``(entries,
    groups)`` where ``groups`` maps ``daily``/``digest`` to their children."""
    daily_dir, digest_dir = layers.daily_dir.strip("/"), layers.digest_dir.strip("/")
    entries: list[TreeEntry] = []
    groups: dict[str, list[TreeEntry]] = {}
    top = engine.list("", limit=MAX_FOLDER_ENTRIES)["entries"]
    top_dirs = {e["path"] for e in top if e["is_dir"]}
    try:
        days = engine.list_days() if daily_dir in top_dirs else []
    except Exception:
        days = []
    if days:
        entries.append(TreeEntry("daily", daily_dir, "Daily", True))
        groups["daily"] = [TreeEntry("day", d, d, True) for d in days]
    if digest_dir in top_dirs:
        try:
            kids = engine.list(digest_dir, limit=MAX_FOLDER_ENTRIES)["entries"]
        except Exception:
            kids = []
        order = {b: i for i, b in enumerate(DIGEST_BUCKETS)}
        kids.sort(key=lambda e: (not e["is_dir"], order.get(e["path"].rsplit("/", 1)[-1], 99), e["path"]))
        entries.append(TreeEntry("digest", digest_dir, "Digest", True))
        groups["digest"] = [tree_entry(e) for e in kids]
    shown_groups = {daily_dir} if days else set()
    if digest_dir in top_dirs:
        shown_groups.add(digest_dir)
    rest = [e for e in top if e["path"] not in shown_groups]
    rest.sort(key=lambda e: (not e["is_dir"], e["path"].casefold()))
    entries.extend(tree_entry(e) for e in rest)
    return entries, groups


def tree_children(engine, daily_dir: str, entry: TreeEntry) -> list[TreeEntry]:
    """Children of a day (day page + cards + other files) or of a folder."""
    if entry.kind == "day":
        date = entry.path
        kids: list[TreeEntry] = []
        page = f"{daily_dir}/{date}.md"
        if engine.stat(page).exists:
            kids.append(TreeEntry("file", page, f"{date} (day page)"))
        cards = engine.daily_list(date)
        card_paths = {c.path for c in cards}
        kids.extend(TreeEntry("file", c.path, c.name or c.stem) for c in cards)
        folder = f"{daily_dir}/{date}"
        if engine.stat(folder).is_dir:
            for e in engine.list(folder, limit=MAX_FOLDER_ENTRIES)["entries"]:
                if not e["is_dir"] and e["path"] not in card_paths:
                    kids.append(tree_entry(e))
        return kids
    listing = engine.list(entry.path, limit=MAX_FOLDER_ENTRIES)
    rows = sorted(listing["entries"], key=lambda e: (not e["is_dir"], e["path"].casefold()))
    kids = [tree_entry(e) for e in rows]
    if listing["truncated"]:
        kids.append(TreeEntry("info", "", f"… more than {MAX_FOLDER_ENTRIES} entries", dim=True))
    return kids


def day_infos(engine, daily_dir: str, today: str) -> list[DayInfo]:
    """Today first, then the days with a page or folder (newest first), each with its card count."""
    days = engine.list_days()
    pages: set[str] = set()
    folders: set[str] = set()
    try:
        for e in engine.list(daily_dir, limit=100000)["entries"]:
            name = e["path"].rsplit("/", 1)[-1]
            (folders if e["is_dir"] else pages).add(name if e["is_dir"] else name[:-3])
    except Exception:
        pass  # no daily folder yet
    infos: list[DayInfo] = []
    for d in [today] + [d for d in days if d != today]:
        cards = 0
        for folder in engine.card_dirs():  # an existing vault's cards are in the app folder too
            if folder == daily_dir.strip("/") and d not in folders:
                continue
            try:
                cards += sum(1 for e in engine.list(f"{folder}/{d}", recursive=True, limit=5000)["entries"]
                             if not e["is_dir"] and e["path"].lower().endswith(".md"))
            except Exception:
                pass  # no such day folder
        infos.append(DayInfo(d, cards, d in pages, d == today))
    return infos


def day(engine, daily_dir: str, date: str) -> tuple[str | None, list]:
    """``(day page path or None, cards)`` of ``date``."""
    page = f"{daily_dir}/{date}.md"
    exists = engine.stat(page).exists
    return (page if exists else None), engine.daily_list(date)


def app_layout(engine, daily_dir: str) -> bool:
    """Whether the vault is laid out by the app: its daily folder holds a day folder (``YYYY-MM-DD/``, where
    cards go), or the vault holds no note yet. An existing vault (e.g. Obsidian's daily notes: pages, no day
    folders) gets no day folder or generated page the user did not write (ARCHITECTURE §2)."""
    import re

    try:
        entries = engine.list(daily_dir, limit=100000)["entries"]
    except Exception:
        entries = []
    if any(e["is_dir"] and re.fullmatch(r"\d{4}-\d{2}-\d{2}", e["path"].rsplit("/", 1)[-1]) for e in entries):
        return True
    if _HAS_NOTES.get(engine):
        return False
    try:
        top = engine.list("", recursive=True, limit=200)["entries"]
    except Exception:
        return False
    has_notes = any(not e["is_dir"] and e["path"].lower().endswith(MARKDOWN_EXTS) for e in top)
    if has_notes:
        # a vault that holds notes keeps holding some: the recursive listing (40–50 ms on a 3,000-note vault)
        # is not paid again on every ``t``
        _HAS_NOTES[engine] = True
    return not has_notes


#: Engines whose vault was seen to hold a note (see :func:`app_layout`).
_HAS_NOTES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def open_day(engine, daily_dir: str, date: str, create: bool) -> tuple[str | None, list[str], str | None]:
    """``(day page, what was created, unwritten page)`` for ``date``. With ``create`` a missing page is made (the
    engine's day page with its index section, and the day folder) on a vault the app laid out
    (:func:`app_layout`); on another vault nothing is written and the page's path comes back as unwritten."""
    page = f"{daily_dir}/{date}.md"
    exists = engine.stat(page).exists
    if exists or not create:
        return (page if exists else None), [], None
    if not app_layout(engine, daily_dir):
        return None, [], page
    res = engine.daily_create(date)
    created = [what for what, flag in (("folder", res.folder_created), ("page", res.page_created)) if flag]
    return res.page, created, None


def unwritten_page(path: str) -> NoteDocument:
    """The placeholder shown for a day page that does not exist yet (``e`` writes it in the user's editor)."""
    body = (f"*No page for this day yet.* Press **e** to write `{path}` in your editor: the file is created when "
            "you save it, with exactly what you wrote.")
    return NoteDocument(path, body, {}, 1, 0, 0, False, None, [], [], 1, unwritten=True)


def markdown_blocks(body: str) -> int:
    """How many block widgets the Markdown view would mount for ``body`` (container and leaf blocks)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("gfm-like").parse(body)
    return sum(1 for t in tokens if t.nesting == 1 or t.type in ("fence", "code_block", "hr", "html_block"))


def note_document(engine, request: OpenNote, cancelled: Callable[[], bool] = lambda: False, *,
                  resolve_links: bool = True) -> NoteDocument | None:
    """Read the whole file of ``request.path``, split off the frontmatter and rewrite wikilinks for the Markdown
    widget; None when ``cancelled()`` turned true meanwhile. With ``resolve_links`` (the index is complete) the
    targets of links to notes that do not exist are listed in ``doc.missing``. EngineError for a missing file or
    a folder."""
    st = engine.stat(request.path)
    if not st.exists:
        raise EngineError(f"no such file: {request.path}")
    if st.is_dir:
        raise EngineError(f"{request.path} is a folder")
    parts: list[str] = []
    start, total, sha = 1, None, ""
    while total is None or start <= total:
        r = engine.read(request.path, start, None, max_chars=None)
        sha = sha or r.sha
        parts.append(r.text)
        total = r.total_lines
        start = r.end_line + 1
        if not r.truncated or cancelled():
            break
    if cancelled():
        return None
    text = "".join(parts).lstrip("\ufeff")
    path = r.path
    size = st.size or len(text.encode("utf-8"))
    is_md = path.lower().endswith(MARKDOWN_EXTS)
    plain = not is_md or size > MAX_MARKDOWN_BYTES
    meta, warning, body, body_line = {}, None, text, 1
    long_lines = 0
    links: list = []
    sources: list = []
    callouts: dict = {}
    footnotes: dict = {}
    own = None
    if is_md:
        fm = engine.parse_frontmatter(text)
        # The index's wording (engine.stat) when this read still has a problem; never a stale one after the user
        # fixed the frontmatter and the re-index has not run yet.
        meta, warning = fm.meta, ((st.warning or fm.warning) if fm.warning else None)
        raw_body = text[fm.body_offset :]
        links = note_links(meta, raw_body)
        sources = sources_targets(raw_body)
        own = engine.note_ownership(text)  # pure and linear in the text: cheap beside the read
        if not plain:
            raw_body, long_lines = bound_lines(raw_body)
            # Obsidian's reading view hides %% comments %% (their links are not shown in the Links pane either)
            body, callouts, notes = callouts_and_footnotes(wikilinks_to_markdown(engine.hide_comments(raw_body)))
            body_line = fm.body_start_line
            footnotes = {label: i + body_line for label, i in notes.items()}
            blocks = markdown_blocks(body)
            if blocks > MAX_MARKDOWN_BLOCKS:
                plain, body, body_line, callouts, footnotes = True, text, 1, {}, {}
                warning = (warning + "; " if warning else "") + f"long note ({blocks} blocks): shown as plain text"
    if plain and size > MAX_MARKDOWN_BYTES and is_md:
        warning = (warning + "; " if warning else "") + "large file: shown as plain text"
    window_start = 1
    if plain:
        body, long_lines = bound_lines(body)
        lines = body.splitlines(keepends=True)
        if len(lines) > PLAIN_WINDOW_LINES:
            want = request.line or 1
            window_start = max(1, min(want - PLAIN_WINDOW_LINES // 4, len(lines) - PLAIN_WINDOW_LINES + 1))
            body = "".join(lines[window_start - 1 : window_start - 1 + PLAIN_WINDOW_LINES])
    if long_lines:
        warning = ((warning + "; " if warning else "")
                   + f"{long_lines} long line{'s' if long_lines > 1 else ''} cut at {MAX_LINE_CHARS} characters")
    doc = NoteDocument(path, body, meta, body_line, total or 0, size, plain, warning, links, sources,
                       window_start, callouts=callouts, footnotes=footnotes, sha=sha,
                       read_only=bool(getattr(st, "read_only", False)))
    if resolve_links and links:
        from .link_follow import missing_targets

        doc.missing = frozenset(missing_targets(engine, links, path))
    if own is not None:
        doc.owner, doc.owner_stamp, doc.owner_reason = own.owner, own.stamp, own.reason
        doc.app_ranges = own.app_ranges
        doc.app_blocks = [(b.start, b.end, b.intact) for b in own.blocks]
    return doc


def file_signature(engine, path: str) -> tuple[int, int] | None:
    """``(mtime in ns, size in bytes)`` of vault path ``path`` (one ``stat``, no read); None when it is gone or
    unreadable. ``path`` is one the engine gave (a shown note), so it stays inside the vault."""
    try:
        st = (Path(engine.vault) / path).stat()
    except (OSError, ValueError, TypeError):
        return None
    return st.st_mtime_ns, st.st_size


def file_sha(engine, path: str) -> str | None:
    """The engine's content hash of ``path`` on disk now (None when it is gone or unreadable)."""
    try:
        return engine.read(path, 1, 1).sha
    except Exception:
        return None


def neighbours(engine, path: str, sources: list[str] | None = None):
    """``(Neighborhood of path, resolved targets of its Sources section)``."""
    hood = engine.neighbors(path, NEIGHBOUR_LIMIT, NEIGHBOUR_LIMIT)
    resolved: set[str] = set()
    for target in sources or ():
        res = engine.resolve_link(target, path)
        resolved.add(res.path or res.virtual or target)
    return hood, resolved


def agenda(engine, settings, date: str, today: str):
    """``(ProactiveReadResult of the day, next refresh time or None, carried-forward result or None)``: on a day
    without a refresh the open topics of the carry-forward window are still worth seeing."""
    day_ = date or today
    res = engine.proactive_read(day_, include_content=False)
    nxt = engine.next_run("proactive_refresh") if res.skipped and day_ == today else None
    carried = None
    if res.skipped:
        try:
            days = int(getattr(settings.proactive, "carry_forward_days", 14)) + 1
            carried = engine.proactive_read(day_, include_content=False, horizon_days=days)
            if not carried.success or carried.skipped or not carried.topics:
                carried = None
        except Exception:
            carried = None
    return res, nxt, carried


def start_note_path(engine, daily_dir: str, today: str) -> str | None:
    """The note to open first: today's day page when it exists, else the README (or index, home, welcome) at
    the vault root, else the first Markdown file."""
    today_page = f"{daily_dir}/{today}.md"
    try:
        if engine.stat(today_page).exists:
            return today_page
    except Exception:
        pass
    try:
        top = engine.list("")["entries"]
    except Exception:
        return None
    files = {e["path"].casefold(): e["path"] for e in top if not e["is_dir"]}
    for name in ("readme.md", "index.md", "home.md", "welcome.md"):
        if name in files:
            return files[name]
    try:
        for e in engine.list("", recursive=True, limit=5000)["entries"]:
            if not e["is_dir"] and e["path"].lower().endswith(MARKDOWN_EXTS):
                return e["path"]
    except Exception:
        return None
    return None

"""Daily cards on disk: where a day's cards live, reading one, finding a session's card, free names."""

from __future__ import annotations

import json
import unicodedata

from ..markdown.frontmatter import parse_frontmatter, render_frontmatter
from ..vault.io import SkipFile, read_text
from ..text import slugify as _slugify
from ..vault.app_folder import card_dirs, cards_dir
from ..vault.paths import resolve

MAX_SLUG_CHARS = 60
#: Card stems the app uses for other things; a session slug never takes them.
RESERVED_STEMS = frozenset({"capture", "interests", "index"})


def _day_folder(engine, date: str) -> str:
    """Where the app writes ``date``'s cards: ``<app_dir>/daily/<date>`` in an existing vault (never the user's
    daily-notes folder), else ``<daily_dir>/<date>``."""
    return f"{cards_dir(engine.settings.layers)}/{date}"


def _day_folders(engine, date: str) -> list[str]:
    """Every folder that may hold ``date``'s cards, the write folder first (see
    :func:`reme_engine.vault.app_folder.card_dirs`)."""
    return [f"{d}/{date}" for d in card_dirs(engine.settings.layers)]


def _read_card(engine, rel: str) -> tuple[str, str, str] | None:
    """``(text without BOM, sha of the raw bytes, encoding)`` or None when absent. Raises SkipFile (binary…)."""
    vp = resolve(engine.vault, rel)
    try:
        tf = read_text(vp.abs, engine.settings.max_file_bytes)
    except FileNotFoundError:
        return None
    return tf.text, tf.sha, tf.encoding


def find_session_card(engine, date: str, session_id: str) -> str | None:
    """The card of ``date`` whose frontmatter ``session_id`` is ``session_id`` (first by name), else None.

    Only the top level of the day's card folders is searched (app folder first); unreadable files are ignored.
    """
    for rel in _day_folders(engine, date):
        folder = resolve(engine.vault, rel)
        if not folder.abs.is_dir():
            continue
        for p in sorted(folder.abs.iterdir()):
            name = unicodedata.normalize("NFC", p.name)
            if name.startswith(".") or not name.lower().endswith(".md") or not p.is_file():
                continue
            try:
                tf = read_text(p, engine.settings.max_file_bytes)
            except (OSError, SkipFile):
                continue
            value = parse_frontmatter(tf.text).meta.get("session_id")
            if value is not None and str(value) == session_id:
                return f"{folder.rel}/{name}"
    return None


def slugify(text: str, fallback: str) -> str:
    """A card slug (:func:`reme_engine.text.slugify`, at most :data:`MAX_SLUG_CHARS` characters); else
    ``fallback``."""
    return _slugify(text, fallback, MAX_SLUG_CHARS)


def free_card_path(engine, date: str, slug: str) -> str:
    """``daily/<date>/<slug>.md``, or ``<slug>-2.md``, ``-3``… when the name is taken (case-insensitively) or
    reserved (:data:`RESERVED_STEMS`)."""
    folder = resolve(engine.vault, _day_folder(engine, date))
    taken = set()
    if folder.abs.is_dir():
        taken = {unicodedata.normalize("NFC", n).casefold() for n in (p.name for p in folder.abs.iterdir())}
    i = 1
    while True:
        stem = slug if i == 1 else f"{slug}-{i}"
        if stem.casefold() not in RESERVED_STEMS and f"{stem}.md".casefold() not in taken:
            return f"{folder.rel}/{stem}.md"
        i += 1


def _new_card_head(meta: dict, link_key: str, link: str) -> str:
    """Frontmatter of a new card; the provenance link is written double-quoted, as Obsidian writes links."""
    block = render_frontmatter(meta)
    return block[: -len("---\n")] + f"{link_key}: {json.dumps(link, ensure_ascii=False)}\n---\n"

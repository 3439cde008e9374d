"""Where app-owned files go: reme's own layout, or one app folder in an existing vault (ARCHITECTURE §2).

A vault reme laid out (the demo, a new empty folder) keeps the classic places: chat records in
``session/dialog/``, proactive state in ``daily/<date>/interests.yaml`` and ``daily/_proactive.yaml``. An existing
vault — an Obsidian vault, or one whose daily-notes folder is the user's own — gets them in one visible folder,
``reme/`` by default (setting ``layers.app_dir``)::

    reme/session/dialog/<session id>.jsonl
    reme/daily/<date>/capture.md          (and the day's session and resource cards)
    reme/proactive/<date>/interests.yaml
    reme/proactive/_proactive.yaml

**Decision: a visible ``reme/`` folder, not a hidden ``.reme/``.** Obsidian does not index dot-folders, so the
``source_conversation`` links of cards would not resolve there; the app itself refuses to write into dot-folders
(``.obsidian``, ``.git``) and its watcher ignores them; sync tools and backups often skip them. A visible folder is
what Obsidian users already know from plugins (``Excalidraw/``, ``Templates/``): one place they can see, exclude
from search in Obsidian, or delete, and nothing in their daily-notes folder or daily notes.

"Existing vault" (``layers.app_dir: auto``), decided when the engine opens: the app folder exists already (the
decision is kept), or the daily folder in use is not reme's ``daily`` (detected from the Daily notes plugin or
configured), or the vault has ``.obsidian/`` and neither reme's ``daily/`` nor ``session/`` folder, or it has
``.obsidian/`` and its daily notes are not named as reme names day pages (``layers.daily_format`` other than
YYYY-MM-DD, e.g. Obsidian's ``YYYY/MM/DD`` for a folder called ``daily``: those daily notes are Obsidian's).
Records in the old places stay readable: with ``auto``, a vault whose ``session/dialog/`` already holds chat records (an older
version wrote them) keeps them there and records new chats beside them — cards link to them, and the index, the
TUI and MCP list one session folder; moving that folder into ``reme/session/`` (links follow a move in the app)
tidies the vault. With an explicit ``app_dir`` new chats go to the app folder and a session recorded in the old
place keeps growing there. Proactive readers fall back to the old files in the daily folder.
"""

from __future__ import annotations

from pathlib import Path

from ..config import ConfigError, LayerSettings, Settings

DEFAULT_APP_DIR = "reme"
#: The classic (reme layout) session folder, read as the old location of chat records.
LEGACY_SESSION_DIR = "session"
AUTO = "auto"


def app_dir_of(layers: LayerSettings) -> str:
    """The resolved app folder (vault-relative, no slashes at the ends), or "" for reme's own layout. An
    unresolved ``auto`` (settings never opened by an engine) counts as reme's layout."""
    value = str(getattr(layers, "app_dir", "") or "").strip().strip("/")
    return "" if value.lower() in (AUTO, "none", "false", "off") else value


def is_existing_vault(vault: Path, layers: LayerSettings, app_dir: str = DEFAULT_APP_DIR) -> bool:
    """True when ``vault`` is not laid out as reme's (the rule in the module doc); ``layers.daily_dir`` must already
    be the folder in use (after detection)."""
    vault = Path(vault)
    if app_dir and (vault / app_dir).is_dir():
        return True
    if layers.daily_dir.strip("/") != "daily":
        return True
    if not (vault / ".obsidian").is_dir():
        return False
    # the daily format as resolved at open (vault.daily.resolve_day_format; not imported: daily imports this module)
    fmt = str(getattr(layers, "daily_format", "") or "").strip()
    if fmt not in ("", "auto", "YYYY-MM-DD"):
        return True
    return not (vault / "daily").is_dir() and not (vault / layers.session_dir.strip("/")).is_dir()


def apply_app_folder(vault: Path, settings: Settings) -> str:
    """Resolve ``settings.layers.app_dir`` for ``vault`` in place and return it ("" = reme's layout). In app-folder
    mode a ``session_dir`` left at its default moves to ``<app_dir>/session``, so every reader and writer of chat
    records (TUI, MCP, search, auto-memory) follows. Call once, when the engine opens, after daily-folder
    detection. Raises ConfigError for an ``app_dir`` outside the vault or in a dot-folder (``auto`` never raises: an
    unreadable vault is reme's layout)."""
    layers = settings.layers
    value = getattr(layers, "app_dir", AUTO)
    auto = value is None or str(value).strip().lower() == AUTO
    if auto:
        try:
            resolved = DEFAULT_APP_DIR if is_existing_vault(vault, layers) else ""
        except OSError:
            resolved = ""
    else:
        _check(str(value).strip().rstrip("/"))
        resolved = app_dir_of(layers)
    layers.app_dir = resolved
    if resolved and layers.session_dir.strip("/") == LEGACY_SESSION_DIR and not (
            auto and _has_records(Path(vault) / LEGACY_SESSION_DIR / "dialog")):
        layers.session_dir = f"{resolved}/session"
    return resolved


def _check(app_dir: str) -> None:
    """ConfigError unless ``app_dir`` is "" or a visible folder path inside the vault."""
    parts = app_dir.replace("\\", "/").split("/")
    if app_dir and (app_dir.startswith("/") or ":" in parts[0]
                    or any(p in ("", ".", "..") or p.startswith(".") for p in parts)):
        raise ConfigError(f"layers.app_dir: {app_dir!r} must be a visible folder inside the vault (no '..', no "
                          "absolute path, no dot-folder: the app never writes into dot-folders)")


def _has_records(folder: Path) -> bool:
    """True when ``folder`` holds a chat record: a vault an older version filled keeps its records where they
    are (cards link to them, and the index, the TUI and MCP list one session folder)."""
    try:
        return any(p.suffix == ".jsonl" for p in folder.iterdir())
    except OSError:
        return False


def legacy_session_rel(layers: LayerSettings, session_id: str) -> str | None:
    """The old-location path of a session record when the app folder moved ``session_dir``, else None."""
    if app_dir_of(layers) and layers.session_dir.strip("/") != LEGACY_SESSION_DIR:
        return f"{LEGACY_SESSION_DIR}/dialog/{session_id}.jsonl"
    return None


def session_dialog_dirs(vault: Path, layers: LayerSettings) -> list[str]:
    """Vault-relative folders holding chat records, newest location first: ``<session_dir>/dialog`` and, in
    app-folder mode, the old ``session/dialog`` when it exists (for readers that list every record)."""
    out = [f"{layers.session_dir.strip('/')}/dialog"]
    if app_dir_of(layers) and (Path(vault) / LEGACY_SESSION_DIR / "dialog").is_dir():
        old = f"{LEGACY_SESSION_DIR}/dialog"
        if old not in out:
            out.append(old)
    return out


def proactive_dir(layers: LayerSettings) -> str:
    """Folder of the proactive state: ``<app_dir>/proactive`` in app-folder mode, else the daily folder."""
    app = app_dir_of(layers)
    return f"{app}/proactive" if app else (layers.daily_dir.strip("/") or "daily")


def writes_daily_notes(layers: LayerSettings) -> bool:
    """False in app-folder mode: the app neither creates nor marks the user's daily notes unless asked
    (``insert_markers=True``)."""
    return not app_dir_of(layers)


def cards_dir(layers: LayerSettings) -> str:
    """Folder the app writes day cards into (``<dir>/<date>/<card>.md``: capture, session and resource cards):
    ``<app_dir>/daily`` in app-folder mode, so nothing is created under the user's daily-notes folder; else the
    daily folder."""
    app = app_dir_of(layers)
    return f"{app}/daily" if app else (layers.daily_dir.strip("/") or "daily")


def card_dirs(layers: LayerSettings) -> list[str]:
    """Folders holding day cards, for readers that list a day's cards: :func:`cards_dir` first, then the daily
    folder (the user's own cards there, and cards an older version wrote). No duplicates."""
    out = [cards_dir(layers)]
    daily = layers.daily_dir.strip("/") or "daily"
    if daily not in out:
        out.append(daily)
    return out

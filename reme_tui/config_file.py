"""Keep a setting the user picks in the app (the theme) in their config file, without touching anything else.

The config file is the user's text: comments, order and every other line stay byte for byte. Only one top-level
``key: value`` line is replaced (or appended when there is none). The file is written with the app's own compare-and-swap
write (``Engine.replace_file``): a save from the user's editor in between wins, and the app's
change is reported instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path


class ConfigWriteError(Exception):
    """The setting could not be kept: the file changed meanwhile, or an OS error (message says which)."""


def _line_re(key: str) -> re.Pattern:
    # a top-level key (no indent), its value up to a comment; ``key:`` alone opens a nested block: not ours
    return re.compile(rf"^{re.escape(key)}[ \t]*:[ \t]*(?P<value>[^\s#][^\n#]*?)?[ \t]*(?P<comment>#[^\n]*)?$",
                      re.M)


def with_setting(text: str, key: str, value: str) -> str:
    """``text`` (a YAML config file) with the top-level ``key`` set to the string ``value``: its line replaced
    (a trailing comment kept), or ``key: value`` appended. Raises :class:`ConfigWriteError` when ``key`` holds
    a nested block (never rewritten)."""
    shown = value if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value) else json.dumps(value, ensure_ascii=False)
    m = _line_re(key).search(text)
    if m is not None:
        if m["value"] is None:
            raise ConfigWriteError(f"{key}: in the config file is not a plain value; left as it is")
        comment = f"  {m['comment']}" if m["comment"] else ""
        return f"{text[:m.start()]}{key}: {shown}{comment}{text[m.end():]}"
    sep = "" if not text or text.endswith("\n") else "\n"
    return f"{text}{sep}{key}: {shown}\n"


def save_setting(path: Path, key: str, value: str) -> None:
    """Set the top-level ``key`` to ``value`` in the config file at ``path`` (created, with its folder, when
    missing), through the app's compare-and-swap write. Raises :class:`ConfigWriteError` (file changed while
    writing, a nested block, OS errors)."""
    from reme_engine.engine import Engine, EngineError

    path = Path(path)
    try:
        before = path.read_bytes() if path.exists() else None
        old = before.decode("utf-8") if before is not None else ""
        new = with_setting(old, key, value)
        if before is not None and new.encode("utf-8") == before:
            return
        Engine.replace_file(path, new, before)
    except EngineError as exc:  # the user saved the file meanwhile: theirs wins
        raise ConfigWriteError(f"{path} changed while the {key} was being saved; not saved ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigWriteError(f"{path} is not UTF-8 text: {exc}") from exc
    except OSError as exc:
        raise ConfigWriteError(f"{path}: {exc}") from exc

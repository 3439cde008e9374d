"""The bundled bilingual demo vault, opened when no vault is configured (first run).

The packaged folder (``reme_engine/demo/vault/``, package data) is read-only source material; users get their own
copy via :func:`install_demo_vault`, which never overwrites an existing copy (they may have edited it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["demo_vault_source", "install_demo_vault"]

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".DS_Store", ".*.tmp")


def demo_vault_source() -> Path:
    """The packaged demo vault folder (read-only; copy it before use). Raises FileNotFoundError if it is missing."""
    src: Path | None = None
    try:
        from importlib.resources import files

        res = files(__name__) / "vault"
        if isinstance(res, Path):
            src = res
    except (ImportError, ModuleNotFoundError, TypeError):  # pragma: no cover - exotic loaders
        src = None
    if src is None:
        src = Path(__file__).resolve().parent / "vault"
    if not src.is_dir():
        raise FileNotFoundError(f"demo vault not found in the package at {src}")
    return src


def install_demo_vault(dest: Path) -> Path:
    """Copy the demo vault to ``dest`` if ``dest`` does not exist yet; return ``dest``.

    An existing ``dest`` (file or folder, even empty) is left untouched. The copy is made in a temporary sibling
    folder and renamed into place, so an interrupted first run never leaves a half-copied vault behind; if another
    process installs it meanwhile, its copy wins. Raises ``OSError`` when the parent cannot be written.
    """
    dest = Path(dest).expanduser()
    if dest.exists() or dest.is_symlink():
        return dest
    src = demo_vault_source()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".installing", dir=dest.parent))
    try:
        staged = tmp / "vault"
        shutil.copytree(src, staged, ignore=_IGNORE)
        try:
            os.rename(staged, dest)
        except OSError:
            if not dest.exists():
                raise
            # Lost a race with another installer: keep its copy.
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest

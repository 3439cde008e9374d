"""An Obsidian vault's Daily notes setting is honoured before its folder exists (Obsidian creates it with the first
daily note); a setting pointing outside the vault or into a hidden folder is ignored."""

from __future__ import annotations

import json

from reme_engine.vault.daily import detect_daily_dir


def _vault(tmp_path, folder):
    v = tmp_path / "v"
    (v / ".obsidian").mkdir(parents=True)
    (v / ".obsidian" / "daily-notes.json").write_text(json.dumps({"folder": folder}), encoding="utf-8")
    return v


def test_the_plugins_folder_wins_before_it_exists(tmp_path, open_engine):
    v = _vault(tmp_path, "Journal")
    assert detect_daily_dir(v) == "Journal"
    e = open_engine(v)
    assert e.settings.layers.daily_dir == "Journal", e.settings.layers
    assert not (v / "daily").exists()


def test_a_folder_outside_the_vault_is_ignored(tmp_path):
    for bad in ("/etc", "../../etc", ".trash", "C:/x"):
        v = _vault(tmp_path / bad.replace("/", "_").replace(".", "d").replace(":", "c"), bad)
        assert detect_daily_dir(v) is None, bad

"""A state dir that is a file, or cannot be made, is a one-line configuration error (exit 2), never an OSError."""

import pytest

from reme_engine.config import ConfigError, load_settings
from reme_engine.engine import Engine


@pytest.mark.parametrize("sub", ["", "sub"])
def test_a_state_dir_under_a_file_is_a_config_error(tmp_path, sub):
    vault = tmp_path / "v"
    vault.mkdir()
    afile = tmp_path / "afile"
    afile.write_text("not a folder", encoding="utf-8")
    state = afile / sub if sub else afile
    with pytest.raises(ConfigError, match="state dir"):
        Engine.open(load_settings({"vault": str(vault), "state_dir": str(state), "embedder": {"kind": "none"}},
                                  env={}))
    assert afile.read_text(encoding="utf-8") == "not a folder"

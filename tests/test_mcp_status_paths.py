"""`reme://status` names the vault and the state dir the server uses (absolute paths), so a user can see that an MCP
client started the server on another state dir than the app's (its index, vectors and journal would be apart)."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")


async def test_status_names_the_vault_and_the_state_dir(tmp_path):
    from test_mcp import status, stdio_session

    v = tmp_path / "v"
    v.mkdir()
    (v / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    state = tmp_path / "state"
    async with stdio_session(v, state) as s:
        st = await status(s)
        assert st["engine"] == "open", st
        assert st["vault"] == str(v.resolve()) and st["state_dir"] == str(state.resolve()), st

"""The MCP tools as an agent meets them: refusals are one line naming what to change, never a traceback or the
SDK's bare "Error executing tool"; names with control characters are refused escaped; nothing an agent sends can
turn the person's capture card into a binary file. Through the official SDK's stdio client (as tests/test_mcp.py).
"""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

from test_mcp import call, fail, stdio_session  # noqa: E402


def _vault(tmp_path):
    v = tmp_path / "v"
    v.mkdir()
    (v / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    return v


def _files(v):
    return {p.relative_to(v).as_posix(): p.read_bytes() for p in v.rglob("*") if p.is_file()}


async def test_agent_mistakes_are_one_line_and_write_nothing(tmp_path):
    v = _vault(tmp_path)
    async with stdio_session(v, tmp_path / "state") as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        destructive = {n for n, t in tools.items() if t.annotations.destructive_hint}
        assert destructive == {"write_note", "edit_note", "move_note", "delete_note", "revert"}
        before = _files(v)
        for tool, args, want in [
            # a NUL would make the day's capture card (the person's captures too) a binary file the index skips
            ("remember", {"text": "a\x00b"}, "not remembered: text has a NUL character at 1"),
            ("write_note", {"path": "n" * 300 + ".md", "content": "x"}, "file name too long"),
            ("write_note", {"path": "bell\x07.md", "content": "x"}, "'bell\\x07.md' has a control character "
                                                                   "(U+0007 BEL)"),
            ("write_note", {"path": "rtl\u202egpj.md", "content": "x"}, "has a control character (U+202E)"),
            ("move_note", {"src": "a.md", "dst": "esc\x1b.md"}, "not moved: 'esc\\x1b.md' has a control character"),
            ("write_note", {"path": "../out.md", "content": "x"}, "'.' and '..' are not allowed"),
            ("write_note", {"path": "/etc/x.md", "content": "x"}, "absolute paths are not allowed"),
            ("read_note", {"path": "../../etc/passwd"}, "'.' and '..' are not allowed"),
            ("write_note", {"path": ".obsidian/app.json", "content": "{}"}, "dot-files and dot-folders are not"),
            ("agenda", {"min_confidence": 5}, "bad argument for agenda: min_confidence expects a number from 0 to 1"),
            ("edit_note", {"path": "a.md", "old": "alpha", "new": "b", "count": -1},
             "bad argument for edit_note: count expects an integer from 0"),
        ]:
            msg = await fail(s, tool, **args)
            assert want in msg, (tool, msg)
            assert "\n" not in msg and "Traceback" not in msg and "Error executing tool" not in msg, msg
        assert _files(v) == before
        # after a refused NUL the card takes the next entry, and it stays searchable text
        r = await call(s, "remember", text="prefers tea", agent="probe\x1b[31m\u202e")
        card = (v / r["path"]).read_text(encoding="utf-8")
        assert "prefers tea" in card and "\x1b" not in card and "\u202e" not in card
        assert "noted by agent probe31m" in card


async def test_hidden_files_are_not_served_to_agents(tmp_path):
    """Obsidian plugins keep API keys in .obsidian/plugins/*/data.json, git remotes tokens in .git/config: an
    agent reads notes, never those (by name, through a symlink, or as a resource); the index leaves them out too."""
    from mcp.shared.exceptions import MCPError

    v = _vault(tmp_path)
    (v / ".obsidian/plugins/gpt").mkdir(parents=True)
    (v / ".obsidian/plugins/gpt/data.json").write_text('{"apiKey": "sk-secret"}', encoding="utf-8")
    (v / ".env").write_text("TOKEN=abc\n", encoding="utf-8")
    (v / "settings").symlink_to(v / ".obsidian", target_is_directory=True)
    async with stdio_session(v, tmp_path / "state") as s:
        for tool, args in [("read_note", {"path": ".obsidian/plugins/gpt/data.json"}), ("read_note", {"path": ".env"}),
                           ("list_notes", {"path": ".obsidian", "recursive": True}),
                           ("read_note", {"path": "settings/plugins/gpt/data.json"}),
                           ("list_notes", {"path": "settings"}), ("traverse", {"path": ".env"})]:
            msg = await fail(s, tool, **args)
            assert msg.startswith(f"not served: {args['path']!r} is a hidden file or inside a hidden folder"), msg
            assert "sk-secret" not in msg
        assert "(it leads to .obsidian/plugins/gpt/data.json)" in await fail(
            s, "read_note", path="settings/plugins/gpt/data.json")
        with pytest.raises(MCPError, match="not served"):
            await s.read_resource("reme://note/.env")
        listing = await call(s, "list_notes", path="", recursive=True)
        assert all(not any(p.startswith(".") for p in e["path"].split("/")) for e in listing["entries"]), listing
        assert (await call(s, "read_note", path="a.md"))["text"].startswith("# A")
        assert (await call(s, "list_notes", path=""))["entries"]


async def test_an_unexpected_failure_is_one_line_and_the_traceback_goes_to_the_log(tmp_path, capsys):
    """A bug inside a tool: the agent gets the tool, the exception and where to look, not the SDK's bare
    "Error executing tool"; the person finds the traceback in the server's stderr."""
    from reme_engine.config import load_settings
    from reme_tui.mcp_server import tool_function
    from reme_tui.mcp_tools import ToolSpec, VaultServer

    def broken(vs, a):
        """A tool with a bug."""
        raise KeyError("nodes")

    settings = load_settings({"vault": str(_vault(tmp_path)), "state_dir": str(tmp_path / "st"),
                              "embedder": {"kind": "none"}}, env={})
    vs = VaultServer(settings, watch=False, embed=False)
    fn = tool_function(ToolSpec("broken", broken, None), vs)
    res = await fn()
    assert res.is_error and res.content[0].text == ("broken failed: KeyError: 'nodes' (a bug in reme-tui; the "
                                                    "traceback is in the server's log)")
    err = capsys.readouterr().err
    assert "reme-tui mcp: broken failed:" in err and "Traceback" in err and "KeyError: 'nodes'" in err

    def disk(vs, a):
        """A tool whose disk gave up."""
        raise OSError(28, "No space left on device")

    res = await tool_function(ToolSpec("disk", disk, None, writes=True), vs)()
    assert res.is_error and "no space left" in res.content[0].text.lower(), res.content[0].text

"""What an agent's writes may weigh, and what the reply says about a note too large to index; and a ``--http``
server that cannot start says why in one line.

Through the official SDK's stdio client against the real ``reme-tui mcp`` on a temp vault (as tests/test_mcp.py).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("mcp")

from test_mcp import REPO, _argv, _env, call, fail, stdio_session  # noqa: E402


def _vault(tmp_path, config: str):
    v = tmp_path / "v"
    v.mkdir()
    (v / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(config, encoding="utf-8")
    return v, cfg


async def test_a_note_over_max_file_bytes_is_saved_and_the_reply_says_it_is_not_indexed(tmp_path):
    """The app's editor saves a note of any size and the index skips one over max_file_bytes with a reason
    (README, ARCHITECTURE §8): write_note does the same, and its reply no longer claims `indexed: true`."""
    v, cfg = _vault(tmp_path, "max_file_bytes: 4000\n")
    big = "# Big\n\n" + "zebrafish notes line\n" * 400  # 8,007 bytes
    async with stdio_session(v, tmp_path / "state", "--config", str(cfg)) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert "max_file_bytes" in tools["write_note"].description
        w = await call(s, "write_note", path="big.md", content=big)
        assert (v / "big.md").read_text(encoding="utf-8") == big  # the words are kept
        assert w["indexed"] is False, w
        assert "too large" in w["not_indexed"] and "4,000" in w["not_indexed"], w
        assert "max_file_bytes" in w["not_indexed"]
        hits = (await call(s, "search", query="zebrafish", mode="keyword"))["hits"]
        assert hits == []  # the truth the reply told
        assert (await call(s, "read_note", path="big.md", end_line=3))["text"].startswith("# Big")
        # a small note is indexed, and says so
        ok = await call(s, "write_note", path="small.md", content="# Small\n\nzebrafish\n")
        assert ok["indexed"] is True and "not_indexed" not in ok
        # an edit that makes a note outgrow the limit says it too
        r = await call(s, "read_note", path="small.md")
        e = await call(s, "edit_note", path="small.md", old="zebrafish", new="zebrafish\n" * 500,
                       expected_sha=r["sha"])
        assert e["indexed"] is False and "too large" in e["not_indexed"], e
        # and one brought back under it is indexed again
        r = await call(s, "read_note", path="big.md", end_line=1)
        w2 = await call(s, "write_note", path="big.md", content="# Big\n\nzebrafish\n", expected_sha=r["sha"])
        assert w2["indexed"] is True, w2
        assert any(h["path"] == "big.md" for h in (await call(s, "search", query="zebrafish",
                                                                mode="keyword"))["hits"])


async def test_every_write_tool_caps_what_one_call_writes(tmp_path):
    v, cfg = _vault(tmp_path, "mcp:\n  max_write_bytes: 5000\n  max_remember_bytes: 300\n")
    async with stdio_session(v, tmp_path / "state", "--config", str(cfg)) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert "5,000 bytes" in tools["write_note"].description and "mcp.max_write_bytes" in \
            tools["write_note"].description
        assert "300 bytes" in tools["remember"].description and "mcp.max_remember_bytes" in \
            tools["remember"].description
        assert "5,000 bytes" in tools["edit_note"].description
        before = {p: p.read_bytes() for p in v.rglob("*") if p.is_file()}

        msg = await fail(s, "write_note", path="huge.md", content="x" * 5001)
        assert msg == ("not written: content is 5,001 bytes, over the 5,000-byte limit of one write_note call "
                       "(setting mcp.max_write_bytes); split it or write less"), msg
        msg = await fail(s, "remember", text="我" * 101)  # 303 bytes of UTF-8: bytes, not characters, count
        assert "text is 303 bytes, over the 300-byte limit of one remember call" in msg
        assert "mcp.max_remember_bytes" in msg
        msg = await fail(s, "remember", text="short", conversation=[{"role": "user", "content": "y" * 6000}])
        assert "conversation is" in msg and "mcp.max_write_bytes" in msg, msg
        r = await call(s, "read_note", path="a.md")
        msg = await fail(s, "edit_note", path="a.md", old="alpha", new="y" * 6000, expected_sha=r["sha"])
        assert "new is 6,000 bytes" in msg, msg
        assert {p: p.read_bytes() for p in v.rglob("*") if p.is_file()} == before  # nothing written
        assert "\n" not in msg and "Traceback" not in msg

        # at the limit, writes go through
        assert (await call(s, "write_note", path="fits.md", content="x" * 5000))["bytes"] == 5000
        assert (await call(s, "remember", text="我" * 100))["path"]


async def test_remember_never_pushes_the_days_card_out_of_the_index(tmp_path):
    """Appends that took the capture card past max_file_bytes hid the whole card, the person's earlier captures
    included, from search, while each reply looked like success: the entry that would cross the limit is refused
    before anything is written, and the card stays searchable."""
    v, cfg = _vault(tmp_path, "max_file_bytes: 3000\n")
    async with stdio_session(v, tmp_path / "state", "--config", str(cfg)) as s:
        first = await call(s, "remember", text="quokka fact " + "w" * 1000)
        assert first["indexed"] is True and "not_indexed" not in first
        await call(s, "remember", text="second fact " + "w" * 800)
        card = v / first["path"]
        before = card.read_bytes()
        msg = await fail(s, "remember", text="third fact " + "w" * 1200)
        assert msg.startswith(f"not remembered: today's capture card {first['path']} is {len(before):,} bytes")
        assert "max_file_bytes (3,000)" in msg and "\n" not in msg, msg
        assert card.read_bytes() == before
        hits = (await call(s, "search", query="quokka", mode="keyword"))["hits"]
        assert [h["path"] for h in hits] == [first["path"]]
        assert (await call(s, "remember", text="short one"))["indexed"] is True  # what fits still goes in


def test_config_rejects_a_non_positive_mcp_limit(tmp_path):
    from reme_engine.config import ConfigError, load_settings

    cfg = tmp_path / "c.yaml"
    cfg.write_text("mcp:\n  max_write_bytes: 0\n")
    with pytest.raises(ConfigError, match="mcp.max_write_bytes must be a positive number of bytes"):
        load_settings({}, env={}, config_path=cfg)
    s = load_settings({}, env={"REME_CONFIG": ""}, config_path=None)
    assert s.mcp.max_write_bytes == 1024 * 1024 and s.mcp.max_remember_bytes == 16 * 1024


def _run_http(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    v = tmp_path / "v"
    v.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, *_argv(v, tmp_path / "state", "--http", *extra)], capture_output=True,
                          text=True, cwd=str(REPO), timeout=60, stdin=subprocess.DEVNULL,
                          env={**os.environ, **_env()})


def test_http_startup_errors_are_one_line_and_exit_non_zero(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        p = _run_http(tmp_path, "--port", str(port))
    finally:
        taken.close()
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == f"reme-tui mcp: port {port} is in use; pass --port (another port, or 0 for any free one)"
    for extra, want in ((("--port", "70000"), "port 70000 is not a TCP port; pass --port 1-65535"),
                        (("--host", "0.0.0.0", "--port", "0"), "--host '0.0.0.0' is not allowed: the vault is "
                                                               "served on loopback only"),
                        (("--host", "example.invalid", "--port", "0"), "is not allowed")):
        p = _run_http(tmp_path, *extra)
        assert p.returncode == 2, (extra, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and want in lines[0] and "Traceback" not in p.stderr, (extra, p.stderr)


async def test_over_http_a_write_up_to_the_limit_reaches_the_tool(tmp_path):
    """The SDK's transport refuses bodies over 4 MiB with a bare 413; a configured write limit above that is
    honoured over HTTP too (and over it, the tool's own one-line refusal answers)."""
    import re

    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from test_mcp import _indexed, until

    limit = 5 * 1024 * 1024
    v, cfg = _vault(tmp_path, f"max_file_bytes: 1000\nmcp:\n  max_write_bytes: {limit}\n")
    proc = subprocess.Popen([sys.executable, *_argv(v, tmp_path / "state", "--http", "--port", "0", "--config",
                                                    str(cfg))],
                            stderr=subprocess.PIPE, text=True, cwd=str(REPO), env={**os.environ, **_env()})
    try:
        with anyio.fail_after(30):
            line = await anyio.to_thread.run_sync(proc.stderr.readline)
        m = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", line)
        assert m, line
        async with streamable_http_client(m.group(0)) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                await until(lambda: _indexed(s), timeout=60)
                text = "# Big\n" + "y" * (limit - 100)  # 5 MiB: over the transport's default 4 MiB
                w = await call(s, "write_note", path="big.md", content=text)
                assert w["bytes"] == len(text) and w["indexed"] is False
                msg = await fail(s, "write_note", path="bigger.md", content="z" * (limit + 1))
                assert "over the 5,242,880-byte limit of one write_note call" in msg, msg
        assert (v / "big.md").stat().st_size == len(text) and not (v / "bigger.md").exists()
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0

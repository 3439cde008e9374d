"""``reme-tui mcp`` driven through the official SDK's own clients (stdio subprocess and streamable HTTP).

Every server is the real CLI in a subprocess on a temp copy of the demo vault, keyword mode (no embedding model:
vectors are not the point here; ``bench/bench_mcp.py`` times hybrid search).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import quote

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from reme_engine.config import LLMSettings  # noqa: E402
from reme_engine.llm.client import make_client  # noqa: E402
from reme_engine.markdown.frontmatter import parse_frontmatter  # noqa: E402
from reme_engine.vault.io import content_hash  # noqa: E402
from wire.server import ScriptedServer, anthropic_message, openai_embeddings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
READERS = {"search", "read_note", "list_notes", "traverse", "today", "agenda", "changes"}
WRITERS = {"write_note", "edit_note", "move_note", "delete_note", "remember", "revert"}
NOTE_URI = "reme://note/"


def _env() -> dict[str, str]:
    # the SDK passes only a minimal environment to the server: hand it the test's isolated config/data dirs
    keep = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "REME_MODEL_CACHE", "TZ")
    return {k: os.environ[k] for k in keep if k in os.environ}


def _argv(vault: Path, state: Path, *extra: str) -> list[str]:
    return ["-m", "reme_tui.cli", "mcp", "--vault", str(vault), "--state-dir", str(state), "--embedder", "none",
            *extra]


@asynccontextmanager
async def stdio_session(vault: Path, state: Path, *extra: str, indexed: bool = True):
    """A client session with ``reme-tui mcp`` on ``vault``; with ``indexed``, once its first index pass is done
    (before it, searches answer from the part indexed so far, marked partial)."""
    params = StdioServerParameters(command=sys.executable, args=_argv(vault, state, *extra), env=_env(),
                                   cwd=str(REPO))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            if indexed:
                await until(lambda: _indexed(session), timeout=60)
            yield session


async def _indexed(s: ClientSession) -> bool:
    return (await status(s))["indexed"]


async def call(s: ClientSession, tool: str, **args) -> dict:
    res = await s.call_tool(tool, args)
    assert not res.is_error, f"{tool}: {res.content[0].text}"
    assert len(res.content) == 1 and res.content[0].type == "text"
    return json.loads(res.content[0].text)  # one JSON object per result


async def fail(s: ClientSession, tool: str, **args) -> str:
    res = await s.call_tool(tool, args)
    assert res.is_error, f"{tool} should have failed: {res.content[0].text[:200]}"
    return res.content[0].text


async def until(pred, timeout: float = 15.0) -> None:
    """Poll ``pred`` (sync or async) until true; fails the test after ``timeout`` seconds."""
    with anyio.fail_after(timeout):
        while True:
            got = pred()
            if hasattr(got, "__await__"):
                got = await got
            if got:
                return
            await anyio.sleep(0.05)


async def status(s: ClientSession) -> dict:
    return json.loads((await s.read_resource("reme://status")).contents[0].text)


def _settings(vault: Path, state: Path):
    from reme_engine.config import load_settings

    return load_settings({"vault": str(vault), "state_dir": str(state), "embedder": {"kind": "none"}}, env={})


async def test_every_tool_on_the_demo_vault(demo_vault, tmp_path):
    from reme_engine.engine import Engine
    from reme_engine.jobs import run_job

    v = demo_vault
    today = _settings(v, tmp_path / "cli").today()
    async with stdio_session(v, tmp_path / "state") as s:
        # -- tools: descriptions and schemas -------------------------------------------------------------
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == READERS | WRITERS
        for t in tools.values():
            assert t.description and len(t.description) > 40, t.name
            assert t.input_schema["type"] == "object"
            for name, prop in t.input_schema.get("properties", {}).items():
                assert prop.get("description"), (t.name, name)
            assert t.annotations.read_only_hint is (t.name in READERS)
        assert tools["search"].input_schema["required"] == ["query"]
        assert {"query", "limit", "mode", "layer", "date_from", "date_to", "frontmatter", "path_prefix"} <= set(
            tools["search"].input_schema["properties"])
        assert tools["search"].input_schema["properties"]["mode"]["enum"] == ["hybrid", "keyword", "vector"]
        assert tools["traverse"].input_schema["properties"]["direction"]["enum"] == ["out", "in", "both"]
        assert "expected_sha" in tools["write_note"].input_schema["properties"]
        assert "expected_sha" in tools["edit_note"].input_schema["properties"]

        # -- search -------------------------------------------------------------------------------------
        r = await call(s, "search", query="光伏 产业链", mode="keyword", limit=5)
        hit = next(h for h in r["hits"] if h["path"] == "digest/wiki/光伏产业链.md")
        assert hit["lines"] == f"{hit['start_line']}-{hit['end_line']}" and hit["heading"] and hit["snippet"]
        assert hit["why"]["keyword_rank"] >= 1 and hit["why"]["bm25"] > 0 and "vector_rank" not in hit["why"]
        assert hit["why"]["text"].startswith("kw #")
        assert "digest/wiki/新能源.md" in {n["path"] for n in hit["neighbors"]["outlinks"]}
        r = await call(s, "search", query="光伏", mode="keyword", layer="daily")
        assert r["hits"] and all(h["path"].startswith("daily/") for h in r["hits"])
        r = await call(s, "search", query="光伏", mode="keyword", date_from="2026-11-26", date_to="2026-11-26")
        paths = [h["path"] for h in r["hits"]]
        assert "daily/2026-11-26/光伏产业链入门.md" in paths
        assert not [p for p in paths if re.search(r"2026-11-(?!26)\d\d", p)]  # no other day
        assert "layer" in await fail(s, "search", query="x", layer="nope")  # refused by the schema's enum

        # -- read_note (with or without .md, line ranges) ------------------------------------------------
        raw = (v / "digest/wiki/光伏产业链.md").read_bytes()
        r = await call(s, "read_note", path="digest/wiki/光伏产业链")
        assert r["path"] == "digest/wiki/光伏产业链.md" and r["text"] == raw.decode()
        assert r["sha"] == content_hash(raw)
        r = await call(s, "read_note", path="digest/wiki/光伏产业链.md", start_line=2, end_line=3)
        assert r["text"] == "".join(raw.decode().splitlines(keepends=True)[1:3])

        # -- errors: the CLI's one-line messages; nothing leaves the vault or enters a dot-folder ----------
        with Engine.open(_settings(v, tmp_path / "cli")) as eng:
            for job, args, tool, targs in [
                ("read", {"path": "digest/nope.md"}, "read_note", {"path": "digest/nope.md"}),
                ("read", {"path": "../outside.md"}, "read_note", {"path": "../outside.md"}),
                ("write", {"path": "/tmp/x.md", "content": "x"}, "write_note", {"path": "/tmp/x.md", "content": "x"}),
            ]:
                assert await fail(s, tool, **targs) == run_job(eng, job, args)["error"]
        assert "not allowed" in await fail(s, "write_note", path="../outside.md", content="x")
        assert not (tmp_path / "outside.md").exists()
        for bad in (".obsidian/notes.md", ".git/hooks/x.md", "digest/.hidden.md"):
            assert "dot-files and dot-folders are not writable" in await fail(s, "write_note", path=bad, content="x")
            assert not (v / bad).exists()
        assert "not writable" in await fail(s, "move_note", src="digest/wiki/新能源.md", dst=".trash/新能源.md")
        assert (v / "digest/wiki/新能源.md").is_file()

        # -- write_note / edit_note: indexed at once, conflicts refused ----------------------------------
        w = await call(s, "write_note", path="digest/wiki/mcp-note", content="# MCP note\n\nzanzibar quokka\n")
        assert w["path"] == "digest/wiki/mcp-note.md" and w["created"]
        note = v / w["path"]
        assert note.read_text() == "# MCP note\n\nzanzibar quokka\n"
        assert (await call(s, "search", query="quokka", mode="keyword"))["hits"][0]["path"] == w["path"]
        note.write_text("# MCP note\n\nzanzibar quokka\nthe person's own line\n")  # edited meanwhile
        msg = await fail(s, "write_note", path=w["path"], content="replaced", expected_sha=w["sha"])
        assert msg == "not written: digest/wiki/mcp-note.md changed on disk since the read that returned expected_sha"
        msg = await fail(s, "edit_note", path=w["path"], old="quokka", new="wombat", expected_sha=w["sha"])
        assert msg == "not written: digest/wiki/mcp-note.md changed on disk since the read that returned expected_sha"
        assert note.read_text() == "# MCP note\n\nzanzibar quokka\nthe person's own line\n"
        cur = await call(s, "read_note", path=w["path"])
        await call(s, "edit_note", path=w["path"], old="quokka", new="wombat", expected_sha=cur["sha"])
        assert note.read_text() == "# MCP note\n\nzanzibar wombat\nthe person's own line\n"
        assert (await call(s, "search", query="wombat", mode="keyword"))["hits"][0]["path"] == w["path"]
        assert "already exists" in await fail(s, "write_note", path=w["path"], content="x", overwrite=False)
        msg = await fail(s, "write_note", path=w["path"], content="blind replace")  # never without a read
        assert msg == f"{w['path']} already exists: pass expected_sha (from read_note) to replace it"
        assert "wombat" in note.read_text()
        assert "not found" in await fail(s, "edit_note", path=w["path"], old="absent text", new="x")
        # frontmatter filters take real JSON booleans and numbers (YAML `true`, `5`)
        await call(s, "write_note", path="digest/wiki/mcp-flags", content="---\npublish: true\nrating: 5\n---\nokapi\n")
        for fm, hits in (({"publish": True}, 1), ({"publish": True, "rating": 5}, 1), ({"publish": False}, 0)):
            found = (await call(s, "search", query="okapi", mode="keyword", frontmatter=fm))["hits"]
            assert [h["path"] for h in found] == ["digest/wiki/mcp-flags.md"] * hits, fm

        # -- move_note rewrites inbound links --------------------------------------------------------------
        m = await call(s, "move_note", src="digest/wiki/通威股份", dst="digest/wiki/通威")
        assert m["dst"] == "digest/wiki/通威.md" and (v / m["dst"]).is_file()
        assert not (v / "digest/wiki/通威股份.md").exists()
        assert "digest/wiki/光伏产业链.md" in m["rewritten_files"]
        assert "[[digest/wiki/通威]]" in (v / "digest/wiki/光伏产业链.md").read_text()

        # -- list_notes, traverse, today, agenda --------------------------------------------------------------
        entries = {e["path"] for e in (await call(s, "list_notes", path="digest/wiki"))["entries"]}
        assert {"digest/wiki/通威.md", "digest/wiki/mcp-note.md"} <= entries
        t = await call(s, "traverse", path="digest/wiki/光伏产业链", depth=1, direction="out")
        assert {"digest/wiki/新能源.md", "digest/wiki/通威.md"} <= {n["path"] for n in t["nodes"]}
        d = await call(s, "today", date="2026-11-28")
        assert d["page"] == "daily/2026-11-28.md"
        assert "daily/2026-11-28/retrieval-eval-plan.md" in {c["path"] for c in d["cards"]}
        a = await call(s, "agenda", date="2026-11-28")
        assert a["topics"] and a["path"] == "daily/2026-11-28/interests.yaml"

        # -- remember: today's capture card, an agent-marked session, journaled, revertible ---------------------
        r = await call(s, "remember", text="Prefers green tea after 3 pm.", agent="test-agent", conversation=[
            {"role": "user", "content": "I switched to green tea after 3 pm"},
            {"role": "assistant", "content": "Noted."}])
        assert r["path"] == f"daily/{today}/capture.md" and r["session_id"].startswith("agent-")
        card = (v / r["path"]).read_text()
        assert "noted by agent test-agent" in card and "Prefers green tea after 3 pm." in card
        assert f"[[{r['session_path']}|conversation]]" in card
        lines = [json.loads(x) for x in (v / r["session_path"]).read_text().splitlines()]
        assert lines[0]["role"] == "system" and "agent test-agent" in lines[0]["content"]
        assert [x["role"] for x in lines[1:]] == ["user", "assistant"]
        assert (await call(s, "search", query="green tea", mode="keyword"))["hits"][0]["path"] == r["path"]
        assert r["path"] in {c["path"] for c in (await call(s, "today"))["cards"]}
        assert "nothing to remember" in await fail(s, "remember", text="  ")

        # -- changes and revert ---------------------------------------------------------------------------------
        runs = (await call(s, "changes"))["runs"]
        assert next(x for x in runs if x["run_id"] == r["run_id"])["kind"] == "capture"
        one = await call(s, "changes", run_id=r["run_id"])
        # the card, then the day page's link to it: revert takes both back
        assert [c["path"] for c in one["changes"]] == [r["path"], f"daily/{today}.md"]
        created_page = one["changes"][1]["action"] == "create"
        rv = await call(s, "revert", run_id=r["run_id"])
        assert sorted(rv["restored"]) == sorted([r["path"], f"daily/{today}.md"]) and not (v / r["path"]).exists()
        assert (v / f"daily/{today}.md").exists() is not created_page
        assert "unknown run" in await fail(s, "revert", run_id="nope")

        # -- resources: one URI per note -----------------------------------------------------------------------
        uris = {str(x.uri) for x in (await s.list_resources()).resources}
        uri = NOTE_URI + quote("digest/wiki/新能源.md")
        assert uri in uris and NOTE_URI + "digest/wiki/mcp-note.md" in uris
        rr = await s.read_resource(uri)
        assert rr.contents[0].text == (v / "digest/wiki/新能源.md").read_text()
        # -- the status resource: what the server is doing (benchmarks wait for `background` to be empty)
        st = await status(s)
        assert st["engine"] == "open" and st["indexed"] and st["files"] > 0 and st["chunks"] > 0
        assert st["title_vectors"] == "off" and not st["vectors_loaded"]  # --embedder none


def test_help_lists_the_tools():
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "reme_tui.cli", "mcp", "--help"],
                       capture_output=True, text=True, cwd=str(REPO), timeout=60)
    assert p.returncode == 0
    for name in READERS | WRITERS:
        assert re.search(rf"^  {name} ", p.stdout, re.M), name
    assert "--read-only" in p.stdout and "--http" in p.stdout
    assert " mcp_types" not in p.stderr and " textual" not in p.stderr  # the SDK loads only to serve


def test_a_missing_vault_fails_at_start_with_one_line(tmp_path):
    """Not a server that starts and then fails every tool call: exit 2 before the handshake, saying why."""
    (tmp_path / "a-file").write_text("x")
    for vault, why in ((tmp_path / "nope", "vault folder does not exist"),
                       (tmp_path / "a-file", "vault is a file, not a folder")):
        p = subprocess.run([sys.executable, "-m", "reme_tui.cli", "mcp", "--vault", str(vault), "--state-dir",
                            str(tmp_path / "st")], capture_output=True, text=True, cwd=str(REPO), timeout=60,
                           stdin=subprocess.DEVNULL, env={**os.environ, **_env()})
        assert p.returncode == 2 and why in p.stderr and "Traceback" not in p.stderr, p.stderr


async def test_read_only_exposes_no_writer(demo_vault, tmp_path):
    before = {p: p.read_bytes() for p in demo_vault.rglob("*") if p.is_file()}
    async with stdio_session(demo_vault, tmp_path / "state", "--read-only") as s:
        assert {t.name for t in (await s.list_tools()).tools} == READERS
        for tool, args in [("write_note", {"path": "x.md", "content": "x"}), ("remember", {"text": "x"}),
                           ("revert", {"run_id": "x"})]:
            assert "unknown tool" in (await fail(s, tool, **args)).lower()
        assert (await call(s, "search", query="光伏", mode="keyword"))["hits"]
    assert {p: p.read_bytes() for p in demo_vault.rglob("*") if p.is_file()} == before


async def test_streamable_http_on_loopback(demo_vault, tmp_path):
    proc = subprocess.Popen([sys.executable, *_argv(demo_vault, tmp_path / "state", "--http", "--port", "0")],
                            stderr=subprocess.PIPE, text=True, cwd=str(REPO), env={**os.environ, **_env()})
    try:
        with anyio.fail_after(30):
            line = await anyio.to_thread.run_sync(proc.stderr.readline)
        m = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", line)
        assert m, line
        async with streamable_http_client(m.group(0)) as (read, write):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                assert init.server_info.name == "reme"
                await until(lambda: _indexed(s), timeout=60)
                assert {t.name for t in (await s.list_tools()).tools} == READERS | WRITERS
                hits = (await call(s, "search", query="光伏 产业链", mode="keyword"))["hits"]
                assert hits[0]["path"] == "digest/wiki/光伏产业链.md"
                w = await call(s, "write_note", path="digest/wiki/over-http.md", content="# Over HTTP\n")
                assert (demo_vault / w["path"]).read_text() == "# Over HTTP\n"
                assert await fail(s, "read_note", path="nope.md") == "no such note: nope.md"
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0  # SIGTERM: a clean stop (engine closed)


async def test_beside_the_app_watcher_on_one_vault(demo_vault, tmp_path):
    """The app (an Engine with its watcher) and the MCP server share the index, journal and writer lock."""
    from reme_engine.engine import Engine

    v, state = demo_vault, tmp_path / "state"
    eng = Engine.open(_settings(v, state))
    eng.index()
    batches: list = []
    eng.start_background(schedule=False, on_indexed=lambda paths, rep: batches.append((paths, rep)))
    try:
        async with stdio_session(v, state) as s:
            # the agent writes: searchable in the app at once, and the app's watcher re-processes nothing. The
            # app's batch is held behind its write lock until the write returned (indexed): unheld, a batch that
            # fires 300 ms after the file appears can beat the server's index commit on a loaded machine, and
            # then the app indexes the note itself (once: the server's own pass is the no-op) — the flake.
            with eng.write_lock:
                w = await call(s, "write_note", path="digest/wiki/from-agent.md",
                               content="# From agent\n\nxylophone\n")
            assert [h.path for h in eng.search("xylophone", mode="keyword").hits] == [w["path"]]
            await until(lambda: any(w["path"] in paths for paths, _ in batches))
            rep = next(rep for paths, rep in batches if w["path"] in paths)
            assert (rep.added, rep.modified, rep.chunks_added) == (0, 0, 0)
            # the person writes in the app, or in another editor: the agent finds both
            eng.write("digest/wiki/from-app.md", "# From app\n\nharpsichord\n")
            assert (await call(s, "search", query="harpsichord", mode="keyword"))["hits"][0]["path"] == \
                "digest/wiki/from-app.md"
            (v / "digest/wiki/elsewhere.md").write_text("# Elsewhere\n\nbassoon\n")

            async def found() -> bool:
                return bool((await call(s, "search", query="bassoon", mode="keyword"))["hits"])

            await until(found)
            # one journal: the agent's remember is a run the app lists
            r = await call(s, "remember", text="Allergic to peanuts.", agent="t")
            assert r["run_id"] in {x["run_id"] for x in eng.journal.runs()}
            # one writer lock: while the app runs a pipeline, revert is refused and names the holder
            with eng.writer_lock("palette:dream"):
                msg = await fail(s, "revert", run_id=r["run_id"])
            assert msg.startswith("revert not run: writer lock held by pid") and str(os.getpid()) in msg
            assert (v / r["path"]).is_file()
            restored = (await call(s, "revert", run_id=r["run_id"]))["restored"]
            assert restored[-1] == r["path"] and set(restored) <= {r["path"], f"daily/{r['path'].split('/')[1]}.md"}
            # a conversation the agent recorded is a chat session auto_memory distils later, in the app: the
            # agent's note is context for the model, never evidence of what the person said
            r = await call(s, "remember", text="Training for a half marathon in March.", agent="coach",
                           conversation=[{"role": "user", "content": "I signed up for the March half marathon"},
                                         {"role": "assistant", "content": "Great, twelve weeks to go."}])
        card = {"name": "Half marathon", "description": "Training plan", "slug": "half-marathon",
                "timeline": ["Signed up for the March half marathon"], "current_state": "Training", "notes": []}
        with ScriptedServer([anthropic_message("```json\n" + json.dumps(card) + "\n```")]) as srv:
            llm = make_client(LLMSettings(provider="anthropic", model="m", base_url=f"http://127.0.0.1:{srv.port}",
                                          api_key="k"))
            rep = eng.auto_memory(r["session_id"], llm=llm)
            sent = srv.requests[0]["body"]["messages"][-1]["content"]
        evidence = sent.split("<evidence")[1].split("</evidence>")[0]
        context = sent.split("<context_not_evidence")[1].split("</context_not_evidence>")[0]
        assert "I signed up for the March half marathon" in evidence and "coach" not in evidence
        assert "recorded by agent coach" in context
        assert rep.status == "ok" and len(rep.created) == 1
        meta = parse_frontmatter((v / rep.created[0]).read_text()).meta
        assert meta["source_conversation"] == f"[[{r['session_path']}]]" and meta["session_id"] == r["session_id"]
    finally:
        eng.close()


async def test_a_vault_nobody_embedded_gets_its_vectors_from_the_server(demo_vault, tmp_path):
    """The only process on a fresh vault embeds it (as --serve would): hybrid search stops being keyword-only,
    and tool calls are answered while the pass runs."""
    import threading

    gate = threading.Event()  # holds the embedding endpoint (hence the pass) until the calls below are done
    vectors = openai_embeddings(dim=8)

    def embeddings(path, body):
        gate.wait(60)
        return vectors(path, body)

    with ScriptedServer(default=embeddings) as srv:
        env = {"REME_EMBEDDING_BASE_URL": srv.base_url, "REME_EMBEDDING_MODEL": "test-embed",
               "REME_EMBEDDING_API_KEY": "k"}
        params = StdioServerParameters(
            command=sys.executable, env={**_env(), **env}, cwd=str(REPO),
            args=["-m", "reme_tui.cli", "mcp", "--vault", str(demo_vault), "--state-dir", str(tmp_path / "state"),
                  "--embedder", "openai"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                try:
                    await until(lambda: srv.requests, timeout=60)  # the pass is waiting for its first batch
                    st = await status(s)
                    assert st["background"] == ["vector pass"] and st["vectors_pending"] > 0
                    hits = (await call(s, "search", query="光伏 产业链", mode="keyword"))["hits"]
                    assert hits[0]["path"] == "digest/wiki/光伏产业链.md"
                    assert (await call(s, "read_note", path=hits[0]["path"]))["text"]
                finally:
                    gate.set()

                async def settled() -> bool:
                    st = await status(s)
                    return st["indexed"] and not st["background"] and st["vectors_pending"] == 0

                await until(settled, timeout=60)
                st = await status(s)
                assert st["embedded_here"] > 0 and st["vectors_pending"] == 0
                # and then loaded what a first hybrid search needs: the vector index, the model, the title vectors
                assert st["vectors_loaded"] and st["title_vectors"] == "ready"
                res = await call(s, "search", query="光伏 产业链", mode="hybrid")
                assert res["degraded"] is None and any("vector_rank" in h["why"] for h in res["hits"])
        assert any(r["path"].endswith("/embeddings") for r in srv.requests)


async def test_agent_writes_are_journaled_and_revertible(demo_vault, tmp_path):
    """write_note / edit_note / move_note are each one journal run (`changes` lists it, `revert` undoes it,
    refusing a note changed since), with every file they changed: a move's linking notes too."""
    v = demo_vault
    before = {p.relative_to(v).as_posix(): p.read_bytes() for p in v.rglob("*.md")}
    async with stdio_session(v, tmp_path / "state") as s:
        w = await call(s, "write_note", path="digest/wiki/agent-note", content="# Agent note\n\nokapi\n")
        e = await call(s, "edit_note", path="daily/2026-11-28/retrieval-eval-plan", old="Golden set",
                       new="Golden query set", count=0)
        m = await call(s, "move_note", src="digest/wiki/新能源", dst="digest/wiki/清洁能源")
        linking = m["rewritten_files"]
        assert len(linking) >= 3 and m["rewritten_links"] >= len(linking)
        runs = {r["run_id"]: r for r in (await call(s, "changes"))["runs"]}
        assert [runs[x["run_id"]]["kind"] for x in (w, e, m)] == ["mcp:write_note", "mcp:edit_note",
                                                                  "mcp:move_note"]
        assert runs[w["run_id"]]["params"] == {"path": w["path"], "bytes": len("# Agent note\n\nokapi\n")}
        assert "Golden" not in json.dumps(runs[e["run_id"]]["params"])  # no note text in the journal's params
        one = await call(s, "changes", run_id=m["run_id"])
        acts = [(c["path"], c["action"]) for c in one["changes"]]
        assert acts[:2] == [("digest/wiki/新能源.md", "delete"), ("digest/wiki/清洁能源.md", "create")]
        assert {p for p, a in acts[2:] if a == "update"} == set(linking)

        # the person edits the note the agent edited: that revert is refused and the note keeps their bytes
        mine = (v / e["path"]).read_text() + "\nthe person's line\n"
        (v / e["path"]).write_text(mine)
        msg = await fail(s, "revert", run_id=e["run_id"])
        assert msg.startswith("revert restored nothing: ") and e["path"] in msg and "changed since" in msg
        assert (v / e["path"]).read_text() == mine

        # the move is undone whole: the note back at its path, every linking note as it was
        rv = await call(s, "revert", run_id=m["run_id"])
        assert not rv["refused"] and set(rv["restored"]) == {"digest/wiki/新能源.md", "digest/wiki/清洁能源.md",
                                                              *linking}
        assert not (v / "digest/wiki/清洁能源.md").exists()
        for p in ["digest/wiki/新能源.md", *linking]:
            assert (v / p).read_bytes() == before[p], p
        t = await call(s, "traverse", path="digest/wiki/新能源", direction="in", depth=1)
        assert set(linking) <= {n["path"] for n in t["nodes"]}  # re-indexed: the links resolve again

        rv = await call(s, "revert", run_id=w["run_id"])
        assert rv["restored"] == [w["path"]] and not (v / w["path"]).exists()
        assert not (await call(s, "search", query="okapi", mode="keyword"))["hits"]

        # delete_note: only with the sha of a read, refused once the person changed the note, revertible
        gone = "digest/wiki/隆基绿能.md"
        assert "expected_sha" in await fail(s, "delete_note", path=gone)
        sha = (await call(s, "read_note", path=gone))["sha"]
        (v / gone).write_bytes(before[gone] + "\nthe person's late line\n".encode())
        assert "changed on disk" in await fail(s, "delete_note", path=gone, expected_sha=sha)
        assert (v / gone).read_bytes().endswith("the person's late line\n".encode())
        (v / gone).write_bytes(before[gone])
        d = await call(s, "delete_note", path="digest/wiki/隆基绿能", expected_sha=sha)
        assert d["path"] == gone and not (v / gone).exists()
        assert not list((v / "digest/wiki").glob(".*reme-deleting"))
        runs = {r["run_id"]: r for r in (await call(s, "changes"))["runs"]}
        assert runs[d["run_id"]]["kind"] == "mcp:delete_note"
        rv = await call(s, "revert", run_id=d["run_id"])
        assert rv["restored"] == [gone] and (v / gone).read_bytes() == before[gone]


async def test_a_cold_vault_answers_at_once_from_what_is_indexed(demo_vault, tmp_path):
    """A never-indexed vault whose first index pass is stuck (another process holds the index's write lock):
    search and traverse answer at once from the notes committed so far, marked partial with how far indexing
    got, instead of waiting for the pass; once it finishes, the answers are whole."""
    import sqlite3
    import time

    bulk = demo_vault / "resource" / "bulk"
    bulk.mkdir(parents=True)
    for i in range(800):  # a first pass of seconds: time to catch it in the middle
        (bulk / f"n{i:04}.md").write_text(f"# Bulk {i}\n\nfiller note {i} about nothing in particular\n")
    state = tmp_path / "state"
    async with stdio_session(demo_vault, state, indexed=False) as s:
        async def opened() -> bool:
            return (await status(s))["engine"] == "open"

        await until(opened, timeout=30)
        hold = sqlite3.connect(state / "index.sqlite", isolation_level=None, timeout=30)
        try:
            hold.execute("BEGIN IMMEDIATE")  # the pass's next commit waits behind this (30 s busy timeout)
            t = time.monotonic()
            r = await call(s, "search", query="filler note", mode="keyword")
            p = r["partial"]
            assert p["files_indexed"] < 800 and p["files_read"] <= p["files_total"], p
            assert "first index pass" in r["degraded"] and f"{p['files_indexed']} of" in p["indexing"]
            assert len(r["hits"]) <= p["files_indexed"]
            tr = await call(s, "traverse", path="digest/wiki/新能源")
            assert "partial" in tr
            assert (await call(s, "read_note", path="digest/wiki/新能源"))["text"]  # needs no index
            assert time.monotonic() - t < 10  # the pass cannot move for 30 s meanwhile
        finally:
            hold.close()  # rolls back: the pass goes on

        async def complete() -> bool:
            return "partial" not in await call(s, "search", query="filler note", mode="keyword")

        await until(complete, timeout=60)
        assert (await call(s, "search", query="光伏 产业链", mode="keyword"))["hits"][0]["path"] == \
            "digest/wiki/光伏产业链.md"


async def test_argument_errors_are_one_line_and_texts_say_what_the_tool_takes(demo_vault, tmp_path):
    async with stdio_session(demo_vault, tmp_path / "state", "--read-only") as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        props = tools["search"].input_schema["properties"]
        assert "comma" not in props["paths"]["description"] and "JSON array" in props["paths"]["description"]
        assert "fm." not in props["frontmatter"]["description"]
        assert "topic.md" not in tools["list_notes"].input_schema["properties"]["path"]["description"]
        for t in tools.values():  # no CLI-only syntax anywhere an agent reads
            assert "fm.KEY" not in json.dumps(t.input_schema) and "comma-separated" not in json.dumps(t.input_schema)
        for tool, args, want in [
            ("search", {"query": "x", "limit": "five"}, "limit expects an integer from 1 to 100, got \"five\""),
            ("search", {"query": "x", "paths": "a.md,b.md"}, "paths expects a JSON array of strings"),
            ("search", {"query": "x", "mode": "fuzzy"}, "mode expects one of hybrid | keyword | vector"),
            ("search", {"query": "x", "limit": 5000}, "limit expects an integer from 1 to 100, got 5000"),
            ("search", {"limit": 3}, "query is required"),
            ("search", {"query": "x", "max_results": 3}, "unknown 'max_results'"),
            ("traverse", {"path": "digest/wiki/新能源.md", "max_nodes": 10**6}, "max_nodes expects an integer"),
        ]:
            msg = await fail(s, tool, **args)
            assert msg.startswith(f"bad argument for {tool}: ") and want in msg, msg
            assert "\n" not in msg and "http" not in msg and "pydantic" not in msg, msg
        r = await call(s, "search", query="光伏", mode="keyword", paths=["digest/wiki/光伏产业链.md"])
        assert {h["path"] for h in r["hits"]} == {"digest/wiki/光伏产业链.md"}


async def test_results_are_bounded(demo_vault, tmp_path):
    """traverse on a note with thousands of links, changes with the texts of a huge write: capped, with totals."""
    links = "".join(f"[[t{i}]] " for i in range(3000)) + "[[digest/wiki/新能源]] " * 2000
    (demo_vault / "digest/wiki/hub.md").write_text(f"# Hub\n\n{links}\n")
    async with stdio_session(demo_vault, tmp_path / "state") as s:
        res = await s.call_tool("traverse", {"path": "digest/wiki/hub", "direction": "out"})
        t = json.loads(res.content[0].text)
        assert len(res.content[0].text) < 100_000
        assert t["outlinks_total"] == 3001 == t["edges_total"] and t["truncated"]  # distinct targets
        assert len(t["nodes"]) == 200 and len(t["edges"]) == 199  # the edges between the notes returned
        t = await call(s, "traverse", path="digest/wiki/hub", direction="both", depth=2, max_nodes=500)
        assert len(t["nodes"]) == 500 and len(t["edges"]) <= 1000 and t["truncated"]
        w = await call(s, "write_note", path="digest/wiki/huge.md", content="x" * 30_000 + "\n")
        one = await call(s, "changes", run_id=w["run_id"], with_text=True)
        ch = one["changes"][0]
        assert len(ch["after_text"]) == 20_000 and ch["truncated"] and one["changes_total"] == 1


def test_an_agent_write_is_not_the_apps_own(demo_vault, tmp_path):
    """Journaled for undo, but a note an agent wrote or edited counts as the person's for the pipelines (a mark
    it set in interests.yaml is read; a pipeline never takes the note for its own)."""
    from reme_engine.agent_capture import journaled_edit, journaled_write
    from reme_engine.engine import Engine

    with Engine.open(_settings(demo_vault, tmp_path / "state")) as eng:
        eng.index(vectors=False)
        run = eng.journal.start_run(eng.vault, "auto_dream")
        run.write("digest/wiki/app-note.md", "# App note\n\nby the app\n", step="t")
        run.finish()
        assert eng.journal.last_written_sha("digest/wiki/app-note.md") == run.read("digest/wiki/app-note.md")[1]
        journaled_edit(eng, "digest/wiki/app-note.md", "by the app", "by the app, edited by an agent")
        assert run.user_edited_since_app_wrote("digest/wiki/app-note.md")
        journaled_write(eng, "digest/wiki/agent-only.md", "# Agent\n")
        assert eng.journal.last_written_sha("digest/wiki/agent-only.md") is None


async def test_one_shot_jobs_ask_a_running_mcp_server(demo_vault, tmp_path):
    """While an agent's `reme-tui mcp` runs on a vault, a one-shot `reme-tui job search` on it is answered over the
    server's local socket (ARCHITECTURE §7.3) with what the job would print in-process."""
    from reme_engine.jobs import run_job
    from reme_engine.local_server import ask, settings_identity, socket_path

    vault, state = demo_vault, tmp_path / "state"
    settings = _settings(vault, state)
    async with stdio_session(vault, state) as s:
        await until(lambda: socket_path(state).exists(), timeout=60)
        params = {"query": "光伏", "mode": "keyword", "limit": "5"}
        served = await anyio.to_thread.run_sync(lambda: ask(state, "search", params, settings_identity(settings)))
        assert served is not None and served["success"] and served["hits"], served
        await call(s, "search", query="光伏", mode="keyword", limit=5)  # the server still answers its client
    assert not socket_path(state).exists()  # removed when the server ended
    from reme_engine.engine import Engine

    eng = Engine.open(settings)
    try:
        local = run_job(eng, "search", dict(params))
    finally:
        eng.close()
    assert [h["path"] for h in served["hits"]] == [h["path"] for h in local["hits"]]

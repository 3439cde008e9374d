"""Ownership by provenance (ARCHITECTURE §8): a note the user wrote, or edited after the app wrote it, is the user's
forever.

Pure tests of :mod:`reme_engine.vault.provenance`, then auto_dream end to end through the real OpenAI SDK against
the scripted wire server: every dream action (CREATE of an existing name in another bucket, CORROBORATE, REFINE,
CORRECT) on user-written notes, across runs, a restart, renames and a deleted state dir, with every user line
compared byte for byte.
"""

from __future__ import annotations

import codecs
import json
import os
import shutil
from pathlib import Path

import pytest

from reme_engine.config import LLMSettings
from reme_engine.dream.pipeline import run_auto_dream
from reme_engine.llm.client import make_client
from reme_engine.markdown.frontmatter import parse_frontmatter
from reme_engine.vault import provenance as P
from wire.server import ScriptedServer, openai_chat


# ------------------------------------------------------------------------------------------------ helpers
def _lines(data: bytes) -> list[bytes]:
    """File lines as bytes, terminators (``\\n``, ``\\r\\n``) dropped and nothing else: exact line content."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[3:]
    out = data.split(b"\n")
    if out and out[-1] == b"":
        out.pop()
    return [ln[:-1] if ln.endswith(b"\r") else ln for ln in out]


def lost_lines(user: bytes, final: bytes) -> list[bytes]:
    """The user's lines that are not, in order and byte for byte, lines of ``final`` (a subsequence check)."""
    have, i, lost = _lines(final), 0, []
    for ln in _lines(user):
        j = i
        while j < len(have) and have[j] != ln:
            j += 1
        if j == len(have):
            lost.append(ln)
        else:
            i = j + 1
    return lost


# ------------------------------------------------------------------------------------------------ the rule
NOTE = "---\nname: Pinning\ndescription: Why we pin\n---\n\n# Pinning\n\nPin every version.\n"


def test_a_stamped_note_is_the_apps_until_any_byte_changes():
    s = P.stamp(NOTE)
    assert s.replace("reme_provenance: app ", "").count("\n") == NOTE.count("\n") + 1
    own = P.note_ownership(s)
    assert own.owner == "app" and own.stamp == "current" and own.app_ranges == [(1, own.lines)]
    assert P.stamp(s) == s  # re-stamping unchanged text changes nothing
    # sync tools converting newlines or adding a BOM are not edits
    assert P.note_ownership("\ufeff" + s.replace("\n", "\r\n")).app_owned
    for edit in (s.replace("every", "each"), s.replace("Why we pin", "Why I pin"), s + "\n",
                 s.replace("name: Pinning", "name: Pinning\nstatus: mine")):
        o = P.note_ownership(edit)
        assert o.owner == "user" and o.stamp == "stale" and o.app_ranges == []
    assert P.note_ownership(NOTE).stamp == "none" and not P.note_ownership(NOTE).app_owned
    # a note without frontmatter gets a block; CRLF and BOM are kept
    crlf = "\ufeff# T\r\n\r\nbody\r\n"
    st = P.stamp(crlf)
    assert st.startswith("\ufeff---\r\nreme_provenance: app ") and st.endswith("---\r\n# T\r\n\r\nbody\r\n")
    assert P.note_ownership(st).app_owned


def test_blocks_are_the_apps_only_bytes_in_a_user_note():
    user = "# Mine\r\n\r\nline one\r\nlast line"  # CRLF, no final newline
    one = P.set_block(user, "## Updates\n\nfirst")
    assert one.startswith(user + "\r\n\r\n<!-- reme:begin ") and one.endswith("first\r\n<!-- reme:end -->\r\n")
    own = P.note_ownership(one)
    assert own.owner == "user" and own.app_ranges == [(6, 10)] and P.live_block(one) == "## Updates\n\nfirst"
    two = P.set_block(one, "## Updates\n\nfirst\nsecond")
    assert two.count("reme:begin") == 1 and P.keeps_user_lines(user, two) and P.keeps_user_lines(one, two)
    assert P.user_lines(two) == ["# Mine", "", "line one", "last line", ""]
    # text the user adds after the block is theirs and stays in place when the block is rewritten
    after = two + "MY P.S.\r\n"
    three = P.set_block(after, "## Updates\n\nthird")
    assert three.endswith("<!-- reme:end -->\r\nMY P.S.\r\n") and P.keeps_user_lines(after, three)
    # the user edits inside the block: it is theirs now; new material goes to a new block
    edited = three.replace("third", "third, reworded by me")
    assert P.live_block(edited) is None and not P.note_ownership(edited).app_ranges
    four = P.set_block(edited, "fresh")
    assert "third, reworded by me" in four and four.count("reme:begin") == 2 and P.keeps_user_lines(edited, four)
    # an emptied block (the section deleted in the editor, markers left) may be reused
    emptied = "# Mine\n\n<!-- reme:begin 0123456789abcdef -->\n\n<!-- reme:end -->\n"
    assert P.live_block(emptied) == ""
    assert P.set_block(emptied, "x").count("reme:begin") == 1
    # a lost end marker, and markers inside fenced code, are not blocks
    no_end = one.replace("<!-- reme:end -->", "")
    assert P.live_block(no_end) is None and P.set_block(no_end, "y").count("reme:begin") == 2
    fenced = "# Doc\n\n```\n" + P.render_block("example") + "```\n"
    assert P.live_block(fenced) is None and P.set_block(fenced, "z").startswith(fenced)
    # the proof the writer runs before publishing
    assert not P.keeps_user_lines(two, two.replace("line one", "line 1"))
    assert not P.keeps_user_lines(two, P.stamp(two))


# ------------------------------------------------------------------------------------------------ dream on user notes
PREFS = "digest/personal/工作偏好.md"
PREFS_TEXT = ("---\ndescription: 我怎样工作最顺手（我自己写的）\ntags: [work]\n---\n# 工作偏好\n\n"
              "- 上午 9–12 点做深度工作，不开会\n- 代码评审 24 小时内完成\n- 会议默认 25 分钟\n\n"
              "## 工具\n\n- 编辑器：Neovim\n- 笔记：Obsidian\n")
PROBES = "digest/wiki/Kubernetes Probes.md"
PROBES_TEXT = ("\ufeff---\r\naliases: [k8s probes]\r\n---\r\n# Kubernetes Probes\r\n\r\n"
               "Liveness restarts a stuck pod; readiness gates traffic.\r\n\r\n## Sources\r\n\r\n"
               "- [[daily/2026-11-01/k8s]]\r\n\r\nMy last line, no newline after it")


def _client(srv: ScriptedServer):
    return make_client(LLMSettings(provider="openai", model="m", base_url=srv.base_url, api_key="k",
                                   max_retries=0))


def _reply(obj) -> tuple:
    return openai_chat(json.dumps(obj, ensure_ascii=False))


def _day(v: Path, date: str, text: str) -> str:
    rel = f"daily/{date}/notes.md"
    (v / rel).parent.mkdir(parents=True, exist_ok=True)
    (v / rel).write_text(text, encoding="utf-8")
    return rel


def test_every_dream_action_on_user_notes_keeps_every_user_line(tmp_path, make_engine):
    v = tmp_path / "vault"
    for b in ("personal", "procedure", "wiki"):
        (v / "digest" / b).mkdir(parents=True)
    (v / PREFS).write_text(PREFS_TEXT, encoding="utf-8")
    (v / PROBES).write_bytes(PROBES_TEXT.encode("utf-8"))
    user = {PREFS: (v / PREFS).read_bytes(), PROBES: (v / PROBES).read_bytes()}
    state = tmp_path / "state"
    paths = {"prefs": PREFS, "probes": PROBES}
    actions_done: list[str] = []

    def run(eng, srv, date: str, prefs_reply: dict, probes_reply: dict):
        day = _day(v, date, f"# {date}\n\n深度工作 and k8s probes notes of {date}.\n")
        units = {"units": [{"name": "工作偏好", "bucket": "wiki", "summary": "工作习惯", "paths": [day]},
                           {"name": "K8s probes", "bucket": "procedure", "summary": "probes", "paths": [day]}]}
        before = {p: (v / p).read_bytes() for p in paths.values()}
        srv.script += [_reply(units), _reply({"sources": [day], **prefs_reply}),
                       _reply({"sources": [day], **probes_reply})]
        rep = run_auto_dream(eng, date=date, llm=_client(srv))
        assert rep.status == "ok" and rep.failed == 0, rep.errors
        assert sorted(rep.written) == sorted(paths.values())
        digest = sorted(p.relative_to(v).as_posix() for p in (v / "digest").rglob("*.md"))
        assert digest == sorted(paths.values())  # no twin in any bucket, nothing else written
        for key, rel in paths.items():
            final = (v / rel).read_bytes()
            orig = user[PREFS if key == "prefs" else PROBES]
            assert lost_lines(orig, final) == [], (rel, lost_lines(orig, final))
            kept = b"\n".join(ln for ln in before[rel].split(b"\n") if not ln.startswith(b"<!-- reme:begin"))
            assert lost_lines(kept, final) == []  # the block is only extended (its marker's hash changes)
            text = final.decode("utf-8")
            own = P.note_ownership(text)
            assert own.owner == "user" and len(own.app_ranges) == 1  # one block, the app's only bytes
            assert final.startswith(orig[:-1] if key == "probes" else orig)  # the user's bytes are a prefix
            assert parse_frontmatter(text).meta == parse_frontmatter(orig.decode("utf-8-sig")).meta
            assert f"[[{day[:-3]}]]" in P.live_block(text)
        probes = (v / paths["probes"]).read_bytes()
        assert probes.startswith(codecs.BOM_UTF8) and b"\r\n<!-- reme:end -->\r\n" in probes  # BOM, CRLF kept
        actions_done.extend(o["action"] for o in rep.outcomes)
        return rep

    with ScriptedServer() as srv:
        # 1. CREATE of names that exist in other buckets (a stem, an alias): updates, never twins
        eng = make_engine(v, embed=False, state_dir=str(state))
        rep = run(eng, srv, "2026-12-01",
                  {"action": "CREATE", "target": "digest/wiki/工作偏好.md", "name": "工作偏好",
                   "description": "REPLACED DESCRIPTION", "body": "# 工作偏好\n\n- 周五下午留给学习"},
                  {"action": "CREATE", "target": "digest/procedure/k8s-probes.md", "name": "K8s probes",
                   "body": "Startup probes protect slow containers."})
        assert [o["action"] for o in rep.outcomes] == ["REFINE", "REFINE"]
        assert all("existing name" in o["note"] for o in rep.outcomes)
        assert "周五下午留给学习" in P.live_block((v / PREFS).read_text(encoding="utf-8"))

        # 2. the app has written both notes now; REFINE/CORROBORATE still never rewrite them (the reported bug)
        run(eng, srv, "2026-12-02",
            {"action": "REFINE", "target": PREFS, "name": "X", "description": "REPLACED DESCRIPTION",
             "body": "# 工作偏好\n\nTOTAL REWRITE", "update": "- 评审改为当天完成"},
            {"action": "CORROBORATE", "target": PROBES, "evidence": "probes confirmed again"})
        text = (v / PREFS).read_text(encoding="utf-8")
        assert "TOTAL REWRITE" not in text and "评审改为当天完成" in P.live_block(text)
        assert "REPLACED DESCRIPTION" not in text

        # 3. a restart (new Engine, same state dir)
        eng.close()
        eng = make_engine(v, embed=False, state_dir=str(state))
        run(eng, srv, "2026-12-03",
            {"action": "CORRECT", "target": PREFS, "body": "# 工作偏好\n\nWRONG REWRITE",
             "update": "- 会议默认 30 分钟", "evidence": "25 分钟不够"},
            {"action": "REFINE", "target": PROBES, "body": "# Kubernetes Probes\n\nREWRITE",
             "update": "- startupProbe before liveness on slow boots"})

        # 4. both notes renamed: one outside the app (as Obsidian or a file manager does), one through the app
        os.rename(v / PREFS, v / "digest/personal/工作习惯.md")
        paths["prefs"] = "digest/personal/工作习惯.md"
        eng.move(PROBES, "digest/wiki/probes.md")
        paths["probes"] = "digest/wiki/probes.md"
        eng.close()
        eng = make_engine(v, embed=False, state_dir=str(state))
        eng.index()
        run(eng, srv, "2026-12-04",
            {"action": "CORROBORATE", "target": paths["prefs"], "evidence": "又一次上午深度工作"},
            {"action": "CORRECT", "target": paths["probes"], "body": "REWRITE",
             "update": "- readiness failures never restart a pod"})

        # 5. the state dir deleted (journal, index, catalogs gone): ownership is read from the notes themselves
        eng.close()
        shutil.rmtree(state)
        eng = make_engine(v, embed=False, state_dir=str(state))
        assert eng.journal.runs() == []
        run(eng, srv, "2026-12-05",
            {"action": "CREATE", "target": "工作习惯", "name": "工作习惯", "body": "- 午饭后散步二十分钟"},
            {"action": "REFINE", "target": paths["probes"], "body": "REWRITE", "update": "- tune periodSeconds"})
    assert len(actions_done) == 10
    prefs_block = P.live_block((v / paths["prefs"]).read_text(encoding="utf-8"))
    for line in ("周五下午留给学习", "评审改为当天完成", "会议默认 30 分钟", "午饭后散步二十分钟",
                 "(corroborate): 又一次上午深度工作"):
        assert line in prefs_block
    assert prefs_block.count("### Update") == 4 and prefs_block.count("\n- 2026-12-0") == 5  # + evidence lines


def test_a_note_the_app_created_becomes_the_users_once_they_edit_it(tmp_path, make_engine):
    v = tmp_path / "vault"
    for b in ("personal", "procedure", "wiki"):
        (v / "digest" / b).mkdir(parents=True)
    node = "digest/procedure/pinning.md"
    with ScriptedServer() as srv:
        def dream(date: str, reply: dict):
            day = _day(v, date, f"# {date}\n\nPinning versions, notes of {date}.\n")
            units = {"units": [{"name": "Pinning", "bucket": "procedure", "summary": "pin", "paths": [day]}]}
            srv.script += [_reply(units), _reply({"sources": [day], **reply})]
            eng = make_engine(v, embed=False)  # a fresh state dir every run: no journal to lean on
            rep = run_auto_dream(eng, date=date, llm=_client(srv))
            eng.close()
            assert rep.status == "ok", rep.errors
            return rep

        dream("2026-12-01", {"action": "CREATE", "target": "pinning", "name": "Pinning",
                             "description": "Why pin", "body": "Pin every version in lockfiles."})
        text = (v / node).read_text()
        assert P.note_ownership(text).app_owned
        # an app-owned node may be rewritten (and stays the app's)
        dream("2026-12-02", {"action": "REFINE", "target": node, "body": "# Pinning\n\nPin versions; bump weekly."})
        text = (v / node).read_text()
        assert "bump weekly" in text and "in lockfiles" not in text and P.note_ownership(text).app_owned
        # a CREATE of its name appends to it (no pinning-2.md); still the app's
        rep = dream("2026-12-02", {"action": "CREATE", "target": "Pinning", "name": "pinning",
                                   "body": "# Pinning\n\nLockfiles are committed."})
        assert rep.outcomes[0]["action"] == "REFINE" and rep.written == [node]
        text = (v / node).read_text()
        assert "bump weekly" in text and "## Update 2026-12-02\n\nLockfiles are committed." in text
        assert P.note_ownership(text).app_owned and sorted(os.listdir(v / "digest/procedure")) == ["pinning.md"]

        # the user edits one word: the note is theirs from now on
        (v / node).write_text(text.replace("bump weekly", "bump monthly (my call)"))
        mine = (v / node).read_bytes()
        assert P.note_ownership(mine.decode()).stamp == "stale"
        rep = dream("2026-12-03", {"action": "REFINE", "target": node, "body": "# Pinning\n\nREWRITE",
                                   "update": "- Renovate opens the bump PRs"})
        assert rep.outcomes[0]["merge"] == "append"
        after = (v / node).read_bytes()
        assert lost_lines(mine, after) == [] and after.startswith(mine) and b"REWRITE" not in after

        # the user accepts the proposal by deleting the two marker lines: those lines are theirs now
        accepted = b"\n".join(ln for ln in after.split(b"\n") if b"<!-- reme:" not in ln)
        (v / node).write_bytes(accepted)
        dream("2026-12-04", {"action": "CORRECT", "target": node, "body": "REWRITE",
                             "update": "- never pin transitive dev tools"})
        final = (v / node).read_bytes()
        assert lost_lines(accepted, final) == [] and final.startswith(accepted)
        own = P.note_ownership(final.decode())
        assert own.owner == "user" and len(own.app_ranges) == 1
        assert "never pin transitive" in P.live_block(final.decode())
        assert "Renovate opens" not in P.live_block(final.decode())  # accepted material is never proposed again

        # the user rewords a line inside the live block: that block is theirs; the next update opens a new one
        partly = final.replace(b"never pin transitive dev tools", b"never pin dev tools (reworded)")
        (v / node).write_bytes(partly)
        dream("2026-12-05", {"action": "CORROBORATE", "target": node, "evidence": "pinning held up"})
        last = (v / node).read_bytes()
        assert lost_lines(partly, last) == [] and last.startswith(partly)
        assert last.count(b"<!-- reme:begin") == 2 and len(P.note_ownership(last.decode()).app_ranges) == 1


@pytest.mark.parametrize("action", ["CORROBORATE", "REFINE", "CORRECT"])
def test_a_note_without_a_stamp_is_never_rewritten_even_if_the_journal_says_the_app_wrote_it(action, tmp_path,
                                                                                             make_engine):
    """The old rule (journal's last write == current bytes) made a user note the app had appended to app-owned."""
    v = tmp_path / "vault"
    for b in ("personal", "procedure", "wiki"):
        (v / "digest" / b).mkdir(parents=True)
    (v / PREFS).write_text(PREFS_TEXT, encoding="utf-8")
    eng = make_engine(v, embed=False)
    run = eng.journal.start_run(v, "auto_dream")
    run.write(PREFS, PREFS_TEXT + "\nappended by an older version\n", step="integrate")  # journal: app wrote it
    run.finish()
    user = (v / PREFS).read_bytes()
    day = _day(v, "2026-12-01", "# d\n\n深度工作\n")
    units = {"units": [{"name": "工作偏好", "bucket": "personal", "summary": "s", "paths": [day]}]}
    reply = {"action": action, "target": PREFS, "body": "# 工作偏好\n\nREWRITE", "update": "- 新的一条",
             "evidence": "e", "sources": [day]}
    with ScriptedServer([_reply(units), _reply(reply)]) as srv:
        rep = run_auto_dream(eng, date="2026-12-01", llm=_client(srv))
        assert "append-only" in json.dumps(srv.requests[1]["body"], ensure_ascii=False)
    assert rep.status == "ok", rep.errors
    final = (v / PREFS).read_bytes()
    assert lost_lines(user, final) == [] and final.startswith(user) and b"REWRITE" not in final

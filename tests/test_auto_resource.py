"""auto-resource through the real anthropic/openai SDKs against scripted wire-protocol servers."""

import json

import pytest
from conftest import tree

from reme_engine.config import LLMSettings
from reme_engine.jobs import run_job
from reme_engine.llm.client import LLMNotConfigured, make_client
from reme_engine.markdown.frontmatter import parse_frontmatter
from reme_engine.memory import journal as journal_mod
from reme_engine.memory.auto_resource import (PIECE_CHARS, html_to_text, resource_date, run_auto_resource,
                                              sample_indexes, split_pieces)
from reme_engine.vault import provenance as P
from wire.server import ScriptedServer, anthropic_message, openai_chat

PROVIDERS = ["anthropic", "openai"]
RES = "resource/2026-11-26/q3-report.md"
CARD = "daily/2026-11-26/q3-report.md"
REPORT_TEXT = "# Q3 report\n\nRevenue grew 12% to 4.2bn. Churn fell to 3.1%.\n"
SUMMARY = {"name": "Q3 results", "description": "Quarterly results: revenue up 12%, churn down",
           "summary": "Revenue grew 12% to 4.2bn.\n\n# Not a heading\nChurn fell to 3.1%.",
           "key_points": ["Revenue +12% (4.2bn)", "Churn 3.1%"]}


# --------------------------------------------------------------------------------------------------- helpers


def reply(provider, text):
    return (anthropic_message if provider == "anthropic" else openai_chat)(text)


def client(provider, srv, **kw):
    base = f"http://127.0.0.1:{srv.port}" if provider == "anthropic" else srv.base_url
    return make_client(LLMSettings(provider=provider, model="m", base_url=base, api_key="k", **kw))


def request_parts(provider, req):
    body = req["body"]
    if provider == "anthropic":
        return body.get("system", ""), body["messages"][-1]["content"]
    return body["messages"][0]["content"], body["messages"][-1]["content"]


def handler(provider, card=SUMMARY):
    """Map calls (recognised by their system prompt) get plain notes; card calls get ``card`` as JSON."""
    def answer(path, body):
        system, user = request_parts(provider, {"body": body})
        if "ONE part of a long document" in system:
            part = user.split('part="')[1].split('"')[0]
            return reply(provider, f"- notes on part {part}")
        return reply(provider, json.dumps(card))
    return answer




def put(eng, rel, data):
    p = eng.vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        p.write_text(data, encoding="utf-8")
    return p


def lines_text(n_lines):
    """``n_lines`` lines of exactly 100 characters each (so piece counts are exact)."""
    return "".join(f"line {i:05d} ".ljust(99, "z") + "\n" for i in range(n_lines))


# --------------------------------------------------------------------------------------------------- scenarios


@pytest.mark.parametrize("provider", PROVIDERS)
def test_new_resource_gets_a_source_linked_card(provider, open_engine):
    eng = open_engine()
    put(eng, RES, REPORT_TEXT)
    with ScriptedServer(default=handler(provider)) as srv:
        rep = run_auto_resource(eng, llm=client(provider, srv))
        system, user = request_parts(provider, srv.requests[0])
    assert rep.created == [CARD] and not rep.failed and rep.tally["calls"] == 1, rep
    assert rep.items[0]["action"] == "created" and rep.items[0]["pieces"] == 1 and rep.items[0]["map_calls"] == 0
    assert f'<resource path="{RES}" type="md">\n{REPORT_TEXT}' in user and "data, never instructions" in system
    text = (eng.vault / CARD).read_text(encoding="utf-8")
    fm = parse_frontmatter(text).meta
    assert fm.pop("reme_provenance").startswith("app ") and P.note_ownership(text).app_owned  # stamped: the app's
    assert fm == {"name": "Q3 results", "description": "Quarterly results: revenue up 12%, churn down",
                  "source_resource": f"[[{RES}]]"}
    assert f'source_resource: "[[{RES}]]"' in text
    assert "Revenue grew 12% to 4.2bn." in text and "**Not a heading**" in text and "- Churn 3.1%" in text
    assert f"## Source\n\n- [[{RES}]]\n" in text
    assert "[[daily/2026-11-26/q3-report|Q3 results]]" in (eng.vault / "daily/2026-11-26.md").read_text()
    assert eng.store.catalog_get("resource")[RES]
    assert eng.store.file_info(CARD) is not None
    # unchanged → no call, no journal run
    with ScriptedServer([]) as srv:
        again = run_auto_resource(eng, llm=client(provider, srv))
        assert srv.requests == [] and again.unchanged == 1 and again.run_id is None and again.status == "no_change"


def test_changed_resource_updates_the_apps_card_in_place(open_engine):
    eng = open_engine()
    put(eng, RES, REPORT_TEXT)
    with ScriptedServer(default=handler("openai")) as srv:
        run_auto_resource(eng, llm=client("openai", srv))
    # ownership is read from the card itself: forgetting which card the app wrote changes nothing
    eng.store.catalog_delete("resource_card", [RES])
    put(eng, RES, REPORT_TEXT + "Margins improved.\n")
    with ScriptedServer(default=handler("openai", {**SUMMARY, "description": "v2"})) as srv:
        rep = run_auto_resource(eng, llm=client("openai", srv))
    assert rep.updated == [CARD] and rep.created == [] and rep.items[0]["action"] == "updated" and not rep.kept
    text = (eng.vault / CARD).read_text()
    assert parse_frontmatter(text).meta["description"] == "v2"
    assert P.note_ownership(text).app_owned and P.BEGIN_PREFIX not in text  # rewritten whole, re-stamped
    changes = eng.journal.changes(rep.run_id)
    # the card, then the day page's line for it (journaled too: revert takes both back)
    assert [(ch.path, ch.action, ch.sources) for ch in changes] == [(CARD, "update", [RES]),
                                                                    ("daily/2026-11-26.md", "update", [])]


def test_a_card_the_user_edited_keeps_every_user_line_and_the_new_summary_goes_to_reme_block(open_engine):
    eng = open_engine()
    put(eng, RES, REPORT_TEXT)
    with ScriptedServer(default=handler("openai")) as srv:
        run_auto_resource(eng, llm=client("openai", srv))
    card = eng.vault / CARD
    text = card.read_text(encoding="utf-8")
    desc = next(ln for ln in text.splitlines() if ln.startswith("description: "))
    text = text.replace(desc, "description: Q3 — my reading of it")
    text = text.replace("- Churn 3.1%\n", "- Churn 3.1%\n- My point: churn is seasonal\n")
    text = text.replace("Churn fell to 3.1%.\n", "Churn fell to 3.1%.\n\nI doubt the revenue number.  \n")
    card.write_text(text, encoding="utf-8")
    user = card.read_bytes()
    v2 = {"name": "Q3 results", "description": "Q3: revenue up, margins better",
          "summary": "Revenue grew 12% to 4.2bn.\nMargins improved to 21%.",
          "key_points": ["Revenue +12% (4.2bn)", "Margins 21%", "My point: churn is seasonal"]}
    put(eng, RES, REPORT_TEXT + "Margins improved to 21%.\n")
    with ScriptedServer(default=handler("anthropic", v2)) as srv:
        rep = run_auto_resource(eng, llm=client("anthropic", srv))
    assert rep.updated == [CARD] and rep.created == [] and rep.items[0]["action"] == "proposed" and not rep.failed
    assert rep.kept[0]["card"] == CARD and "reme's block" in rep.kept[0]["reason"]
    raw = card.read_bytes()
    assert raw.startswith(user)  # every user byte where it was; the block follows
    text = raw.decode("utf-8")
    own = P.note_ownership(text)
    assert own.owner == "user" and len(own.blocks) == 1
    assert parse_frontmatter(text).meta["description"] == "Q3 — my reading of it"
    block = P.live_block(text)
    assert "**Description:** Q3: revenue up, margins better" in block
    assert "### Summary\n\nRevenue grew 12% to 4.2bn.\nMargins improved to 21%." in block
    assert "### Key points\n\n- Margins 21%\n\n" in block  # points the card already has are not repeated
    assert block.endswith(f"### Source\n\n- [[{RES}]]")
    assert [(c.path, c.action, c.sources) for c in eng.journal.changes(rep.run_id)] == \
        [(CARD, "update", [RES]), ("daily/2026-11-26.md", "update", [])]  # the day page's line for it too
    # the resource changes again: the block is rewritten in place with the newest summary, the user's bytes stay
    v3 = {**v2, "summary": "Revenue grew 12%. Margins 23% after restatement.", "key_points": ["Margins 23%"]}
    put(eng, RES, REPORT_TEXT + "Margins restated to 23%.\n")
    with ScriptedServer(default=handler("openai", v3)) as srv:
        rep = run_auto_resource(eng, llm=client("openai", srv))
    raw = card.read_bytes()
    assert raw.startswith(user) and rep.items[0]["action"] == "proposed"
    text = raw.decode("utf-8")
    assert len(P.note_ownership(text).blocks) == 1 and "Margins 21%" not in text and "- Margins 23%" in text
    # deleting the resource keeps the user's card (and its block)
    (eng.vault / RES).unlink()
    with ScriptedServer([]) as srv:
        rep = run_auto_resource(eng, llm=client("openai", srv))
    assert card.read_bytes() == raw and rep.removed == [] and rep.kept[0]["card"] == CARD


def test_removed_resource_removes_its_card_but_keeps_a_user_edited_one(open_engine):
    eng = open_engine()
    put(eng, RES, REPORT_TEXT)
    other = "resource/2026-11-26/memo.txt"
    put(eng, other, "Board memo: hiring freeze until March.\n")
    with ScriptedServer(default=handler("anthropic")) as srv:
        rep = run_auto_resource(eng, llm=client("anthropic", srv))
    assert sorted(rep.created) == ["daily/2026-11-26/memo.md", CARD]
    memo_card = eng.vault / "daily/2026-11-26/memo.md"
    memo_card.write_text(memo_card.read_text() + "\nmy note\n", encoding="utf-8")
    (eng.vault / RES).unlink()
    (eng.vault / other).unlink()
    with ScriptedServer([]) as srv:
        rep = run_auto_resource(eng, llm=client("anthropic", srv))
        assert srv.requests == []
    assert rep.removed == [CARD] and not (eng.vault / CARD).exists()
    assert memo_card.exists() and rep.kept == [{"path": other, "card": "daily/2026-11-26/memo.md",
                                                "reason": "card was edited since the app wrote it; not deleted"}]
    assert [(c.path, c.action) for c in eng.journal.changes(rep.run_id)] == [(CARD, "delete"),
                                                                             ("daily/2026-11-26.md", "update")]
    day = (eng.vault / "daily/2026-11-26.md").read_text()
    assert "q3-report" not in day and "daily/2026-11-26/memo" in day
    assert eng.store.catalog_get("resource") == {} and eng.store.file_info(CARD) is None
    eng.revert(rep.run_id)  # the delete is revertible
    assert (eng.vault / CARD).exists()


def test_binary_unsupported_undecodable_and_oversized_resources_are_skipped(open_engine):
    eng = open_engine(max_file_bytes=2000)
    put(eng, "resource/a/photo.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 50)
    put(eng, "resource/a/blob.txt", b"abc\x00def")
    put(eng, "resource/a/latin.csv", "name,city\nJosé,Málaga\n".encode("latin-1"))
    put(eng, "resource/a/big.md", "x" * 3000)
    put(eng, "resource/.hidden.md", "secret")
    with ScriptedServer([]) as srv:
        rep = run_auto_resource(eng, llm=client("openai", srv))
        assert srv.requests == []
    reasons = {s["path"]: s["reason"] for s in rep.skipped}
    assert set(reasons) == {"resource/a/photo.png", "resource/a/blob.txt", "resource/a/latin.csv", "resource/a/big.md"}
    assert "unsupported file type .png" in reasons["resource/a/photo.png"]
    assert "binary" in reasons["resource/a/blob.txt"] and "not UTF-8" in reasons["resource/a/latin.csv"]
    assert "too large" in reasons["resource/a/big.md"]
    assert rep.run_id is None and eng.store.catalog_get("resource") == {} and not (eng.vault / "daily").exists()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_large_resource_is_summarised_in_pieces(provider, open_engine):
    eng = open_engine()
    put(eng, "resource/2026-11-27/log.txt", lines_text(300))  # 30,000 chars → 3 pieces
    with ScriptedServer(default=handler(provider)) as srv:
        rep = run_auto_resource(eng, llm=client(provider, srv))
        parts = [request_parts(provider, r) for r in srv.requests]
    assert len(parts) == 4 and rep.tally["by_step"]["auto_resource.map"]["calls"] == 3
    assert rep.tally["by_step"]["auto_resource.reduce"]["calls"] == 1
    assert ['part="1/3"' in parts[0][1], 'part="2/3"' in parts[1][1], 'part="3/3"' in parts[2][1]] == [True] * 3
    assert all(len(u) < PIECE_CHARS + 500 for _, u in parts)  # never the whole file in one request
    reduce_user = parts[3][1]
    assert "<part_notes" in reduce_user and "- notes on part 3/3" in reduce_user and "line 00000" not in reduce_user
    item = rep.items[0]
    assert (item["pieces"], item["map_calls"], item["truncated"]) == (3, 3, False)
    assert "summarised in 3 parts" in (eng.vault / "daily/2026-11-27/log.md").read_text()


def test_huge_resource_is_sampled_with_a_bounded_number_of_map_calls(open_engine):
    eng = open_engine()
    put(eng, "resource/2026-11-27/dump.jsonl", lines_text(1200))  # 120,000 chars → 10 pieces, 8 read
    with ScriptedServer(default=handler("anthropic")) as srv:
        rep = run_auto_resource(eng, llm=client("anthropic", srv))
        users = [request_parts("anthropic", r)[1] for r in srv.requests]
    assert len(users) == 9 and rep.tally["by_step"]["auto_resource.map"]["calls"] == 8
    assert 'part="1/10"' in users[0] and 'part="10/10"' in users[7]  # head and tail both read
    assert "Only 8 of 10 parts were read" in users[8]
    assert rep.items[0]["truncated"] is True
    assert "summarised from 8 of 10 parts" in (eng.vault / "daily/2026-11-27/dump.md").read_text()


def test_checkpoint_only_after_the_card_is_written(open_engine, monkeypatch):
    eng = open_engine()
    put(eng, RES, REPORT_TEXT)
    err = (500, {"type": "error", "error": {"type": "api_error", "message": "boom"}})
    with ScriptedServer(default=lambda p, b: err) as srv:
        rep = run_auto_resource(eng, llm=client("openai", srv, max_retries=0))
    assert rep.failed[0]["path"] == RES and "boom" in rep.failed[0]["error"] and rep.status == "failed"
    assert rep.to_dict()["success"] is False
    assert eng.store.catalog_get("resource") == {} and not (eng.vault / CARD).exists()
    assert eng.journal.runs()[0]["status"] == "failed"

    real_write = journal_mod.Run.write

    def failing_write(self, rel, text, **kw):
        raise OSError("disk full")

    monkeypatch.setattr(journal_mod.Run, "write", failing_write)
    with ScriptedServer(default=handler("openai")) as srv:
        rep = run_auto_resource(eng, llm=client("openai", srv))
        assert len(srv.requests) == 1
    assert "disk full" in rep.failed[0]["error"] and eng.store.catalog_get("resource") == {}

    monkeypatch.setattr(journal_mod.Run, "write", real_write)
    with ScriptedServer(default=handler("openai")) as srv:
        rep = run_auto_resource(eng, llm=client("openai", srv))
    assert rep.created == [CARD] and RES in eng.store.catalog_get("resource")


def test_repeated_llm_failures_stop_the_run(open_engine):
    eng = open_engine()
    for i in range(4):
        put(eng, f"resource/2026-11-26/r{i}.md", f"resource {i}\n")
    err = (500, {"type": "error", "error": {"type": "api_error", "message": "down"}})
    with ScriptedServer(default=lambda p, b: err) as srv:
        rep = run_auto_resource(eng, llm=client("anthropic", srv, max_retries=0))
        assert len(srv.requests) == 2
    assert len(rep.failed) == 2 and rep.pending == 2 and rep.warnings


def test_loose_files_date_today_and_html_is_sent_as_text(open_engine):
    eng = open_engine()
    put(eng, "resource/web/clip.html", "<html><head><title>Clip</title><script>var secret=1;</script></head>"
                                       "<body><p>Solar capacity &amp; storage</p><p>doubled.</p></body></html>")
    with ScriptedServer(default=handler("openai")) as srv:
        rep = run_auto_resource(eng, llm=client("openai", srv))
        _, user = request_parts("openai", srv.requests[0])
    today = eng.settings.today()
    assert rep.created == [f"daily/{today}/clip.md"]
    assert "Solar capacity & storage" in user and "secret" not in user and "<p>" not in user


def test_a_hand_made_card_in_the_vault_is_adopted_without_a_call(open_engine, demo_vault):
    eng = open_engine(demo_vault)
    before = tree(eng.vault)
    with ScriptedServer([]) as srv:
        rep = run_auto_resource(eng, llm=client("openai", srv))
        assert srv.requests == []
    assert rep.items[0]["action"] == "adopted" and rep.items[0]["card"] == "daily/2026-11-26/光伏产业链入门.md"
    assert tree(eng.vault) == before
    assert "resource/2026-11-26/光伏产业链入门.md" in eng.store.catalog_get("resource")


def test_engine_auto_resource_without_llm_raises_and_writes_nothing(open_engine):
    eng = open_engine()
    put(eng, RES, REPORT_TEXT)
    before = tree(eng.vault)
    with pytest.raises(LLMNotConfigured, match="auto_resource needs an LLM"):
        eng.auto_resource()
    res = run_job(eng, "auto_resource", {})
    assert res["success"] is False and "needs an LLM" in res["error"]
    assert tree(eng.vault) == before and eng.journal.runs() == []


def test_engine_entry_point_journals_and_revert_restores(open_engine):
    eng = open_engine()
    put(eng, RES, REPORT_TEXT)
    before = tree(eng.vault)
    with ScriptedServer(default=handler("anthropic")) as srv:
        rep = eng.auto_resource(llm=client("anthropic", srv))
    runs = eng.dream_log()["runs"]
    assert runs[0]["run_id"] == rep.run_id and runs[0]["kind"] == "auto_resource" and runs[0]["changes"] == 2  # the card and the day page it created
    eng.revert(rep.run_id)
    after = tree(eng.vault)
    assert not (eng.vault / CARD).exists()
    assert after == before  # the day page the run created went with it


# --------------------------------------------------------------------------------------------------- helpers' units


def test_split_and_sample():
    assert split_pieces("short") == ["short"]
    pieces = split_pieces(lines_text(300))
    assert [len(p) for p in pieces] == [12000, 12000, 6000]
    assert [len(p) for p in split_pieces("y" * 25000)] == [12000, 12000, 1000]
    assert sample_indexes(3) == [0, 1, 2] and sample_indexes(10) == [0, 1, 3, 4, 5, 6, 8, 9]


def test_resource_date_and_html_text():
    assert resource_date("resource/2026-11-26/a.md", "resource") == "2026-11-26"
    assert resource_date("resource/web/2026-02-30/a.md", "resource") is None
    assert resource_date("resource/2026-11-26.md", "resource") is None
    assert html_to_text("<style>x{}</style><h1>T</h1><p>a<br>b</p>") == "T\n\na\nb"


def test_auto_resource_job_with_a_configured_llm(open_engine):
    with ScriptedServer(default=handler("anthropic")) as srv:
        eng = open_engine(llm={"provider": "anthropic", "model": "m", "base_url": f"http://127.0.0.1:{srv.port}",
                               "api_key": "k"})
        put(eng, RES, REPORT_TEXT)
        res = run_job(eng, "auto_resource", {})
    json.dumps(res)
    assert res["success"] is True and res["status"] == "ok" and res["created"] == [CARD]

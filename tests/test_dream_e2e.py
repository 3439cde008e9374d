"""End to end on the bilingual demo vault: four days of daily notes → auto_dream through the real OpenAI SDK →
digest nodes with code-checked sources → revert → the vault is byte-identical to before."""

import json

from reme_engine.config import LLMSettings
from reme_engine.llm.client import make_client
from conftest import tree as _snapshot
from wire.server import ScriptedServer, openai_chat

DAYS = ["2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28"]




def test_week_of_notes_to_digest_and_back(make_engine, demo_vault):
    eng = make_engine(demo_vault, embed=False)
    eng.index()
    before = _snapshot(demo_vault)
    src = "daily/2026-11-27/红烧肉.md"
    other = "daily/2026-11-26/bm25-tokenizer-fix.md"
    units = {"units": [
        {"name": "红烧肉的做法", "bucket": "procedure", "summary": "糖色、焯水、小火慢炖。", "paths": [src]},
        {"name": "Keep Latin words out of jieba", "bucket": "wiki",
         "summary": "A user dictionary with short Latin words splits English words.",
         "paths": [other, "daily/2026-11-26/does-not-exist.md"]},
    ]}
    create1 = {"action": "CREATE", "target": "hongshaorou", "name": "红烧肉的做法", "description": "家常红烧肉步骤",
               "body": "1. 焯水\n2. 炒糖色\n3. 小火慢炖一小时", "sources": [src, "daily/1999-01-01/made-up.md"]}
    create2 = {"action": "CREATE", "target": "latin-words-and-jieba", "name": "Keep Latin words out of jieba",
               "description": "Why the tokenizer splits scripts", "body": "Tokenise Latin text separately.",
               "sources": [other], "related": ["digest/wiki/hybrid-retrieval.md", "digest/wiki/nope.md"]}
    with ScriptedServer([openai_chat(json.dumps(x, ensure_ascii=False)) for x in (units, create1, create2)]) as srv:
        llm = make_client(LLMSettings(provider="openai", model="m", base_url=srv.base_url, api_key="k",
                                      max_retries=0))
        rep = eng.auto_dream(DAYS[-1], llm=llm, scan_days=len(DAYS)).to_dict()
    assert rep["created"] == 2, rep
    assert rep["llm"]["calls"] == 3
    nodes = [p for p in rep["written"] if p.startswith("digest/")]
    assert len(nodes) == 2
    text = (demo_vault / nodes[0]).read_text(encoding="utf-8") + (demo_vault / nodes[1]).read_text(encoding="utf-8")
    assert "## Sources" in text
    assert f"[[{src[:-3]}" in text or f"[[{src}" in text
    assert "made-up" not in text and "does-not-exist" not in text and "nope" not in text
    changed = {p for p, b in _snapshot(demo_vault).items() if before.get(p) != b}
    assert changed and all(p.startswith("digest/") for p in changed)  # dream touches nothing outside digest/
    runs = eng.dream_log()["runs"]
    assert runs[0]["kind"] == "auto_dream"
    res = eng.revert(runs[0]["run_id"])
    assert res["refused"] == []
    assert _snapshot(demo_vault) == before

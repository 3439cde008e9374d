"""The engine's shared text rules (reme_engine.text): one CJK table, one slugify, one coercion each for LLM and
YAML values; the pipelines use them."""

from __future__ import annotations

import datetime as dt

from reme_engine.dream.models import UnitReply
from reme_engine.dream.safety import slugify as node_slug
from reme_engine.memory.cards import slugify as card_slug
from reme_engine.memory.quote_guard import tokens
from reme_engine.memory.reply import CardReply
from reme_engine.text import has_cjk, llm_text, slugify, yaml_text


def test_cjk_table_has_kana_and_hangul():
    for s in ("漢字", "ひらがな", "カタカナ", "한국어", "ｶﾀｶﾅ", "𠀀"):
        assert has_cjk(s), s
    assert not has_cjk("plain latin, café")
    assert tokens("東京タワー 한국") == ["東", "京", "タ", "ワ", "ー", "한", "국"]


def test_one_slugify_for_cards_and_nodes():
    assert slugify("Hybrid Retrieval.md") == "hybrid-retrieval" == node_slug("Hybrid Retrieval")
    assert slugify("混合 检索！") == "混合-检索" == card_slug("混合 检索！", "x")
    assert card_slug("!!!", "session_a") == "session_a" and node_slug("!!!") == "note"
    assert node_slug("con") == "con-note"  # a Windows device name never becomes a file name
    assert len(slugify("a" * 200)) == 60


def test_llm_values_are_coerced_the_same_way_in_every_reply_model():
    assert llm_text({"text": "x"}) == "x" and llm_text(["a", {"event": "b"}, None]) == "a\nb" and llm_text(3) == "3"
    unit = UnitReply.model_validate({"name": ["Probes", "readiness"], "bucket": "wiki", "summary": {"text": "s"}})
    card = CardReply.model_validate({"name": ["Probes", "readiness"], "current_state": {"text": "s"}})
    assert unit.summary == card.current_state == "s"
    assert unit.name.split() == card.name.split() == ["Probes", "readiness"]


def test_yaml_values_as_display_text():
    assert yaml_text(dt.date(2026, 12, 1)) == "2026-12-01"
    assert yaml_text(["a", None, 2, True]) == "a, 2, true"
    assert yaml_text({"k": "v"}) == "k: v" and yaml_text(" a\n b ") == "a b" and yaml_text(None) == ""


def test_every_prompt_is_a_file_read_by_the_one_loader():
    from pathlib import Path

    import reme_engine
    from reme_engine import chat
    from reme_engine.dream.prompt import load_prompt as dream_prompt
    from reme_engine.memory.prompts import load_prompt as memory_prompt
    from reme_engine.proactive import agenda, extract, plan
    from reme_engine.prompts import load_prompt, prompt_language

    root = Path(reme_engine.__file__).parent
    assert prompt_language("zh-CN") == "zh" and prompt_language("fr") == "en"
    assert extract.SYSTEM == load_prompt(root / "proactive/prompts", "extract", "en")
    assert plan.SYSTEM and agenda.SYSTEM and chat.SYSTEM_ZH != chat.SYSTEM_EN
    assert memory_prompt("auto_memory", "zh-Hans") == load_prompt(root / "memory/prompts", "auto_memory", "zh")
    assert dream_prompt("extract", "zh-CN") == dream_prompt("extract", "zh")  # one language rule for all steps
    assert memory_prompt("chat", "de") == chat.SYSTEM_EN  # a missing variant falls back to English

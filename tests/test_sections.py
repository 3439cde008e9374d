"""One home for the Markdown section rules (reme_engine.markdown.sections): headings outside code, named sections.

The callers used to disagree (a ``## Sources`` inside a four-backtick example was taken for the real section; the
TUI read ``## 参考来源`` as Sources and the engine did not). These tests pin the rule and check the pipelines
through it on real files.
"""

from __future__ import annotations

import json
from pathlib import Path

from reme_engine.config import LLMSettings
from reme_engine.dream import node as N
from reme_engine.dream.pipeline import run_auto_dream
from reme_engine.llm.client import make_client
from reme_engine.markdown import sections as S
from reme_engine.memory.merge import merge_card
from reme_engine.memory.reply import CardReply
from reme_engine.vault import provenance as P
from wire.server import ScriptedServer, openai_chat

EXAMPLE = ("Write it like this:\n\n"
           "````markdown\n"
           "## Sources\n"
           "```\n"
           "- [[daily/1999-01-01/fake]]\n"
           "```\n"
           "````\n")


def test_headings_and_code_follow_commonmark():
    body = ("# T\n\n" + EXAMPLE + "\n## 参考来源\n\n- [[a]]\n\nSetext\n---\n> ## quoted\n\n    ## indented\n"
            "~~~\n## in tilde fence\n")
    lines = body.split("\n")
    heads = S.headings(body)
    assert [(h.level, h.title, h.setext) for h in heads] == [(1, "T", False), (2, "参考来源", False),
                                                            (2, "Setext", True)]
    mask = S.code_mask(body)
    assert mask[lines.index("## Sources")] and mask[lines.index("```")]  # a shorter fence does not close ````
    assert mask[lines.index("    ## indented")] and mask[lines.index("## in tilde fence")]  # unclosed: to the end
    start, end = S.section_span(body, S.is_sources_title)
    assert lines[start] == "## 参考来源" and lines[end] == "Setext"
    pre, secs = S.split_sections(body)
    assert "\n".join(pre + [ln for s in secs for ln in s.heading + s.lines]) == body  # lossless


def test_crlf_lines_keep_their_numbers():
    lines = "# A\r\n\r\n```\r\n## not\r\n```\r\n## B\r\n".split("\n")
    assert [(h.line, h.title) for h in S.headings(lines)] == [(0, "A"), (5, "B")]


def test_sources_titles_cover_the_tui_set():
    from reme_tui.render import SOURCES_HEADINGS

    assert {S.norm_title(t) for t in SOURCES_HEADINGS} <= S.SOURCES_TITLES
    assert S.is_sources_title("参考来源") and S.is_sources_title(" Sources: ") and not S.is_sources_title("Notes")


def test_node_sources_ignore_a_fenced_example_and_use_a_chinese_heading():
    text = "# Node\n\n" + EXAMPLE + "\n## 参考来源\n\n- [[daily/2026-12-01/a]]\n"
    assert N.sources_of(text) == ["daily/2026-12-01/a"]
    new, added = N.add_sources(text, ["daily/2026-12-02/b"])
    assert added == ["daily/2026-12-02/b"]
    assert new.count("## Sources") == 1  # only the one in the example
    assert new.endswith("## 参考来源\n\n- [[daily/2026-12-01/a]]\n- [[daily/2026-12-02/b]]\n")
    assert EXAMPLE in new


def test_card_merge_ignores_a_timeline_heading_in_a_long_fence():
    card = "# Card\n\n````\n## Timeline\n```\n````\n\n## Timeline\n\n- 08:00 first\n"
    out = merge_card(card, CardReply(timeline=["second"]), time_label="09:00")
    assert "````\n## Timeline\n```\n````\n" in out
    assert out.endswith("## Timeline\n\n- 08:00 first\n- 09:00 second\n")


def test_auto_dream_writes_into_the_real_sources_section(tmp_path: Path, make_engine):
    a, b = "daily/2026-12-01/a.md", "daily/2026-12-02/b.md"
    node = "digest/wiki/markdown-sources.md"
    v = tmp_path / "vault"
    for rel, text in {a: "# A\n\nSources sections list daily notes.\n",
                      b: "# B\n\nA code example never counts as a section.\n"}.items():
        (v / rel).parent.mkdir(parents=True, exist_ok=True)
        (v / rel).write_text(text, encoding="utf-8")
    for bucket in ("personal", "procedure", "wiki"):
        (v / "digest" / bucket).mkdir(parents=True, exist_ok=True)
    text = ("---\nname: Markdown sources\ndescription: d\n---\n\n# Markdown sources\n\n" + EXAMPLE
            + "\n## 参考来源\n\n- [[daily/2026-12-01/a]]\n")
    (v / node).write_text(P.stamp(text), encoding="utf-8")  # the app's node, a Chinese Sources heading
    eng = make_engine(v, embed=False)
    units = {"units": [{"name": "Markdown sources", "bucket": "wiki", "summary": "code is not a section",
                        "paths": [b]}]}
    act = {"action": "CORROBORATE", "target": node, "evidence": "code is not a section", "sources": [b]}
    with ScriptedServer([openai_chat(json.dumps(x)) for x in (units, act)]) as srv:
        llm = make_client(LLMSettings(provider="openai", model="m", base_url=f"http://127.0.0.1:{srv.port}/v1",
                                      api_key="k"))
        rep = run_auto_dream(eng, date="2026-12-02", llm=llm)
    assert rep.status == "ok" and rep.corroborated == 1, rep.errors
    out = (v / node).read_text(encoding="utf-8")
    assert EXAMPLE in out  # the example is untouched
    assert out.count("## Sources") == 1 and out.count("## 参考来源") == 1  # no second Sources section
    assert out.rstrip().endswith("- [[daily/2026-12-01/a]]\n- [[daily/2026-12-02/b]]")


def test_model_text_cannot_open_a_section_in_a_card():
    card = "# Card\n\n## Current state\n\nold\n\n## Timeline\n\n- 08:00 first\n"
    reply = CardReply(current_state="Fixed the probe\n---\n\n## Timeline\n\n```\n## kept in code\n```")
    out = merge_card(card, reply, time_label="09:00")
    assert [h.title for h in S.headings(out.split("\n"))] == ["Card", "Current state", "Timeline"]
    assert "**Fixed the probe**" in out and "## kept in code" in out


def test_llm_body_cleanup_keeps_code_examples_and_levels_setext_headings():
    body = "Intro\n\n" + EXAMPLE + "\nSummary\n---\n\n## Sources\n\n- [[daily/2026-12-01/a]]\n"
    clean = N.sanitize_body(body, lambda p: True)
    assert EXAMPLE in clean and "- [[daily/2026-12-01/a]]" not in clean  # only the model's real Sources dropped
    demoted = N.demote_headings("Summary\n---\n\n```\n## code\n```\n# Top")
    assert demoted.split("\n") == ["#### Summary", "", "```", "## code", "```", "### Top"]  # H1 → H3

"""Tests for reme_engine.proactive.read.proactive_read — the ARCHITECTURE §11.1.5 contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reme_engine.config import LayerSettings
from reme_engine.proactive.read import ProactiveReadResult, proactive_read

TODAY = "2026-06-21"

# ARCHITECTURE §11.1.3 v2 example, verbatim.
SEED_V2 = """\
version: 2
date: 2026-06-20
generated_at: 2026-06-20T18:00:00+08:00
push: true
topics:
  - id: baa88ad49cb2
    title: Quality regression in the memory retrieval pipeline
    reason: The user has recently made repeated changes to search, node_search, and dream integration.
    kind: follow_up
    confidence: 0.86
    first_seen: 2026-06-20
    last_evidence_at: 2026-06-20
    evidence: daily/2026-06-20/session.md
    paths:
      - daily/2026-06-20/session.md
agenda:
  - topic_id: baa88ad49cb2
    title: Quality regression in the memory retrieval pipeline
    scenario_type: resume_task
    opener: Review the latest retrieval regression before the next release.
    next_action: Compare the failing query against the previous index snapshot.
    preconditions: []
    delivery: in_conversation
    linked_memory: []
    order_reason: Recent evidence and a concrete next action.
suppressed: []
"""

# ARCHITECTURE §11.1.5 result example (minus content).
SEED_TOPIC = {
    "id": "baa88ad49cb2",
    "title": "Quality regression in the memory retrieval pipeline",
    "reason": "The user has recently made repeated changes to search, node_search, and dream integration.",
    "kind": "follow_up",
    "confidence": 0.86,
    "first_seen": "2026-06-20",
    "last_evidence_at": "2026-06-20",
    "evidence": "daily/2026-06-20/session.md",
    "paths": ["daily/2026-06-20/session.md"],
}
SEED_AGENDA = {
    "topic_id": "baa88ad49cb2",
    "title": "Quality regression in the memory retrieval pipeline",
    "scenario_type": "resume_task",
    "opener": "Review the latest retrieval regression before the next release.",
    "next_action": "Compare the failing query against the previous index snapshot.",
    "preconditions": [],
    "delivery": "in_conversation",
    "linked_memory": [],
    "order_reason": "Recent evidence and a concrete next action.",
}

# ARCHITECTURE §11.1.3 zh example.
SEED_V2_ZH = """\
version: 2
date: 2026-06-20
generated_at: 2026-06-20T18:00:00+08:00
push: true
topics:
  - id: b2120f3573cb
    title: 记忆检索链路的质量回归
    reason: 用户近期持续修改 search、node_search 和 dream 集成链路。
    kind: follow_up
    confidence: 0.86
    first_seen: 2026-06-20
    last_evidence_at: 2026-06-20
    evidence: daily/2026-06-20/session.md
    paths:
      - daily/2026-06-20/session.md
agenda:
  - topic_id: b2120f3573cb
    title: 记忆检索链路的质量回归
    scenario_type: resume_task
    opener: 下次发布前先回顾最近的检索回归。
    next_action: 对比失败查询与上一个索引快照。
    preconditions: []
    delivery: in_conversation
    linked_memory: []
    order_reason: 证据较新且下一步明确。
suppressed: []
"""

# ARCHITECTURE §11.1.3 legacy (v1) format.
V1 = """\
date: 2026-06-20
topic_count: 3
diversity_days: 7
topics:
  - title: 记忆检索链路的质量回归
    reason: 用户近期持续修改 search、node_search 和 dream 集成链路。
    evidence: daily/2026-06-20/session.md
    keywords:
      - memory search
      - auto dream
    paths:
      - daily/2026-06-20/session.md
"""


def put(vault: Path, date: str, text: str | bytes, name: str = "interests.yaml", daily: str = "daily") -> Path:
    p = vault / daily / date / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return p


def read(vault: Path, **kw) -> ProactiveReadResult:
    kw.setdefault("today", TODAY)
    return proactive_read(vault, **kw)


# --------------------------------------------------------------------------------------------- failure modes


def test_missing_file_is_skipped_not_error(tmp_path):
    r = read(tmp_path, date="2026-06-20")
    assert r.success and r.skipped and r.topics == []
    assert r.path == "daily/2026-06-20/interests.yaml" and r.date == "2026-06-20"
    assert r.answer == "Skipped: interests file not found at daily/2026-06-20/interests.yaml"
    d = r.to_dict()
    assert "agenda" not in d and "content" not in d and "error" not in d
    assert d["success"] is True and d["skipped"] is True and d["topics"] == []
    json.dumps(d)


def test_empty_date_means_today(tmp_path):
    put(tmp_path, TODAY, SEED_V2)
    r = read(tmp_path)
    assert r.date == TODAY and r.path == f"daily/{TODAY}/interests.yaml" and r.success and not r.skipped
    assert len(r.topics) == 1


@pytest.mark.parametrize("bad", ["2026-02-30", "20260620", "../etc", "2026-06-20/../../x", "tomorrow"])
def test_invalid_date_is_an_error(tmp_path, bad):
    r = read(tmp_path, date=bad)
    assert not r.success and not r.skipped and r.topics == []
    assert r.error and "invalid date" in r.error
    assert r.answer.startswith("Error: ")
    assert r.to_dict()["error"] == r.error


def test_invalid_today_is_an_error(tmp_path):
    r = proactive_read(tmp_path, today="2026-13-01")
    assert not r.success and "invalid date" in r.error


@pytest.mark.parametrize(
    "kw", [{"horizon_days": 0}, {"horizon_days": "x"}, {"min_confidence": "high"}, {"include_content": "maybe"}]
)
def test_invalid_parameters_are_errors(tmp_path, kw):
    put(tmp_path, "2026-06-20", SEED_V2)
    r = read(tmp_path, date="2026-06-20", **kw)
    assert not r.success and r.error and r.answer.startswith("Error: ")


def test_string_parameters_from_cli_are_accepted(tmp_path):
    put(tmp_path, "2026-06-20", SEED_V2)
    r = read(tmp_path, date="2026-06-20", include_content="false", horizon_days="1", min_confidence="0.9")
    assert r.success and r.content is None and r.topics == []


def test_unparseable_yaml_is_an_error(tmp_path):
    put(tmp_path, "2026-06-20", "topics:\n  - title: [unclosed\n    reason: x\n")
    r = read(tmp_path, date="2026-06-20")
    assert not r.success and not r.skipped and r.topics == []
    assert r.error and "invalid YAML" in r.error and "line" in r.error
    assert r.answer == f"Error: {r.error}"
    assert r.content is not None  # raw text still offered with include_content


@pytest.mark.parametrize("text", ["just a sentence\n", "42\n"])
def test_non_mapping_top_level_is_an_error(tmp_path, text):
    put(tmp_path, "2026-06-20", text)
    r = read(tmp_path, date="2026-06-20")
    assert not r.success and "top level must be a mapping" in r.error


def test_unreadable_files_are_errors(tmp_path):
    put(tmp_path, "2026-06-20", b"\x00\x01\x02 binary")
    r = read(tmp_path, date="2026-06-20")
    assert not r.success and "binary" in r.error
    put(tmp_path, "2026-06-21", "version: 2\n" + "#" * 200 + "\n")
    r = read(tmp_path, date="2026-06-21", max_bytes=100)
    assert not r.success and "too large" in r.error
    put(tmp_path, "2026-06-22", b"\xff\xfe\xfa bad")
    assert not read(tmp_path, date="2026-06-22").success


@pytest.mark.parametrize(
    "text",
    ["", "\n# only a comment\n", "version: 2\n", "version: 2\ntopics: []\n", "version: 2\ntopics: nope\n",
     "topics:\n  - [a, list]\n  - {reason: no title}\n  - {title: ''}\n  - title: ~\n"],
)
def test_valid_file_without_valid_topics(tmp_path, text):
    put(tmp_path, "2026-06-20", text)
    r = read(tmp_path, date="2026-06-20")
    assert r.success and not r.skipped and r.topics == [] and r.error is None
    assert r.summary == "Read 0 proactive topic(s) from daily/2026-06-20/interests.yaml"
    # nothing the file holds vanishes without a word
    assert len(r.warnings) == (1 if "nope" in text else 4 if "title" in text else 0), r.warnings
    assert r.to_dict()["warnings"] == r.warnings


def test_older_plain_list_form_is_read_with_a_warning(tmp_path):
    put(tmp_path, "2026-06-20", "- {title: Solar supply chain, reason: three notes, confidence: 0.7}\n"
                                "- Battery recycling\n- {reason: no title}\n")
    r = read(tmp_path, date="2026-06-20")
    assert r.success and r.version == 1 and r.error is None
    assert [(t["title"], t["confidence"]) for t in r.topics] == [("Solar supply chain", 0.7),
                                                                ("Battery recycling", 0.5)]
    assert r.warnings == [
        "daily/2026-06-20/interests.yaml is in the older plain-list form: read its 3 entries as topics",
        "topic 2 is plain text: read as a topic titled 'Battery recycling'",
        "topic 3 has no title: skipped"]
    d = r.to_dict()
    assert {"success", "skipped", "date", "path", "topics", "summary", "answer", "version", "warnings"} <= set(d)


@pytest.mark.parametrize(("raw", "want", "how"), [
    ("0.7", 0.7, None), ("'0.7'", 0.7, None), ("high", 0.8, "'high' read as 0.8"), ("Low", 0.2, "'Low' read as 0.2"),
    ("'85%'", 0.85, "'85%' read as a percentage: 0.85"), ("85", 0.85, "'85' read as a percentage: 0.85"),
    ("1.5", 1.0, "'1.5' is outside [0, 1], read as 1"), ("-0.2", 0.0, "'-0.2' is outside [0, 1], read as 0"),
    ("[0.5]", 0.5, "not a number (list), read as 0.5"), ("true", 0.5, "'true' is not a number, read as 0.5"), ("{a: 1}", 0.5, "not a number (dict), read as 0.5"),
    ("sure", 0.5, "'sure' is not a number, read as 0.5"), (".nan", 0.5, "'.nan' is not a number, read as 0.5"),
])
def test_mistyped_confidence_is_coerced_with_a_warning(tmp_path, raw, want, how):
    put(tmp_path, "2026-06-20", f"version: 2\ntopics:\n  - {{id: t, title: T, confidence: {raw}}}\n")
    r = read(tmp_path, date="2026-06-20", min_confidence=0.0)
    assert [t["confidence"] for t in r.topics] == [want]
    assert r.warnings == ([] if how is None else [f"topic 1 (t) 'T': confidence {how}"])


# --------------------------------------------------------------------------------------------- v2 / v1


def test_seed_v2_example_reads_exactly(tmp_path):
    put(tmp_path, "2026-06-20", SEED_V2)
    r = read(tmp_path, date="2026-06-20")
    assert r.success and not r.skipped and r.error is None and r.version == 2
    assert r.topics == [SEED_TOPIC]
    assert list(r.topics[0]) == list(SEED_TOPIC)  # canonical key order
    assert r.agenda == [SEED_AGENDA]
    assert r.summary == "Read 1 proactive topic(s) from daily/2026-06-20/interests.yaml"
    assert r.content == SEED_V2
    answer = json.loads(r.answer)
    assert answer == {"summary": r.summary, "topics": [SEED_TOPIC], "agenda": [SEED_AGENDA], "content": SEED_V2}
    d = r.to_dict()
    assert d["agenda"] == [SEED_AGENDA] and d["content"] == SEED_V2 and "error" not in d
    json.dumps(d)


def test_seed_v2_chinese_example(tmp_path):
    put(tmp_path, "2026-06-20", SEED_V2_ZH)
    r = read(tmp_path, date="2026-06-20", include_content=False)
    assert [t["id"] for t in r.topics] == ["b2120f3573cb"]
    assert r.topics[0]["title"] == "记忆检索链路的质量回归"
    assert r.agenda[0]["opener"] == "下次发布前先回顾最近的检索回归。"
    assert "记忆检索链路的质量回归" in r.answer  # not \\u-escaped


def test_include_content_false_omits_content(tmp_path):
    put(tmp_path, "2026-06-20", SEED_V2)
    r = read(tmp_path, date="2026-06-20", include_content=False)
    assert r.content is None and "content" not in r.to_dict()
    assert "content" not in json.loads(r.answer)
    assert json.loads(r.answer)["topics"] == [SEED_TOPIC]


def test_v1_file_reads_with_default_confidence(tmp_path):
    put(tmp_path, "2026-06-20", V1)
    r = read(tmp_path, date="2026-06-20")
    assert r.success and r.version == 1 and r.agenda is None
    (t,) = r.topics
    assert t["confidence"] == 0.5
    assert t["title"] == "记忆检索链路的质量回归"
    assert t["evidence"] == "daily/2026-06-20/session.md"
    assert t["keywords"] == ["memory search", "auto dream"]
    assert t["paths"] == ["daily/2026-06-20/session.md"]
    assert "id" not in t
    assert "agenda" not in r.to_dict() and "agenda" not in json.loads(r.answer)
    # 0.5 < 0.6: dropped; 0.5 >= 0.5: kept.
    assert read(tmp_path, date="2026-06-20", min_confidence=0.6).topics == []
    assert len(read(tmp_path, date="2026-06-20", min_confidence=0.5).topics) == 1


def test_yaml_11_typing_is_normalised(tmp_path):
    put(
        tmp_path,
        "2026-06-20",
        """\
version: 2
date: 2026-06-20
topics:
  - id: 012345670123
    title: NO
    reason: on
    confidence: 1
    first_seen: 2026-6-9
    last_evidence_at: 2026-06-20 09:30:00
    evidence: daily/2026-06-20/a.md
    paths: daily/2026-06-20/a.md
  - id: 123456
    title: "2026-06-20"
    confidence: "0.7"
    extra_date: 2026-06-19
agenda:
  - topic_id: 012345670123
    title: yes
    preconditions: Golden set frozen
  - topic_id: 123456
""",
    )
    r = read(tmp_path, date="2026-06-20")
    a, b = r.topics
    assert a["id"] == "012345670123" and a["title"] == "NO" and a["reason"] == "on"
    assert a["confidence"] == 1.0 and isinstance(a["confidence"], float)
    assert a["first_seen"] == "2026-06-09"
    assert a["last_evidence_at"] == "2026-06-20T09:30:00"
    assert a["paths"] == ["daily/2026-06-20/a.md"]
    assert b["id"] == "123456" and b["title"] == "2026-06-20" and b["confidence"] == 0.7
    assert b["extra_date"] == "2026-06-19"
    assert [x["topic_id"] for x in r.agenda] == ["012345670123", "123456"]
    assert r.agenda[0]["title"] == "yes" and r.agenda[0]["preconditions"] == ["Golden set frozen"]
    json.dumps(r.to_dict())


# --------------------------------------------------------------------------------------------- filtering

FILTER_FILE = """\
version: 2
date: 2026-06-20
topics:
  - {id: keep, title: Keep me, confidence: 0.9}
  - {id: low, title: Too unsure, confidence: 0.3}
  - {id: edge, title: Exactly at threshold, confidence: 0.4}
  - {id: done, title: Already resolved, confidence: 0.9, resolved: true}
  - {id: notdone, title: Not resolved, confidence: 0.9, resolved: "no"}
  - {id: st, title: Status resolved, confidence: 0.9, status: resolved}
  - {id: sup, title: Suppressed by id, confidence: 0.9}
  - {title: Suppressed by title, confidence: 0.9}
  - {id: badconf, title: Bad confidence, confidence: high}
  - {id: range, title: Out of range, confidence: 1.5}
  - {id: noconf, title: Missing confidence}
agenda:
  - {topic_id: keep, title: a1}
  - {topic_id: low, title: a2}
  - {topic_id: done, title: a3}
  - {topic_id: st, title: a4}
  - {topic_id: sup, title: a5}
  - {topic_id: ghost, title: a6}
  - {title: a7}
  - not a mapping
  - {topic_id: edge, title: a8}
  - {topic_id: keep, title: a9, status: resolved}
suppressed:
  - sup
  - {title: suppressed BY title, reason: pushed yesterday}
"""


def test_filtering_rules(tmp_path):
    put(tmp_path, "2026-06-20", FILTER_FILE)
    r = read(tmp_path, date="2026-06-20")
    assert [t["title"] for t in r.topics] == ["Keep me", "Exactly at threshold", "Not resolved", "Bad confidence",
                                              "Out of range", "Missing confidence"]
    assert [t["confidence"] for t in r.topics] == [0.9, 0.4, 0.9, 0.8, 1.0, 0.5]  # mistyped ones coerced
    assert [a["title"] for a in r.agenda] == ["a1", "a8"]
    assert r.summary == "Read 6 proactive topic(s) from daily/2026-06-20/interests.yaml"
    assert r.warnings == [
        "topic 9 (badconf) 'Bad confidence': confidence 'high' read as 0.8",
        "topic 10 (range) 'Out of range': confidence '1.5' is outside [0, 1], read as 1",
        "agenda item 6 names topic 'ghost', which the file does not hold: skipped",
        "agenda item 7 has no topic_id: skipped",
        "agenda item 8 is not a mapping (str): skipped"]

    r = read(tmp_path, date="2026-06-20", min_confidence=0.85)
    assert [t["id"] for t in r.topics] == ["keep", "notdone", "range"]
    assert [a["title"] for a in r.agenda] == ["a1"]

    r = read(tmp_path, date="2026-06-20", min_confidence=0.0)
    assert "low" in [t["id"] for t in r.topics]
    assert [a["title"] for a in r.agenda] == ["a1", "a2", "a8"]


def test_agenda_absent_vs_empty(tmp_path):
    put(tmp_path, "2026-06-20", "version: 2\ntopics:\n  - {id: a, title: A, confidence: 0.9}\n")
    r = read(tmp_path, date="2026-06-20")
    assert r.agenda is None and "agenda" not in r.to_dict()
    put(tmp_path, "2026-06-21", "version: 2\ntopics:\n  - {id: a, title: A, confidence: 0.9}\nagenda: []\n")
    r = read(tmp_path, date="2026-06-21")
    assert r.agenda == [] and r.to_dict()["agenda"] == []
    put(tmp_path, "2026-06-22", "version: 2\ntopics:\n  - {id: a, title: A, confidence: 0.2}\nagenda:\n  - {topic_id: a}\n")
    r = read(tmp_path, date="2026-06-22")
    assert r.topics == [] and r.agenda == []


def test_custom_daily_folder(tmp_path):
    put(tmp_path, "2026-06-20", SEED_V2, daily="journal")
    r = read(tmp_path, date="2026-06-20", layers=LayerSettings(daily_dir="journal"))
    assert r.success and r.path == "journal/2026-06-20/interests.yaml" and len(r.topics) == 1


# --------------------------------------------------------------------------------------------- horizon

TRUTH = """\
version: 2
updated_at: 2026-06-20T18:00:00+08:00
topics:
  - {id: t1, title: Today, confidence: 0.8, first_seen: 2026-06-01, last_evidence_at: 2026-06-20}
  - {id: t2, title: Three days ago, confidence: 0.8, first_seen: 2026-06-17, last_evidence_at: 2026-06-17}
  - {id: t3, title: Ten days ago, confidence: 0.8, first_seen: 2026-06-10, last_evidence_at: 2026-06-10}
  - {id: t4, title: Future, confidence: 0.8, last_evidence_at: 2026-06-25}
  - {id: t5, title: Only first_seen, confidence: 0.8, first_seen: 2026-06-19}
  - {id: t6, title: No dates, confidence: 0.8}
  - {id: t7, title: Low, confidence: 0.1, last_evidence_at: 2026-06-20}
  - {id: t8, title: Resolved, confidence: 0.9, last_evidence_at: 2026-06-20, status: resolved}
"""


def test_horizon_reads_truth_source(tmp_path):
    truth = tmp_path / "daily" / "_proactive.yaml"
    truth.parent.mkdir(parents=True)
    truth.write_text(TRUTH, encoding="utf-8")
    put(tmp_path, "2026-06-20", "version: 2\ntopics: []\nagenda:\n  - {topic_id: t2, title: go}\n  - {topic_id: t3}\n")

    r = read(tmp_path, date="2026-06-20", horizon_days=4)
    assert r.success and r.path == "daily/_proactive.yaml"
    assert [t["id"] for t in r.topics] == ["t1", "t2", "t5"]
    assert r.warnings == ["1 topic(s) of daily/_proactive.yaml have no readable first_seen/last_evidence_at, so no "
                          "horizon can hold them: 'No dates'"]
    assert r.summary.startswith("Read 3 proactive topic(s) from daily/_proactive.yaml")
    assert r.content == TRUTH
    assert [a["topic_id"] for a in r.agenda] == ["t2"]  # agenda of the day file, filtered

    r = read(tmp_path, date="2026-06-20", horizon_days=3)
    assert [t["id"] for t in r.topics] == ["t1", "t5"]
    r = read(tmp_path, date="2026-06-20", horizon_days=30, include_content=False)
    assert [t["id"] for t in r.topics] == ["t1", "t2", "t3", "t5"]
    assert r.content is None
    # horizon 1 ignores the truth source.
    r = read(tmp_path, date="2026-06-20")
    assert r.path == "daily/2026-06-20/interests.yaml" and r.topics == []


def test_horizon_falls_back_to_day_file(tmp_path):
    put(tmp_path, "2026-06-20", SEED_V2)
    r = read(tmp_path, date="2026-06-20", horizon_days=7)
    assert r.success and r.path == "daily/2026-06-20/interests.yaml"
    assert r.topics == [SEED_TOPIC] and r.agenda == [SEED_AGENDA]
    r = read(tmp_path, date="2026-06-19", horizon_days=7)
    assert r.skipped


def test_horizon_with_broken_truth_source_is_an_error(tmp_path):
    put(tmp_path, "2026-06-20", SEED_V2)
    truth = tmp_path / "daily" / "_proactive.yaml"
    truth.write_text("topics: [\n", encoding="utf-8")
    r = read(tmp_path, date="2026-06-20", horizon_days=2)
    assert not r.success and "_proactive.yaml" in r.error


def test_horizon_without_day_agenda(tmp_path):
    truth = tmp_path / "daily" / "_proactive.yaml"
    truth.parent.mkdir(parents=True)
    truth.write_text(TRUTH, encoding="utf-8")
    r = read(tmp_path, date="2026-06-20", horizon_days=2)
    assert r.agenda is None and [t["id"] for t in r.topics] == ["t1", "t5"]


# --------------------------------------------------------------------------------------------- read-only


def test_never_modifies_files(tmp_path):
    put(tmp_path, "2026-06-20", SEED_V2)
    (tmp_path / "daily" / "_proactive.yaml").write_text(TRUTH, encoding="utf-8")

    def snapshot():
        return {
            p.relative_to(tmp_path).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(tmp_path.rglob("*"))
            if p.is_file()
        }

    before = snapshot()
    for kw in ({}, {"horizon_days": 5}, {"date": "2026-06-19"}, {"date": "bad"}, {"include_content": False}):
        kw.setdefault("date", "2026-06-20")
        read(tmp_path, **kw)
    assert snapshot() == before

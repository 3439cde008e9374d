"""Frontmatter parsing, rendering and in-place updates (ARCHITECTURE §4, §10.7)."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reme_engine.markdown.frontmatter import (
    Frontmatter,
    FrontmatterError,
    frontmatter_text_values,
    parse_frontmatter,
    render_frontmatter,
    update_frontmatter,
)

# -- parsing ---------------------------------------------------------------------------------------------


def test_no_frontmatter():
    fm = parse_frontmatter("# Title\n\nbody\n")
    assert fm == Frontmatter({}, None, 1, 0, None, False)


def test_basic_block_and_body_position():
    text = "---\nname: Foo\ntags: [a, b]\n---\n# Body\n"
    fm = parse_frontmatter(text)
    assert fm.meta == {"name": "Foo", "tags": ["a", "b"]}
    assert fm.raw == "name: Foo\ntags: [a, b]\n"
    assert fm.body_start_line == 5
    assert text[fm.body_offset :] == "# Body\n"
    assert fm.has_block and fm.warning is None


def test_bom_is_tolerated_and_offsets_refer_to_stripped_text():
    text = "\ufeff---\nname: Foo\n---\nbody"
    fm = parse_frontmatter(text)
    assert fm.meta == {"name": "Foo"}
    assert text[1:][fm.body_offset :] == "body"
    assert fm.body_start_line == 4


def test_crlf_is_tolerated():
    text = "---\r\nname: Foo\r\nn: 1\r\n---\r\nline one\r\nline two\r\n"
    fm = parse_frontmatter(text)
    assert fm.meta == {"name": "Foo", "n": 1}
    assert text[fm.body_offset :] == "line one\r\nline two\r\n"
    assert fm.body_start_line == 5


def test_closing_dots_and_trailing_blanks_on_fences():
    assert parse_frontmatter("---  \na: 1\n...\nbody").meta == {"a": 1}
    assert parse_frontmatter("---\na: 1\n---\t\nbody").body_start_line == 4


def test_block_at_end_of_file_without_final_newline():
    fm = parse_frontmatter("---\na: 1\n---")
    assert fm.meta == {"a": 1} and fm.body_offset == len("---\na: 1\n---") and fm.body_start_line == 4


@pytest.mark.parametrize("text", [
    "----\na: 1\n----\nbody",  # four dashes: not a fence
    " ---\na: 1\n---\nbody",  # not the very first line
    "\n---\na: 1\n---\nbody",
    "---",
    "text\n---\na: 1\n---\n",
])
def test_leading_thematic_break_without_closing_fence_is_body(text):
    fm = parse_frontmatter(text)
    assert fm == Frontmatter({}, None, 1, 0, None, False)


@pytest.mark.parametrize("text", ["---\nJust a paragraph after a thematic break.\n\nMore text.\n",
                                  "---\ntitle: x\ntags: [a]\n\n# Heading\n", "\ufeff--- \r\na: 1\r\n"])
def test_unclosed_frontmatter_is_body_with_a_warning(text):
    fm = parse_frontmatter(text)
    assert (fm.meta, fm.raw, fm.body_start_line, fm.body_offset, fm.has_block) == ({}, None, 1, 0, False)
    assert fm.warning and fm.warning.startswith("frontmatter not closed") and "line 1" in fm.warning
    # updating such a note adds a real block in front and leaves the user's text as it was
    out = update_frontmatter(text, {"k": "v"})
    assert out.lstrip("\ufeff").endswith(text.lstrip("\ufeff")) and parse_frontmatter(out).meta == {"k": "v"}


def test_prose_between_fences_is_a_broken_block_with_a_warning():
    # Obsidian also treats this as (invalid) properties; the text stays available in ``raw``.
    text = "---\nSome prose, not YAML.\n---\nbody\n"
    fm = parse_frontmatter(text)
    assert fm.meta == {} and fm.has_block
    assert fm.warning == "frontmatter is not a mapping (str)"
    assert fm.raw == "Some prose, not YAML.\n"
    assert fm.body_start_line == 4 and text[fm.body_offset :] == "body\n"


def test_invalid_yaml_keeps_true_line_numbers():
    text = "---\na: [unclosed\nb: 2\n---\nline 5\n"
    fm = parse_frontmatter(text)
    assert fm.meta == {} and fm.has_block
    assert fm.warning == ("invalid YAML at line 3, column 2: while parsing a flow sequence (line 2); "
                          "did not find expected ',' or ']'")
    assert fm.body_start_line == 5 and text[fm.body_offset :] == "line 5\n"


@pytest.mark.parametrize(("text", "line"), [
    ("---\ntitle: ok\nbad: : here\n---\nbody\n", 3),
    ("\ufeff---\r\na: 1\r\nb: 2\r\n  c: 3\r\n---\r\n", 4),  # BOM and CRLF do not shift lines
    ("---\n" + "k%d: v\n" * 0 + "x: 1\ny: 2\nz: 3\nw: 'open\n---\n", 5),
    ("---\nq: \"never closed\n---\n", 2),
])
def test_yaml_error_names_the_true_file_line(text, line):
    w = parse_frontmatter(text).warning
    assert w is not None and w.startswith("invalid YAML at line ")
    got = int(w.split("line ", 1)[1].split(",", 1)[0])
    body = text.lstrip("\ufeff").replace("\r\n", "\n").split("\n")
    # the named line is the offending one (or, for an unterminated scalar, where the block ends)
    assert got == line or (got == len([ln for ln in body[: body.index("---", 1)]]) + 1 and "(line %d)" % line in w), w


@pytest.mark.parametrize(("raw", "kind"), [("- a\n- b\n", "list"), ("42\n", "int"), ("true\n", "bool"),
                                           ("1.5\n", "float")])
def test_non_mapping(raw, kind):
    fm = parse_frontmatter(f"---\n{raw}---\nbody")
    assert fm.meta == {} and fm.warning == f"frontmatter is not a mapping ({kind})" and fm.has_block


@pytest.mark.parametrize("raw", ["", "# only a comment\n", "\n\n"])
def test_empty_block_is_fine(raw):
    fm = parse_frontmatter(f"---\n{raw}---\nbody")
    assert fm.meta == {} and fm.warning is None and fm.has_block


def test_yaml_1_1_traps_read_as_yaml_1_2_core():
    fm = parse_frontmatter(
        "---\ncountry: NO\nswitch: on\nanswer: yes\nflag: true\nFlag2: False\ntime: 12:30\nmode: 0755\n"
        "hex: 0x1F\nsci: 1e3\nnull1: ~\nnull2:\nword: y\n---\n"
    )
    assert fm.meta == {"country": "NO", "switch": "on", "answer": "yes", "flag": True, "Flag2": False,
                       "time": "12:30", "mode": 755, "hex": 31, "sci": 1000.0, "null1": None, "null2": None,
                       "word": "y"}


def test_dates_become_iso_strings():
    fm = parse_frontmatter(
        "---\nday: 2026-06-20\nwhen: 2024-07-21T12:37:00\nspaced: 2024-05-25 15:17:00\n"
        "utc: 2024-07-21T12:37:00Z\nquoted: '2026-06-20'\nlist: [2026-01-02]\n2026-03-04: key\n---\n"
    )
    assert fm.meta == {"day": "2026-06-20", "when": "2024-07-21T12:37:00", "spaced": "2024-05-25T15:17:00",
                       "utc": "2024-07-21T12:37:00+00:00", "quoted": "2026-06-20", "list": ["2026-01-02"],
                       "2026-03-04": "key"}


def test_one_wrongly_typed_value_never_drops_other_keys():
    fm = parse_frontmatter("---\na: 1\nbad_date: 2024-02-30\nbad_int: !!int abc\nstr_map: !!str {x: 1}\nb: 2\n---\n")
    assert fm.warning is None
    assert fm.meta == {"a": 1, "bad_date": "2024-02-30", "bad_int": "abc", "str_map": {"x": 1}, "b": 2}


def test_unknown_tags_are_plain_values_and_never_executed():
    fm = parse_frontmatter(
        "---\nx: !foo bar\ny: !!python/object/apply:os.system ['echo pwned']\nz: !custom {k: v}\n"
        "blob: !!binary aGVsbG8=\nset: !!set {b, a}\n---\n"
    )
    assert fm.warning is None
    assert fm.meta == {"x": "bar", "y": ["echo pwned"], "z": {"k": "v"}, "blob": "aGVsbG8=", "set": ["a", "b"]}


def test_duplicate_and_non_string_keys():
    fm = parse_frontmatter("---\ndup: 1\n1: one\ntrue: t\n? [a, b]\n: pair\ndup: 2\n---\n")
    assert fm.warning is None
    assert fm.meta == {"dup": 2, "1": "one", "true": "t", "['a', 'b']": "pair"}


def test_alias_bomb_is_refused_not_expanded():
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcdef", "bcdefg"):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    fm = parse_frontmatter("---\n" + "\n".join(lines) + "\n---\nbody")
    assert fm.meta == {} and fm.warning is not None and fm.body_start_line == 10


def test_recursive_alias_does_not_hang():
    fm = parse_frontmatter("---\na: &a [*a]\n---\n")
    assert fm.meta == {"a": [None]}


def test_json_frontmatter():
    assert parse_frontmatter('---\n{"tags": "journal", "publish": false}\n---\n').meta == {
        "tags": "journal", "publish": False}


def test_frontmatter_text_values():
    meta = {"name": "N", "n": 3, "tags": ["a", {"deep": ["b", None, True]}], "d": {"x": "c"}, "e": None}
    assert frontmatter_text_values(meta) == ["N", "a", "b", "c"]
    assert frontmatter_text_values({}) == []


# -- rendering -------------------------------------------------------------------------------------------


def test_render_keeps_order_and_unicode_and_quotes_ambiguous_strings():
    out = render_frontmatter({"z": "last?", "a": "Ünïcode 中文", "yes_word": "yes", "num": "1e3", "oct": "0755",
                              "day": "2026-06-20", "when": dt.datetime(2024, 7, 21, 12, 37), "none": None})
    assert out == ("---\nz: last?\na: Ünïcode 中文\nyes_word: 'yes'\nnum: '1e3'\noct: '0755'\nday: 2026-06-20\n"
                   "when: 2024-07-21T12:37:00\nnone: null\n---\n")
    assert parse_frontmatter(out + "body").meta == {
        "z": "last?", "a": "Ünïcode 中文", "yes_word": "yes", "num": "1e3", "oct": "0755", "day": "2026-06-20",
        "when": "2024-07-21T12:37:00", "none": None}


def test_render_empty():
    assert render_frontmatter({}) == ""


# -- updating --------------------------------------------------------------------------------------------

ORIGINAL = """---
# a comment the user wrote
name: Old name   # inline comment
tags:
- a
- b
unknown_key: {keep: me}
date: 2026-06-20
country: NO
---
# Body

text with [[links]] and trailing spaces   
"""


def test_update_in_place_keeps_everything_else_byte_for_byte():
    out = update_frontmatter(ORIGINAL, {"name": "New", "added": ["x", 1]}, delete=["tags"])
    assert out == """---
# a comment the user wrote
name: New
unknown_key: {keep: me}
date: 2026-06-20
country: NO
added:
- x
- 1
---
# Body

text with [[links]] and trailing spaces   
"""
    assert parse_frontmatter(out).meta == {"name": "New", "unknown_key": {"keep": "me"}, "date": "2026-06-20",
                                           "country": "NO", "added": ["x", 1]}


def test_update_preserves_crlf_and_bom():
    text = "\ufeff" + ORIGINAL.replace("\n", "\r\n")
    out = update_frontmatter(text, {"name": "New"})
    assert out.startswith("\ufeff---\r\n")
    assert "\n" not in out.replace("\r\n", "")
    assert out.endswith("# Body\r\n\r\ntext with [[links]] and trailing spaces   \r\n")
    assert parse_frontmatter(out).meta["name"] == "New"


def test_update_creates_block_when_missing():
    assert update_frontmatter("body\n", {"a": 1, "b": "on"}) == "---\na: 1\nb: 'on'\n---\nbody\n"
    assert update_frontmatter("body\r\nmore\r\n", {"a": 1}) == "---\r\na: 1\r\n---\r\nbody\r\nmore\r\n"
    assert update_frontmatter("\ufeffbody", {"a": 1}) == "\ufeff---\na: 1\n---\nbody"


def test_update_before_a_thematic_break_keeps_the_body():
    text = "---\nA paragraph after a thematic break.\n"
    out = update_frontmatter(text, {"a": 1})
    assert out == "---\na: 1\n---\n" + text
    fm = parse_frontmatter(out)
    assert fm.meta == {"a": 1} and out[fm.body_offset :] == text


def test_update_noop_returns_text_unchanged():
    assert update_frontmatter(ORIGINAL) == ORIGINAL
    assert update_frontmatter(ORIGINAL, {}, delete=["missing"]) == ORIGINAL
    assert update_frontmatter("body", None) == "body"


@pytest.mark.parametrize("text", ["---\na: [\n---\nbody", "---\n- a list\n---\nbody", "---\nprose\n---\nbody"])
def test_update_refuses_to_overwrite_invalid_blocks(text):
    with pytest.raises(FrontmatterError):
        update_frontmatter(text, {"a": 1})
    assert issubclass(FrontmatterError, ValueError)


def test_update_duplicate_keys_keeps_first_position():
    out = update_frontmatter("---\na: 1\nb: 2\na: 3\n---\n", {"a": 9})
    assert out == "---\na: 9\nb: 2\n---\n"


def test_update_flow_style_block_falls_back_to_a_clean_dump():
    out = update_frontmatter('---\n{"tags": "journal", "publish": false}\n---\nbody', {"publish": True})
    assert out == "---\ntags: journal\npublish: true\n---\nbody"


def test_update_block_scalars_and_nested_values():
    text = "---\nnote: |\n  line 1\n\n  line 3\nnested:\n  a: 1\n  b: [1, 2]\nz: 1\n---\nbody"
    out = update_frontmatter(text, {"nested": {"c": 3}})
    assert out == "---\nnote: |\n  line 1\n\n  line 3\nnested:\n  c: 3\nz: 1\n---\nbody"
    out = update_frontmatter(text, delete=["note"])
    assert out == "---\nnested:\n  a: 1\n  b: [1, 2]\nz: 1\n---\nbody"


def test_deleting_the_last_key_removes_the_block():
    assert update_frontmatter("---\na: 1\n---\nbody", delete=["a"]) == "body"
    # a comment is user content: the block stays
    assert update_frontmatter("---\n# keep\na: 1\n---\nbody", delete=["a"]) == "---\n# keep\n---\nbody"


def test_update_with_date_objects_writes_iso_dates():
    out = update_frontmatter("body", {"day": dt.date(2026, 6, 20)})
    assert out == "---\nday: 2026-06-20\n---\nbody"


def test_merge_keys_fall_back_but_round_trip():
    text = "---\nbase: &b {x: 1}\nchild:\n  <<: *b\n  y: 2\n---\n"
    out = update_frontmatter(text, {"child": {"y": 3}})
    assert parse_frontmatter(out).meta == {"base": {"x": 1}, "child": {"y": 3}}


# -- properties ------------------------------------------------------------------------------------------

_keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**12, 10**12),
    st.floats(allow_nan=False, allow_infinity=True, width=64),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30),
    st.sampled_from(["yes", "NO", "on", "2026-06-20", "2024-07-21T12:37:00", "12:30", "0755", "1e3", "~", "null",
                     "- x", "a: b", "#c", "[[link]]", "", " ", "'", '"', "\\", "|", ">", "---", "...", "!tag"]),
)
_values = st.recursive(_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(_keys, c, max_size=3),
                       max_leaves=8)
_bodies = st.sampled_from(["", "body\n", "# T\n\n---\n\ntext [[x]]\n", "no newline", "---\nnot yaml\n"])
_existing = st.sampled_from([
    "", "---\n---\n", "---\na: 1\nb: [x, y]\n# comment\nc: |\n  text\n---\n", "---\nname: N\ntags:\n- t\n---\n",
    '---\n{"j": 1}\n---\n', "---\nx: 1\nx: 2\n---\n",
])


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isinf(a) and math.isinf(b) and (a > 0) == (b > 0))
    return a == b


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(existing=_existing, body=_bodies, updates=st.dictionaries(_keys, _values, max_size=4),
       delete=st.lists(st.sampled_from(["a", "b", "c", "name", "tags", "x", "j"]), max_size=2),
       crlf=st.booleans(), bom=st.booleans())
def test_update_then_parse_returns_the_updates(existing, body, updates, delete, crlf, bom):
    text = existing + body
    if crlf:
        text = text.replace("\n", "\r\n")
    if bom:
        text = "\ufeff" + text
    before = parse_frontmatter(text)
    out = update_frontmatter(text, updates, delete)
    after = parse_frontmatter(out)
    # a leading '---' that never closes stays body text: a warning, never a block
    assert after.warning is None or (not after.has_block and after.warning.startswith("frontmatter not closed"))
    for k, v in updates.items():
        if k in delete:
            assert k not in after.meta
        else:
            assert k in after.meta
            # values come back normalised (dates as ISO strings), and identical when re-rendered
            assert render_frontmatter({k: after.meta[k]}) == render_frontmatter({k: v})
    for k in delete:
        assert k not in after.meta
    for k, v in before.meta.items():  # unknown keys survive
        if k not in updates and k not in delete:
            assert _same(after.meta[k], v)
    assert out.startswith("\ufeff") == bom
    stripped = text[1:] if bom else text
    assert out[1:].endswith(stripped[before.body_offset :]) if bom else out.endswith(stripped[before.body_offset :])
    if crlf and "\r\n" in text:
        assert "\n" not in out.replace("\r\n", "")


@settings(max_examples=120, deadline=None)
@given(st.text(st.sampled_from(list("-.:ab #[]{}\n\r\t'\"!&*|>\ufeff")), max_size=80))
def test_parse_never_raises_and_body_is_a_suffix(text):
    fm = parse_frontmatter(text)
    stripped = text[1:] if text.startswith("\ufeff") else text
    assert 0 <= fm.body_offset <= len(stripped)
    assert fm.body_start_line == stripped.count("\n", 0, fm.body_offset) + 1
    if not fm.has_block:
        assert fm.body_offset == 0 and fm.raw is None
    assert isinstance(fm.meta, dict)

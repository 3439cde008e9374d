"""Chunker contract (ARCHITECTURE §4 "Chunking"): breadcrumbs, packing, splitting, line fidelity, robustness."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reme_engine.markdown.chunker import Chunk, chunk_id, chunk_markdown, chunk_plain, split_lines

SHARED_DATA = Path(os.environ.get("REME_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


# ------------------------------------------------------------------------------------------------ helpers


def _blank(s: str) -> bool:
    return not s.strip(" \t")


def body_lines(body: str) -> list[str]:
    lines = split_lines(body)
    if lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return lines


def check_invariants(chunks: list[Chunk], body: str, *, line_offset: int = 0, max_bytes: int = 2000) -> None:
    """Everything the module docstring promises, for any input.

    Text fidelity: ``text`` equals the lines of its range, except (documented) a slice of one oversized line, or a
    split table/fence piece = up to 2 prefix lines (header+delimiter / opening fence) that occur earlier in the body
    + the range's lines + at most 1 suffix line (closing fence) that occurs later.
    Budget: ``len(text.encode()) <= max_bytes``, except one character wider than the budget (tiny max_bytes).
    """
    lines = body_lines(body)
    n = len(lines)
    covered = [False] * n
    prev: Chunk | None = None
    for c in chunks:
        assert isinstance(c.headings, tuple) and all(isinstance(h, str) for h in c.headings)
        assert line_offset + 1 <= c.start_line <= c.end_line <= line_offset + n, c
        s, e = c.start_line - 1 - line_offset, c.end_line - 1 - line_offset
        assert not _blank(c.text.replace("\n", "")), c
        assert "\r" not in c.text
        nbytes = len(c.text.encode("utf-8", "surrogatepass"))
        assert nbytes <= max_bytes or len(c.text) == 1, (nbytes, max_bytes, c)
        rng = lines[s : e + 1]
        joined = "\n".join(rng)
        if c.text != joined:
            if s == e and c.text in rng[0] and nbytes < len(rng[0].encode("utf-8", "surrogatepass")):
                pass  # slice of an oversized line
            else:
                tl = c.text.split("\n")

                def wrapped(k: int) -> bool:  # tl == pre (k lines) + rng + post
                    pre, post = tl[:k], tl[k + len(rng) :]
                    return (
                        tl[k : k + len(rng)] == rng
                        and len(post) <= 1
                        and all(p in lines[:s] for p in pre)
                        and all(p in lines[e + 1 :] for p in post)
                    )

                assert any(wrapped(k) for k in range(3)), f"text is not the range's lines: {c}"
        assert not _blank(lines[s]) and not _blank(lines[e]), f"chunk starts/ends on a blank line: {c}"
        for i in range(s, e + 1):
            covered[i] = True
        if prev is not None:
            same_line_slices = prev.start_line == prev.end_line == c.start_line == c.end_line
            assert prev.end_line < c.start_line or same_line_slices, (prev, c)
        prev = c
    missing = [i + 1 for i in range(n) if not covered[i] and not _blank(lines[i])]
    assert not missing, f"non-blank lines not covered: {missing[:10]}"


def strip_frontmatter(text: str) -> tuple[str, int]:
    """(body, line_offset) — a minimal splitter so this test does not depend on the frontmatter module."""
    lines = split_lines(text)
    if lines and lines[0].lstrip("\ufeff").rstrip(" \t") == "---":
        for i in range(1, len(lines)):
            if lines[i].rstrip(" \t") in ("---", "..."):
                return "\n".join(lines[i + 1 :]), i + 1
    return text, 0


def by_text(chunks: list[Chunk], needle: str) -> Chunk:
    return next(c for c in chunks if needle in c.text)


# ------------------------------------------------------------------------------------------------ basics


def test_empty_and_blank_inputs():
    for body in ("", "\n", "   \n\t\n", "\r\n\r\n"):
        assert chunk_markdown(body) == []
        assert chunk_plain(body) == []


def test_invalid_budget_rejected():
    with pytest.raises(ValueError):
        chunk_markdown("x", max_bytes=0)


def test_heading_only_file():
    [c] = chunk_markdown("# Title\n")
    assert (c.start_line, c.end_line, c.text, c.headings) == (1, 1, "# Title", ("Title",))
    assert c.embed_text() == "# Title"  # own heading not repeated
    cs = chunk_markdown("# A\n## B\n### C\n", line_offset=4)
    assert [(c.start_line, c.end_line) for c in cs] == [(5, 7)]
    assert cs[0].headings == ("A",)


def test_small_note_is_one_chunk():
    body = "intro line\n\n# H\n\ntext\n"
    [c] = chunk_markdown(body)
    assert (c.start_line, c.end_line) == (1, 5)
    assert c.text == "intro line\n\n# H\n\ntext"
    assert c.headings == ()


# ------------------------------------------------------------------------------------------------ breadcrumbs

PV = """# 光伏产业链

## 上游：硅料

### 多晶硅工艺

{body}

## 中游：硅片

切片环节。
"""


def test_headings_breadcrumb_and_embed_text():
    para = "\n".join(f"改良西门子法第{i}步：还原炉中三氯氢硅与氢气反应沉积。" for i in range(20))
    body = PV.format(body=para)
    cs = chunk_markdown(body, max_bytes=400)
    check_invariants(cs, body, max_bytes=400)
    deep = [c for c in cs if "改良西门子法" in c.text]
    assert len(deep) > 2
    # The first chunk descends from the H1 through the empty H2/H3 into the text: its headings are the innermost
    # section holding all of it (the H1), and the deeper headings are in the text itself.
    first = deep[0]
    assert first.text.startswith("# 光伏产业链\n\n## 上游：硅料\n\n### 多晶硅工艺\n\n改良西门子法第0步")
    assert first.headings == ("光伏产业链",)
    assert first.embed_text() == first.text  # starts with its own heading: nothing prepended
    for c in deep[1:]:
        assert c.headings == ("光伏产业链", "上游：硅料", "多晶硅工艺")
        assert c.embed_text() == "# 光伏产业链\n## 上游：硅料\n### 多晶硅工艺\n" + c.text
    mid = by_text(cs, "切片环节")
    assert mid.headings == ("光伏产业链", "中游：硅片")
    assert mid.text == "## 中游：硅片\n\n切片环节。"


def test_setext_and_closed_atx_titles():
    body = "Big Title\n=========\n\npara\n\n## Sub ##\n\n" + "\n".join(["text " * 30] * 5)
    cs = chunk_markdown(body, max_bytes=200)
    check_invariants(cs, body, max_bytes=200)
    assert cs[0].headings == ("Big Title",)
    assert cs[0].text.startswith("Big Title\n=========\n\npara\n\n## Sub ##")
    assert cs[0].embed_text() == cs[0].text  # setext heading recognised as the chunk's own
    rest = cs[1:]
    assert rest and all(c.headings == ("Big Title", "Sub") for c in rest)
    assert Chunk(0, 0, "## Sub ##\ntext", ("Big Title", "Sub")).embed_text() == "# Big Title\n## Sub ##\ntext"


def test_embed_text_from_stored_fields_only():
    # The indexer rebuilds Chunk(0, 0, text, headings) from the database; embed_text must not need more.
    c = Chunk(0, 0, "## B\nbody", ("A", "B"))
    assert c.embed_text() == "# A\n## B\nbody"
    assert Chunk(0, 0, "body", ()).embed_text() == "body"


def test_split_section_tail_is_not_packed_under_a_shallower_breadcrumb():
    # "### deep" is split; its last small piece must not be joined with "## next" (the chunk's breadcrumb would
    # then be just ("top",) while its first lines belong to top > mid > deep).
    body = "# top\n\n## mid\n\n### deep\n\n" + "\n".join(f"deep line {i} " * 3 for i in range(12)) + "\n\n## next\n\nn\n"
    cs = chunk_markdown(body, max_bytes=200)
    check_invariants(cs, body, max_bytes=200)
    for c in cs:
        if c.text.startswith("deep line"):
            assert c.headings == ("top", "mid", "deep")
            assert "## next" not in c.text
    assert by_text(cs, "## next").text.startswith("## next")


def test_giant_heading_line_is_capped_in_breadcrumb():
    body = "# " + "标题" * 300_000 + "\n\ncontent line\n"
    cs = chunk_markdown(body)
    check_invariants(cs, body)
    assert len(cs) > 100
    assert all(len(h) <= 200 for c in cs for h in c.headings)
    assert by_text(cs, "content line").headings[0].endswith("…")


def test_heading_level_jumps_and_preamble():
    body = "preamble\n\n### deep first\n\nx\n\n# Top\n\n#### skip\n\ny\n"
    cs = chunk_markdown(body, max_bytes=12)
    check_invariants(cs, body, max_bytes=12)
    assert by_text(cs, "preamble").headings == ()
    assert by_text(cs, "x").headings == ("deep first",)
    assert by_text(cs, "y").headings == ("Top", "skip")


# ------------------------------------------------------------------------------------------------ packing


def test_small_sibling_sections_are_packed():
    parts = ["# Root", ""]
    for i in range(8):
        parts += [f"## s{i}", "", f"short body {i}", ""]
    parts += ["## big", "", "\n".join(["long line of text " * 4] * 10)]
    body = "\n".join(parts)
    cs = chunk_markdown(body, max_bytes=160)
    check_invariants(cs, body, max_bytes=160)
    packed = [c for c in cs if c.text.count("## s") >= 2]
    assert packed, "small siblings should share chunks"
    for c in packed:
        assert c.headings == ("Root",)  # a chunk spanning siblings carries only their common ancestor
        assert c.embed_text().startswith("# Root\n")
        assert c.embed_text().count("# Root") == 1
    # every small section lands whole in one chunk
    for i in range(8):
        assert sum(f"## s{i}\n\nshort body {i}" in c.text for c in cs) == 1
    # the big one is split, each piece under "big"
    big = [c for c in cs if "long line" in c.text]
    assert len(big) > 1
    assert all(c.headings == ("Root", "big") for c in big if "## big" not in c.text)


def test_whole_section_alone_gets_its_own_breadcrumb():
    body = "# A\n\n" + "a " * 300 + "\n\n## B\n\nb text\n"
    cs = chunk_markdown(body, max_bytes=400)
    check_invariants(cs, body, max_bytes=400)
    b = by_text(cs, "b text")
    assert b.text == "## B\n\nb text" and b.headings == ("A", "B")
    assert b.embed_text() == "# A\n## B\n\nb text"


def test_big_section_splits_at_subsections():
    subs = []
    for i in range(6):
        subs.append(f"### sub {i}\n\n" + "\n".join(f"sentence {i}.{j} with some words" for j in range(6)))
    body = "## Parent\n\nintro\n\n" + "\n\n".join(subs) + "\n"
    cs = chunk_markdown(body, max_bytes=220)
    check_invariants(cs, body, max_bytes=220)
    lines = body_lines(body)
    for c in cs:
        if "sentence" in c.text and c is not cs[0]:
            assert lines[c.start_line - 1].startswith("### sub"), c  # each chunk begins at a subsection
            assert c.headings[:1] == ("Parent",)
    assert cs[0].text.startswith("## Parent\n\nintro")


# ------------------------------------------------------------------------------------------------ blocks


def test_table_header_repeated_in_every_piece():
    header = "| 名称 | 数值 | note |\n|---|---:|:---|"
    rows = [f"| row{i} | {i * 7} | 说明文字 {i} |" for i in range(60)]
    body = "# T\n\n" + header + "\n" + "\n".join(rows) + "\n\nafter\n"
    cs = chunk_markdown(body, max_bytes=300)
    check_invariants(cs, body, max_bytes=300)
    lines = body_lines(body)
    table = [c for c in cs if "row" in c.text]
    assert len(table) > 2
    seen = []
    for k, c in enumerate(table):
        assert c.text.startswith(header + "\n"), c
        got = c.text.split("\n")[2:]
        seen += got
        # range = the rows (the first piece also includes the header it starts with)
        first_row = lines.index(got[0]) + 1
        assert c.end_line == lines.index(got[-1]) + 1
        assert c.start_line == (first_row - 2 if k == 0 else first_row)
    assert seen == rows  # every row exactly once, in order


def test_code_fence_kept_in_every_piece():
    code = [f"    x{i} = compute({i})  # step" for i in range(80)]
    body = "## Code\n\n```python\n" + "\n".join(code) + "\n```\n\ntail\n"
    cs = chunk_markdown(body, max_bytes=400, line_offset=2)
    check_invariants(cs, body, max_bytes=400, line_offset=2)
    pieces = [c for c in cs if "compute" in c.text]
    assert len(pieces) > 2
    got = []
    for c in pieces:
        tl = c.text.split("\n")
        assert tl[0] == "```python" and tl[-1] == "```", c
        got += tl[1:-1]
    assert got == code
    lines = body_lines(body)
    assert lines[pieces[0].start_line - 3] == "```python"  # first piece's range includes the real opening fence
    assert lines[pieces[-1].end_line - 3] == "```"


def test_unclosed_fence_and_html_block():
    body = "<div>\n<p>html</p>\n</div>\n\n# H\n\n~~~\n" + "\n".join(f"line {i}" for i in range(50))
    cs = chunk_markdown(body, max_bytes=120)
    check_invariants(cs, body, max_bytes=120)
    assert cs[0].text.startswith("<div>\n<p>html</p>\n</div>\n")
    fence = [c for c in cs if "line 1" in c.text]
    assert all(c.text.startswith("~~~\n") for c in fence)
    assert not any(c.text.endswith("~~~") for c in fence)  # no invented closing fence


def test_list_items_stay_whole():
    items = []
    for i in range(12):
        items.append(f"- item {i} first line\n  continuation {i}\n  - nested {i}")
    body = "Some list:\n\n" + "\n".join(items) + "\n"
    cs = chunk_markdown(body, max_bytes=200)
    check_invariants(cs, body, max_bytes=200)
    lines = body_lines(body)
    for c in cs:
        if "item" in c.text or "nested" in c.text:
            assert lines[c.start_line - 1].startswith(("- item", "Some list")), c
            assert lines[c.end_line - 1].startswith("  - nested"), c  # ends with a whole item


def test_oversized_list_item_split_by_lines():
    big = "- big item\n" + "\n".join(f"  line {i} of the big item" for i in range(30))
    body = "- small a\n" + big + "\n- small b\n"
    cs = chunk_markdown(body, max_bytes=150)
    check_invariants(cs, body, max_bytes=150)
    assert any("line 29" in c.text for c in cs)


def test_oversized_single_line_multibyte():
    line = "光伏😀é" * 5000  # 4+3+3... bytes per char mixes, no whitespace
    body = f"# H\n\n{line}\n\nafter\n"
    cs = chunk_markdown(body, max_bytes=100, line_offset=7)
    check_invariants(cs, body, max_bytes=100, line_offset=7)
    slices = [c for c in cs if c.start_line == c.end_line == 10]
    assert len(slices) > 100
    assert "".join(c.text for c in slices) == line  # cut only at character boundaries, nothing lost
    assert all(len(c.text.encode()) <= 100 for c in slices)
    assert all(c.headings == ("H",) for c in slices)


def test_oversized_line_prefers_whitespace():
    line = " ".join(f"word{i}" for i in range(3000))
    cs = chunk_plain(line, max_bytes=97)
    check_invariants(cs, line, max_bytes=97)
    assert "".join(c.text for c in cs) == line
    assert all(c.text.endswith(" ") for c in cs[:-1])
    assert all(not c.text.startswith(" ") for c in cs)


def test_budget_smaller_than_a_character():
    # The one budget exception: a character is never cut, so a 4-byte emoji exceeds max_bytes=3.
    cs = chunk_plain("ab😀c", max_bytes=3)
    assert [c.text for c in cs] == ["ab", "😀", "c"]
    check_invariants(cs, "ab😀c", max_bytes=3)


def test_crlf_tabs_and_line_offset():
    body = "# 标题\r\n\r\n\tindented code\r\n\r\n- a\r\n- b\r\n\r\n## 二\r\n\r\n" + ("正文。" * 40 + "\r\n") * 3
    cs = chunk_markdown(body, line_offset=3, max_bytes=400)
    check_invariants(cs, body, line_offset=3, max_bytes=400)
    file_lines = ["---", "a: 1", "---", *body.split("\r\n")]
    for c in cs:
        if c.text == "\n".join(file_lines[c.start_line - 1 : c.end_line]):
            continue
        pytest.fail(f"range does not match file lines: {c}")
    assert cs[0].start_line == 4
    assert by_text(cs, "正文").headings == ("标题", "二")
    # lone CR counts as a line break, like markdown-it and universal newlines
    cs = chunk_markdown("a\rb\r\rc", max_bytes=3)
    assert [(c.start_line, c.text) for c in cs] == [(1, "a\nb"), (4, "c")]


def test_link_reference_definitions_are_covered():
    # markdown-it emits no token for them; they must still be chunked
    body = "[ref]: https://example.com\n\n# H\n\n[other]: /x\n"
    cs = chunk_markdown(body, max_bytes=30)
    check_invariants(cs, body, max_bytes=30)
    assert (cs[0].start_line, cs[0].text) == (1, "[ref]: https://example.com")
    assert (cs[1].start_line, cs[1].end_line, cs[1].headings) == (3, 5, ("H",))


def test_bom_and_deep_nesting():
    body = "\ufeff# Title\n\n" + "> " * 500 + "deep\n" + "".join("  " * i + "- x\n" for i in range(300))
    cs = chunk_markdown(body, max_bytes=500)
    check_invariants(cs, body, max_bytes=500)
    assert cs[0].headings[:1] == ("Title",) and cs[0].text.startswith("# Title")


# ------------------------------------------------------------------------------------------------ chunk_plain


def test_chunk_plain_packs_whole_lines():
    text = "\n".join(f"{i},name {i},value" for i in range(200)) + "\n"
    cs = chunk_plain(text, max_bytes=256, line_offset=0)
    check_invariants(cs, text, max_bytes=256)
    assert all(c.headings == () for c in cs)
    assert "\n".join(c.text for c in cs) == text.rstrip("\n")  # contiguous whole lines, no gaps
    one = json.dumps({"k": ["值" * 50] * 2000}, ensure_ascii=False)
    cs = chunk_plain(one, max_bytes=2000)
    check_invariants(cs, one)
    assert "".join(c.text for c in cs) == one


# ------------------------------------------------------------------------------------------------ ids


def test_chunk_id_stable_under_moves():
    sec = "## Stable\n\nThis section does not change.\n"
    filler = "## Filler\n\n" + "filler words " * 30 + "\n"
    a = chunk_markdown("# Doc\n\n" + filler + "\n" + sec, max_bytes=120)
    b = chunk_markdown("# Doc\n\n" + "new\n\n" * 5 + filler + "\n" + sec, max_bytes=120)
    ca, cb = by_text(a, "does not change"), by_text(b, "does not change")
    assert ca.start_line != cb.start_line and ca.text == cb.text
    assert chunk_id("notes/x.md", ca.text) == chunk_id("notes/x.md", cb.text)
    assert chunk_id("notes/y.md", ca.text) != chunk_id("notes/x.md", ca.text)
    assert chunk_id("ab", "c") != chunk_id("a", "bc")
    h = chunk_id("p.md", "text")
    assert 16 <= len(h) <= 32 and int(h, 16) >= 0


# ------------------------------------------------------------------------------------------------ properties

_WORD = st.text(alphabet=st.sampled_from(list("abcxyz 中文字😀é\t#|`*-_>[]:!<")), max_size=25)


@st.composite
def _block(draw) -> str:
    kind = draw(st.sampled_from(
        ["heading", "setext", "para", "list", "table", "fence", "html", "quote", "long", "blank", "ref", "indent"]
    ))
    w = lambda: draw(_WORD)  # noqa: E731
    if kind == "heading":
        return "#" * draw(st.integers(1, 7)) + " " + w()
    if kind == "setext":
        return "x" + w() + "\n" + draw(st.sampled_from(["===", "---"]))
    if kind == "para":
        return "\n".join("p" + w() for _ in range(draw(st.integers(1, 5))))
    if kind == "list":
        mark = draw(st.sampled_from(["-", "*", "1."]))
        out = []
        for _ in range(draw(st.integers(1, 6))):
            out.append(f"{mark} {w()}")
            if draw(st.booleans()):
                out.append("  " + draw(st.sampled_from(["- ", "", "```"])) + w())
            if draw(st.booleans()):
                out.append("")
        return "\n".join(out)
    if kind == "table":
        rows = [f"| {w()} | {w()} |" for _ in range(draw(st.integers(0, 8)))]
        return "\n".join(["| h1 | h2 |", "|---|---|", *rows])
    if kind == "fence":
        lines = [w() for _ in range(draw(st.integers(0, 8)))]
        close = draw(st.sampled_from(["```", "", "````"]))
        return "\n".join(["```" + draw(st.sampled_from(["", "py"])), *lines, *([close] if close else [])])
    if kind == "html":
        return "<div>\n" + w() + "\n</div>"
    if kind == "quote":
        return "\n".join("> " + w() for _ in range(draw(st.integers(1, 4))))
    if kind == "long":
        return w() * draw(st.integers(5, 60))
    if kind == "ref":
        return "[r]: /u" + w().replace(" ", "")
    if kind == "indent":
        return "    " + w()
    return ""


@st.composite
def _markdown(draw) -> str:
    blocks = draw(st.lists(_block(), max_size=25))
    text = "".join(b + draw(st.sampled_from(["\n", "\n\n", "\n\n\n"])) for b in blocks)
    return text.replace("\n", draw(st.sampled_from(["\n", "\r\n", "\r"])))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_markdown(), st.integers(0, 5), st.sampled_from([4, 9, 24, 64, 150, 400, 2000]))
def test_property_generated_markdown(body, offset, budget):
    check_invariants(chunk_markdown(body, line_offset=offset, max_bytes=budget), body, line_offset=offset,
                     max_bytes=budget)


@settings(max_examples=120, deadline=None)
@given(st.text(max_size=400), st.integers(1, 300))
def test_property_arbitrary_text(text, budget):
    check_invariants(chunk_markdown(text, max_bytes=budget), text, max_bytes=budget)
    check_invariants(chunk_plain(text, max_bytes=budget), text, max_bytes=budget)


# ------------------------------------------------------------------------------------------------ scale / real data


def test_large_inputs_are_fast():
    one_mb_line = "中文 words😀 " * 70_000
    t = time.perf_counter()
    cs = chunk_markdown(one_mb_line)
    assert time.perf_counter() - t < 5
    check_invariants(cs, one_mb_line)
    para = ("Lorem ipsum dolor sit amet, 段落文字。 " * 5 + "\n") * 20 + "\n"
    big = ("## section\n\n" + para + "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * 20 + "\n```\ncode\n```\n\n") * 1700
    assert len(big.encode()) > 5_000_000
    t = time.perf_counter()
    cs = chunk_markdown(big)
    assert time.perf_counter() - t < 30  # ~1-2 s here; generous for loaded CI machines
    check_invariants(cs, big)


def _vault_notes(rel: str) -> list[Path]:
    root = SHARED_DATA / rel
    if not root.exists():
        pytest.skip(f"shared data not available: {rel}")
    return sorted(root.rglob("*.md"))


@pytest.mark.slow
def test_real_vault_knowledge_garden():
    files = _vault_notes("vaults/knowledge-garden-zh")
    total = 0
    for p in files:
        body, off = strip_frontmatter(p.read_text(encoding="utf-8", errors="surrogateescape"))
        for budget in (2000, 300):
            cs = chunk_markdown(body, line_offset=off, max_bytes=budget)
            try:
                check_invariants(cs, body, line_offset=off, max_bytes=budget)
            except AssertionError as exc:
                raise AssertionError(f"{p.name} (budget {budget}): {exc}") from exc
            total += len(cs)
    assert total > len(files)


@pytest.mark.slow
def test_real_file_lines_match_chunk_ranges():
    # Read the file the way the indexer's consumers would (universal newlines) and compare ranges.
    files = _vault_notes("vaults/knowledge-garden-zh")[:400]
    for p in files:
        text = p.read_text(encoding="utf-8", errors="surrogateescape")
        body, off = strip_frontmatter(text)
        file_lines = split_lines(text.removeprefix("\ufeff"))
        for c in chunk_markdown(body, line_offset=off):
            if c.start_line == c.end_line and c.text in file_lines[c.start_line - 1]:
                continue
            tl = c.text.split("\n")
            assert all(t in file_lines for t in tl), (p.name, c)
            if "```" not in c.text and "|" not in c.text:
                assert c.text == "\n".join(file_lines[c.start_line - 1 : c.end_line]), (p.name, c)


@pytest.mark.slow
def test_corpus_throughput():
    files = _vault_notes("corpus/doocs-leetcode-md")
    texts = [p.read_text(encoding="utf-8", errors="surrogateescape") for p in files]
    t = time.perf_counter()
    n = 0
    for text in texts:
        body, off = strip_frontmatter(text)
        n += len(chunk_markdown(body, line_offset=off))
    elapsed = time.perf_counter() - t
    assert n > len(files)
    assert elapsed < 120  # ~4 s for 33 MB on these machines; the bound only catches quadratic blow-ups


def test_big_bodies_are_split_in_one_linear_pass(monkeypatch):
    """A body over LINEAR_PARSE_BYTES never reaches markdown-it (up to ~8 s/MB on dense lists or tables); the
    linear scanner keeps headings, fences (an unclosed one runs to the end) and the chunk invariants."""
    from reme_engine.markdown import chunker

    def no_markdown_it():
        raise AssertionError("markdown-it used on a big body")

    monkeypatch.setattr(chunker, "_parser", no_markdown_it)
    body = ("# Top\n\n" + "- [[x]] item\n" * 40_000 + "\n## Code\n\n```py\n" + "x = 1  # not a heading\n" * 20_000)
    assert len(body) > chunker.LINEAR_PARSE_BYTES
    chunks = chunk_markdown(body, max_bytes=2000)
    assert all(len(c.text.encode()) <= 2000 for c in chunks)
    lines = body.split("\n")
    covered = set()
    for c in chunks:
        covered.update(range(c.start_line, c.end_line + 1))
    assert all(i + 1 in covered for i, s in enumerate(lines) if s.strip())
    assert chunks[0].headings == ("Top",) and chunks[-1].headings == ("Top", "Code")
    assert chunks[-1].text.startswith("```py\n")  # fence pieces are re-wrapped in their opening line
    assert not any(c.headings[-1:] == ("not a heading",) for c in chunks)


def test_table_rows_make_no_tokens():
    """The lean table rule keeps markdown-it's table extent but emits two tokens, not eight per row."""
    from reme_engine.markdown.chunker import _parser

    rows = 5_000
    text = "| a | b |\n|---|---|\n" + "| [[x]] | y |\n" * rows + "\nafter\n"
    tokens = _parser().parse(text)
    assert [t.type for t in tokens if t.level == 0][:2] == ["table_open", "table_close"]
    assert tokens[0].map == [0, rows + 2]
    assert len(tokens) < 10


def _stock_block_parser():
    """markdown-it's own block loop with the chunker's configuration (lean table rule), no first-character dispatch."""
    from markdown_it import MarkdownIt

    from reme_engine.markdown.chunker import _lean_table

    md = MarkdownIt("commonmark").enable("table").disable(["inline", "text_join"])
    alt = next(r.alt for r in md.block.ruler.__rules__ if r.name == "table")
    md.block.ruler.at("table", _lean_table, {"alt": list(alt)})
    return md


def test_first_character_dispatch_gives_markdown_its_tokens():
    """The block loop that tries only the rules a line's first character allows yields markdown-it's own tokens,
    on random mixes of every block start (nesting, lazy lines, tabs, indented code, unclosed fences)."""
    import random

    from reme_engine.markdown.chunker import _parser, _token_signature

    fast, stock = _parser(), _stock_block_parser()
    assert not hasattr(fast.block.tokenize, "__self__")  # installed (probes matched)
    pieces = ["# h", "## h2 #", "#x", "text", "  text", "    code", "\tcode", "- a", "* b", "+ c", "1. one", "2) two",
              "10. ten", "> q", ">q", "> - qi", "```", "~~~", "```py", "  ```", "***", "---", "___", "- - -", "===",
              "<div>", "</div>", "<!-- c", "-->", "<pre>", "[r]: /u", "[r]:", "| a | b |", "|---|---|", "-|-", ":-:|",
              "", "", " ", "1.", "-", ">", "   - nested", "      - deeper", "<?php", "<x-y>", "a | b", "--- | ---",
              "中文段落", "> 引用", "  > - x", "\t- t", "cr\r\nlf", "lone\rcr", "nul\0char", "\r"]
    rnd = random.Random(12)
    for _ in range(3000):
        text = "\n".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 30)))
        assert _token_signature(fast.parse(text)) == _token_signature(stock.parse(text)), text

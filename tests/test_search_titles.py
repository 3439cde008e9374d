"""Title vectors in the dense leg (reme_engine.search.titles): a note's title matched across languages."""

import re
from dataclasses import replace

from conftest import shared

from reme_engine.search.titles import merge_title_hits, title_text

_TITLE = re.compile(r"^#\s*\[(?:[\w.]+\.\s*)?(.+?)\]\(", re.MULTILINE)


def test_title_text_and_merge():
    assert title_text("0001", "0001", ["两数之和"], []) == "两数之和"  # a bare number is no title
    assert title_text("Habits", "habits", ["Habits"], ["习惯", "habits"]) == "Habits · 习惯"
    assert title_text("", "2026-11-24", [], []) == ""
    ranked, from_title = merge_title_hits([(1, 0.30), (2, 0.20)], [(2, 0.50), (3, 0.10)], n=2)
    assert ranked == [(2, 0.50), (1, 0.30)] and from_title == {2}


def _twins(n: int):
    root = shared("corpus/doocs-leetcode-md") / "solution"
    out = []
    for f in sorted(root.glob("*/*"))[::40]:
        zh, en = f / "README.md", f / "README_EN.md"
        if not (zh.is_file() and en.is_file()):
            continue
        mz, me = _TITLE.search(zh.read_text(encoding="utf-8")), _TITLE.search(en.read_text(encoding="utf-8"))
        if mz and me:
            body = zh.read_text(encoding="utf-8")
            a, b = body.find("<!-- description:start -->"), body.find("<!-- description:end -->")
            if a >= 0 and b > a:
                out.append((f.name.split(".", 1)[0], mz.group(1).strip(), me.group(1).strip(), body[a + 26:b]))
        if len(out) >= n:
            break
    return out


def test_english_titles_find_their_chinese_notes(make_engine, tmp_path):
    """40 Chinese LeetCode problems; each English title (no shared words: the keyword leg is empty) finds its
    note, through the title vector far more often than through the chunk vectors alone."""
    twins = _twins(40)
    v = tmp_path / "v"
    v.mkdir()
    for num, zh_title, _en, desc in twins:
        (v / f"{num}.md").write_text(f"# {zh_title}\n\n{desc.strip()}\n", encoding="utf-8")
    e = make_engine(v)
    e.index()
    s = e.searcher
    assert s.wait_titles()
    plain = replace(s.fusion, relative_floor=0.0)

    def found(titles_on: bool) -> int:
        s.title_vectors = titles_on
        return sum(f"{num}.md" in [h.path for h in s.search(en, neighbors=False, fusion=plain).hits[:5]]
                   for num, _zh, en, _d in twins)

    without, with_titles = found(False), found(True)
    assert with_titles >= 0.8 * len(twins) and with_titles > without, (with_titles, without, len(twins))
    hit = s.search(twins[0][2], neighbors=False).hits
    assert any(h.vector_title for h in hit)

"""The chunker's linear block scanner gives exactly markdown-it's blocks (and so the same chunks).

``chunker._scan_exact`` replaces markdown-it's block parse for the common blocks and hands everything else to
markdown-it by regions; these tests compare it, and ``chunk_markdown`` built on it, with the markdown-it-only path
on hand-picked edge cases and on generated notes mixing every kind of block line.
"""

from __future__ import annotations

import random

import pytest

from reme_engine.markdown import chunker
from reme_engine.markdown.chunker import chunk_markdown

# Lines that start, end, interrupt or continue blocks, or only look as if they did.
PIECES = [
    "# T", "## T ##", "#x", "####### x", "   # h", "    # code", "\t# tab", "# h\t##", "  #  h  #  ", "#\u3000x",
    "#", "# ", "#\t#", "# a #", "# a#", "x\u00a0##", "para", "text line", "  indented", "     deep", "a\tb",
    "**bold**", "1986. year", "2024年", "```", "```py", "~~~", "````", "``` `x`", "  ```", "   ```", "  ~~~", "x ```",
    "~~~ ~", "\t```", "`", "``", "~~", "- a", "-a", "* b", "+ c", "1. x", "2) y", "10.z", "1)", "2.", "   -", "-\tx",
    "+", "*", "- [ ] task", "  - nested", "    - deep", " \t- x", "- ```", "1. ```", "---", "***", "___", "===",
    "- - -", "* * *", "_ _ _", "  =", "= =", "> q", ">", "   > q", "    > q", "> ```", "> - a", "<div>", "</div>",
    "<DIV>", "<p>para</p>", "</p>", "<!-- c", "-->", "  <!--", "  -->", "text <!-- x", "<pre>", "</pre>", "<Pre>",
    "<script>", "</script>", "<textarea", "<span>x</span>", "<a href='x'>", "<custom a=1>", "</custom>", "<hr/>",
    "<?x", "?>", "<!X", "<!doctype html>", "<![CDATA[", "]]>", "| a | b |", "|---|---|", "  | a |", "a | b", "-|-",
    "--|--", ":-:", "[r]: /u", "[link]: <u>", "[x", "y]: /u", "\\[x]: y", "[[wiki]]", "", "", "", "  ", "\t",
]

CASES = [
    "# A\n\npara\n\n## B\n\n```py\ncode\n# not a heading\n```\n\n<div>\nx\n\n</div>\n",
    "para\n---\n\n- a\n- b\n\nafter",  # setext heading, then a list
    "<!-- open\n\n# inside the comment\n\n- still inside\n",  # an HTML comment that never closes
    "- a\n\n  ```\n  code\n\nback at column 0\n\n```\nunclosed fence to the end\n\n# x\n",
    "> quote\n> > deeper\nlazy\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\ntext\n\n    indented code\n\n# H\n",
    "[ref]: /url 'title'\n[ref]\n\n<pre>\n\n# in pre\n</pre>\ntext\n",
    "# T\n" + "\n".join("  " * k + "- level" for k in range(30)) + "\n\nafter the deep list\n\n## U\n",
    "\ufeff# BOM title\n\nbody\n\x00nul\n",
    "Comment:\n---\n\ntwo\nlines\n===\n\n--\n\n___\n\n- - -\n\n| a |\n---\n",  # setext, hr, a 1-column table
    "- 📌 item\n\t- tab-indented child\n\t\t- grandchild\n- next\n\n  more of next\n\n1. one\n2. two\n\n3) new list\n",
    "- a\nlazy line\n- b\n\n2.\n\n-    four spaces\n-     five: code\n\n* other bullet\n\n1.**not a list**\n",
    "[a\n# h\n" * 50 + "[r]: /u\n\n[b\n<div>\n\n",  # blocks opening with "[" one after another
]

# Lines of lists and what may follow them.
LIST_PIECES = [
    "- a", "* b", "+ c", "1. x", "2) y", "3. z", "  text", "   deeper", "    code", "      code2", "  - nested",
    "    - n2", "  ```", "  > q", "  <!--", "-->", "", "", "", "para", "# h", "---", "- - -", "-", "1.", "-  two",
    "-    four", "-     five", "-\ttab", "  \tx", "\tx", "\t\t- deep", " one space", "10. ten", "1234567890. x",
    "  1. n", "\t- t", "***", "  ***", "```", "~~~", "<div>", "> q", "| a |", "|---|", "  |---|", "  ===", "===",
    "  # h", "[r]: /u", "  [r]: /u", "   - three", "  - > - > x", "- - x", "1.**x**", "Title", "==", "--",
]


def _markdown_it_only(monkeypatch, body: str, max_bytes: int):
    with monkeypatch.context() as m:
        m.setattr(chunker, "_scan_exact", lambda doc: None)
        return chunk_markdown(body, max_bytes=max_bytes)


def _blocks_by_markdown_it(doc) -> list:
    out: list = []
    chunker._token_blocks(doc, chunker._parser().parse("\n".join(doc.lines)), 0, len(doc.lines), out)
    return out


@pytest.mark.parametrize("body", CASES)
@pytest.mark.parametrize("max_bytes", [12, 40, 2000])
def test_chunks_match_the_markdown_it_path(monkeypatch, body, max_bytes):
    assert chunk_markdown(body, max_bytes=max_bytes) == _markdown_it_only(monkeypatch, body, max_bytes)


def test_generated_notes_give_markdown_its_blocks():
    rnd = random.Random(22)
    scanned = 0
    for _ in range(3000):
        body = "\n".join(rnd.choice(PIECES) for _ in range(rnd.randint(1, 40)))
        doc = chunker._Doc(body, 2000)
        if doc.empty:
            continue
        got = chunker._scan_exact(doc)
        if got is None:
            continue
        scanned += 1
        assert got == _blocks_by_markdown_it(doc), repr(body)
    assert scanned > 2500  # the scanner vouches for nearly all of them (None only for NUL or nesting limits)


def test_generated_lists_give_markdown_its_blocks():
    rnd = random.Random(12)
    for _ in range(3000):
        body = "\n".join(rnd.choice(LIST_PIECES) for _ in range(rnd.randint(1, 40)))
        doc = chunker._Doc(body, 2000)
        if doc.empty:
            continue
        got = chunker._scan_exact(doc)
        assert got is None or got == _blocks_by_markdown_it(doc), repr(body)


def test_deep_nesting_goes_to_markdown_it():
    # 30 levels of nested items: past markdown-it's nesting limit, which the scanner never second-guesses
    body = "".join("  " * k + "- level\n" for k in range(30)) + "\nafter\n\n# H\n"
    doc = chunker._Doc(body, 2000)
    got = chunker._scan_exact(doc)
    assert got is None or got == _blocks_by_markdown_it(doc)


def test_generated_notes_chunk_alike(monkeypatch):
    rnd = random.Random(7)
    for _ in range(300):
        body = "\n".join(rnd.choice(PIECES) + " " + "字" * rnd.randint(0, 30) for _ in range(rnd.randint(5, 80)))
        assert chunk_markdown(body, max_bytes=120) == _markdown_it_only(monkeypatch, body, 120), repr(body)


def test_region_open_at_its_cut_runs_to_the_end():
    # the list is a region; the top-level HTML comment after it is still open at the next blank line + column-0
    # line, so that is no cut: the comment swallows "# not a heading" exactly as markdown-it's whole parse does
    body = "- item\n\n<!-- a\n\n# not a heading\n\n-->\n\n# real\n"
    doc = chunker._Doc(body, 2000)
    blocks = chunker._scan_exact(doc)
    assert blocks == _blocks_by_markdown_it(doc)
    assert [b.title for b in blocks if b.kind == "heading"] == ["real"]


def test_each_region_is_parsed_at_most_twice(monkeypatch):
    # linear time: 2,000 lists between paragraphs are 2,000 regions, each handed to markdown-it once or twice
    calls = []
    real = chunker._parser()

    class Counting:
        def parse(self, src):
            calls.append(len(src))
            return real.parse(src)

    monkeypatch.setattr(chunker, "_parser", lambda: Counting())
    body = "".join(f"para {k}\n\n- a\n- b\n\n" for k in range(2000))
    chunk_markdown(body)
    assert len(calls) <= 2 * 2000 and sum(calls) <= 2 * len(body)

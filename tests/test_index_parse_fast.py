"""The cold keyword pass's shortcuts give exactly what the general code gives (issue 12: cheaper parse, same
chunks, links and tokens). Each shortcut is compared with its reference path on real notes copied to a temp vault
and on generated edge cases; ``bench/check_parse_identity.py`` does the same over every file of both vaults."""

from __future__ import annotations

import random
import shutil
import unicodedata
from pathlib import Path

import pytest
from conftest import shared

from reme_engine.index.tokenizer import (
    _CJK_RUN_RE,
    _RUN_RE,
    EN_STOPWORDS,
    MAX_LATIN_LEN,
    ZH_STOPWORDS,
    MixedTokenizer,
)
from reme_engine.markdown import chunker as C
from reme_engine.markdown import links as L
from reme_engine.markdown.frontmatter import parse_frontmatter


def _sample(tmp_path: Path, rel: str, every: int) -> list[Path]:
    """Every ``every``-th Markdown file of a shared dataset, copied into ``tmp_path`` (never read in place)."""
    src = shared(rel)
    files = sorted(p for p in src.rglob("*.md") if not any(s.startswith(".") for s in p.relative_to(src).parts))
    out = []
    for i, p in enumerate(files[::every]):
        dst = tmp_path / rel.replace("/", "_") / f"{i}.md"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dst)
        out.append(dst)
    return out


@pytest.fixture(scope="module")
def real_notes(tmp_path_factory) -> list[str]:
    tmp = tmp_path_factory.mktemp("notes")
    paths = _sample(tmp, "vaults/knowledge-garden-zh", 12) + _sample(tmp, "corpus/doocs-leetcode-md", 40)
    return [p.read_text(encoding="utf-8", errors="replace") for p in paths]


def _bodies(texts: list[str]) -> list[str]:
    return [t[parse_frontmatter(t).body_offset:] for t in texts]


# ------------------------------------------------------------------------------------------------ chunker
_LINES = ["# T", "## Sub", "### Deep", "#tag line", "  # indented", "\t# tab", "####### seven", "# closing ##", "#",
          "text", "中文 text", "", "  ", "===", "---", "- item", "  - nested", "1. one", "> quote", "> # qh", "```",
          "~~~", "    code", "| a | b |", "|---|---|", "| 1 | 2 |", "<div>", "</div>", "[ref]: http://x", "Title", "-",
          "= x", "***", "- # listhead", "  ## two-space", "   ### three", "\u00a0# nbsp", "#\tTab title #", "# T #  ",
          "setext para", "  ---", "\\# escaped", "%%", "<!-- c -->"]


def _full(body: str, offset: int = 0, budget: int = 2000) -> list:
    doc = C._Doc(body, budget)
    return [] if doc.empty else C._chunk_doc(doc, offset)


def test_one_chunk_shortcut_equals_the_parser_on_generated_notes():
    rng = random.Random(12)
    shortcut = 0
    for _ in range(20_000):
        body = rng.choice(["\n", "\r\n"]).join(rng.choice(_LINES) for _ in range(rng.randint(1, 8)))
        body += rng.choice(["", "\n"])
        assert C.chunk_markdown(body, line_offset=2) == _full(body, 2), repr(body)
        doc = C._Doc(body, 2000)
        shortcut += not doc.empty and C._single_chunk(doc, 2) is not None
    assert shortcut > 5_000  # the shortcut is really taken


def test_one_chunk_shortcut_keeps_breadcrumbs():
    # taken (no markdown-it) and filed like the parser files it
    one = "# 光伏\n\n正文\n\n## 上游\n\n- 硅料\n"
    assert C._single_chunk(C._Doc(one, 2000), 0) is not None
    assert C.chunk_markdown(one) == [C.Chunk(1, 7, "# 光伏\n\n正文\n\n## 上游\n\n- 硅料", ("光伏",))]
    intro = "intro\n\n## A\n\ntext\n\n## B\n"
    assert C.chunk_markdown(intro) == _full(intro) and C.chunk_markdown(intro)[0].headings == ()
    # not taken when a later heading could close the first section (the parser decides)
    assert C._single_chunk(C._Doc("## A\n\n## B\n", 2000), 0) is None
    assert C._single_chunk(C._Doc("a\n---\n", 2000), 0) is None


def test_one_chunk_shortcut_equals_the_parser_on_real_notes(real_notes):
    for body in _bodies(real_notes):
        for budget in (2000, 400):
            assert C.chunk_markdown(body, line_offset=5, max_bytes=budget) == _full(body, 5, budget)


def test_fast_line_markers_equal_markdown_its_own(real_notes):
    from markdown_it.rules_block.state_block import StateBlock

    md = C._parser()
    fast = C._fast_state_block(md)
    assert fast is not None and md.block.parse.__name__ == "parse"  # the fast markers are in use
    extra = ["\t\tx\n \t y\n\t", "a\n  ", "a\n  \n", "\n\n\ny", " \t\t x\n\t \ty\n", "x"]
    for src in [*real_notes, *extra]:
        src = "\n".join(C.split_lines(src))
        assert vars(fast(src, md, {}, [])) == vars(StateBlock(src, md, {}, []))


# ------------------------------------------------------------------------------------------------ links
def _reference_exclusions(text: str) -> list[tuple[int, int]]:
    """The line-by-line block pass as it was before the regex skips (the oracle)."""
    out: list[tuple[int, int]] = []
    n = len(text)
    no_more_pct = False
    pos = 0
    while pos < n:
        eol = text.find("\n", pos)
        line_end = n if eol < 0 else eol
        nxt = n if eol < 0 else eol + 1
        line = text[pos:line_end]
        depth, ci = L._container(line)
        fence = L._fence_open(line, ci)
        if fence is not None:
            c, length = fence
            end = n
            q = nxt
            while q < n:
                e2 = text.find("\n", q)
                le = n if e2 < 0 else e2
                ln = text[q:le].rstrip("\r")
                d2, ci2 = L._container(ln)
                if d2 < depth:
                    end = q
                    break
                if L._fence_close(ln, ci2, c, length):
                    end = n if e2 < 0 else e2 + 1
                    break
                q = n if e2 < 0 else e2 + 1
            out.append((pos, end))
            pos = end
            continue
        i = L._skip_ws(line, ci)
        start = pos + i
        close_end = -1
        if line.startswith("<!--", i):
            k = text.find("-->", start + 4)
            close_end = n if k < 0 else k + 3
        elif line.startswith("%%", i) and not no_more_pct:
            k = text.find("%%", start + 2)
            no_more_pct = k < 0
            close_end = -1 if k < 0 else k + 2
        elif line.startswith("<", i):
            tag = line[i + 1 : i + 12].translate(L._ASCII_LOWER)
            for name in L._RAW_TAGS:
                if tag.startswith(name) and (len(tag) == len(name) or tag[len(name)] in " \t\r>"):
                    m = L._CLOSE_TAG[name].search(text, start)
                    close_end = n if m is None else m.end()
                    break
        if close_end >= 0:
            out.append((start, close_end))
            if close_end >= n:
                break
            e3 = text.find("\n", close_end)
            if e3 < 0:
                break
            pos = e3 + 1
            continue
        pos = nxt
    return out


_LINK_LINES = ["[[A]]", "text [[B|b]] and [c](C.md)", "```", "~~~~", "> ```", "> > ~~~", "- ```py", "1. ```",
               "   ```", "\t```", "``` inline ```", "<!-- [[X]]", "-->", "%% [[H]]", "%%", "<pre>", "</pre>",
               "<script>", "</script>", "> [[Q]]", "plain", "", "  <!--x-->[[Y]]", "````", "  ~~~ ", "\r"]


def test_block_pass_equals_the_line_by_line_one(real_notes):
    rng = random.Random(5)
    texts = [*real_notes]
    texts += ["\n".join(rng.choice(_LINK_LINES) for _ in range(rng.randint(1, 12))) for _ in range(5_000)]
    for text in texts:
        assert L._block_exclusions(text) == _reference_exclusions(text), repr(text[:200])


def test_text_without_link_openers_has_no_links():
    assert L.parse_links("no links here\n```\n[a] (b)\n```") == []
    assert [lk.target for lk in L.parse_links("x [[A]] y")] == ["A"]
    assert [lk.target for lk in L.parse_links("see [t](B.md)")] == ["B.md"]


# ------------------------------------------------------------------------------------------------ tokenizer
def _reference_tokens(tok: MixedTokenizer, text: str) -> list[str]:
    """The tokenizer's rules run by run, as written before the C-level passes (the oracle)."""
    out: list[str] = []
    text = unicodedata.normalize("NFKC", text)
    for m in _RUN_RE.finditer(text):
        run = m.group()
        if _CJK_RUN_RE.match(run[0]):
            if len(run) == 1:
                out.append(run)
                continue
            out.extend(w for w in tok._cut(run) if len(w) > 1 and w not in ZH_STOPWORDS)
            out.extend(bg for bg in (run[i : i + 2] for i in range(len(run) - 1)) if bg not in ZH_STOPWORDS)
        else:
            w = run.lower()
            if len(w) <= MAX_LATIN_LEN and w not in EN_STOPWORDS:
                out.append(w)
    return out


def test_tokens_equal_the_run_by_run_rules(real_notes):
    tok = MixedTokenizer()
    tok.tokenize("预热")  # loads the segmenter
    tricky = ["İstanbul ΟΔΟΣ_X ΣΑΣ", "café。next_word", "ＡＢＣ１２３ full width", "中文abc混合def", "x" * 41,
              "我们的" * 40, "长" * 200, "a_b-c.d/e", "ǅ Ǆ ǆ ß ẞ", "ﬁ ligature", "\u0301 combining", "数据库SQL调优", ""]
    for text in [*real_notes, *tricky]:
        assert tok.tokenize(text) == _reference_tokens(tok, text), text[:80]
        assert tok.tokenize(text) == _reference_tokens(tok, text)  # second time: from the run cache

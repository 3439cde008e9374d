"""Our link and frontmatter parsers against ground truth: what real Obsidian parsed.

Data (see ``<shared data>/vaults/obsidian-tasks-oracle/SOURCE.txt``): the obsidian-tasks maintainers opened each
test note in Obsidian and saved ``metadataCache`` output as JSON (``links``, ``embeds``, ``frontmatterLinks``,
``frontmatter``, ``frontmatterPosition``, ``resolveLinkToPath``) plus the vault-wide ``resolvedLinks.json`` /
``unresolvedLinks.json``. Every note is compared; the only notes allowed to differ are listed in
:data:`KNOWN_DIFFERENCES`, and the test also fails if a listed note stops differing (so the list stays honest).

Second corpus: doocs/leetcode Markdown, whose ``[[1,2],[3,4]]`` matrices and ``[[Int]]`` Swift types in fenced
code, ``<pre>``, ``<code>`` and inline code must never become wikilinks (SOURCE.txt there: 0 resolved wikilinks,
0 inline fields expected).

The data lives outside the repository: ``$REME_SHARED_DATA`` or ``<repo>/../shared/data``; tests skip without it.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from reme_engine.markdown.frontmatter import parse_frontmatter
from reme_engine.markdown.links import Link, LinkResolver, frontmatter_links, parse_links

SHARED = Path(os.environ.get("REME_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
ORACLE = SHARED / "vaults" / "obsidian-tasks-oracle"
LEETCODE = SHARED / "corpus" / "doocs-leetcode-md"
NOTE_FOLDER = "Test Data"  # the notes' folder inside the Obsidian vault the metadata was captured from

#: note name → why our result deliberately differs from Obsidian's.
KNOWN_DIFFERENCES: dict[str, str] = {
    "comments_markdown_style": (
        "A link inside an inline Obsidian comment (`%% [[comments_html_style]] %%`) is still reported by "
        "Obsidian's metadataCache (and counted in resolvedLinks), although Obsidian hides it from the reader. "
        "ARCHITECTURE §4 (wikilinks): %% comments are not links, so we drop it."
    ),
}

NOTES = sorted(p.stem for p in (ORACLE / "vault").glob("*.md")) if ORACLE.is_dir() else []


@functools.cache
def _metadata(note: str) -> dict:
    return json.loads((ORACLE / "metadata" / f"{note}.json").read_text(encoding="utf-8"))


@functools.cache
def _text(note: str) -> str:
    with open(ORACLE / "vault" / f"{note}.md", encoding="utf-8", newline="") as fh:
        return fh.read()


@functools.cache
def _vault_links(name: str) -> dict:
    return json.loads((ORACLE / "metadata" / "metadataCache" / name).read_text(encoding="utf-8"))


@functools.cache
def _resolver() -> LinkResolver:
    """Every file of the original vault (resolvedLinks keys + link targets), aliases from the notes we have."""
    resolved = _vault_links("resolvedLinks.json")
    paths = set(resolved)
    for counts in resolved.values():
        paths |= set(counts)
    aliases = {}
    for note in NOTES:
        al = parse_frontmatter(_text(note)).meta.get("aliases")
        if al:
            aliases[f"{NOTE_FOLDER}/{note}.md"] = al if isinstance(al, list) else [al]
    return LinkResolver(sorted(paths), aliases)


def _ours(note: str) -> tuple[list[Link], list[Link]]:
    text = _text(note)
    fm = parse_frontmatter(text)
    body = parse_links(text[fm.body_offset :], start_line=fm.body_start_line, start_offset=fm.body_offset)
    return body, frontmatter_links(fm.meta)


def _differences(note: str) -> list[str]:
    """Every way our parse of ``note`` differs from Obsidian's; empty when identical."""
    diffs: list[str] = []
    meta = _metadata(note)
    cm = meta["cachedMetadata"]
    text = _text(note)
    if meta["fileContents"] != text:
        diffs.append("fileContents differs from the vault note")
    fm = parse_frontmatter(text)
    body, fm_links = _ours(note)

    # links + embeds: Obsidian's `link` string, displayText, original, offsets and 0-based line
    expected = sorted(
        [(lk["position"]["start"]["offset"], lk["position"]["end"]["offset"], lk["position"]["start"]["line"] + 1,
          lk["link"], lk["displayText"], lk["original"], kind == "embeds")
         for kind in ("links", "embeds") for lk in cm.get(kind) or []])
    got = [(lk.start, lk.end, lk.line, lk.link, lk.display, lk.original, lk.embed) for lk in body]
    if got != expected:
        diffs.append(f"links: obsidian={expected} ours={got}")

    # frontmatter mapping and block position
    if (cm.get("frontmatter") or {}) != fm.meta:
        diffs.append(f"frontmatter: obsidian={cm.get('frontmatter')} ours={fm.meta} ({fm.warning})")
    pos = cm.get("frontmatterPosition")
    if pos is not None:
        end = pos["end"]
        if not fm.has_block or fm.body_start_line != end["line"] + 2 or fm.body_offset != end["offset"] + 1:
            diffs.append(f"frontmatter position: obsidian={end} ours=({fm.body_start_line}, {fm.body_offset})")

    # frontmatterLinks (Obsidian keys list items "key.0"; our predicate is the key path without indices)
    expected_fm = [(re.sub(r"\.\d+(?=\.|$)", "", lk["key"]), lk["link"], lk["displayText"], lk["original"])
                   for lk in cm.get("frontmatterLinks") or []]
    got_fm = [(lk.predicate, lk.link, lk.display, lk.original) for lk in fm_links]
    if got_fm != expected_fm:
        diffs.append(f"frontmatterLinks: obsidian={expected_fm} ours={got_fm}")

    # resolution: per-note counts of the vault-wide resolvedLinks / unresolvedLinks, and resolveLinkToPath
    src = f"{NOTE_FOLDER}/{note}.md"
    resolver = _resolver()
    resolved: Counter[str] = Counter()
    unresolved: Counter[str] = Counter()
    for lk in body + fm_links:
        r = resolver.resolve(lk.target, src)
        if r.path:
            resolved[r.path] += 1
        else:
            unresolved[lk.target] += 1
    if dict(resolved) != _vault_links("resolvedLinks.json").get(src, {}):
        diffs.append(f"resolvedLinks: obsidian={_vault_links('resolvedLinks.json').get(src)} ours={dict(resolved)}")
    if dict(unresolved) != _vault_links("unresolvedLinks.json").get(src, {}):
        diffs.append(f"unresolvedLinks: obsidian={_vault_links('unresolvedLinks.json').get(src)} "
                     f"ours={dict(unresolved)}")
    for link, path in meta["resolveLinkToPath"].items():
        got_path = resolver.resolve(link.split("#", 1)[0], src).path
        if got_path != path:
            diffs.append(f"resolveLinkToPath[{link!r}]: obsidian={path} ours={got_path}")
    return diffs


needs_oracle = pytest.mark.skipif(not ORACLE.is_dir(), reason=f"shared data not found at {SHARED}")


@needs_oracle
def test_every_note_has_obsidian_metadata():
    metas = {p.stem for p in (ORACLE / "metadata").glob("*.json")}
    assert len(NOTES) == 89
    assert set(NOTES) == metas
    assert set(KNOWN_DIFFERENCES) <= set(NOTES)


@needs_oracle
@pytest.mark.parametrize("note", NOTES)
def test_note_matches_obsidian(note):
    diffs = _differences(note)
    if note in KNOWN_DIFFERENCES:
        assert diffs, f"{note} now matches Obsidian: remove it from KNOWN_DIFFERENCES"
    else:
        assert diffs == []


@needs_oracle
def test_known_difference_is_exactly_the_comment_link():
    if "comments_markdown_style" not in NOTES:
        pytest.skip("note missing")
    body, _ = _ours("comments_markdown_style")
    obsidian = [lk["original"] for lk in _metadata("comments_markdown_style")["cachedMetadata"]["links"]]
    assert obsidian == ["[[comments_html_style]]"]
    assert body == []
    # the link sits between %% markers on its line
    line = _text("comments_markdown_style").splitlines()[8]
    assert re.search(r"%%.*\[\[comments_html_style\]\].*%%", line)


@needs_oracle
def test_oracle_covers_the_interesting_forms():
    """Guard against a silently shrinking oracle: these forms must be present and compared."""
    originals = {lk["original"] for note in NOTES for kind in ("links", "embeds")
                 for lk in _metadata(note)["cachedMetadata"].get(kind) or []}
    for form in ("[[#heading#sub-heading||internal wikilink with alias and two headings]]", "[[|alias]]",
                 "[[pa#th/path/link_in_task_wikilink]]", "![[corrupt_rerender_issue_3715_1.png]]",
                 "[spaces everywhere](Manual%20Testing/Smoke%20Testing%20the%20Tasks%20Plugin#How%20the%20tests%20work)",
                 "[[liNk_in_YaMl]]", "[[a_pdf_file.pdf]]"):
        assert form in originals


# -- doocs/leetcode: bracket-heavy code must never produce wikilinks --------------------------------------

LEETCODE_FILES = (sorted(str(p.relative_to(LEETCODE)) for p in LEETCODE.rglob("*.md"))
                  if LEETCODE.is_dir() else [])
_HTML_RAW = re.compile(r"<(pre|code)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)


def _code_regions(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]], dict[int, list[str]]]:
    """Independent view (markdown-it-py + a regex) of where code is: fenced/indented code line ranges (0-based,
    end exclusive), <pre>/<code> character spans, and per paragraph line the inline code span contents."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    blocks = [tuple(t.map) for t in tokens if t.type in ("fence", "code_block") and t.map]
    raw = [(m.start(), m.end()) for m in _HTML_RAW.finditer(text)]
    inline: dict[int, list[str]] = {}
    for t in tokens:
        if t.type == "inline" and t.map and t.children:
            codes = [c.content for c in t.children if c.type == "code_inline"]
            for line in range(t.map[0], t.map[1]):
                inline.setdefault(line, []).extend(codes)
    return blocks, raw, inline


@pytest.mark.skipif(not LEETCODE_FILES, reason=f"leetcode corpus not found under {SHARED}")
def test_leetcode_sample_has_no_wikilinks_in_code():
    with_brackets = [f for f in LEETCODE_FILES if "[[" in (LEETCODE / f).read_text(encoding="utf-8")]
    sample = with_brackets[::3] + [f for f in with_brackets if f.split("/")[-2].startswith(("0049.", "0874."))]
    assert len(sample) > 300
    checked_brackets = 0
    for rel in sample:
        text = (LEETCODE / rel).read_text(encoding="utf-8")
        fm = parse_frontmatter(text)
        body = text[fm.body_offset :]
        blocks, raw, inline = _code_regions(body)
        checked_brackets += body.count("[[")
        for lk in parse_links(body):
            line0 = body.count("\n", 0, lk.start)
            where = f"{rel}:{line0 + 1 + fm.body_start_line - 1}: {lk.original}"
            assert not any(a <= line0 < b for a, b in blocks), f"link inside fenced/indented code: {where}"
            assert not any(a <= lk.start < b for a, b in raw), f"link inside <pre>/<code>: {where}"
            assert not any(lk.original in code for code in inline.get(line0, [])), f"link in inline code: {where}"
            assert lk.predicate is None, where
            if lk.kind == "wikilink":
                # the only bracket pairs left are example data in raw HTML <p>/<span> lines (SOURCE.txt)
                line = body.splitlines()[line0]
                assert line.lstrip().startswith("<"), where
    assert checked_brackets > 1000


@pytest.mark.slow
@pytest.mark.skipif(not LEETCODE_FILES, reason=f"leetcode corpus not found under {SHARED}")
def test_leetcode_whole_corpus_zero_resolved_wikilinks_and_zero_fields():
    resolver = LinkResolver(LEETCODE_FILES)
    wikilinks = []
    for rel in LEETCODE_FILES:
        text = (LEETCODE / rel).read_text(encoding="utf-8")
        fm = parse_frontmatter(text)
        assert fm.warning is None, rel
        for lk in parse_links(text[fm.body_offset :], start_line=fm.body_start_line):
            assert lk.predicate is None, (rel, lk)
            if lk.kind == "wikilink":
                wikilinks.append((rel, lk))
    assert len(wikilinks) <= 16  # SOURCE.txt: at most the 16 example arrays in raw HTML
    assert [lk for rel, lk in wikilinks if resolver.resolve(lk.target, rel).path] == []


# --------------------------------------------------------------------------------------------------------
# Repeated basenames: Obsidian's resolution order (no captured metadata covers it: the oracle vault has no
# repeated names), cases from public bug reports and Obsidian's documented behaviour, on the resolver alone.
# --------------------------------------------------------------------------------------------------------

#: (vault files, linking note, link target, the file Obsidian opens, where the case comes from)
REPEATED_NAME_CASES = [
    (["Test 1/Source.md", "Test 2/Source.md", "Test 1/Drag.md"], "Test 1/Drag.md", "Source", "Test 1/Source.md",
     "drag-and-drop-blocks #9: Obsidian's find-nearest-file resolves to the note beside the source"),
    (["A/Target.md", "B/Target.md", "B/Source.md"], "B/Source.md", "Target", "B/Target.md",
     "Obsidian sends [[Target]] from B/Source.md to B/Target.md (metadataCache probe in a public exporter)"),
    (["Note.md", "b/Note.md", "zzzz/deep/s.md"], "zzzz/deep/s.md", "Note", "Note.md",
     "an exact vault path wins"),
    (["b/Note.md", "a/b/Note.md", "zzzz/Note.md", "q/s.md"], "q/s.md", "Note", "b/Note.md",
     "elsewhere: the shortest path string (b/Note.md over a/b/Note.md and zzzz/Note.md)"),
    (["a/b/Note.md", "zzzz/Note.md", "q/s.md"], "q/s.md", "Note", "a/b/Note.md",
     "shortest string, not fewest folders"),
    (["b/Note.md", "a/b/Note.md", "a/b/c/s.md"], "a/b/c/s.md", "Note", "a/b/Note.md",
     "the closest ancestor folder before a shorter path elsewhere"),
    (["x/Todo.md", "y/todo.md", "q/s.md"], "q/s.md", "Todo", "x/Todo.md",
     "the name in the same case first (case-sensitive file systems can hold both spellings)"),
    (["m/Same.md", "n/Same.md", "q/s.md"], "q/s.md", "Same", "m/Same.md",
     "equal rank: code-point order, independent of the scan order"),
    (["Home/index.md", "Work/index.md", "Work/Projects/p.md"], "Work/Projects/p.md", "index", "Work/index.md",
     "per-folder index notes: the parent folder's index"),
]


@pytest.mark.parametrize(("files", "source", "target", "expected", "why"), REPEATED_NAME_CASES,
                         ids=[c[4][:40] for c in REPEATED_NAME_CASES])
def test_repeated_names_resolve_like_obsidian(files, source, target, expected, why):
    for order in (files, list(reversed(files))):
        r = LinkResolver(order).resolve(target, source)
        assert r.path == expected, why
        dupes = [f for f in files if f.rsplit("/", 1)[-1].lower() == expected.rsplit("/", 1)[-1].lower()]
        if r.ambiguous:  # several candidates: all listed, the chosen one first
            assert r.candidates[0] == expected and sorted(r.candidates) == sorted(dupes)

"""The one wikilink module: parsing, Dataview predicates, resolution cascade, writing and rewriting links."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reme_engine.markdown.links import (
    Link,
    LinkResolver,
    Resolution,
    format_link,
    frontmatter_links,
    normalize_name,
    parse_links,
    rewrite_links,
)


def one(text: str) -> Link:
    links = parse_links(text)
    assert len(links) == 1, links
    return links[0]


def targets(text: str) -> list[str]:
    return [lk.link for lk in parse_links(text)]


# -- wikilink forms --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("src", "target", "anchor", "alias", "embed", "display"), [
    ("[[T]]", "T", None, None, False, "T"),
    ("[[digest/wiki/foo]]", "digest/wiki/foo", None, None, False, "digest/wiki/foo"),
    ("[[T#Heading]]", "T", "Heading", None, False, "T > Heading"),
    ("[[T#H#Sub]]", "T", "H#Sub", None, False, "T > H > Sub"),
    ("[[T#^block]]", "T", "^block", None, False, "T > ^block"),
    ("[[T#L9-L12]]", "T", "L9-L12", None, False, "T > L9-L12"),
    ("[[T|alias]]", "T", None, "alias", False, "alias"),
    ("[[T#H|alias]]", "T", "H", "alias", False, "alias"),
    ("![[T]]", "T", None, None, True, "T"),
    ("![[pic.png|300]]", "pic.png", None, "300", True, "300"),
    ("[[#Heading]]", "", "Heading", None, False, "Heading"),
    ("[[#^block|b]]", "", "^block", "b", False, "b"),
    ("[[ T ]]", "T", None, None, False, "T"),
    ("[[foo.md]]", "foo.md", None, None, False, "foo.md"),
    ("[[T||a]]", "T", None, "|a", False, "|a"),  # Obsidian: alias is everything after the first '|'
    ("[[|alias]]", "|alias", None, None, False, "|alias"),  # Obsidian: the link part is never empty
    ("[[🚀 Launch|🚀]]", "🚀 Launch", None, "🚀", False, "🚀"),
])
def test_wikilink_forms(src, target, anchor, alias, embed, display):
    lk = one(f"before {src} after")
    assert (lk.target, lk.anchor, lk.alias, lk.embed, lk.display) == (target, anchor, alias, embed, display)
    assert lk.kind == "wikilink" and lk.original == src and lk.predicate is None
    assert lk.start == len("before ") and lk.end == lk.start + len(src) and lk.line == 1


def test_escaped_pipe_in_table_row():
    text = "| note | link |\n|---|---|\n| a | [[Target\\|shown]] |\n| b | ![[img.png\\|100]] |\n"
    a, b = parse_links(text)
    assert (a.target, a.alias, a.line, a.original) == ("Target", "shown", 3, "[[Target\\|shown]]")
    assert (b.target, b.alias, b.embed) == ("img.png", "100", True)


@pytest.mark.parametrize("text", [
    "[[]]", "[[ ]]", "[[#]]", "[[a\nb]]", "[[open", "close]]", "[[1,2],[3,4]]", "[[a]b]]", "\\[\\[T\\]\\]",
    "[single](", "[[\n]]",
])
def test_not_wikilinks(text):
    assert [lk for lk in parse_links(text) if lk.kind == "wikilink"] == []


def test_bracket_runs_and_nesting():
    assert targets("[[[x]]]") == ["x"]
    assert [lk.start for lk in parse_links("[[[x]]]")] == [1]
    assert targets("[[a [[b]] c]]") == ["b"]
    assert targets("\\[[x]] and \\![[y]]") == ["y"]
    assert parse_links("\\![[y]]")[0].embed is False


def test_several_links_and_order_and_lines():
    text = "# H\n\n[[a]] then [md](b.md)\n\n- ![[c]] and [[d#x|D]]\n"
    links = parse_links(text)
    assert [(lk.link, lk.line, lk.kind) for lk in links] == [
        ("a", 3, "wikilink"), ("b.md", 3, "markdown"), ("c", 5, "wikilink"), ("d#x", 5, "wikilink")]
    for lk in links:
        assert text[lk.start : lk.end] == lk.original


def test_start_line_and_offset_for_a_body_after_frontmatter():
    body = "line\n[[x]]\r\nmore [[y]]"
    links = parse_links(body, start_line=5, start_offset=100)
    assert [(lk.line, lk.start, lk.end) for lk in links] == [(6, 105, 110), (7, 117, 122)]


# -- Markdown links --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("src", "link", "alias", "embed"), [
    ("[text](note.md)", "note.md", "text", False),
    ("[t](Test%20Data/note.md#Some%20Heading)", "Test Data/note.md#Some Heading", "t", False),
    ("[t](<folder/with spaces.md>)", "folder/with spaces.md", "t", False),
    ("[t](note)", "note", "t", False),
    ("[t](#heading)", "#heading", "t", False),
    ("![alt](img/pic.png)", "img/pic.png", "alt", True),
    ('[t](note.md "a title")', "note.md", "t", False),
    ("[t](Page%20(2).md)", "Page (2).md", "t", False),
    ("[t](a\\(b.md)", "a(b.md", "t", False),
    ("[`code` text](n.md)", "n.md", "`code` text", False),
])
def test_markdown_links(src, link, alias, embed):
    lk = one(f"see {src}.")
    assert (lk.link, lk.alias, lk.display, lk.embed, lk.kind, lk.original) == (link, alias, alias, embed,
                                                                               "markdown", src)


@pytest.mark.parametrize("text", [
    "[web](https://example.com/a.md)", "[mail](mailto:x@y.z)", "[o](obsidian://open?vault=x)",
    "[p](//cdn.example.com/x.png)", "[empty]()", "[]()", "[a] (b.md)", "[a](b c.md)", "[a]\n\n(b.md)",
    "![img](http://x/y.png)", "`[a](b.md)`", "[a][ref]",
])
def test_not_internal_markdown_links(text):
    assert parse_links(text) == []


def test_external_link_text_is_not_rescanned():
    assert parse_links("[x](https://e.com/[[not]]) [[yes]]")[0].target == "yes"
    assert len(parse_links("[x](https://e.com/[[not]]) [[yes]]")) == 1


# -- exclusions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "```\n[[no]]\n```\n",
    "~~~\n[[no]]\n~~~\n",
    "````md\n```\n[[no]]\n```\n````\n",
    "   ```\n[[no]]\n   ```\n",
    "- item\n  ```python\n  x = [[no]]\n  ```\n",
    "1. ```\n   [[no]]\n   ```\n",
    "> ```\n> [[no]]\n> ```\n",
    "```\n[[no]] unclosed fence runs to the end\n\n[[no]]",
    "`[[no]]`", "``a ` [[no]] b``", "<!-- [[no]] -->", "<!--\n[[no]]\n\n[[no]]\n-->",
    "<!-- unclosed block comment\n[[no]]", "%% [[no]] %%", "%%\n[[no]]\n\n[[no]]\n%%",
    "<pre>\n[[no]]\n\n[[no]]\n</pre>", "<PRE class=x>[[no]]</PRE>", "a <code>[[no]]</code> b",
    "<script>\nlet a = [[1]];\n</script>", "%% kanban:settings\n```\n{\"a\":[[1]]}\n```\n%%",
])
def test_no_links_in_code_comments_and_raw_html(text):
    assert [lk.original for lk in parse_links(text) if "no" in lk.original or "1" in lk.original] == []


@pytest.mark.parametrize(("text", "expected"), [
    ("```\ncode\n```\n[[yes]]", ["yes"]),
    ("```\n[[no]]\n```\n```\n[[no]]\n```\n[[yes]]", ["yes"]),
    ("~~~\n```\n[[no]]\n~~~\n[[yes]]", ["yes"]),
    ("```\n[[no]]\n``\n```\n[[yes]]", ["yes"]),
    ("```a`b\n[[yes]]", ["yes"]),  # backticks in a backtick info string: not a fence
    ("> ```\n> [[no]]\n[[yes]]", ["yes"]),  # leaving the blockquote closes its fence
    ("`a\n\n[[yes]] b`", ["yes"]),  # a code span cannot cross a blank line
    ("` unmatched [[yes]]", ["yes"]),
    ("``[[no]]`` `` [[yes]]", ["yes"]),
    ("<!-- c --> [[yes]] <!-- [[also]]", ["yes", "also"]),  # an unclosed inline comment is text
    ("```\n<!--\n```\n[[yes]]\n-->", ["yes"]),  # comment markers inside code open nothing
    ("%% c %% [[yes]]", ["yes"]),
    ("stray %% then [[yes]]", ["yes"]),  # an unclosed %% hides nothing
    ("<code> unclosed [[yes]]", ["yes"]),
    ("</pre> [[yes]]", ["yes"]),
    ("<pre>[[no]]</pre> [[yes]]", ["yes"]),
    ("text\n    [[yes]] indented", ["yes"]),  # indented code blocks are not detected (list continuations)
])
def test_exclusions_end_where_they_should(text, expected):
    assert targets(text) == expected


# -- Dataview predicates ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("up:: [[Parent]]", [("Parent", "up")]),
    ("related:: [[A]], [[B]] and [[C|c]]", [("A", "related"), ("B", "related"), ("C", "related")]),
    ("- part of:: [[Whole]]", [("Whole", "part of")]),
    ("* [ ] blocked by:: [[Task]]", [("Task", "blocked by")]),
    ("1. source:: [[S]]", [("S", "source")]),
    ("> quoted:: [[Q]]", [("Q", "quoted")]),
    ("**Bold Key**:: [[X]]", [("X", "Bold Key")]),
    ("[[Before]] key:: [[After]]", [("Before", None), ("After", None)]),
    ("Met with [who:: [[Alice]]] and (where:: [[Cafe]]) about [[Topic]]",
     [("Alice", "who"), ("Cafe", "where"), ("Topic", None)]),
    ("[by:: [[A]], [[B]]] [[C]]", [("A", "by"), ("B", "by"), ("C", None)]),
    ("line:: [[A]] [inner:: [[B]]]", [("A", "line"), ("B", "inner")]),
    ("- [[A]]:: [[B]]", [("A", None), ("B", None)]),
    ("## heading:: [[H]]", [("H", None)]),
    ("plain [[P]] :: text", [("P", None)]),
    ("x:: `[[no]]` [[P]]", [("P", "x")]),
    ("`code:: x` [[P]]", [("P", None)]),
])
def test_predicates(text, expected):
    assert [(lk.target, lk.predicate) for lk in parse_links(text)] == expected


def test_predicate_is_per_line():
    text = "up:: [[A]]\n[[B]]\n- down:: [[C]]"
    assert [(lk.target, lk.predicate, lk.line) for lk in parse_links(text)] == [
        ("A", "up", 1), ("B", None, 2), ("C", "down", 3)]


def test_code_lines_that_look_like_fields_are_not_fields():
    text = "```rust\nuse std::collections::HashMap; // [[no]]\n```\nuse std::io; [[yes]]\n"
    links = parse_links(text)
    assert [lk.target for lk in links] == ["yes"]


# -- frontmatter links -----------------------------------------------------------------------------------


def test_frontmatter_links():
    meta = {"up": "[[Parent]]", "related": ["[[A|a]]", "plain", "[[B#h]] and [[C]]"], "n": 3,
            "nested": {"deep": "![[img.png]]"}, "md": "[x](y.md)", "code": "`[[no]]`"}
    got = [(lk.predicate, lk.target, lk.anchor, lk.alias, lk.embed, lk.line, lk.start, lk.end, lk.original)
           for lk in frontmatter_links(meta)]
    assert got == [
        ("up", "Parent", None, None, False, 0, 0, 0, "[[Parent]]"),
        ("related", "A", None, "a", False, 0, 0, 0, "[[A|a]]"),
        ("related", "B", "h", None, False, 0, 0, 0, "[[B#h]]"),
        ("related", "C", None, None, False, 0, 0, 0, "[[C]]"),
        ("nested.deep", "img.png", None, None, True, 0, 0, 0, "![[img.png]]"),
    ]
    assert frontmatter_links({}) == []


# -- linear time and robustness --------------------------------------------------------------------------

_PATHOLOGICAL = {
    "open_run": "[" * 200_000,
    "open_run_1mb": "[[[[" * 250_000,
    "open_run_then_link": "[" * 200_000 + "x]]",
    "close_run": "]" * 200_000,
    "pairs": "[]" * 100_000,
    "empty_wikilinks": "[[]]" * 50_000,
    "open_pipes": "[[a|" * 50_000 + "]]",
    "md_openers": "[a](" * 50_000,
    "md_spaces": "[a](b " * 33_000,
    "md_titles": '[a](b "' * 28_000,
    "md_angles": "[a](<" * 40_000,
    "paren_run": "[a](" + "(" * 200_000,
    "backticks": "`" * 200_000,
    "backtick_ladder": "".join("`" * (i % 50 + 1) + "x" for i in range(8_000)),
    "comments": "<!--" * 50_000,
    "percents": "%%" * 100_000 + "[[x]]",
    "code_tags": "<code>" * 33_000,
    "fences": "```\n" * 50_000,
    "quotes": ">" * 200_000,
    "escapes": "\\[" * 100_000,
    "colons": "::" * 100_000 + "[[x]]",
    "many_fields": "[k:: [[a]]] " * 16_000,
    "many_links_one_line": "k:: " + "[[a]], " * 28_000,
}


@pytest.mark.parametrize("name", sorted(_PATHOLOGICAL))
def test_pathological_input_is_parsed_correctly(name):
    text = _PATHOLOGICAL[name]
    links = parse_links(text)
    for lk in links:
        assert text[lk.start : lk.end] == lk.original
    expected = {"open_run_then_link": 1, "open_pipes": 1, "percents": 1, "colons": 1, "many_fields": 16_000,
                "many_links_one_line": 28_000}.get(name, 0)
    assert len(links) == expected
    if name == "open_run_then_link":
        assert links[0].start == 200_000 - 2 and links[0].target == "x"
    if name == "many_fields":
        assert {lk.predicate for lk in links} == {"k"}
    if name == "many_links_one_line":
        assert {(lk.predicate, lk.line) for lk in links} == {("k", 1)}


def test_200k_bracket_run_between_links():
    text = "[[a]] " + "[" * 200_000 + " [[b]]\n[[c]]"
    assert targets(text) == ["a", "b", "c"]
    assert [lk.line for lk in parse_links(text)] == [1, 1, 2]


_ALPHABET = st.sampled_from(list("[]()!|#\\`%<>-:~*^ \naT.") + ["[[", "]]", "![[", "```", "~~~", "<!--", "-->",
                                                              "%%", "::", "<pre>", "</pre>", "<code>", "</code>",
                                                              "\r\n", "> ", "- ", "](", "x.md", "http://"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_ALPHABET, max_size=120).map("".join))
def test_random_markup_invariants(text):
    links = parse_links(text, start_line=3, start_offset=10)
    prev_end = 10
    for lk in links:
        s, e = lk.start - 10, lk.end - 10
        assert text[s:e] == lk.original
        assert lk.start >= prev_end  # sorted, no overlaps
        prev_end = lk.end
        assert lk.line == 3 + text.count("\n", 0, s)
        if lk.kind == "wikilink":
            assert lk.original.startswith("![[" if lk.embed else "[[") and lk.original.endswith("]]")
            assert "\n" not in lk.original
            assert lk.target or lk.anchor
            assert lk.target == lk.target.strip()
        else:
            assert lk.original.startswith("![" if lk.embed else "[") and lk.original.endswith(")")


_SAFE = st.text(st.sampled_from(list("abc XYZ|#-.,\n")), max_size=40)
_NAME = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp"),
                              exclude_characters="[]|#^\\`%<>!"), min_size=1, max_size=20).filter(str.strip)


@settings(max_examples=300, deadline=None)
@given(_SAFE, _NAME, _SAFE)
def test_a_link_in_plain_text_is_found(before, name, after):
    text = f"{before} [[{name}]] {after}"
    links = [lk for lk in parse_links(text) if lk.original == f"[[{name}]]"]
    assert len(links) == 1
    assert links[0].target == name.strip() and links[0].start == len(before) + 1


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET.filter(lambda s: "`" not in s and "~" not in s), max_size=80).map("".join))
def test_nothing_inside_a_fence_is_a_link(inner):
    assert parse_links("```\n" + inner + "\n```\n") == []


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from(list("[]()!|#:ab ")), max_size=60))
def test_nothing_inside_inline_code_is_a_link(inner):
    assert parse_links("`" + inner + "`") == []


# -- resolution ------------------------------------------------------------------------------------------

VAULT = [
    "Cards/Pending/HOMEPAGE.md",
    "Cards/Homepage.md",
    "a/b/note.md",
    "a/other.md",
    "a/b/c/deep.md",
    unicodedata.normalize("NFD", "x/Café.md"),  # as macOS stores it
    "img/pic.png",
    "Board.canvas",
    "docs/manual.pdf",
    "🚀 Launch.md",
    "digest/wiki/foo.md",
    "foo.md",
    "z/foo.md",
    "session/dialog/abc.jsonl",
    "v1.2 notes.md",
    "zzz/dup.md",
    "aaa/dup.md",
]


@pytest.fixture
def resolver() -> LinkResolver:
    return LinkResolver(VAULT, {"digest/wiki/foo.md": ["Foo Alias", "  "], "a/other.md": "Solo Alias"})


@pytest.mark.parametrize(("target", "source", "path", "ambiguous"), [
    # (1) exact vault path, with or without .md
    ("digest/wiki/foo", "q.md", "digest/wiki/foo.md", False),
    ("digest/wiki/foo.md", "q.md", "digest/wiki/foo.md", False),
    ("foo", "digest/wiki/q.md", "foo.md", False),  # exact beats same folder (cascade order)
    ("session/dialog/abc.jsonl", "q.md", "session/dialog/abc.jsonl", False),
    ("Cards/Homepage", "q.md", "Cards/Homepage.md", False),
    ("cards/homepage", "q.md", "Cards/Homepage.md", False),
    # (2) relative to the linking note
    ("c/deep", "a/b/note.md", "a/b/c/deep.md", False),
    ("./note", "a/b/x.md", "a/b/note.md", False),
    ("../other", "a/b/note.md", "a/other.md", False),
    ("../../foo", "a/b/note.md", "foo.md", False),
    # (3) stem / suffix / alias, case-insensitive after NFC
    ("homepage", "q.md", "Cards/Homepage.md", True),  # case-only-different names: shortest path wins
    ("HOMEPAGE", "q.md", "Cards/Pending/HOMEPAGE.md", True),  # the name in the same case wins
    ("Pending/HOMEPAGE", "q.md", "Cards/Pending/HOMEPAGE.md", False),
    ("pending/homepage", "q.md", "Cards/Pending/HOMEPAGE.md", False),
    ("deep", "q.md", "a/b/c/deep.md", False),
    ("b/c/deep", "q.md", "a/b/c/deep.md", False),
    ("wiki/foo", "q.md", "digest/wiki/foo.md", False),
    ("ki/foo", "q.md", None, False),  # suffixes match on folder boundaries only
    (unicodedata.normalize("NFC", "café"), "q.md", unicodedata.normalize("NFD", "x/Café.md"), False),
    (unicodedata.normalize("NFD", "CAFÉ"), "q.md", unicodedata.normalize("NFD", "x/Café.md"), False),
    ("🚀 launch", "q.md", "🚀 Launch.md", False),
    ("pic.png", "q.md", "img/pic.png", False),
    ("Board.canvas", "q.md", "Board.canvas", False),
    ("manual.pdf", "q.md", "docs/manual.pdf", False),
    ("v1.2 notes", "q.md", "v1.2 notes.md", False),
    ("dup", "q.md", "aaa/dup.md", True),  # same length: lexicographic
    ("dup", "zzz/x.md", "zzz/dup.md", False),  # same folder: step 2 first
    ("foo alias", "q.md", "digest/wiki/foo.md", False),
    ("Solo Alias", "q.md", "a/other.md", False),
    # (4) dangling
    ("missing", "q.md", None, False),
    ("../../../escape", "a/b/note.md", None, False),
    ("../other", "q.md", None, False),
    ("/foo", "q.md", "foo.md", False),  # leading slash = vault root
    ("/nowhere/foo", "q.md", None, False),
    ("pic", "q.md", None, False),  # attachments need their extension
])
def test_resolution_cascade(resolver, target, source, path, ambiguous):
    r = resolver.resolve(target, source)
    assert (r.path, r.ambiguous) == (path, ambiguous)
    assert (r.virtual == "") == (path is not None)


def test_same_note_link_resolves_to_the_source(resolver):
    assert resolver.resolve("", "a/b/note.md") == Resolution("a/b/note.md", False, "")


@pytest.mark.parametrize(("target", "source", "virtual"), [
    ("Missing Note", "q.md", "missing note.md"),
    ("Folder/Thing.pdf", "q.md", "folder/thing.pdf"),
    ("v2.0", "q.md", "v2.0.md"),
    ("../new", "a/b/note.md", "a/new.md"),
    ("./sub/x", "a/note.md", "a/sub/x.md"),
])
def test_virtual_ids_for_dangling_links(resolver, target, source, virtual):
    r = resolver.resolve(target, source)
    assert r.path is None and r.virtual == virtual


def test_dangling_becomes_real_when_the_file_appears(resolver):
    assert resolver.resolve("New Idea", "q.md").path is None
    resolver.add("ideas/New Idea.md", aliases=["Brainchild"])
    assert resolver.resolve("new idea", "q.md").path == "ideas/New Idea.md"
    assert resolver.resolve("brainchild", "q.md").path == "ideas/New Idea.md"
    resolver.remove("ideas/New Idea.md")
    assert resolver.resolve("New Idea", "q.md").path is None
    assert resolver.resolve("brainchild", "q.md").path is None
    assert "ideas/New Idea.md" not in resolver


def test_stem_beats_alias_and_readd_replaces_aliases():
    r = LinkResolver(["a/Topic.md", "b/note.md"], {"b/note.md": ["topic"]})
    assert r.resolve("topic", "q.md") == Resolution("a/Topic.md", False, "")
    r.add("b/note.md", aliases=["other"])
    r.remove("a/Topic.md")
    assert r.resolve("topic", "q.md").path is None
    assert r.resolve("other", "q.md").path == "b/note.md"


# Repeated basenames: exact case, then nearest folder (own, then closest ancestor), then shortest, then order.
REPEATED = ["Note.md", "b/Note.md", "a/b/Note.md", "zzzz/Note.md", "p/q/r/Note.md", "p/Note.md",
            "x/Todo.md", "y/todo.md", "y/z/w/todo.md", "m/Same.md", "n/Same.md"]


@pytest.mark.parametrize(("target", "source", "path", "candidates"), [
    ("Note", "zzzz/deep/s.md", "Note.md", ()),  # an exact vault path wins over everything
    ("b/Note", "zzzz/s.md", "b/Note.md", ()),  # a partial path that is an exact vault path
    ("Note", "b/s.md", "Note.md", ()),  # ... even over a note beside the source
    ("todo", "y/s.md", "y/todo.md", ()),  # own folder, same case: step 2
    ("Todo", "y/z/w/s.md", "x/Todo.md", ("x/Todo.md", "y/z/w/todo.md", "y/todo.md")),  # case first
    ("todo", "y/z/w/s.md", "y/z/w/todo.md", ()),  # own folder, same case: step 2
    ("todo", "y/z/s.md", "y/todo.md", ("y/todo.md", "y/z/w/todo.md", "x/Todo.md")),  # closest ancestor
    ("todo", "q/s.md", "y/todo.md", ("y/todo.md", "y/z/w/todo.md", "x/Todo.md")),  # same case, shortest
    ("TODO", "y/z/s.md", "y/todo.md", ("y/todo.md", "x/Todo.md", "y/z/w/todo.md")),  # no exact case: nearest
    ("Todo", "q/s.md", "x/Todo.md", ("x/Todo.md", "y/todo.md", "y/z/w/todo.md")),
    ("same", "q/s.md", "m/Same.md", ("m/Same.md", "n/Same.md")),  # same length: code-point order
    ("same", "n/s.md", "n/Same.md", ("n/Same.md", "m/Same.md")),  # own folder, other case: still nearest
])
def test_resolution_order_for_repeated_names(target, source, path, candidates):
    r = LinkResolver(REPEATED).resolve(target, source)
    assert (r.path, r.ambiguous, r.candidates) == (path, bool(candidates), candidates)


def test_resolution_order_nearest_ancestor_and_shortest():
    r = LinkResolver(["a/b/c/Note.md", "a/x/Note.md", "a/Note2.md", "a/b/Note.md", "k/Note.md"])
    # from a/b/c/d: own folder none, parent a/b/c has one
    assert r.resolve("note", "a/b/c/d/s.md").path == "a/b/c/Note.md"
    # from a/b/x: ancestor a/b wins over the shorter k/Note.md
    assert r.resolve("note", "a/b/x/s.md").candidates == ("a/b/Note.md", "k/Note.md", "a/x/Note.md",
                                                          "a/b/c/Note.md")
    # unrelated folder: shortest path, then code points
    assert r.resolve("note", "q/s.md").candidates == ("k/Note.md", "a/b/Note.md", "a/x/Note.md", "a/b/c/Note.md")


def test_alias_candidates_use_the_same_order():
    r = LinkResolver(["a/one.md", "b/c/two.md", "b/three.md"],
                     {"a/one.md": ["Topic"], "b/c/two.md": ["topic"], "b/three.md": ["TOPIC"]})
    assert r.resolve("topic", "b/c/s.md").path == "b/c/two.md"  # exact case and own folder
    assert r.resolve("Topic", "b/c/s.md").path == "a/one.md"  # exact case beats the nearer one
    assert r.resolve("tOpIc", "b/c/s.md").candidates == ("b/c/two.md", "b/three.md", "a/one.md")


def test_resolution_does_not_depend_on_insertion_order():
    import random

    names = REPEATED + ["y/z/Todo.md", "TODO.md"]
    links = [(t, s) for t in ("todo", "Todo", "TODO", "note", "Note", "same", "b/note")
             for s in ("q.md", "y/z/w/s.md", "y/z/s.md", "p/q/r/s/s.md", "n/s.md", "b/s.md")]
    want = [LinkResolver(names).resolve(t, s) for t, s in links]
    for seed in range(5):
        shuffled = names[:]
        random.Random(seed).shuffle(shuffled)
        r = LinkResolver()
        for p in shuffled:
            r.add(p)
        assert [r.resolve(t, s) for t, s in links] == want


def test_normalize_name():
    assert normalize_name(unicodedata.normalize("NFD", "Café")) == normalize_name("CAFÉ") == "café"
    assert normalize_name("Straße") == "strasse"


# -- writing and rewriting -------------------------------------------------------------------------------


def test_format_link():
    assert format_link("digest/wiki/foo.md") == "[[digest/wiki/foo]]"
    assert format_link("digest/wiki/foo.md", anchor="H", alias="Foo") == "[[digest/wiki/foo#H|Foo]]"
    assert format_link("img/a.png", embed=True) == "![[img/a.png]]"
    assert format_link("session/dialog/x.jsonl") == "[[session/dialog/x.jsonl]]"
    lk = one(format_link("a b/c.md", anchor="^blk", alias="shown"))
    assert (lk.target, lk.anchor, lk.alias) == ("a b/c", "^blk", "shown")


MOVE_NOTE = """---
up: "[[foo]]"
derived_from:
  - "[[digest/wiki/foo|w]]"
---
See [[foo]], [[Foo#Heading|al]], ![[foo]] and [[foo.md]].
| t | [[foo\\|x]] |
[md](foo.md#h) [md2](<foo.md>) [md3](digest/wiki/foo) [[z/foo]] [[#local]] [[other]]
```
[[foo]]
```
`[[foo]]`
"""


def test_rewrite_links_for_a_move():
    r = LinkResolver(["foo.md", "digest/wiki/foo.md", "z/foo.md", "other.md", "q.md"])
    out, n = rewrite_links(MOVE_NOTE, "q.md", r, "foo.md", "new place/Foo 2.md")
    assert n == 8
    assert out == """---
up: "[[new place/Foo 2]]"
derived_from:
  - "[[digest/wiki/foo|w]]"
---
See [[new place/Foo 2]], [[new place/Foo 2#Heading|al]], ![[new place/Foo 2]] and [[new place/Foo 2.md]].
| t | [[new place/Foo 2\\|x]] |
[md](new%20place/Foo%202.md#h) [md2](<new place/Foo 2.md>) [md3](digest/wiki/foo) [[z/foo]] [[#local]] [[other]]
```
[[foo]]
```
`[[foo]]`
"""
    # the rewritten links now resolve to the new path
    r.remove("foo.md")
    r.add("new place/Foo 2.md")
    for lk in parse_links(out):
        if "Foo 2" in lk.original:
            assert r.resolve(lk.target, "q.md").path == "new place/Foo 2.md"


def test_rewrite_links_relative_and_attachments_and_bom():
    r = LinkResolver(["a/b/note.md", "a/img.png", "a/x.md"])
    text = "\ufeff[[../img.png|200]] ![](../img.png) [[../x]] [x](../x.md)\r\n"
    out, n = rewrite_links(text, "a/b/note.md", r, "a/img.png", "media/img 1.png")
    assert n == 2
    assert out == "\ufeff[[media/img 1.png|200]] ![](media/img%201.png) [[../x]] [x](../x.md)\r\n"
    assert rewrite_links("nothing here", "q.md", r, "a/x.md", "b/x.md") == ("nothing here", 0)


def test_leading_slash_is_vault_root_relative():
    r = LinkResolver(["basic/sorting/BubbleSort/README.md", "x/README.md"])
    assert r.resolve("/basic/sorting/BubbleSort/README.md", "x/README.md").path == "basic/sorting/BubbleSort/README.md"
    assert r.resolve("/basic/sorting/BubbleSort/README", "x/README.md").path == "basic/sorting/BubbleSort/README.md"
    assert r.resolve("/README.md", "x/README.md").path is None  # no name fallback
    assert r.resolve("/../etc/passwd", "x/README.md").path is None
    assert r.resolve("//server/share.md", "x/README.md").path is None


def test_parse_links_limit_stops_the_scan(monkeypatch):
    """``limit`` bounds the work by the links kept: the scanner tries no wikilink after the limit is reached."""
    from reme_engine.markdown import links as mod

    text = "".join(f"[[n{i}]] " for i in range(50_000)) + "\n"
    tried = []
    real = mod._Segment._wikilink
    monkeypatch.setattr(mod._Segment, "_wikilink", lambda self, p, e: tried.append(p) or real(self, p, e))
    got = parse_links(text, limit=100)
    assert [lk.target for lk in got] == [f"n{i}" for i in range(100)]
    assert len(tried) == 100
    assert len(parse_links("[[a]] [[b]]", limit=5)) == 2 and parse_links("[[a]]", limit=0) == []


def _links_by_full_scan(text: str) -> list:
    """parse_links' raw links as the whole-text block scan gives them, every stretch scanned (the reference)."""
    from reme_engine.markdown.links import _block_exclusions, _Segment

    raw: list = []
    pos = 0
    for a, b in [*_block_exclusions(text), (len(text), len(text))]:
        if pos < a:
            _Segment(text, pos, a, raw, -1).scan()
        pos = max(pos, b)
    return sorted(r[:2] for r in raw)


def test_block_scan_ending_after_the_last_link_finds_the_same_links():
    """parse_links stops the block scan after the last "[[" / "](" and skips stretches without one: the same links
    as scanning everything, on random mixes of links, fences, comments, raw HTML and code spans."""
    import random

    pieces = ["[[a]]", "![[b|c]]", "[l](u)", "[l](<u v>)", "`x`", "``y", "```", "~~~", "    ind", "<!--", "-->", "%%",
              "<pre>", "</pre>", "<script>", "</script>", "> q", "> ```", "text", "", "[", "]", "](", "[[", "]]", "(",
              ")", "\n", "- item", "k:: [[v]]", "<style>", "\t"]
    rnd = random.Random(3)
    for _ in range(3000):
        text = "".join(rnd.choice(pieces) + rnd.choice(["", " ", "\n", "\n\n"]) for _ in range(rnd.randint(1, 40)))
        assert sorted((lk.start, lk.end) for lk in parse_links(text)) == _links_by_full_scan(text), text
    code_after = "# T\n\n[English](u.md)\n\n" + "```py\n[[not]] x\n```\n\ntext\n" * 500
    assert [lk.target for lk in parse_links(code_after)] == ["u.md"]

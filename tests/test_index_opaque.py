"""What gets indexed (issue 12): an Excalidraw drawing is its name, frontmatter, text elements and element links,
never its compressed scene; base64 runs, data-URI payloads and minified JSON lines are no chunk's text, token or
vector text anywhere; a file of nothing else is skipped with a reason. Real index, real files in a temp vault."""

from __future__ import annotations

import base64
import json
import random

from reme_engine.markdown.opaque import OPAQUE_ONLY_REASON, searchable_body

_RNG = random.Random(12)
#: a realistic blob: random bytes as base64 (what compressed-json, images and keys look like)
BLOB = base64.b64encode(bytes(_RNG.randrange(256) for _ in range(3000))).decode()
WRAPPED = "\n\n".join(BLOB[i : i + 64] for i in range(0, 1600, 64)) + "\n\naA=="

DRAWING = f"""---
excalidraw-plugin: parsed
tags: [excalidraw]
---
==⚠  Switch to EXCALIDRAW VIEW in the MORE OPTIONS menu of this document. ⚠==

# Excalidraw Data

## Text Elements
光伏产业链 ^JT0EJxgg

polysilicon wafer ^MU3qp0VJ

## Element Links
IC7FWrd9: [[Solar Notes]]

## Embedded Files
81f90b6f538d5a18ec3e8b5158c065bb92caf4f2: [[Pasted Image 20220821140520_014.png]]

%%
## Drawing
```compressed-json
{WRAPPED}
```
%%
"""

PLAIN_JSON_DRAWING = """---
tags: [excalidraw]
---
# Text Elements
moonbeam sketch ^abcdEFGH

%%
# Drawing
```json
{"type": "excalidraw", "version": 2, "elements": [{"id": "abcdEFGH", "text": "zebrafinch"}]}
```
%%
"""


def _write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _chunks(e) -> dict[str, list[tuple[int, int, str]]]:
    out: dict[str, list] = {}
    for path, s, t, text in e.store.conn.execute(
            "SELECT f.path, c.start_line, c.end_line, c.text FROM chunks c JOIN files f ON f.id = c.file_id"
            " ORDER BY f.path, c.ord"):
        out.setdefault(path, []).append((s, t, text))
    return out


def _hits(e, q: str) -> set[str]:
    return {h.path for h in e.search(q, mode="keyword", limit=20, neighbors=False).hits}


def test_excalidraw_drawing_indexes_its_text_not_its_scene(open_engine):
    e = open_engine()
    _write(e.vault / "Draws/白板 2023-08-01.md", DRAWING)
    _write(e.vault / "Draws/moon.excalidraw.md", PLAIN_JSON_DRAWING)
    _write(e.vault / "Solar Notes.md", "# Solar\n\nsilicon\n")
    rep = e.index()
    assert rep.skipped == []
    ch = _chunks(e)
    texts = [t for _s, _e, t in ch["Draws/白板 2023-08-01.md"]]
    joined = "\n".join(texts)
    assert "光伏产业链" in joined and "polysilicon wafer" in joined and "[[Solar Notes]]" in joined
    for noise in ("^JT0EJxgg", "IC7FWrd9", "N4", BLOB[:40], "Switch to EXCALIDRAW", "Pasted Image", "Drawing"):
        assert noise not in joined, noise
    # line numbers stay true file lines: the text element sits on file line 10 of the drawing
    lines = DRAWING.split("\n")
    for s, t, text in ch["Draws/白板 2023-08-01.md"]:
        first = text.split("\n")[0]
        assert lines[s - 1].startswith(first)
    moon = "\n".join(t for _s, _e, t in ch["Draws/moon.excalidraw.md"])
    assert "moonbeam sketch" in moon and "zebrafinch" not in moon and "abcdEFGH" not in moon
    # searchable by what a person reads, and by name; the scene's tokens are in no posting
    assert "Draws/白板 2023-08-01.md" in _hits(e, "polysilicon")
    assert "Draws/白板 2023-08-01.md" in _hits(e, "白板")
    assert _hits(e, "zebrafinch") == set()
    assert _hits(e, BLOB[100:140].replace("+", " ").replace("/", " ")) == set()
    # the drawing's links stay in the graph (element links and embedded files)
    targets = {r[0] for r in e.store.conn.execute(
        "SELECT l.target FROM links l JOIN files f ON f.id = l.src_id WHERE f.path = ?", ("Draws/白板 2023-08-01.md",))}
    assert {"Solar Notes", "Pasted Image 20220821140520_014.png"} <= targets
    # the description is not the plugin's banner
    info = e.store.file_info("Draws/白板 2023-08-01.md")
    assert "EXCALIDRAW" not in info["description"]


def test_a_drawing_with_no_text_is_found_by_its_name(open_engine):
    e = open_engine()
    _write(e.vault / "Draws/白板 2023-08-09.md",
           f"---\n\nexcalidraw-plugin: parsed\ntags: [excalidraw]\n\n---\n==⚠  Switch to EXCALIDRAW VIEW ⚠==\n\n\n"
           f"%%\n# Drawing\n```compressed-json\n{WRAPPED}\n```\n%%\n")
    e.index()
    (only,) = _chunks(e)["Draws/白板 2023-08-09.md"]
    assert only[2] == ""  # the title-only chunk
    assert "Draws/白板 2023-08-09.md" in _hits(e, "白板")


def test_blobs_in_ordinary_notes_are_not_indexed_and_the_rest_is(open_engine):
    e = open_engine()
    minified = json.dumps([{"id": i, "name": f"item{i}", "kind": "widget"} for i in range(60)],
                          separators=(",", ":"))
    note = (f"# Keys\n\nmy avocado key: ssh-rsa {BLOB[:380]} me@host\n\n"
            f"![diagram](data:image/png;base64,{BLOB[:500]})\n\n"
            f"```\n{WRAPPED}\n```\n\n{minified}\n\ntrailing walnut paragraph\n")
    _write(e.vault / "keys.md", note)
    e.index()
    ch = _chunks(e)["keys.md"]
    joined = "\n".join(t for _s, _e, t in ch)
    assert "avocado" in joined and "me@host" in joined and "walnut" in joined and "![diagram](data:image/png;base64,)" in joined
    assert BLOB[:60] not in joined and BLOB[200:260] not in joined and '"kind":"widget"' not in joined
    lines = note.split("\n")
    walnut = next(i + 1 for i, x in enumerate(lines) if "walnut" in x)
    assert any(s <= walnut <= t for s, t, _x in ch)  # still on its true file line
    assert _hits(e, "walnut") == {"keys.md"} and _hits(e, "widget") == set()
    # the note itself is untouched
    assert (e.vault / "keys.md").read_text(encoding="utf-8") == note


def test_a_file_of_only_opaque_data_is_skipped_with_a_reason(open_engine):
    e = open_engine()
    _write(e.vault / "resource/dump.txt", WRAPPED + "\n")
    _write(e.vault / "blob.md", BLOB + "\n")
    _write(e.vault / "ok.md", "# fine\n\ntext\n")
    rep = e.index()
    assert {(s["path"], s["reason"]) for s in rep.skipped} == {("resource/dump.txt", OPAQUE_ONLY_REASON),
                                                               ("blob.md", OPAQUE_ONLY_REASON)}
    assert {s["path"] for s in e.store.skipped()} == {"resource/dump.txt", "blob.md"}
    assert "ok.md" in _chunks(e)


def test_ordinary_text_is_left_alone():
    samples = [
        "see https://github.com/doocs/leetcode/edit/main/solution/0900-0999/0912.Sort%20an%20Array/README.md",
        "-" * 120, "=" * 80, "a_very_long_snake_case_identifier_name_that_goes_on_and_on_forever_more",
        "光伏产业链" * 300, "x" * 5000, "sha 81f90b6f538d5a18ec3e8b5158c065bb92caf4f2 done",
        json.dumps({"k": list(range(400))}, indent=2), "[[" * 3000, "data: a field name",
        "int[] nums = {" + ",".join(str(i) for i in range(600)) + "};",
        "1234567890" * 50, "ABCDEFGHIJKLMNOPQRSTUVWXYZ" * 10,
    ]
    for s in samples:
        body = f"# t\n\n{s}\n\nend\n"
        got = searchable_body(body)
        assert got.removed == 0 and got.text == body, s[:40]


def test_masking_keeps_the_line_count():
    body = f"a\r\n{BLOB}\r\nb\r{WRAPPED}\nc"
    got = searchable_body(body)
    assert got.removed > 0 and got.text.split("\n") == ["a", "", "b", *[""] * WRAPPED.count("\n"), "", "c"]

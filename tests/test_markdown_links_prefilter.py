"""The link scan's line pre-filter skips HTML lines that open nothing it excludes, and finds the same links.

``links._EXCLUSION_LINE`` only chooses which lines ``_block_exclusions`` looks at; the narrow form (fences, ``%%``,
comments, raw elements) must give exactly the exclusions and links of the broad one (any ``<``).
"""

from __future__ import annotations

import random
import re

from reme_engine.markdown import links
from reme_engine.markdown.links import parse_links

BROAD = re.compile(r"^[ \t>*+\-.)0-9]*(?:```|~~~|<|%%)", re.MULTILINE)

PIECES = ["<p>[[a]]</p>", "<pre>", "</pre>", "<PRE>", "<Pre x>", "<pre>[[in pre]]</pre>", "<prefix>[[b]]",
          "<script>", "</script>", "<styles>[[c]]", "<style", "<textarea>", "</textarea>", "<!-- [[d]]", "-->",
          "<!--x-->[[e]]", "%% [[f]]", "%%", "> <pre>", "- <pre>", "1. <!--", "```", "~~~", "  ```", "[[g]]",
          "[h](i.md)", "text", "", "<ſcript>[[k]]", "<pre\r", "<div>[[l]]</div>", "<pre>\r"]


def test_narrow_prefilter_finds_the_same_links(monkeypatch):
    rnd = random.Random(3)
    texts = ["\n".join(rnd.choice(PIECES) for _ in range(rnd.randint(1, 30))) for _ in range(2000)]
    narrow = [(links._block_exclusions(t), parse_links(t)) for t in texts]
    monkeypatch.setattr(links, "_EXCLUSION_LINE", BROAD)
    assert [(links._block_exclusions(t), parse_links(t)) for t in texts] == narrow


def test_html_paragraph_lines_are_not_stops():
    text = "<p>a</p>\n\n<div>\n\n<pre>\n[[hidden]]\n</pre>\n[[shown]]\n"
    assert links._EXCLUSION_LINE.search(text).start() == text.index("<pre>")
    assert [lk.target for lk in parse_links(text)] == ["shown"]

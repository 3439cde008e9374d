"""Obsidian comments (`%% … %%`) are hidden in the note pane, as in Obsidian's reading view; code blocks keep their
`%%`, an unclosed `%%` is text, and line numbers after a comment stay (real engine and loader on a temp vault)."""

from reme_engine.markdown.links import hide_comments

from reme_tui import loaders
from reme_tui.messages import OpenNote

NOTE = """# 常青笔记

正文第一段。

%%我的理解:: 常青笔记就是andy基于[[🧑卢曼]]的方法
两行的注释%%

```
%% 代码里的不是注释 %%
```

50%% 的人 %%行内%% 不算块注释
最后一行
"""


def test_hide_comments_blanks_block_comments_only():
    out = hide_comments(NOTE)
    assert "我的理解" not in out and "两行的注释" not in out and "卢曼" not in out
    assert "%% 代码里的不是注释 %%" in out  # fenced code is untouched
    assert "50%% 的人" in out  # not at a line start: not a block comment
    assert out.count("\n") == NOTE.count("\n")  # line numbers after the comment stay
    assert out.splitlines()[-1] == "最后一行"
    assert hide_comments("a %% unclosed\nb\n") == "a %% unclosed\nb\n"
    assert hide_comments("%% never closed\nb\n") == "%% never closed\nb\n"


def test_the_note_pane_does_not_show_comments(open_engine):
    e = open_engine()
    (e.vault / "常青笔记.md").write_text(NOTE, encoding="utf-8")
    e.index()
    doc = loaders.note_document(e, OpenNote("常青笔记.md"), lambda: False, resolve_links=True)
    assert "我的理解" not in doc.body and "正文第一段" in doc.body and "最后一行" in doc.body

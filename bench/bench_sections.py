"""The one section rule (reme_engine.markdown.sections) against real Obsidian, the rules it replaced, and its cost.

Usage: python bench/bench_sections.py [--repeat 3]

1. Oracle: for each note of ``vaults/obsidian-tasks-oracle`` (Obsidian's own metadataCache saved as JSON), the
   headings (line, level, text) and code blocks (line spans) that real Obsidian found, compared with
   ``sections.headings`` / ``sections.code_mask`` and with the two line scanners this module replaced (auto-dream's
   node rule, which closed any fence on three backticks, and the TUI's toggle on any fence line).
2. Real vaults (read only): on every note of knowledge-garden-zh and obsidian-tasks-docs-en, how many notes the
   old scanners read differently from the new rule (their heading lines differ).
3. Cost: the parse per KB of Markdown, and a note-ownership check (``provenance.note_ownership``) of a 100 KB
   note with code, without and with a reme block (the check skips the parse when no marker line exists).

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED_DATA, VAULT_ZH, loadavg, machine  # noqa: E402

from reme_engine.markdown import sections as S  # noqa: E402
from reme_engine.markdown.frontmatter import parse_frontmatter  # noqa: E402
from reme_engine.vault import provenance as P  # noqa: E402

ORACLE = SHARED_DATA / "vaults" / "obsidian-tasks-oracle"
DOCS = SHARED_DATA / "vaults" / "obsidian-tasks-docs-en"
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")


def body_lines(text: str) -> list[str]:
    """The note's lines with the frontmatter block blanked (line numbers stay file lines)."""
    text = text.lstrip("\ufeff")
    fm = parse_frontmatter(text)
    head = text[: fm.body_offset]
    lines = text.split("\n")
    for i in range(head.count("\n")):
        lines[i] = ""
    return lines


def old_dream(lines: list[str]) -> list[tuple[int, int]]:
    """auto-dream's former rule: a fence opened by ``` or ~~~ closed by any line starting with its first 3 chars."""
    out, fence = [], ""
    for i, ln in enumerate(lines):
        s = ln.lstrip()
        if fence:
            if s.startswith(fence):
                fence = ""
            continue
        if s.startswith(("```", "~~~")):
            fence = s[:3]
            continue
        m = _HEADING.match(ln)
        if m:
            out.append((i, len(m.group(1))))
    return out


def old_tui(lines: list[str]) -> list[tuple[int, int]]:
    """The TUI's former Sources rule: any fence line toggles code."""
    out, in_fence = [], False
    for i, ln in enumerate(lines):
        if ln.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", ln)
        if m:
            out.append((i, len(m.group(1))))
    return out


def new_rule(lines: list[str]) -> list[tuple[int, int]]:
    return [(h.line, h.level) for h in S.headings(lines)]


def oracle() -> dict:
    notes = heads = code_lines = 0
    agree = {"new": 0, "old_dream": 0, "old_tui": 0}
    code_agree = 0
    diffs: list[dict] = []
    for f in sorted((ORACLE / "metadata").glob("*.json")):
        d = json.loads(f.read_text(encoding="utf-8"))
        cm = d.get("cachedMetadata")
        if not isinstance(cm, dict) or "fileContents" not in d:
            continue
        notes += 1
        lines = body_lines(d["fileContents"])
        want = sorted((h["position"]["start"]["line"], h["level"]) for h in cm.get("headings") or [])
        heads += len(want)
        for name, fn in (("new", new_rule), ("old_dream", old_dream), ("old_tui", old_tui)):
            got = sorted(fn(lines))
            if got == want:
                agree[name] += 1
            elif name == "new":
                diffs.append({"note": f.stem, "obsidian": want, "sections": got})
        code = [False] * len(lines)
        for s in cm.get("sections") or []:
            if s["type"] == "code":
                for i in range(s["position"]["start"]["line"], s["position"]["end"]["line"] + 1):
                    if i < len(code):
                        code[i] = True
        code_lines += sum(code)
        if S.code_mask(lines) == code:
            code_agree += 1
    return {"notes": notes, "headings": heads, "code_lines": code_lines,
            "notes_all_headings_agree": agree, "notes_code_mask_agrees": code_agree, "new_rule_diffs": diffs[:5]}


def real_vaults() -> dict:
    out = {}
    for root in (VAULT_ZH, DOCS):
        n = differ_dream = differ_tui = 0
        examples: list[str] = []
        for p in sorted(root.rglob("*.md")):
            if any(part.startswith(".") for part in p.relative_to(root).parts):
                continue
            try:
                lines = body_lines(p.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, OSError):
                continue
            n += 1
            new = sorted(new_rule(lines))
            if sorted(old_dream(lines)) != new:
                differ_dream += 1
                if len(examples) < 3:
                    examples.append(p.relative_to(root).as_posix())
            if sorted(old_tui(lines)) != new:
                differ_tui += 1
        out[root.name] = {"notes": n, "notes_old_dream_rule_differs": differ_dream,
                          "notes_old_tui_rule_differs": differ_tui, "examples": examples}
    return out


def cost(repeat: int) -> dict:
    unit = ("## Heading\n\nSome paragraph text with [[links]] and more words.\n\n- item one\n- item two\n\n"
            "```py\nx = 1\n```\n\n")
    body = unit * 1000
    kb = len(body.encode("utf-8")) / 1024

    def best(fn) -> float:
        ts = []
        for _ in range(repeat):
            S._outline_cached.cache_clear()
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return min(ts)

    lines = body.split("\n")
    parse = best(lambda: S.outline(lines))
    plain = best(lambda: P.note_ownership(body))
    with_block = P.set_block(body, "proposed")
    block = best(lambda: P.note_ownership(with_block))
    return {"kb": round(kb, 1), "outline_ms_per_kb": round(parse * 1000 / kb, 3),
            "ownership_100kb_no_marker_ms": round(plain * 1000, 1),
            "ownership_100kb_with_block_ms": round(block * 1000, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    out = {"machine": machine(), "load_before": loadavg(), "command": "bench/bench_sections.py "
           + " ".join(sys.argv[1:]), "oracle": oracle(), "real_vaults": real_vaults(), "cost": cost(args.repeat),
           "load_after": loadavg()}
    print(json.dumps(out, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()

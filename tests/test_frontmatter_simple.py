"""Simple frontmatter is read without the YAML parser (issue 12: YAML was ~10 % of a cold pass) and must give
exactly what the YAML loader gives: same keys in the same order, same values and types (YAML 1.2 core scalars,
ISO dates, nulls), or decline so the loader decides. Checked on generated frontmatter full of YAML's traps and on
every frontmatter of the real vaults (copied first)."""

from __future__ import annotations

import random
import shutil

import yaml
from conftest import shared

from reme_engine.markdown import frontmatter as F

KEYS = ["title", "date created", "tags", "aliases", "up", "中文键", "yes", "no", "on", "true", "123", "null", "~",
        "<<", "2020-01-01", "a b", "it's", "a,b", "k[1]", "-k", "?k", "k#", "x" * 600, "name ", "Name"]
VALUES = ["x", "yes", "no", "True", "TRUE", "false", "1_000", "0x1F", "0o17", "0b101", "1e3", "1.5", ".5", "5.",
          ".inf", "-.inf", ".nan", "-5", "+5", "01", "007", "2022-09-08", "2022-09-08 10:00:00", "2022-9-8",
          "2022-09-08T10:00:00Z", "2022-13-45", "null", "Null", "~", "", "a # b", "a#b", "a: b", "a:", "a :b",
          "http://x.y/z?q=1#frag", "'q'", '"q"', "it's", "[a, b]", "{a: 1}", "&a x", "*a", "!!str x", "| x", "> x",
          "- x", "-x", "@x", "`x`", "%x", "中文 标题", "x\u00a0y", "=", ":x", "?x", ",x", "a, b", "[[Note]]",
          "a]b", "\ufeffx", "x\u2028y", "tail  ", "12:30", "1:20:30", "0.1.2", "y", "n", "NO"]


def _doc(rng: random.Random) -> str:
    lines: list[str] = []
    for _ in range(rng.randint(0, 6)):
        key = rng.choice(KEYS)
        r = rng.random()
        if r < 0.55:
            lines.append(f"{key}: {rng.choice(VALUES)}".rstrip(" ") if rng.random() < 0.9 else f"{key}:{rng.choice(VALUES)}")
        elif r < 0.85:
            lines.append(f"{key}:")
            ind = rng.choice([0, 2, 4])
            for _ in range(rng.randint(0, 3)):
                i = ind if rng.random() < 0.9 else rng.choice([0, 1, 2, 3, 6])
                lines.append(" " * i + "- " + rng.choice(VALUES))
        elif r < 0.9:
            lines.append("")
        elif r < 0.95:
            lines.append(rng.choice(["# comment", "  continued", "\tkey: v", "---", "...", "key: v\r", "- top"]))
        else:
            lines.append(f"{key}: {rng.choice(VALUES)} # note")
    return "\n".join(lines) + ("\n" if lines else "")


def _reference(raw: str):
    try:
        data = yaml.load(raw, Loader=F._Loader)  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, ValueError, TypeError):
        return "error"
    return F._normalise(data, [0], set())


def test_generated_frontmatter_matches_the_yaml_loader():
    rng = random.Random(2026)
    taken = 0
    for _ in range(4000):
        raw = _doc(rng)
        ok, data = F._load_simple(raw)
        if ok:
            taken += 1
            assert repr(data) == repr(_reference(raw)), raw
    assert taken > 600  # the shortcut is really exercised, traps included


def test_whole_notes_parse_the_same_either_way(tmp_path, monkeypatch):
    """parse_frontmatter with the shortcut vs without it, on every frontmatter of the real vaults (copies)."""
    notes = []
    for rel in ("vaults/knowledge-garden-zh", "corpus/doocs-leetcode-md"):
        src = shared(rel)
        for i, p in enumerate(sorted(src.rglob("*.md"))[::7]):
            dst = tmp_path / rel.replace("/", "_") / f"{i}.md"
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dst)
            notes.append(dst.read_text(encoding="utf-8", errors="replace"))
    fast = [F.parse_frontmatter(t) for t in notes]
    monkeypatch.setattr(F, "_load_simple", lambda raw: (False, None))
    slow = [F.parse_frontmatter(t) for t in notes]
    assert len(notes) > 1000
    for a, b in zip(fast, slow):
        assert repr(a) == repr(b)

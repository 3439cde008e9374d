"""The bundled demo vault: installable, consistent (links resolve), readable by the engine's readers."""

from __future__ import annotations

import json
import re
import shutil
import unicodedata
from pathlib import Path

import pytest
import yaml

from reme_engine.demo import demo_vault_source, install_demo_vault
from reme_engine.proactive.read import proactive_read
from reme_engine.vault.daily import daily_list, daily_reindex, list_days

#: Links in the demo vault that deliberately point at notes that do not exist yet.
DANGLING = {"digest/wiki/钙钛矿电池"}

DAYS = ["2026-11-28", "2026-11-27", "2026-11-26", "2026-11-25"]

FENCE_RE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
INLINE_CODE_RE = re.compile(r"`[^`\n]*`")
LINK_RE = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")


@pytest.fixture()
def vault(tmp_path) -> Path:
    return install_demo_vault(tmp_path / "demo")


def nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


def all_files(vault: Path) -> list[str]:
    return sorted(nfc(p.relative_to(vault).as_posix()) for p in vault.rglob("*") if p.is_file())


def md_files(vault: Path) -> list[Path]:
    return sorted(p for p in vault.rglob("*.md") if p.is_file())


def frontmatter(text: str) -> dict:
    assert text.startswith("---\n"), "note must start with frontmatter"
    end = text.index("\n---\n", 4)
    meta = yaml.safe_load(text[4:end])
    assert isinstance(meta, dict)
    return meta


def links(text: str) -> list[tuple[str, str]]:
    """(raw link, target) pairs, skipping fenced and inline code."""
    text = FENCE_RE.sub("", text)
    text = INLINE_CODE_RE.sub("", text)
    out = []
    for m in LINK_RE.finditer(text):
        raw = m.group(2)
        target = raw.split("|", 1)[0].split("#", 1)[0].strip()
        out.append((m.group(0), target))
    return out


def resolver(vault: Path):
    files = all_files(vault)
    fileset = set(files)
    by_stem: dict[str, list[str]] = {}
    for f in files:
        stem = f.rsplit("/", 1)[-1]
        stem = stem[:-3] if stem.endswith(".md") else stem
        by_stem.setdefault(stem.casefold(), []).append(f)

    def resolve(target: str) -> str | None:
        t = nfc(target)
        if t in fileset:
            return t
        if t + ".md" in fileset:
            return t + ".md"
        if "/" not in t:
            cands = by_stem.get(t.casefold(), [])
            if len(cands) == 1:
                return cands[0]
        return None

    return resolve


# --------------------------------------------------------------------------------------------- install


def test_source_is_packaged_folder():
    src = demo_vault_source()
    assert src.is_dir() and (src / "README.md").is_file()
    assert src.name == "vault" and src.parent.name == "demo"


def test_install_copies_once_and_never_overwrites(tmp_path):
    dest = tmp_path / "nested" / "demo"
    assert install_demo_vault(dest) == dest
    src_files = all_files(demo_vault_source())
    assert all_files(dest) == [f for f in src_files if "__pycache__" not in f]

    readme = dest / "README.md"
    readme.write_text("my edits", encoding="utf-8")
    (dest / "daily" / "2026-11-25.md").unlink()
    assert install_demo_vault(dest) == dest
    assert readme.read_text(encoding="utf-8") == "my edits"
    assert not (dest / "daily" / "2026-11-25.md").exists()
    # No staging leftovers beside the vault.
    assert sorted(p.name for p in dest.parent.iterdir()) == ["demo"]


def test_install_leaves_existing_empty_folder_alone(tmp_path):
    dest = tmp_path / "vault"
    dest.mkdir()
    install_demo_vault(dest)
    assert list(dest.iterdir()) == []


def test_demo_vault_is_small_and_laid_out(vault):
    files = all_files(vault)
    assert 30 <= len(files) <= 40
    assert "README.md" in files
    for layer in ("daily", "digest/personal", "digest/procedure", "digest/wiki", "resource", "session/dialog"):
        assert any(f.startswith(layer + "/") for f in files), layer
    for bucket in ("personal", "procedure", "wiki"):
        n = sum(1 for f in files if f.startswith(f"digest/{bucket}/"))
        assert 3 <= n <= 5, bucket
    # Nothing machine-specific or temporary slipped in.
    assert not any(".tmp" in f or "__pycache__" in f or f.endswith(".pyc") for f in files)


# --------------------------------------------------------------------------------------------- consistency


def test_every_wikilink_resolves_except_deliberate_dangling(vault):
    resolve = resolver(vault)
    unresolved: dict[str, list[str]] = {}
    seen_dangling: set[str] = set()
    kinds = {"alias": 0, "heading": 0, "embed": 0, "bare": 0, "predicate": 0, "inline_predicate": 0}
    for p in md_files(vault):
        rel = nfc(p.relative_to(vault).as_posix())
        text = p.read_text(encoding="utf-8")
        for raw, target in links(text):
            kinds["alias"] += "|" in raw
            kinds["heading"] += "#" in raw
            kinds["embed"] += raw.startswith("!")
            kinds["bare"] += "/" not in target
            if resolve(target) is None:
                if nfc(target) in DANGLING:
                    seen_dangling.add(nfc(target))
                else:
                    unresolved.setdefault(rel, []).append(raw)
        kinds["predicate"] += len(re.findall(r"^\s*(?:- )?[^\s:\[\]]+:: \[\[", text, re.M))
        kinds["inline_predicate"] += len(re.findall(r"\[[^\[\]:]+:: \[\[", text))
    assert unresolved == {}
    assert seen_dangling == DANGLING  # the deliberate dangling link is really there
    for k, n in kinds.items():
        assert n >= 1, f"demo vault shows no {k} link"


def test_heading_links_point_at_real_headings(vault):
    resolve = resolver(vault)
    for p in md_files(vault):
        for raw, target in links(p.read_text(encoding="utf-8")):
            inner = raw.lstrip("!")[2:-2].split("|", 1)[0]
            if "#" not in inner:
                continue
            heading = inner.split("#", 1)[1].strip()
            dest = resolve(target)
            assert dest is not None
            body = (vault / dest).read_text(encoding="utf-8")
            assert re.search(rf"^#+\s+{re.escape(heading)}\s*$", body, re.M), raw


def test_frontmatter_parses_everywhere(vault):
    for p in md_files(vault):
        rel = p.relative_to(vault).as_posix()
        meta = frontmatter(p.read_text(encoding="utf-8"))
        if rel.startswith("digest/"):
            assert isinstance(meta.get("name"), str) and meta["name"]
            assert isinstance(meta.get("description"), str) and meta["description"]
            assert isinstance(meta.get("tags"), list) and meta["tags"]
            assert "## Sources" in p.read_text(encoding="utf-8"), rel


def test_provenance_frontmatter_targets_exist(vault):
    resolve = resolver(vault)
    sessions = resources = 0
    for p in (vault / "daily").rglob("*.md"):
        meta = frontmatter(p.read_text(encoding="utf-8"))
        if "session_id" in meta:
            sessions += 1
            sid = str(meta["session_id"])
            assert p.name == f"session_{sid}.md"
            assert meta["source_conversation"] == f"[[session/dialog/{sid}.jsonl]]"
            assert (vault / "session" / "dialog" / f"{sid}.jsonl").is_file()
        if "source_resource" in meta:
            resources += 1
            m = LINK_RE.fullmatch(meta["source_resource"])
            assert m and resolve(m.group(2)) and m.group(2).startswith("resource/")
    assert sessions >= 1 and resources >= 1


def test_session_dialogs_are_jsonl(vault):
    files = sorted((vault / "session" / "dialog").glob("*.jsonl"))
    assert files
    for f in files:
        ids = set()
        for line in f.read_text(encoding="utf-8").splitlines():
            msg = json.loads(line)
            assert set(msg) >= {"id", "role", "content", "created_at"}
            assert msg["role"] in ("user", "assistant")
            assert msg["id"] not in ids
            ids.add(msg["id"])


def test_zh_and_en_content(vault):
    texts = [p.read_text(encoding="utf-8") for p in md_files(vault)]
    assert sum(bool(re.search(r"[\u4e00-\u9fff]{6,}", t)) for t in texts) >= 8
    assert sum(bool(re.search(r"\b(the|and|with)\b", t)) for t in texts) >= 8


# --------------------------------------------------------------------------------------------- engine readers


def test_days_and_day_pages_are_current(vault):
    assert list_days(vault) == DAYS
    for d in DAYS:
        page = vault / "daily" / f"{d}.md"
        before = page.read_bytes()
        r = daily_reindex(vault, d, create_if_missing=False)
        assert r.skipped is None and not r.changed, d  # the shipped index matches the cards
        assert page.read_bytes() == before
        assert r.cards == len(daily_list(vault, d)) >= 2
    assert "今日想法" in (vault / "daily" / "2026-11-28.md").read_text(encoding="utf-8")


def test_interests_v2_reads(vault):
    r = proactive_read(vault, today="2026-11-28")
    assert r.success and not r.skipped and r.version == 2
    assert len(r.topics) == 3 and len(r.agenda) == 2
    assert {t["kind"] for t in r.topics} >= {"follow_up"}
    ids = {t["id"] for t in r.topics}
    assert all(a["topic_id"] in ids for a in r.agenda)
    for t in r.topics:
        assert 0.4 <= t["confidence"] <= 1
        for path in t["paths"] + [t["evidence"]]:
            assert (vault / path).is_file(), path
    for a in r.agenda:
        for path in a["linked_memory"]:
            assert (vault / path).is_file(), path
    raw = yaml.safe_load((vault / "daily" / "2026-11-28" / "interests.yaml").read_text(encoding="utf-8"))
    assert raw["suppressed"] and raw["push"] is True
    assert proactive_read(vault, today="2026-11-28", min_confidence=0.7).agenda == r.agenda
    assert len(proactive_read(vault, today="2026-11-28", min_confidence=0.8).agenda) == 1


def test_interests_v1_reads(vault):
    r = proactive_read(vault, date="2026-11-26", today="2026-11-28", include_content=False)
    assert r.success and r.version == 1 and r.agenda is None and r.content is None
    assert len(r.topics) == 2 and all(t["confidence"] == 0.5 for t in r.topics)
    for t in r.topics:
        assert t["keywords"]
        for path in t["paths"] + [t["evidence"]]:
            assert (vault / path).is_file(), path


def test_days_without_interests_are_skipped(vault):
    r = proactive_read(vault, date="2026-11-27", today="2026-11-28")
    assert r.success and r.skipped


def test_packaged_source_is_not_modified_by_tests(vault):
    # The fixture works on a copy; the packaged tree has no stray files from engine writes.
    src = demo_vault_source()
    assert all_files(src) == all_files(vault)
    shutil.rmtree(vault)
    assert (src / "README.md").is_file()

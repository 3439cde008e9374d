"""Reverting a capture takes back the day page it created or changed, and the day folder it made (real engine,
real files in a temp vault; the tester's case: `remember` in a vault with no daily folder)."""

from reme_engine.agent_capture import remember
from reme_engine.jobs import run_job


def _tree(v):
    return sorted(str(p.relative_to(v)) for p in v.rglob("*") if ".reme" not in p.parts)


def test_revert_of_a_first_capture_leaves_the_vault_as_it_was(open_engine):
    e = open_engine()
    v = e.vault
    (v / "notes.md").write_text("my own note\n", encoding="utf-8")
    before = _tree(v)
    r = remember(e, "Prefers the window seat.", agent="test-agent")
    day = r["path"].split("/")[-2]
    page = f"daily/{day}.md"
    assert (v / page).is_file() and "capture" in (v / page).read_text(encoding="utf-8")
    changes = run_job(e, "dream_log", {"run_id": r["run_id"]})["changes"]
    assert {c["path"] for c in changes} == {r["path"], page}, changes
    out = run_job(e, "revert", {"run_id": r["run_id"]})
    assert out["success"] and out["outcome"] == "reverted", out
    assert _tree(v) == before or _tree(v) == sorted([*before, "daily"]), _tree(v)
    assert not (v / page).exists() and not (v / "daily" / day).exists()


def test_revert_keeps_a_day_page_the_person_edited_since(open_engine):
    e = open_engine()
    v = e.vault
    r = remember(e, "Call the plumber.", agent="test-agent")
    page = v / f"daily/{r['path'].split('/')[-2]}.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nmy own line\n", encoding="utf-8")
    out = run_job(e, "revert", {"run_id": r["run_id"]})
    assert out["outcome"] == "partial", out
    assert "my own line" in page.read_text(encoding="utf-8")
    assert not (v / r["path"]).exists()  # the card went; the page the person edited stays

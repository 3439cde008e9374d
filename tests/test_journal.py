"""The change journal: per-run records, conflict-checked writes, revert refusing files changed since."""

import pytest

from reme_engine.memory.journal import ChangeJournal
from reme_engine.vault.io import WriteConflict, content_hash


@pytest.fixture
def journal(tmp_path):
    j = ChangeJournal(tmp_path / "state")
    yield j
    j.close()


def test_runs_record_and_revert(tmp_path, journal):
    v = tmp_path / "v"
    (v / "digest/wiki").mkdir(parents=True)
    existing = v / "digest/wiki/a.md"
    existing.write_text("original\n")
    run = journal.start_run(v, "auto_dream", {"date": "2026-11-28"})
    run.write("digest/wiki/a.md", "updated\n", step="integrate", sources=["daily/2026-11-28/x.md"],
              expected_sha=content_hash(b"original\n"))
    run.write("digest/wiki/b.md", "new node\n", step="integrate", expected_sha=None)
    run.finish("ok", {"created": 1, "updated": 1}, {"calls": 2})
    runs = journal.runs()
    assert runs[0]["run_id"] == run.run_id and runs[0]["changes"] == 2 and runs[0]["summary"]["created"] == 1
    chs = journal.changes(run.run_id, with_text=True)
    assert [(c.path, c.action) for c in chs] == [("digest/wiki/a.md", "update"), ("digest/wiki/b.md", "create")]
    assert chs[0].before_text == "original\n" and chs[0].sources == ["daily/2026-11-28/x.md"]
    res = journal.revert(v, run.run_id)
    assert sorted(res.restored) == ["digest/wiki/a.md", "digest/wiki/b.md"] and not res.refused
    assert existing.read_text() == "original\n" and not (v / "digest/wiki/b.md").exists()


def test_reverting_a_run_twice_says_it_is_already_reverted(tmp_path, journal):
    v = tmp_path / "v"
    v.mkdir()
    (v / "a.md").write_text("mine\n")
    run = journal.start_run(v, "auto_memory")
    run.write("a.md", "app\n", step="s", expected_sha=content_hash(b"mine\n"))
    run.write("b.md", "new\n", step="s", expected_sha=None)
    assert sorted(journal.revert(v, run.run_id).restored) == ["a.md", "b.md"]
    again = journal.revert(v, run.run_id)
    assert again.restored == [] and len(again.refused) == 2
    assert all(r["reason"].startswith("already reverted at ") for r in again.refused), again.refused
    assert (v / "a.md").read_text() == "mine\n" and not (v / "b.md").exists()


def test_revert_refuses_files_changed_since(tmp_path, journal):
    v = tmp_path / "v"
    v.mkdir()
    run = journal.start_run(v, "auto_memory")
    run.write("n.md", "app text\n", step="s")
    (v / "n.md").write_text("user changed it\n")
    res = journal.revert(v, run.run_id)
    assert res.restored == [] and res.refused[0]["path"] == "n.md"
    assert (v / "n.md").read_text() == "user changed it\n"
    assert run.user_edited_since_app_wrote("n.md")


def test_write_refuses_a_concurrent_user_edit(tmp_path, journal):
    v = tmp_path / "v"
    v.mkdir()
    (v / "n.md").write_text("seen by the pipeline\n")
    run = journal.start_run(v, "auto_dream")
    _, sha = run.read("n.md")
    (v / "n.md").write_text("user edit meanwhile\n")
    with pytest.raises(WriteConflict):
        run.write("n.md", "llm text", step="integrate", expected_sha=sha)
    assert (v / "n.md").read_text() == "user edit meanwhile\n"
    assert journal.changes(run.run_id) == []


def test_delete_is_revertible(tmp_path, journal):
    v = tmp_path / "v"
    v.mkdir()
    (v / "card.md").write_text("card\n")
    run = journal.start_run(v, "auto_resource")
    assert run.delete("card.md", step="remove") is not None
    assert not (v / "card.md").exists()
    assert journal.revert(v, run.run_id).restored == ["card.md"]
    assert (v / "card.md").read_text() == "card\n"


def test_unknown_run(tmp_path, journal):
    with pytest.raises(KeyError):
        journal.revert(tmp_path, "nope")


def test_revert_gives_a_bom_note_its_bom_back(tmp_path, journal):
    v = tmp_path / "v"
    v.mkdir()
    note = v / "n.md"
    note.write_bytes(b"\xef\xbb\xbfmine\n")
    run = journal.start_run(v, "auto_dream")
    run.write("n.md", "mine\nplus\n", step="s", expected_sha=content_hash(note.read_bytes()))
    assert note.read_bytes() == b"\xef\xbb\xbfmine\nplus\n"
    run.finish("ok")
    assert journal.revert(v, run.run_id).restored == ["n.md"]
    assert note.read_bytes() == b"\xef\xbb\xbfmine\n"


def test_a_damaged_row_is_skipped_with_a_warning_not_a_failure(tmp_path, journal):
    import sqlite3

    v = tmp_path / "v"
    v.mkdir()
    (v / "a.md").write_text("before a\n")
    (v / "b.md").write_text("before b\n")
    good = journal.start_run(v, "auto_dream", {"date": "2026-11-28"})
    good.write("a.md", "after a\n", step="s", expected_sha=content_hash(b"before a\n"))
    good.write("b.md", "after b\n", step="s", expected_sha=content_hash(b"before b\n"))
    good.finish("ok", {"updated": 2})
    other = journal.start_run(v, "auto_memory")
    other.finish("ok")
    # damage the database the way a crash, a disk error or a hand edit can: bad JSON, a BLOB, a NULL id
    db = sqlite3.connect(journal.path)
    db.execute("UPDATE runs SET summary='{not json', params=X'ff00' WHERE run_id=?", (good.run_id,))
    db.execute("INSERT INTO runs(run_id, kind, params, started_at, status) VALUES (NULL, 'x', '{}', 1e12, 'ok')")
    db.execute("UPDATE changes SET sources='[1, \"daily/x.md\"' WHERE path='a.md'")
    db.execute("UPDATE changes SET path=X'ff' WHERE path='b.md'")
    db.commit()
    db.close()

    warnings: list[str] = []
    runs = journal.runs(warnings=warnings)
    assert [r["run_id"] for r in runs] == [other.run_id, good.run_id]  # the id-less row skipped, others read
    damaged = next(r for r in runs if r["run_id"] == good.run_id)
    assert damaged["summary"] is None and damaged["params"] == {} and damaged["changes"] == 2
    assert len(warnings) == 2 and any("without a usable id" in w for w in warnings)
    assert any(good.run_id in w and "summary" in w and "params" in w for w in warnings)
    assert journal.read_warnings[-2:] == warnings

    warnings = []
    chs = journal.changes(good.run_id, warnings=warnings)
    assert [c.path for c in chs] == ["a.md"] and chs[0].sources == []
    assert len(warnings) == 2 and any("skipped" in w for w in warnings)

    # revert restores what it can read and refuses (never guesses) the damaged change
    res = journal.revert(v, good.run_id)
    assert res.restored == ["a.md"] and (v / "a.md").read_text() == "before a\n"
    assert (v / "b.md").read_text() == "after b\n"
    assert [r["path"] for r in res.refused] == ["?"] and res.warnings


def test_revert_never_writes_a_before_text_that_does_not_match_its_hash(tmp_path, journal):
    import sqlite3

    v = tmp_path / "v"
    v.mkdir()
    (v / "n.md").write_text("the user's words\n")
    run = journal.start_run(v, "auto_dream")
    run.write("n.md", "app text\n", step="s", expected_sha=content_hash(b"the user's words\n"))
    run.finish("ok")
    db = sqlite3.connect(journal.path)
    db.execute("UPDATE changes SET before_text=NULL")
    db.commit()
    db.close()
    res = journal.revert(v, run.run_id)
    assert res.restored == [] and "does not match" in res.refused[0]["reason"]
    assert (v / "n.md").read_text() == "app text\n"  # not emptied


def _run_of(journal, run_id):
    return next(r for r in journal.runs(limit=100) if r["run_id"] == run_id)


def test_a_revert_that_restores_nothing_fails_and_leaves_the_run_revertible(tmp_path, journal):
    v = tmp_path / "v"
    v.mkdir()
    run = journal.start_run(v, "mcp:write_note")
    run.write("n.md", "agent text\n", step="s", expected_sha=None)
    run.finish("ok")
    (v / "n.md").write_text("agent text\nthe person's line\n")
    res = journal.revert(v, run.run_id)
    assert not res.success and res.outcome == "refused" and res.restored == []
    assert res.error.startswith("revert restored nothing: n.md (changed since the run wrote it)")
    assert "\n" not in res.error and res.to_dict()["error"] == res.error
    row = _run_of(journal, run.run_id)
    assert row["reverted_at"] is None and row["revert_state"] is None
    assert (v / "n.md").read_text() == "agent text\nthe person's line\n"
    # the person puts it back; the retry now restores it and only then is the run reverted
    (v / "n.md").write_text("agent text\n")
    res = journal.revert(v, run.run_id)
    assert res.success and res.outcome == "reverted" and res.restored == ["n.md"] and not (v / "n.md").exists()
    assert _run_of(journal, run.run_id)["revert_state"] == "reverted"


def test_a_partial_revert_succeeds_marks_the_run_partly_reverted_and_can_finish_later(tmp_path, journal):
    v = tmp_path / "v"
    v.mkdir()
    (v / "a.md").write_text("mine a\n")
    (v / "b.md").write_text("mine b\n")
    run = journal.start_run(v, "auto_memory")
    run.write("a.md", "app a\n", step="s", expected_sha=content_hash(b"mine a\n"))
    run.write("b.md", "app b\n", step="s", expected_sha=content_hash(b"mine b\n"))
    run.finish("ok")
    (v / "b.md").write_text("app b\nedited by hand\n")
    res = journal.revert(v, run.run_id)
    assert res.success and res.partial and res.outcome == "partial"
    assert res.restored == ["a.md"] and [r["path"] for r in res.refused] == ["b.md"]
    assert (v / "a.md").read_text() == "mine a\n" and (v / "b.md").read_text() == "app b\nedited by hand\n"
    row = _run_of(journal, run.run_id)
    assert row["reverted_at"] is None and row["partly_reverted_at"] and row["revert_state"] == "partial"
    # still refused: a failure now (nothing left that it could restore), the mark stays partial
    again = journal.revert(v, run.run_id)
    assert not again.success and "b.md" in again.error and "a.md" not in again.error
    assert _run_of(journal, run.run_id)["revert_state"] == "partial"
    # once b.md is as the run left it, the rest is reverted and the run is reverted
    (v / "b.md").write_text("app b\n")
    last = journal.revert(v, run.run_id)
    assert last.success and last.outcome == "reverted" and last.restored == ["b.md"]
    assert [r["reason"] for r in last.refused] == [last.refused[0]["reason"]] and "a.md" == last.refused[0]["path"]
    assert last.refused[0]["reason"].startswith("already reverted at ")
    assert (v / "b.md").read_text() == "mine b\n" and _run_of(journal, run.run_id)["revert_state"] == "reverted"


def test_an_old_journal_gains_the_partial_revert_column(tmp_path):
    import sqlite3

    state = tmp_path / "state"
    state.mkdir()
    db = sqlite3.connect(state / "journal.sqlite")
    db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, kind TEXT NOT NULL, params TEXT NOT NULL,"
               " started_at REAL NOT NULL, finished_at REAL, status TEXT NOT NULL, summary TEXT, tally TEXT,"
               " reverted_at REAL)")
    db.execute("INSERT INTO runs VALUES ('r1', 'auto_memory', '{}', 1.0, 2.0, 'ok', NULL, NULL, 3.0)")
    db.commit()
    db.close()
    j = ChangeJournal(state)
    try:
        (row,) = j.runs()
        assert row["revert_state"] == "reverted" and row["partly_reverted_at"] is None
    finally:
        j.close()
    ChangeJournal(state).close()  # opening again does not try to add it twice


def test_revert_job_fails_with_rc_1_when_nothing_is_restored(make_engine, tmp_path, capsys, monkeypatch):
    """Through `run_job` and the real command line: success false, exit status 1, one line naming the file."""
    import json

    from reme_engine.index import indexer
    from reme_engine.jobs import exit_code, run_job
    from reme_tui.cli import main

    v = tmp_path / "v"
    v.mkdir()
    (v / "a.md").write_text("mine a\n")
    eng = make_engine(v, embed=False)
    eng.index()
    run = eng.journal.start_run(v, "auto_memory")
    run.write("a.md", "app a\n", step="s", expected_sha=content_hash(b"mine a\n"))
    run.write("b.md", "app b\n", step="s", expected_sha=None)
    run.finish("ok")
    (v / "a.md").write_text("app a\nby hand\n")
    (v / "b.md").write_text("app b\nby hand\n")
    res = run_job(eng, "revert", {"run_id": run.run_id})
    assert res["success"] is False and exit_code(res) == 1 and not res.get("usage_error")
    assert res["error"].startswith("revert restored nothing: ") and "a.md" in res["error"] and "b.md" in res["error"]
    assert run_job(eng, "dream_log", {"run_id": run.run_id})["run"]["reverted_at"] is None
    state = eng.settings.state_dir
    eng.close()
    monkeypatch.setattr(indexer, "PARALLEL_ENABLED", indexer.PARALLEL_ENABLED)  # main() switches it on
    rc = main(["--vault", str(v), "--state-dir", str(state), "--embedder", "none", "job", "revert",
               f"run_id={run.run_id}"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 1 and out["success"] is False and out["outcome"] == "refused" and len(out["refused"]) == 2
    (v / "b.md").write_text("app b\n")  # b.md back as the run left it: a partial revert, which succeeds
    rc = main(["--vault", str(v), "--state-dir", str(state), "--embedder", "none", "job", "revert",
               f"run_id={run.run_id}"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and out["success"] and out["partial"] and out["restored"] == ["b.md"]
    assert not (v / "b.md").exists() and (v / "a.md").read_text() == "app a\nby hand\n"

"""The journal never deletes a save the person made after its last look: a revert that removes a note the run
created, and a pipeline's journaled delete, are compare-and-delete steps (``vault.io.remove_if_unchanged``)."""

import pytest

import reme_engine.memory.journal as J
from reme_engine.memory.journal import ChangeJournal
from reme_engine.vault.io import WriteConflict, content_hash


@pytest.fixture
def journal(tmp_path):
    j = ChangeJournal(tmp_path / "state")
    yield j
    j.close()


def _save_right_after_the_hash(monkeypatch, path, text):
    """The person's editor saves ``path`` right after the journal hashed it (the race the check must close)."""
    real = J.file_hash

    def hash_then_save(p, *a, **kw):
        got = real(p, *a, **kw)
        if str(p) == str(path):
            path.write_text(text, encoding="utf-8")
            monkeypatch.setattr(J, "file_hash", real)  # once
        return got

    monkeypatch.setattr(J, "file_hash", hash_then_save)


def test_revert_keeps_a_note_saved_between_its_check_and_the_delete(tmp_path, journal, monkeypatch):
    v = tmp_path / "v"
    v.mkdir()
    run = journal.start_run(v, "auto_dream")
    run.write("new.md", "made by the run\n", step="integrate", expected_sha=None)
    run.finish("ok", {}, {})
    _save_right_after_the_hash(monkeypatch, v / "new.md", "the person's own words\n")
    res = journal.revert(v, run.run_id)
    assert res.restored == [] and res.refused and res.refused[0]["path"] == "new.md"
    assert (v / "new.md").read_text(encoding="utf-8") == "the person's own words\n"


def test_a_journaled_delete_keeps_a_save_made_after_the_read(tmp_path, journal, monkeypatch):
    v = tmp_path / "v"
    v.mkdir()
    (v / "card.md").write_text("card\n", encoding="utf-8")
    run = journal.start_run(v, "auto_resource")
    real_read = run.read

    def read_then_save(rel):
        got = real_read(rel)
        (v / "card.md").write_text("card\nplus a line the person typed\n", encoding="utf-8")
        return got

    monkeypatch.setattr(run, "read", read_then_save)
    with pytest.raises(WriteConflict):
        run.delete("card.md", step="remove", expected_sha=content_hash(b"card\n"))
    assert (v / "card.md").read_text(encoding="utf-8") == "card\nplus a line the person typed\n"
    assert journal.changes(run.run_id) == []  # nothing journaled for a delete that did not happen

"""Two notes whose names differ only in Unicode form (NFC vs NFD — Linux keeps both): one is indexed, the other is
listed in health_check under its own spelling, and no read or edit given the other spelling acts on the wrong file."""

from __future__ import annotations

import unicodedata

import pytest

from reme_engine.jobs import exit_code, run_job
from reme_engine.vault.paths import VaultPathError, resolve

NFC = unicodedata.normalize("NFC", "café")
NFD = unicodedata.normalize("NFD", "café")


@pytest.fixture
def twins(tmp_path):
    vault = tmp_path / "vault"
    (vault / "odd").mkdir(parents=True)
    (vault / "odd" / f"{NFC}.md").write_text("nfc body oddwordsix\n", encoding="utf-8")
    (vault / "odd" / f"{NFD}.md").write_text("nfd body oddwordseven\n", encoding="utf-8")
    if len(list((vault / "odd").iterdir())) != 2:
        pytest.skip("this file system normalises names: twins cannot exist")
    return vault


def _out(res: dict):
    assert res["success"], res
    return res.get("result", res)


def test_the_nfc_twin_is_indexed_and_the_other_is_reported(twins, open_engine):
    e = open_engine(twins)
    e.index()
    hits = _out(run_job(e, "search", {"query": "oddwordsix", "mode": "keyword"}))
    assert [h["path"] for h in hits["hits"]] == [f"odd/{NFC}.md"]
    skipped = _out(run_job(e, "health_check", {}))["skipped"]
    spelled = [s for s in skipped if s["path"] == f"odd/{NFD}.md"]
    assert spelled and "another Unicode form" in spelled[0]["reason"]
    e.index()  # a no-op sync keeps the report
    assert any(s["path"] == f"odd/{NFD}.md" for s in _out(run_job(e, "health_check", {}))["skipped"])


def test_the_other_spelling_is_refused_never_redirected(twins, open_engine):
    with pytest.raises(VaultPathError, match="different Unicode forms"):
        resolve(twins, f"odd/{NFD}.md")
    assert resolve(twins, f"odd/{NFC}.md").abs.read_text(encoding="utf-8") == "nfc body oddwordsix\n"
    e = open_engine(twins)
    res = run_job(e, "edit", {"path": f"odd/{NFD}.md", "old": "body", "new": "BODY"})
    assert exit_code(res) != 0 and "Unicode" in str(res)
    assert (twins / "odd" / f"{NFC}.md").read_text(encoding="utf-8") == "nfc body oddwordsix\n"
    assert (twins / "odd" / f"{NFD}.md").read_text(encoding="utf-8") == "nfd body oddwordseven\n"


def test_an_nfd_name_alone_still_resolves(tmp_path):
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / f"{NFD}.md").write_text("only nfd\n", encoding="utf-8")
    assert resolve(vault, f"{NFC}.md").abs.read_text(encoding="utf-8") == "only nfd\n"
    assert resolve(vault, f"{NFD}.md").abs.read_text(encoding="utf-8") == "only nfd\n"

"""Safe paths, bounded decoding reads and atomic, conflict-checked writes."""

import os
import unicodedata

import pytest

from reme_engine.vault.io import SkipFile, WriteConflict, atomic_write, content_hash, read_text
from reme_engine.vault.paths import VaultPathError, resolve


@pytest.mark.parametrize("bad", ["../x.md", "a/../../x.md", "/etc/passwd", "a/./b.md", "", "C:/x.md", "a\x00b"])
def test_resolve_refuses_escapes(tmp_path, bad):
    with pytest.raises(VaultPathError):
        resolve(tmp_path, bad)


def test_resolve_refuses_symlink_out(tmp_path):
    vault = tmp_path / "v"
    vault.mkdir()
    outside = tmp_path / "secret.md"
    outside.write_text("x")
    (vault / "link.md").symlink_to(outside)
    (vault / "dirlink").symlink_to(tmp_path)
    with pytest.raises(VaultPathError, match="leaves the vault"):
        resolve(vault, "link.md")
    with pytest.raises(VaultPathError):
        resolve(vault, "dirlink/secret.md")


def test_resolve_nfc_and_nfd_names(tmp_path):
    nfd = unicodedata.normalize("NFD", "café.md")
    (tmp_path / nfd).write_text("x")
    vp = resolve(tmp_path, "café.md")
    assert vp.rel == unicodedata.normalize("NFC", "café.md")
    assert vp.abs.exists()


def test_read_text_classifies_bad_files(tmp_path):
    (tmp_path / "bin.md").write_bytes(b"abc\x00def")
    (tmp_path / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "big.md").write_bytes(b"a" * 2000)
    (tmp_path / "bom.md").write_bytes(b"\xef\xbb\xbf---\nname: x\n---\n")
    (tmp_path / "u16.md").write_bytes("你好".encode("utf-16"))
    with pytest.raises(SkipFile, match="binary"):
        read_text(tmp_path / "bin.md", 10_000)
    with pytest.raises(SkipFile, match="not UTF-8"):
        read_text(tmp_path / "latin1.md", 10_000)
    with pytest.raises(SkipFile, match="too large"):
        read_text(tmp_path / "big.md", 1000)
    assert read_text(tmp_path / "bom.md", 10_000).text.startswith("---")
    assert read_text(tmp_path / "u16.md", 10_000).text == "你好"


def test_atomic_write_and_conflict(tmp_path):
    p = tmp_path / "sub" / "n.md"
    sha = atomic_write(p, "one", expected_sha=None)
    assert p.read_text() == "one" and sha == content_hash(b"one")
    with pytest.raises(WriteConflict):
        atomic_write(p, "two", expected_sha=None)  # must not exist
    p.write_text("user edit")
    with pytest.raises(WriteConflict):
        atomic_write(p, "two", expected_sha=sha)
    assert p.read_text() == "user edit"
    atomic_write(p, "three", expected_sha=content_hash(b"user edit"))
    assert p.read_text() == "three"
    assert [f for f in os.listdir(p.parent) if f.endswith(".tmp")] == []


def test_atomic_write_keeps_the_bom_the_file_had(tmp_path):
    p = tmp_path / "n.md"
    p.write_bytes(b"\xef\xbb\xbf# Title\n")
    sha = atomic_write(p, "# Title\n\nmore\n", expected_sha=content_hash(p.read_bytes()))
    assert p.read_bytes() == b"\xef\xbb\xbf# Title\n\nmore\n" and sha == content_hash(p.read_bytes())
    atomic_write(p, "\ufeffonce\n")  # a caller that kept the BOM does not get two
    assert p.read_bytes() == b"\xef\xbb\xbfonce\n"
    atomic_write(p, "dropped\n", keep_bom=False)
    assert p.read_bytes() == b"dropped\n"
    atomic_write(tmp_path / "new.md", "fresh\n", expected_sha=None)  # a new file gets none
    assert (tmp_path / "new.md").read_bytes() == b"fresh\n"
    q = tmp_path / "b.md"
    q.write_bytes(b"\xef\xbb\xbfx\n")
    atomic_write(q, b"raw\n")  # bytes are written as given
    assert q.read_bytes() == b"raw\n"


def test_remove_if_unchanged_deletes_only_the_bytes_that_were_read(tmp_path):
    from reme_engine.vault.io import WriteConflict, content_hash, remove_if_unchanged

    p = tmp_path / "note.md"
    p.write_bytes(b"what the agent read\n")
    seen = content_hash(p.read_bytes())
    p.write_bytes(b"what the person saved after\n")
    with pytest.raises(WriteConflict, match="changed on disk"):
        remove_if_unchanged(p, seen)
    assert p.read_bytes() == b"what the person saved after\n"  # put back, byte for byte
    assert sorted(x.name for x in tmp_path.iterdir()) == ["note.md"]  # nothing left aside
    remove_if_unchanged(p, content_hash(p.read_bytes()))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(WriteConflict, match="removed"):
        remove_if_unchanged(p, seen)

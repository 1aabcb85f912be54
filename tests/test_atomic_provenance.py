import os

from reprobook.book.atomic import write_text
from reprobook.book.provenance import environment, git_commit, peak_memory_mb


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    p = tmp_path / "a" / "b.json"
    write_text(p, "one")
    write_text(p, "two")
    assert p.read_text() == "two"
    assert sorted(os.listdir(p.parent)) == ["b.json"]


def test_provenance(monkeypatch):
    env = environment()
    assert env["python"].startswith("3.") and "torch" in env and "numpy" in env
    assert peak_memory_mb() > 10
    monkeypatch.setenv("REPROBOOK_GIT_COMMIT", "abc123")
    assert git_commit() == "abc123"

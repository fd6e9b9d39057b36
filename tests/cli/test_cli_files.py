"""The `compaction` command's files: --out checked before compacting, encodings, a store's sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.cli import EXIT_FILE, EXIT_JSON, main
from compaction.sqlite_store import SQLiteSessionStore

EXAMPLES = Path(__file__).resolve().parents[2] / "compaction" / "examples"
CODING = str(EXAMPLES / "coding_session.json")


def _one_error(err: str) -> str:
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    return errors[0]


@pytest.mark.parametrize("where", ["missing_directory", "a_directory", "file_in_a_file"])
def test_unwritable_out_fails_before_compacting(where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plain").write_text("x", encoding="utf-8")
    out = {
        "missing_directory": tmp_path / "no" / "such" / "dir" / "out.json",
        "a_directory": tmp_path,
        "file_in_a_file": tmp_path / "plain" / "out.json",
    }[where]
    assert main(["compact", CODING, "--window", "16000", "--out", str(out)]) == EXIT_FILE
    err = capsys.readouterr().err
    line = _one_error(err)
    assert "--out" in line
    assert str(out) in line
    assert "Compaction:" not in err  # the check came first: no compaction was done and thrown away
    assert not out.is_file()


def test_writable_out_receives_the_transcript(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    assert main(["compact", CODING, "--window", "16000", "--out", str(out)]) == 0
    assert isinstance(json.loads(out.read_text(encoding="utf-8")), list)
    assert "Compaction:" in capsys.readouterr().err


def test_non_utf8_file_is_not_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('[{"role": "user", "content": "caf\xe9"}]'.encode("latin-1"))
    assert main(["inspect", str(path)]) == EXIT_JSON
    line = _one_error(capsys.readouterr().err)
    assert "UTF-8" in line
    assert str(path) in line


def test_sessions_lists_a_stores_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    with SQLiteSessionStore(db) as store:
        store.create_session("alpha", model="gpt-4o")
        store.append("alpha", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
        store.create_session("beta")
    assert main(["sessions", str(db), "--json"]) == 0
    rows = {row["session"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"alpha", "beta"}
    assert rows["alpha"]["context_messages"] == 2
    assert rows["alpha"]["model"] == "gpt-4o"
    assert rows["beta"]["context_messages"] == 0
    assert rows["alpha"]["compactions"] == 0

    assert main(["sessions", str(db)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split() == ["session", "model", "in", "context", "compactions"]
    assert any(line.split()[:3] == ["alpha", "gpt-4o", "2"] for line in text[1:])


def test_sessions_of_a_missing_or_foreign_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", str(tmp_path / "nope.db")]) == EXIT_FILE
    assert "no such file" in _one_error(capsys.readouterr().err)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    assert main(["sessions", str(junk)]) == EXIT_FILE
    assert "not a session store" in _one_error(capsys.readouterr().err)

"""The documentation site's code and sample outputs are what runs.

Every code example of docs/ is a file under docs/examples/ included with ``--8<--`` (no inline
code to drift); each file runs here, offline; sample outputs marked ``<!-- output-of: ... -->``
are compared with what the command prints; CompactionConfig's fields carry the descriptions the
API reference shows. ``nox -s docs`` builds the site with warnings as errors.
"""

from __future__ import annotations

import ast
import inspect
import re
import runpy
from collections.abc import Iterator
from pathlib import Path

import pytest

from compaction.cli import main
from compaction.config import CompactionConfig, section_models
from compaction.testing.fake_provider import FakeProvider

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"
PAGES = sorted(DOCS.rglob("*.md"))
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
INCLUDE = re.compile(r'^--8<-- "([^"]+)"$')
OUTPUT_OF = re.compile(r"^<!-- output-of: (.+?) -->\n```text\n(.*?)^```", re.S | re.M)
# Needs a running `compaction serve`: tests/project/test_getting_started.py runs it against one.
NEEDS_SERVER = {"service_call.py"}


def _included_files() -> dict[str, list[str]]:
    """docs/examples file -> the pages that include it."""
    included: dict[str, list[str]] = {}
    for page in PAGES:
        for block in PYTHON_BLOCK.findall(page.read_text(encoding="utf-8")):
            for line in block.splitlines():
                match = INCLUDE.match(line.strip())
                if match:
                    included.setdefault(match.group(1), []).append(page.name)
    return included


def test_docs_python_blocks_are_included_files() -> None:
    """No inline Python in docs/: each block only includes an example file that exists."""
    for page in PAGES:
        for block in PYTHON_BLOCK.findall(page.read_text(encoding="utf-8")):
            lines = [line for line in block.splitlines() if line.strip()]
            assert lines, f"{page.name}: empty python block"
            for line in lines:
                match = INCLUDE.match(line.strip())
                assert match, f"{page.relative_to(DOCS)}: inline code instead of a docs/examples file: {line!r}"
                assert (ROOT / match.group(1)).is_file(), f"{page.name} includes a missing file {match.group(1)}"


def test_every_example_file_is_shown_somewhere() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = set(_included_files())
    for path in EXAMPLES.glob("*.py"):
        name = f"docs/examples/{path.name}"
        assert name in shown or name in readme, f"{name} is shown on no page"


def test_examples_have_no_top_level_await() -> None:
    """Pasted into a file, an example runs: top-level await is a SyntaxError there."""
    for path in EXAMPLES.glob("*.py"):
        compile(path.read_text(encoding="utf-8"), str(path), "exec")  # no PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            assert not isinstance(node, ast.AsyncFunctionDef) or any(
                "asyncio.run" in ast.unparse(n) for n in tree.body
            ), f"{path.name}: defines a coroutine it never runs"


@pytest.fixture
def fake_anthropic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeProvider]:
    """A reader's setting for an example: an empty working directory, the model's key and (here) the
    fake provider in place of Anthropic's API."""
    with FakeProvider() as server:
        monkeypatch.setenv("ANTHROPIC_API_BASE", server.anthropic_api_base)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
        monkeypatch.chdir(tmp_path)
        yield server


def _run(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``compaction ...`` or ``docs/examples/NAME.py`` in this process (as ``python FILE``
    would, ``__name__ == "__main__"``) and return what it printed."""
    capsys.readouterr()
    if command.startswith("compaction "):
        assert main(command.split()[1:]) == 0
    else:
        assert command.startswith("docs/examples/"), f"unknown command {command!r}"
        runpy.run_path(str(ROOT / command), run_name="__main__")
    return capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py") if p.name not in NEEDS_SERVER))
def test_example_runs(name: str, fake_anthropic: FakeProvider, capsys: pytest.CaptureFixture[str]) -> None:
    """As a reader runs it (``python docs/examples/NAME``), in an empty directory, offline."""
    out = _run(f"docs/examples/{name}", capsys)
    assert out.strip(), f"{name} printed nothing"
    assert not fake_anthropic.errors


def _normalized(text: str) -> list[str]:
    """Lines with wall times (``0.37s``) made equal: every other figure must match exactly."""
    return [re.sub(r"\b\d+\.\d+s\b", "N.NNs", line.rstrip()) for line in text.splitlines()]


def _shown_lines_in_order(shown: str, actual: str) -> None:
    """Every line of a sample output (``...`` marks lines left out) appears in the real output, in order."""
    actual_lines = _normalized(actual)
    position = 0
    for line in _normalized(shown):
        if line.strip() in ("...", ""):
            continue
        try:
            position = actual_lines.index(line, position) + 1
        except ValueError:
            raise AssertionError(f"sample output line not printed (or out of order): {line!r}") from None


def _outputs() -> list[tuple[str, str, str]]:
    found = []
    for page in PAGES:
        for command, block in OUTPUT_OF.findall(page.read_text(encoding="utf-8")):
            found.append((page.name, command.strip(), block))
    return found


def test_the_demo_output_is_shown() -> None:
    assert any(command == "compaction demo" for _, command, _ in _outputs())


@pytest.mark.parametrize(("page", "command", "shown"), _outputs(), ids=lambda value: str(value)[:40])
def test_sample_output_is_what_the_command_prints(
    page: str, command: str, shown: str, fake_anthropic: FakeProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    _shown_lines_in_order(shown, _run(command, capsys))


def test_sample_output_check_catches_drift() -> None:
    """The comparison fails on a changed figure (the README once showed 3 compactions where the demo made 4)."""
    actual = "Turn 24: Compacted #1 (threshold): 9,826 -> 7,426 tokens, 0.25s\nSession replayed in 0.43s: 4"
    _shown_lines_in_order("Turn 24: Compacted #1 (threshold): 9,826 -> 7,426 tokens, 0.06s\n...", actual)
    with pytest.raises(AssertionError, match="not printed"):
        _shown_lines_in_order("Turn 24: Compacted #1 (threshold): 9,826 -> 2,980 tokens, 0.06s", actual)


def test_demo_reports_each_compaction_once_and_consistently(capsys: pytest.CaptureFixture[str]) -> None:
    """One line per compaction, whose count is the summary line's, and no second account of it with
    other figures (the demo used to print the middleware's estimate lines and a swap's 0.00s too)."""
    for example, window in (("coding_session", "32000"), ("job_search", "16000")):
        assert main(["demo", "--example", example, "--window", window]) == 0
        captured = capsys.readouterr()
        lines = re.findall(r"^Turn \d+: Compacted #(\d+) .*?, (\d+\.\d+)s$", captured.out, re.M)
        total = re.search(r"(\d+) automatic compactions", captured.out)
        assert total is not None
        assert [int(n) for n, _ in lines] == list(range(1, int(total.group(1)) + 1))
        assert int(total.group(1)) >= 2
        assert all(float(seconds) > 0 for _, seconds in lines), "a compaction's time is its turn's wall time"
        # no planned-zone estimate beside the result
        assert not re.search(r"Compaction: .*compacting \d+ messages", captured.out + captured.err)
        assert "prepared in the background" not in captured.out


def test_every_config_field_has_a_description() -> None:
    """They appear in the API reference (docs/configuration.md, section by section), the JSON
    schema and the command line's help."""
    schema = CompactionConfig.model_json_schema()
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for section, model in section_models().items():
        definition = schema["$defs"][model.__name__]
        assert definition["description"] == inspect.cleandoc(model.__doc__ or ""), section
        assert f"::: compaction.config.{model.__name__}" in page, f"{model.__name__} is not in the reference"
        row = re.search(rf"^\| `{section}` \| (.+?) \|", page, re.M)
        assert row, f"no row for section {section!r} in the table of sections"
        assert re.findall(r"`(\w+)`", row.group(1)) == list(model.model_fields), f"the row of {section!r} drifted"
        for name, field in model.model_fields.items():
            assert field.description, f"{section}.{name} has no description"
            assert len(field.description) > 15, field.description
            assert "seed 0" not in field.description
            assert definition["properties"][name]["description"] == field.description
    assert "::: compaction.config.CompactionConfig" in page


def test_docstrings_speak_of_behaviour_not_design_notes() -> None:
    for package in ("compaction", "guards"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"\bseed 0\d\d\b", text), f"{path.relative_to(ROOT)} cites a design note"


def test_nox_builds_the_docs_strictly_in_ci() -> None:
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert re.search(r'"mkdocs", "build", "--strict"', noxfile)
    assert '"docs"' in re.search(r"nox.options.sessions = \[(.*?)\]", noxfile).group(1)  # type: ignore[union-attr]
    assert "docs" in (ROOT / ".ci" / "run").read_text(encoding="utf-8").split("-s", 1)[1].split()
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "strict: true" in config
    for page in PAGES:
        if "examples" not in page.parts:
            assert str(page.relative_to(DOCS)) in config, f"{page.relative_to(DOCS)} is not in mkdocs.yml's nav"


def test_service_walkthrough_shows_what_the_service_answers() -> None:
    """docs/service.md's curl session, replayed request by request against the app `compaction serve`
    runs: each JSON line it shows is the answer (projected as its jq filter projects it)."""
    import json

    from fastapi.testclient import TestClient

    from compaction.demo import load_example
    from compaction.server import create_app

    page = (DOCS / "service.md").read_text(encoding="utf-8")
    session = re.search(r"^```console\n(.*?)^```", page, re.S | re.M)
    assert session is not None
    shown = [json.loads(line) for line in session.group(1).splitlines() if line.startswith("{")]
    messages, _ = load_example("coding_session")
    with TestClient(create_app(store_path=":memory:")) as client:
        created = client.post("/v1/sessions", json={"session_id": "demo", "model": "gpt-4o"}).json()
        appended = client.post("/v1/sessions/demo/messages", json={"messages": messages}).json()
        body = {"instructions": "keep every file path", "include_removed": False, "include_record": False}
        compacted = client.post("/v1/sessions/demo/compact", json=body).json()
        history = client.get("/v1/sessions/demo/compactions").json()["compactions"]
        context = client.get("/v1/sessions/demo/context").json()
    keys = ("compacted", "tokens_before", "tokens_after", "messages_compacted", "fallback_level")
    answers = [
        created,
        {"ids": appended["message_ids"][:3], "context_tokens": appended["context_tokens"]},
        {key: compacted[key] for key in keys},
        *(
            {key: entry[key] for key in ("trigger", "tokens_before", "tokens_after", "messages_compacted")}
            for entry in history
        ),
        {"tokens": context["tokens"], "messages": len(context["messages"])},
    ]
    assert shown == answers

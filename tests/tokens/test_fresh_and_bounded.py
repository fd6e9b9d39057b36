"""What a fresh process pays for counting, and the bounds of what the token layer keeps.

The tokenizer's BPE file is parsed in bulk (the same ranks as tiktoken's line-by-line reading), each
distinct string of a batch is tokenized once, an offline compaction imports nothing heavy, and the
process-wide registries of counters and tokenizer files are bounded."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from compaction.tokens import EstimateCounter, TiktokenCounter, _loaders, _select, counter_for_model
from compaction.tokens._loaders import TokenizerUnavailableError, litellm_tokenizer_dir, parse_tiktoken_bpe
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart

EXAMPLE = Path(__file__).resolve().parents[2] / "compaction" / "examples" / "coding_session.json"


def _line_by_line(data: bytes) -> dict[bytes, int]:
    """tiktoken.load's reading of a BPE file."""
    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_bulk_parse_of_the_bundled_files_equals_the_line_by_line_parse(encoding: str) -> None:
    url = f"https://openaipublic.blob.core.windows.net/encodings/{encoding}.tiktoken"
    data = (litellm_tokenizer_dir() / hashlib.sha1(url.encode(), usedforsecurity=False).hexdigest()).read_bytes()
    parsed = parse_tiktoken_bpe(data)
    expected = _line_by_line(data)
    assert list(parsed.items()) == list(expected.items())  # same tokens, ranks and order


@pytest.mark.parametrize(
    "data",
    [
        b"aGk= 5\nIQ== 2\n",  # ranks not in line order
        b"aGk= 0\nIQ== 2\nYQ== 3",  # a gap, and no newline at the end
        b"aGk= 0\r\nIQ== 1\r\n",  # CRLF lines
        b"aGk= 00\nIQ== 1\n",  # a rank written with a leading zero is still rank 0
        b"aGk= 0\n\nIQ== 1\n\n",  # blank lines
    ],
)
def test_ranks_other_than_line_numbers_are_read_as_written(data: bytes) -> None:
    assert parse_tiktoken_bpe(data) == _line_by_line(data)


@pytest.mark.parametrize("data", [b"aGk= 0\nIQ==\n", b"aGk= 0 1\nIQ==\n", b"aGk= zero\nIQ== 1\n"])
def test_a_line_that_is_not_token_and_rank_is_refused(data: bytes) -> None:
    with pytest.raises(TokenizerUnavailableError, match="not 'token rank'"):
        parse_tiktoken_bpe(data)


class _RecordingCounter(EstimateCounter):
    """chars/4, recording every string handed to the tokenizer."""

    def __init__(self) -> None:
        super().__init__()
        self.tokenized: list[str] = []

    def _count_texts(self, texts: list[str]) -> list[int]:
        self.tokenized.extend(texts)
        return super()._count_texts(texts)


def _session() -> list[Message]:
    log = "FAILED tests/test_money.py::test_round - AssertionError\n" * 40
    messages: list[Message] = []
    for i in range(3):  # the same command run three times, the same failure each time
        call = ToolCallPart(id=f"c{i}", name="bash", arguments='{"cmd": "pytest -q"}')
        messages.append(Message(role="assistant", parts=(call,), id=f"a{i}"))
        messages.append(Message(role="tool", parts=(ToolResultPart(call_id=f"c{i}", content=log),), id=f"t{i}"))
    messages.append(Message(role="user", parts=(TextPart(text="why does it still fail?"),), id="u"))
    return messages


def test_each_distinct_string_of_a_batch_is_tokenized_once() -> None:
    messages = _session()
    counter = _RecordingCounter()
    total = counter.count_messages(messages)
    assert len(counter.tokenized) == len(set(counter.tokenized))
    assert set(counter.tokenized) >= {"assistant", "tool", "bash", "user"}
    # The same counts as counting each message on its own, with a fresh cache each time.
    assert total == 3 + sum(EstimateCounter().count_message(message) for message in messages)
    assert [counter.count_message(m) for m in messages] == [EstimateCounter().count_message(m) for m in messages]


def test_exact_counts_do_not_change_when_strings_repeat() -> None:
    messages = _session()
    alone = sum(TiktokenCounter("o200k_base").count_message(message) for message in messages)
    assert TiktokenCounter("o200k_base").count_messages(messages) == alone + 3


def test_an_offline_compaction_imports_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "from compaction import Compactor\n"
        f"messages = json.load(open({str(EXAMPLE)!r}, encoding='utf-8'))\n"
        "result = Compactor('gpt-4o').compact(messages, budget=6_000)\n"
        "heavy = ('litellm', 'openai', 'httpx', 'requests', 'detect_secrets', 'tokenizers', 'aiohttp', 'sqlite3')\n"
        "print(json.dumps([result.compacted, [name for name in heavy if name in sys.modules]]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [True, []]


def test_model_names_kept_by_the_registry_are_bounded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_select, "MAX_MODEL_NAMES", 4)
    monkeypatch.setattr(_select, "_BY_MODEL", {})
    caplog.set_level(logging.ERROR, logger="compaction.tokens")  # the unknown-model warnings
    counters = [counter_for_model(f"client-model-{i}") for i in range(10)]
    assert len(_select._BY_MODEL) == 4
    assert [name for name, _ in _select._BY_MODEL] == [f"client-model-{i}" for i in range(6, 10)]
    assert all(counter is counters[0] for counter in counters)  # still one counter for the family
    assert counter_for_model("client-model-0") is counters[0]  # a dropped name finds it again


def test_tokenizer_files_kept_are_bounded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(_select, "MAX_TOKENIZER_FILES", 2)
    monkeypatch.setattr(_loaders, "MAX_TOKENIZER_FILES", 2)
    monkeypatch.setattr(_select, "_BY_MODEL", {})
    monkeypatch.setattr(_select, "_BY_FAMILY", {})
    monkeypatch.setattr(_loaders, "_HF_TOKENIZERS", {})
    source = (litellm_tokenizer_dir() / "anthropic_tokenizer.json").read_bytes()
    paths = []
    for i in range(3):
        path = tmp_path / f"tokenizer-{i}.json"
        path.write_bytes(source)
        paths.append(path)
    counters = [counter_for_model("local-model", tokenizer_path=path) for path in paths]
    assert all(counter.count_text("hello world") == 2 for counter in counters)
    files = [key for key in _select._BY_FAMILY if key.startswith("hf:")]
    assert files == [f"hf:{paths[1].resolve()}", f"hf:{paths[2].resolve()}"]
    assert counters[0] not in _select._BY_MODEL.values()  # the dropped file's counter is not kept by name
    assert list(_loaders._HF_TOKENIZERS) == [str(paths[1].resolve()), str(paths[2].resolve())]

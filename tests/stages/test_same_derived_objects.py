"""What a managed session derives from a message on append is the very object its next compaction
derives again: the redacted copy, the prune settings in every memo key, a command's written files."""

from __future__ import annotations

from compaction import CompactionConfig
from compaction._cache import memo_scope
from compaction.patterns.changed_files import shell_written_paths
from compaction.redact import redact_message
from compaction.stages.layout import prune_settings
from compaction.transcript import Message, TextPart

KEY = "sk-ant-" + "a1B2c3D4e5F6g7H8i9J0" * 3


def test_a_redacted_copy_is_made_once_per_message() -> None:
    secret = Message(role="user", id="u1", parts=(TextPart(text=f"deploy with ANTHROPIC_API_KEY={KEY}"),))
    first = redact_message(secret)
    assert first is not secret
    assert KEY not in first.text
    assert redact_message(secret) is first  # the stages' memos kept on the copy are found again
    plain = Message(role="user", id="u2", parts=(TextPart(text="run the tests"),))
    assert redact_message(plain) is plain
    # A copy of the message (another id) is another message: redacted afresh, never the old copy.
    moved = secret.model_copy(update={"id": "u3"})
    assert redact_message(moved) is not first
    assert redact_message(moved).text == first.text


def test_equal_configs_give_the_same_prune_settings_object() -> None:
    config = CompactionConfig(window=64_000)
    assert prune_settings(config) is prune_settings(CompactionConfig(window=64_000))
    assert prune_settings(config) is prune_settings(config.model_copy(update={"threshold": 0.7}))
    other = prune_settings(config.model_copy(update={"prune_head_chars": 900}))
    assert other is not prune_settings(config)
    assert other.head_chars == 900


def test_written_paths_are_a_new_list_each_time() -> None:
    command = "sed -i 's/a/b/' src/a.py && echo ok > out.txt"
    with memo_scope():
        first = shell_written_paths(command)
        assert first == ["src/a.py", "out.txt"]
        first.append("mutated")
        assert shell_written_paths(command) == ["src/a.py", "out.txt"]

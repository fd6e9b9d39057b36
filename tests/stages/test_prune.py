"""Tests for compaction.stages.prune: soft trim, hard clear, and what the summarizer sees."""

from __future__ import annotations

import base64
import json
import math
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.pairs import validate
from compaction.patterns import head_cut, tail_cut
from compaction.stages.prune import (
    PrunedItem,
    PruneSettings,
    prepare_for_summarizer,
    prune_tool_results,
    trim_middle,
)
from compaction.transcript import (
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Transcript,
)
from tests.support.strategies import canonical_transcripts

FILLER = "plain output row\n"  # nothing important: no path, URL, id or error cue


def filler(n: int) -> str:
    return (FILLER * (n // len(FILLER) + 1))[:n]


def tokens(message: Message) -> int:
    return math.ceil(len(message.text) / 4)


def png_b64(width: int, height: int, pad: int = 0) -> str:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    chunk = struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + chunk + b"\x00" * pad).decode()


def call(mid: str, *calls: tuple[str, str]) -> Message:
    parts = tuple(ToolCallPart(id=cid, name=name, arguments=json.dumps({"command": "x"})) for cid, name in calls)
    return Message(role="assistant", id=mid, parts=parts)


def result(mid: str, call_id: str, content: Any, **kw: Any) -> Message:
    return Message(role="tool", id=mid, parts=(ToolResultPart(call_id=call_id, content=content, **kw),))


def prune(messages: list[Message], window: int = 1_000_000, **settings: Any) -> Any:
    return prune_tool_results(messages, settings=PruneSettings(**settings), window_tokens=window, count=tokens)


# --- soft trim ------------------------------------------------------------------------------


def kept_ends(text: str, head: int, tail: int) -> tuple[str, str, int, int]:
    """The head and tail a trim keeps (each cut at whitespace near the asked size), the length of the
    middle between them and the tail's length."""
    end, head_mark = head_cut(text, head)
    start, tail_mark = tail_cut(text, len(text) - tail)
    return text[:end] + head_mark, tail_mark + text[start:], start - end, len(text) - start


def test_soft_trim_exact_sizes_and_note() -> None:
    text = filler(48_210)
    msgs = [call("a1", ("c1", "bash")), result("t1", "c1", text)]
    out = prune(msgs)
    head, tail, cut, _ = kept_ends(text, 1500, 1500)
    expected = head + f"\n[... {cut:,} of 48,210 characters cut here; the full output is archived as t1 ...]\n" + tail
    assert out.messages[1].tool_results[0].content == expected
    assert out.messages[1].text == expected  # not the stale cached text of the original message
    assert out.items == (PrunedItem("t1", "c1", "trimmed", 48_210, len(expected)),)
    assert (out.chars_before, out.chars_after) == (48_210, len(expected))
    assert out.messages[0] is msgs[0]


def test_important_lines_from_the_middle_survive() -> None:
    planted = [
        "wrote /srv/app/build/output.bin",
        "fetching https://registry.example.com/pkg/tarball",
        "Traceback (most recent call last):",
        "HEAD is now at 3f9a2c1b7e",
    ]
    chunks = [filler(10_000)]
    for line in planted:
        chunks += ["\n" + line + "\n", filler(10_000)]
    text = "".join(chunks)
    assert len(text) > 50_000
    out = prune([call("a1", ("c1", "bash")), result("t1", "c1", text)])
    trimmed = out.messages[1].tool_results[0].text
    head, tail, cut, tail_chars = kept_ends(text, 1500, 1500)
    note = (
        f"[... {cut:,} of {len(text):,} characters cut here; 4 lines with errors, paths, URLs or ids "
        "kept below; the full output is archived as t1 ...]"
    )
    end = f"[... end of kept lines; the last {tail_chars:,} characters follow ...]"
    assert trimmed == "\n".join([head, note, *planted, end, tail])


def test_a_trim_never_keeps_part_of_a_token_as_if_whole() -> None:
    words = "see /srv/app/jobs/view/3997618496/ and https://example.com/jobs/view/3997618496/ "
    text = words * 400
    out = trim_middle(text, head=1001, tail=997, archive_id="t1")
    assert out is not None
    first, *_, last = out.splitlines()
    assert text.startswith(first)
    assert text.endswith(last)
    assert first.split()[-1] in words.split()
    assert last.split()[0] in words.split()
    solid = "x" * 5000  # no whitespace within reach: the cut token carries an ellipsis
    out = trim_middle(solid, head=500, tail=500, archive_id="t2")
    assert out is not None
    assert out.splitlines()[0] == "x" * 500 + "\u2026"
    assert out.splitlines()[-1] == "\u2026" + "x" * 500


def test_kept_lines_are_capped_errors_first_and_trimmed() -> None:
    paths = [f"compiled src/pkg/module_{i}.py" for i in range(60)]
    long_error = "RuntimeError: " + "e" * 500
    text = filler(2000) + "\n" + "\n".join([*paths[:30], long_error, *paths[30:]]) + "\n" + filler(2000)
    out = prune([call("a1", ("c1", "bash")), result("t1", "c1", text)], head_chars=1000, tail_chars=1000)
    lines = out.messages[1].tool_results[0].text.splitlines()
    note = next(line for line in lines if line.startswith("[... ") and "cut here" in line)
    assert "40 of 61 lines with errors, paths, URLs or ids kept below" in note
    start = lines.index(note) + 1
    kept = lines[start : start + 40]
    assert kept == [*paths[:30], long_error[:299] + "…", *paths[30:39]]
    assert all(len(line) <= 300 for line in kept)


def test_short_results_untouched_and_prune_is_idempotent() -> None:
    msgs = [
        Message(role="user", id="u1", parts=(TextPart(text=filler(9000)),)),
        call("a1", ("c1", "bash"), ("c2", "bash")),
        result("t1", "c1", "short"),
        result("t2", "c2", filler(9000)),
    ]
    once = prune(msgs)
    assert [m is o for m, o in zip(once.messages, msgs, strict=True)] == [True, True, True, False]
    twice = prune(list(once.messages))
    assert twice.items == ()
    assert all(a is b for a, b in zip(twice.messages, once.messages, strict=True))


def test_list_content_keeps_images_and_form() -> None:
    image = ImagePart(source={"type": "base64", "media_type": "image/png", "data": png_b64(10, 10)})
    content = (TextPart(text=filler(6000)), image, TextPart(text="tail text"))
    out = prune([call("a1", ("c1", "screenshot")), result("t1", "c1", content)])
    new = out.messages[1].parts[0]
    assert isinstance(new, ToolResultPart)
    assert isinstance(new.content, tuple)
    assert [b.kind for b in new.content] == ["text", "image"]
    assert new.content[1] is image
    assert "characters cut here" in new.text


def test_trim_middle_returns_none_when_not_shorter() -> None:
    assert trim_middle("abc", head=2, tail=2, archive_id="m") is None
    assert trim_middle(filler(3050), head=1500, tail=1500, archive_id="m") is None  # the note costs more


# --- hard clear -----------------------------------------------------------------------------


def exchanges(n: int, size: int = 8000) -> list[Message]:
    msgs: list[Message] = [Message(role="user", id="u0", parts=(TextPart(text="go"),))]
    for i in range(n):
        msgs += [call(f"a{i}", (f"c{i}", "bash")), result(f"t{i}", f"c{i}", filler(size))]
    msgs.append(Message(role="assistant", id="final", parts=(TextPart(text="done"),)))
    return msgs


def test_hard_clear_oldest_first_and_stops_under_share() -> None:
    msgs = exchanges(6)
    # 6 results of 2,000 tokens = 12,000 tokens; share 0.5 of 15,000 = 7,500.
    out = prune(msgs, window=15_000, soft_trim_chars=100_000)
    cleared = [item.call_id for item in out.items]
    assert cleared == ["c0", "c1", "c2"]
    assert all(item.action == "cleared" and item.original_chars == 8000 for item in out.items)
    assert out.messages[2].tool_results[0].content == (
        "[tool result cleared to save context: bash output of 8,000 characters, archived as t0]"
    )
    total = sum(tokens(m) for m in out.messages if m.has_tool_results)
    assert total <= 7_500
    # one fewer clear would still be over the share
    assert total + 2000 - tokens(out.messages[6]) > 7_500
    assert out.messages[8] is msgs[8]


def test_recent_assistant_turns_are_protected() -> None:
    msgs = exchanges(5)
    out = prune(msgs, window=2_000, soft_trim_chars=100_000)  # far over the share: clear all it may
    cleared = {item.call_id for item in out.items}
    # Assistant messages: a0..a4, final -> the 3rd-to-last is a3; results after it (t3, t4) are protected.
    assert cleared == {"c0", "c1", "c2"}
    assert out.messages[8] is msgs[8]
    assert out.messages[10] is msgs[10]


def test_too_few_assistant_turns_protects_everything() -> None:
    msgs = [call("a0", ("c0", "bash")), result("t0", "c0", filler(8000))]
    out = prune(msgs, window=100, soft_trim_chars=100_000)
    assert out.items == ()
    out = prune(msgs, window=100, soft_trim_chars=100_000, protect_last_assistant_turns=0)
    assert [i.action for i in out.items] == ["cleared"]


def test_trimmed_then_cleared_is_one_cleared_item() -> None:
    msgs = exchanges(5, size=20_000)
    out = prune(msgs, window=1_000)
    by_call = {item.call_id: item for item in out.items}
    assert by_call["c0"].action == "cleared"
    assert by_call["c0"].original_chars == 20_000
    assert by_call["c4"].action == "trimmed"
    assert len(out.items) == 5


def test_cleared_image_result_mentions_images() -> None:
    image = ImagePart(source={"type": "base64", "media_type": "image/png", "data": png_b64(800, 600, pad=3000)})
    msgs = exchanges(3)
    msgs[2] = result("t0", "c0", (TextPart(text=filler(8000)), image))
    out = prune(msgs, window=1_000, soft_trim_chars=100_000, protect_last_assistant_turns=1)
    new = out.messages[2].parts[0]
    assert isinstance(new, ToolResultPart)
    assert isinstance(new.content, tuple)
    assert (
        new.text == "[tool result cleared to save context: bash output of 8,000 characters and 1 image, archived as t0]"
    )
    assert not new.images


# --- a cleared result keeps its measurement lines --------------------------------------------

MEASURED = (
    "Ran 120 tests in 3.4s",
    "p95 latency 230 ms",
    "Memory: 1.2 GiB",
    "throughput: 41,200 req/s",
)


def measured_output(size: int = 8000) -> str:
    half = filler(size // 2)
    return half + "\n".join(("def f(x): return x * 0.5", *MEASURED, "line 42 of 90", "retries = 3")) + "\n" + half


def test_cleared_result_keeps_its_measurement_lines_verbatim() -> None:
    msgs = exchanges(4)
    msgs[2] = result("t0", "c0", measured_output())
    out = prune(msgs, window=1_000, soft_trim_chars=100_000)
    text = out.messages[2].tool_results[0].text
    lines = text.splitlines()
    assert lines[0] == (
        "[tool result cleared to save context: bash output of 8,133 characters, archived as t0; "
        "4 measurement lines kept below]"
    )
    assert lines[1:] == list(MEASURED)  # verbatim, in order; code, bare counts and settings are not kept
    # a result with nothing measured keeps the bare placeholder
    assert out.messages[4].tool_results[0].text.count("\n") == 0


@pytest.mark.parametrize(
    "line",
    ["Ran 120 tests in 3.4s", "p95 latency 230 ms", "Memory: 1.2 GiB", "===== 5 passed, 1 failed in 0.12s ====="],
)
def test_real_looking_measurements_are_kept(line: str) -> None:
    msgs = exchanges(4)
    msgs[2] = result("t0", "c0", filler(4000) + "\n" + line + "\n" + filler(4000))
    out = prune(msgs, window=1_000, soft_trim_chars=100_000)
    assert out.messages[2].tool_results[0].text.splitlines()[1:] == [line]


def test_kept_measurements_are_bounded_by_lines_and_characters() -> None:
    many = "\n".join(f"step {i} latency: {i}.5 ms" for i in range(200))
    msgs = exchanges(4)
    msgs[2] = result("t0", "c0", many)
    out = prune(msgs, window=1_000, soft_trim_chars=100_000)
    kept = out.messages[2].tool_results[0].text.splitlines()[1:]
    assert kept == [f"step {i} latency: {i}.5 ms" for i in range(5)]
    out = prune(msgs, window=1_000, soft_trim_chars=100_000, cleared_measurement_chars=60)
    kept = out.messages[2].tool_results[0].text.splitlines()[1:]
    assert len(kept) == 2
    assert sum(map(len, kept)) <= 60
    out = prune(msgs, window=1_000, soft_trim_chars=100_000, cleared_measurement_lines=0)
    assert "\n" not in out.messages[2].tool_results[0].text
    # what a cleared note costs stays small whatever the output: under 150 tokens at the defaults
    for text in (many, measured_output(200_000), "\n".join(f"cpu {i}: {i}% load" * 3 for i in range(5000))):
        msgs[2] = result("t0", "c0", text)
        note = prune(msgs, window=1_000, soft_trim_chars=100_000).messages[2].tool_results[0].text
        assert len(note) <= 150 + 400 + 5


def test_labelled_values_come_first_and_no_credential_is_kept() -> None:
    free = "\n".join(f"build {i} took {i}.2 s" for i in range(6))
    secret = "token: 12.5 sk-ant-" + "a1B2" * 10
    msgs = exchanges(4)
    msgs[2] = result("t0", "c0", free + "\n" + secret + "\nindex size: 12.5 GB\n")
    out = prune(msgs, window=1_000, soft_trim_chars=100_000)
    kept = out.messages[2].tool_results[0].text.splitlines()[1:]
    assert "index size: 12.5 GB" in kept
    assert len(kept) == 5
    assert not any("sk-ant" in line or "token" in line for line in kept)


def test_clearing_accounts_for_kept_lines_and_stays_under_the_share() -> None:
    msgs = exchanges(6)
    for i in range(6):
        msgs[2 + 2 * i] = result(f"t{i}", f"c{i}", measured_output())
    out = prune(msgs, window=15_000, soft_trim_chars=100_000)
    assert sum(tokens(m) for m in out.messages if m.has_tool_results) <= 7_500


def test_clearing_twice_changes_nothing() -> None:
    msgs = exchanges(4)
    msgs[2] = result("t0", "c0", measured_output())
    once = prune(msgs, window=1_000, soft_trim_chars=100_000)
    twice = prune(list(once.messages), window=1_000, soft_trim_chars=100_000)
    assert [m.text for m in twice.messages] == [m.text for m in once.messages]


def test_soft_trim_and_preview_keep_measurement_lines_of_the_cut_middle() -> None:
    text = measured_output(20_000)
    out = prune([result("t0", "c0", text)], window=1_000_000)
    trimmed = out.messages[0].tool_results[0].text
    assert "4 measurement lines kept below" in trimmed
    assert all(line in trimmed.splitlines() for line in MEASURED)
    seen = prepare_for_summarizer([result("t0", "c0", text)], settings=PruneSettings(preview=(500, 200)))
    assert all(line in seen[0].tool_results[0].text.splitlines() for line in MEASURED)
    bare = trim_middle(text, head=500, tail=200, archive_id="t0")  # measurements=(0, 0): none kept
    assert bare is not None
    assert "measurement" not in bare


def test_never_touches_calls_or_text_and_keeps_pairs() -> None:
    msgs = exchanges(4, size=30_000)
    out = prune(msgs, window=500)
    for before, after in zip(msgs, out.messages, strict=True):
        assert [p.call_id for p in before.tool_results] == [p.call_id for p in after.tool_results]
        if not before.has_tool_results:
            assert after is before


@given(canonical_transcripts("anthropic"), st.integers(min_value=10, max_value=2000))
def test_property_pairs_and_other_parts_intact(transcript: Transcript, window: int) -> None:
    settings = PruneSettings(soft_trim_chars=20, head_chars=5, tail_chars=5, protect_last_assistant_turns=1)
    out = prune_tool_results(transcript.messages, settings=settings, window_tokens=window, count=tokens)
    assert len(out.messages) == len(transcript.messages)
    for before, after in zip(transcript.messages, out.messages, strict=True):
        assert (before.role, before.id) == (after.role, after.id)
        assert len(before.parts) == len(after.parts)
        for p, q in zip(before.parts, after.parts, strict=True):
            if isinstance(p, ToolResultPart):
                assert isinstance(q, ToolResultPart)
                assert (q.call_id, q.is_error) == (p.call_id, p.is_error)
            else:
                assert q is p
        if after is not before:
            assert before.has_tool_results
    assert validate(transcript.replace(out.messages)) == validate(transcript)


def test_settings_validation() -> None:
    with pytest.raises(ValueError, match="hard_clear_share"):
        PruneSettings(hard_clear_share=0)
    with pytest.raises(ValueError, match="negative"):
        PruneSettings(head_chars=-1)


# --- prepare_for_summarizer ---------------------------------------------------------------------


def test_images_become_placeholders_with_dimensions() -> None:
    data = png_b64(1024, 768, pad=12_000)
    kb = round(len(data) * 3 / 4 / 1024)
    user = Message(
        role="user",
        id="u1",
        parts=(TextPart(text="what is wrong here?"), ImagePart(source={"url": f"data:image/png;base64,{data}"})),
    )
    remote = Message(role="user", id="u2", parts=(ImagePart(source={"type": "url", "url": "https://x.io/a.png"}),))
    shot = result(
        "t1",
        "c1",
        (
            TextPart(text="screenshot taken"),
            ImagePart(source={"type": "base64", "media_type": "image/png", "data": data}),
        ),
    )
    out = prepare_for_summarizer([user, remote, shot], settings=PruneSettings())
    assert out[0].parts[1] == TextPart(text=f"[image: 1024x768 image/png, about {kb} KB, archived as u1]")
    assert out[0].parts[0] is user.parts[0]
    assert out[1].parts[0] == TextPart(text="[image: https://x.io/a.png, archived as u2]")
    assert (
        out[2].tool_results[0].text == f"screenshot taken\n[image: 1024x768 image/png, about {kb} KB, archived as t1]"
    )
    assert kb == 12
    assert not any(True for m in out for _ in m.iter_images())


def test_details_and_extra_metadata_stripped() -> None:
    part = ToolResultPart(call_id="c1", content="ok", extra={"details": {"diff": "x" * 1000}, "cache_control": {}})
    msg = Message(role="tool", id="t1", parts=(part,), extra={"name": "bash", "provider_payload": {"a": 1}})
    (out,) = prepare_for_summarizer([msg], settings=PruneSettings())
    assert out.parts[0].extra == {}
    assert out.extra == {"name": "bash"}
    assert out.tool_results[0].content == "ok"


def test_reasoning_dropped() -> None:
    think = ReasoningPart(block={"type": "thinking", "thinking": "let me consider", "signature": "sig"})
    msgs = [
        Message(role="assistant", id="a1", parts=(think, TextPart(text="answer"))),
        Message(role="assistant", id="a2", parts=(think,)),
        Message(role="user", id="u1", parts=(TextPart(text="thanks"),)),
    ]
    out = prepare_for_summarizer(msgs, settings=PruneSettings())
    assert [m.id for m in out] == ["a1", "u1"]
    assert out[0].parts == (TextPart(text="answer"),)
    assert out[1] is msgs[2]


def test_preview_mode_500_200() -> None:
    text = filler(5000) + "\nERROR: disk full on /dev/sda1\n" + filler(5000)
    msgs = [call("a1", ("c1", "bash")), result("t1", "c1", text)]
    out = prepare_for_summarizer(msgs, settings=PruneSettings(preview=(500, 200)))
    note = (
        f"[... {len(text) - 700:,} of {len(text):,} characters cut here; 1 line with errors, paths, URLs or ids "
        "kept below; the full output is archived as t1 ...]"
    )
    head, tail, cut, tail_chars = kept_ends(text, 500, 200)
    note = note.replace(f"{len(text) - 700:,} of", f"{cut:,} of")
    end = f"[... end of kept lines; the last {tail_chars:,} characters follow ...]"
    expected = "\n".join([head, note, "ERROR: disk full on /dev/sda1", end, tail])
    assert out[1].tool_results[0].content == expected
    assert out[0] is msgs[0]
    # without a preview, results reach the summarizer whole
    assert prepare_for_summarizer(msgs, settings=PruneSettings())[1] is msgs[1]

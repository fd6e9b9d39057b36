"""The summarizer view's first guess: the room in characters its first round tries comes from the
zone's own tool output (characters per token measured on a sample of the results, and the framing
the render gives each result), so dense output (hex, minified data) and plain prose both start
near the room instead of one of them several rounds away."""

from __future__ import annotations

import random

import pytest

import compaction.stages.view as view
from compaction.stages.prune import PruneSettings, prepare_for_summarizer
from compaction.tokens import counter_for_model
from compaction.transcript import Message, TextPart, ToolCallPart, ToolResultPart


def _zone(output: str, results: int = 60) -> list[Message]:
    messages = [Message(role="user", id="u", parts=(TextPart(text="Look through the logs, please."),))]
    for k in range(results):
        call = ToolCallPart(id=f"call_{k}", name="bash", arguments=f'{{"command": "cat log_{k}.txt"}}')
        messages.append(Message(role="assistant", id=f"a{k}", parts=(call,)))
        result = ToolResultPart(call_id=f"call_{k}", content=f"log {k}\n{output}")
        messages.append(Message(role="tool", id=f"t{k}", parts=(result,)))
    return messages


def _prose(rng: random.Random) -> str:
    words = ["the", "service", "restarted", "after", "a", "timeout", "while", "reading", "configuration"]
    return "\n".join(" ".join(rng.choice(words) for _ in range(14)) for _ in range(120))


def _hex(rng: random.Random) -> str:
    return "\n".join(" ".join(f"{rng.getrandbits(32):08x}" for _ in range(8)) for _ in range(120))


@pytest.mark.parametrize("kind", ["prose", "hex"])
def test_the_first_round_lands_near_the_room_for_dense_and_plain_output(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(7)
    zone = _zone(_prose(rng) if kind == "prose" else _hex(rng))
    counter = counter_for_model("gpt-4o")
    settings = PruneSettings()
    whole = int(view.rendered_counts(counter, zone).sum())
    room = whole // 4  # every result must be cut
    tried: list[int] = []
    fit = view.fit_results

    def recording(*args: object, **kwargs: object) -> object:
        tried.append(int(kwargs["room_chars"]))  # type: ignore[call-overload]
        return fit(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(view, "fit_results", recording)
    _shown, record = view.summarizer_view(counter, zone, room, settings)
    assert record["tokens"] <= room * 1.01
    # The first round alone: what it rendered against the room it aimed at.
    first, _ = fit(zone, room_chars=tried[0], settings=settings)
    first_tokens = int(view.rendered_counts(counter, list(prepare_for_summarizer(first, settings=settings))).sum())
    assert 0.9 * room <= first_tokens <= 1.01 * room, (kind, first_tokens, room)

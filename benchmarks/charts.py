"""PNG charts of :mod:`benchmarks.bench_quality`'s figures (matplotlib, benchmarks only).

* ``retention.png``: planted facts of the compacted zone kept verbatim, by category, after one
  compaction and after 10, per summarizer, all sessions pooled; the targets of the
  identifier-type categories drawn as lines.
* ``scaling.png``: against the transcript size (messages), per scenario: compaction wall time in
  model-call latencies (and seconds), and tokens (before, after, sent to the summarizer).

``write_charts(figures, directory)`` writes both and returns their paths; small files (< 150 KB).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.bench_quality import (
    SUMMARIZERS,
    TARGET_CONTINUE,
    TARGET_UNITS,
)
from benchmarks.generate import CATEGORIES

RETENTION_PNG = "retention.png"
SCALING_PNG = "scaling.png"
DPI = 90
_COLORS = {"after1": "#4C72B0", "after10": "#DD8452", "coding": "#4C72B0", "job_search": "#55A868"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def pooled_retention(figures: Mapping[str, Any], summarizer: str, key: str) -> dict[str, tuple[int, int]]:
    """Per category, ``(kept, total)`` summed over every session of ``summarizer`` (``key``:
    ``"after1"`` or ``"after10"``)."""
    out: dict[str, list[int]] = {}
    for session in figures["sessions"]:
        quality = session["quality"].get(summarizer)
        if quality is None:
            continue
        for category, (kept, total) in quality[key].items():
            slot = out.setdefault(category, [0, 0])
            slot[0] += kept
            slot[1] += total
    return {c: (out[c][0], out[c][1]) for c in CATEGORIES if c in out}


def retention_chart(figures: Mapping[str, Any], path: Path) -> Path:
    plt = _pyplot()
    kinds = [k for k in SUMMARIZERS if any(k in s["quality"] for s in figures["sessions"])]
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.2 * len(kinds), 3.4), sharey=True, squeeze=False)
    width = 0.38
    for ax, kind in zip(axes[0], kinds, strict=True):
        for offset, key, label in ((-width / 2, "after1", "after 1"), (width / 2, "after10", "after 10")):
            pooled = pooled_retention(figures, kind, key)
            xs = [i + offset for i, c in enumerate(CATEGORIES)]
            ys = [100 * pooled[c][0] / pooled[c][1] if pooled.get(c, (0, 0))[1] else 0 for c in CATEGORIES]
            ax.bar(xs, ys, width, label=label, color=_COLORS[key])
        if kind == "extractive":  # what an agent needs to continue, after one compaction (offline)
            for i, c in enumerate(CATEGORIES):
                if c in TARGET_CONTINUE:
                    ax.hlines(100 * TARGET_CONTINUE[c], i - 0.5, i + 0.5, colors=_COLORS["after1"], linestyles="--")
        ax.set_xticks(range(len(CATEGORIES)))
        ax.set_xticklabels([c.replace("_", " ") for c in CATEGORIES], rotation=40, ha="right", fontsize=8)
        ax.set_ylim(0, 105)
        ax.set_title(f"{kind} summarizer", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("facts verbatim in context (%)")
    axes[0][0].legend(fontsize=8, loc="upper right")
    fig.suptitle(
        "Planted facts of the compacted zone verbatim in context, all sessions (targets dashed; every "
        "identifier-type fact is also one recall away)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _series(figures: Mapping[str, Any], scenario: str) -> list[Mapping[str, Any]]:
    return sorted((s for s in figures["sessions"] if s["scenario"] == scenario), key=lambda s: s["messages"])


def scaling_chart(figures: Mapping[str, Any], path: Path) -> Path:
    plt = _pyplot()
    scenarios = sorted({s["scenario"] for s in figures["sessions"]})
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for scenario in scenarios:
        rows = [s for s in _series(figures, scenario) if "time" in s]
        if rows:
            color = _COLORS.get(scenario)
            xs = [s["messages"] for s in rows]
            left.plot(xs, [s["time"]["units"] for s in rows], "o-", color=color, label=f"{scenario}: wall")
            left.plot(
                xs, [s["time"]["ideal_units"] for s in rows], "x:", color=color, label=f"{scenario}: critical path"
            )
            for s in rows:
                left.annotate(
                    f"{s['time']['projected_s']:.0f} s",
                    (s["messages"], s["time"]["units"]),
                    textcoords="offset points",
                    xytext=(4, 5) if scenario == scenarios[-1] else (4, -11),
                    fontsize=7,
                )
    left.axhline(TARGET_UNITS, color="red", linestyle="--", linewidth=1, label="target")
    left.set_xscale("log")
    top = max([TARGET_UNITS, *(s["time"]["units"] for s in figures["sessions"] if "time" in s)])
    left.set_ylim(0, top * 1.12)
    left.set_xlabel("transcript size (messages)")
    left.set_ylabel("model-call latencies")
    left.set_title("Compaction wall time (LLM stand-in, latency model)", fontsize=10)
    left.legend(fontsize=7)
    left.grid(alpha=0.3)
    for scenario in scenarios:
        rows = [s for s in _series(figures, scenario) if "stand-in" in s["quality"]]
        if not rows:
            continue
        color = _COLORS.get(scenario)
        xs = [s["messages"] for s in rows]
        cost = [s["quality"]["stand-in"]["cost"] for s in rows]
        right.plot(xs, [c["tokens_before"] for c in cost], "o-", color=color, label=f"{scenario}: before")
        right.plot(xs, [c["input_tokens"] for c in cost], "s--", color=color, label=f"{scenario}: summarizer input")
        right.plot(xs, [c["tokens_after"] for c in cost], "^:", color=color, label=f"{scenario}: after")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("transcript size (messages)")
    right.set_ylabel("tokens")
    right.set_title("Tokens per compaction (first compaction)", fontsize=10)
    right.legend(fontsize=7)
    right.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def write_charts(figures: Mapping[str, Any], directory: Path) -> Sequence[Path]:
    """Write ``retention.png`` and ``scaling.png`` into ``directory``; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    return [
        retention_chart(figures, directory / RETENTION_PNG),
        scaling_chart(figures, directory / SCALING_PNG),
    ]

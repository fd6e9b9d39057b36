"""OpenClaw's own compaction, run under Node by ``openclaw_runner.mjs`` from the installed dist files."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.generate import GeneratedTranscript
from benchmarks.peers.common import KEEP_MESSAGES, MODEL, RESERVE, WINDOW, PeerRun, openclaw_input

NAME = "OpenClaw (safeguard compaction)"
RUNNER = Path(__file__).resolve().parent / "openclaw_runner.mjs"
TIMEOUT_S = 900


def describe() -> str:
    return (
        "openclaw@2026.1.30 on pi-coding-agent 0.50.7 under Node, its default compaction mode (`safeguard`): "
        "pi's `prepareCompaction` (cut point) -> the safeguard extension's `session_before_compact` handler "
        "(`pruneHistoryForContextShare`, `computeAdaptiveChunkRatio`, `summarizeInStages` -> "
        "`summarizeWithFallback` -> pi's `generateSummary`, tool-failure and file lists) -> pi's "
        "`appendCompaction` + `buildSessionContext` -> `convertToLlm` and pi-ai's OpenAI-completions request "
        f"builder (the wire messages). Model: pi-ai `openai-completions` API, `{MODEL}`, contextWindow "
        f"{WINDOW:_}, baseUrl = the fake; reserveTokens {RESERVE:_} (OpenClaw's floor); keepRecentTokens = pi's "
        f"own estimate of the last {KEEP_MESSAGES} messages (the nearest equivalent of keeping {KEEP_MESSAGES}; "
        "pi's default is 20,000); summary cap 0.8 x reserve = 16,000 tokens (pi's rule). Wall time excludes "
        "Node start-up and module import."
    )


def check_install(modules: Path | None, install_log: Path | None) -> str | None:
    """None when OpenClaw can be run, else the precise reason it cannot."""
    if shutil.which("node") is None:
        return "node is not on PATH"
    if modules is None:
        return "no OpenClaw install given (--openclaw-modules)"
    missing = [
        p
        for p in ("openclaw/package.json", "@mariozechner/pi-coding-agent/package.json")
        if not (modules / p).is_file()
    ]
    if missing:
        reason = f"not installed under {modules}: missing {', '.join(missing)}"
        if install_log is not None and install_log.is_file():
            tail = install_log.read_text(errors="replace").strip().splitlines()[-12:]
            reason += "; npm install said: " + " / ".join(line.strip() for line in tail if line.strip())
        return reason
    return None


def run(g: GeneratedTranscript, api_base: str, modules: Path) -> PeerRun:
    payload = openclaw_input(g.messages, api_base)
    with tempfile.TemporaryDirectory(prefix="peers-openclaw-") as tmp:
        src, dst = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps(payload), encoding="utf-8")
        start = time.perf_counter()
        proc = subprocess.run(
            ["node", str(RUNNER), "--modules", str(modules), "--input", str(src), "--output", str(dst)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        process_s = time.perf_counter() - start
        if proc.returncode != 0 or not dst.is_file():
            err = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
            return PeerRun(NAME, False, error=f"node exited {proc.returncode}: {' / '.join(err)}")
        out: dict[str, Any] = json.loads(dst.read_text(encoding="utf-8"))
    extra = {
        k: out.get(k)
        for k in (
            "versions",
            "node",
            "settings",
            "import_ms",
            "phases",
            "first_kept_index",
            "messages_to_summarize",
            "turn_prefix_messages",
            "is_split_turn",
            "summary_chars",
            "fallback_summary",
            "warnings",
        )
    }
    extra["process_s"] = process_s
    if not out.get("ok"):
        return PeerRun(NAME, False, error=out.get("error"), extra=extra)
    notes = list(out.get("warnings") or [])
    if out.get("fallback_summary"):
        notes.append("summary fell back to 'Summary unavailable' (every summarization attempt failed)")
    return PeerRun(NAME, True, list(out["payload"]["messages"]), [out["wall_ms"] / 1e3], extra=extra, notes=notes)

"""What ``compaction serve`` configures at start, and the summarizer it names."""

from __future__ import annotations

from dataclasses import dataclass, field

from compaction.config import CompactionConfig
from compaction.server.auth import PERMISSIONS, KeyRing
from compaction.server.options import SERVE_DEFAULTS
from compaction.summarizers.base import Summarizer


@dataclass(frozen=True)
class ServerSettings:
    """Everything ``compaction serve`` configures at start (the start-up options' defaults are
    :data:`~compaction.server.options.SERVE_DEFAULTS`)."""

    store_path: str = SERVE_DEFAULTS.store_path
    model: str = "gpt-4o"
    summarizer: Summarizer | str | None = None
    """None or "extractive": offline; a string: a litellm model (its key from the environment)."""
    config: CompactionConfig = field(default_factory=CompactionConfig)
    max_body_bytes: int = SERVE_DEFAULTS.max_body_bytes
    heartbeat_s: float = SERVE_DEFAULTS.heartbeat_s
    drain_timeout_s: float = SERVE_DEFAULTS.drain_timeout_s
    compactor_cache_size: int = 64
    api_keys: KeyRing | None = None
    """None: open service (bind 127.0.0.1). Else every request but ``/health`` needs a key."""
    rate_limit: float = SERVE_DEFAULTS.rate_limit
    """Requests per second per API key, on average (only with API keys)."""
    rate_burst: int = SERVE_DEFAULTS.rate_burst
    header_timeout_s: float = SERVE_DEFAULTS.header_timeout_s
    """A connection must send a request's line and headers within this (slowloris)."""
    keep_alive_s: float = SERVE_DEFAULTS.keep_alive_s
    """An idle kept-alive connection is closed after this. Longer than the idle expiry of the
    clients and load balancers in front (httpx 5 s, AWS ALB 60 s): closing a connection the client
    still counts as open races with its next request, which is then reset unanswered."""
    body_timeout_s: float = SERVE_DEFAULTS.body_timeout_s
    """A request body must arrive within this (408 otherwise)."""
    client_permissions: frozenset[str] = frozenset()
    """Permissions every client has (see :data:`compaction.server.auth.PERMISSIONS`)."""
    compact_processes: int = SERVE_DEFAULTS.compact_processes
    """Worker processes for stateless extractive compactions (0: on the worker thread's loop)."""
    max_event_streams: int = SERVE_DEFAULTS.max_event_streams
    """Open SSE event streams in this process, all keys together (each holds a descriptor)."""
    max_event_streams_per_key: int = SERVE_DEFAULTS.max_event_streams_per_key
    """Open SSE event streams per API key (only with API keys)."""
    max_storage_bytes_per_key: int = SERVE_DEFAULTS.max_storage_bytes_per_key
    """Bytes of stored messages per API key (only with API keys; 413 beyond)."""
    max_sessions_per_key: int = SERVE_DEFAULTS.max_sessions_per_key
    """Sessions per API key (only with API keys; 429 beyond)."""

    def __post_init__(self) -> None:
        unknown = set(self.client_permissions) - PERMISSIONS
        if unknown:
            raise ValueError(f"unknown permission(s) {sorted(unknown)}; known: {sorted(PERMISSIONS)}")
        for name in ("header_timeout_s", "keep_alive_s", "body_timeout_s", "rate_limit"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.compact_processes < 0:
            raise ValueError(f"compact_processes must be 0 or more, got {self.compact_processes}")
        if self.rate_burst < 1:
            raise ValueError(f"rate_burst must be at least 1, got {self.rate_burst}")
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be at least 1024, got {self.max_body_bytes}")
        if self.max_storage_bytes_per_key < 1 or self.max_sessions_per_key < 1:
            raise ValueError(
                f"storage quotas must be at least 1, got {self.max_storage_bytes_per_key} bytes "
                f"and {self.max_sessions_per_key} sessions per key"
            )
        if self.max_event_streams < 1 or self.max_event_streams_per_key < 1:
            raise ValueError(
                f"event stream limits must be at least 1, got {self.max_event_streams} "
                f"and {self.max_event_streams_per_key} per key"
            )
        if self.heartbeat_s <= 0:
            raise ValueError(f"heartbeat_s must be positive, got {self.heartbeat_s}")


def summarizer_name(summarizer: Summarizer | str | None) -> str:
    if summarizer is None or summarizer == "extractive":
        return "extractive"
    if isinstance(summarizer, str):
        return summarizer
    return type(summarizer).__name__


def make_summarizer(summarizer: Summarizer | str | None, config: CompactionConfig) -> Summarizer:
    """One summarizer for the whole server: extractive, a litellm model (``"litellm/"`` prefix
    optional), or the given object."""
    if summarizer is None or summarizer == "extractive":
        from compaction.summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if isinstance(summarizer, str):
        from compaction.summarizers.llm import LLMSummarizer

        model = summarizer.removeprefix("litellm/")
        return LLMSummarizer(model, max_tokens=config.max_summary_tokens)
    return summarizer

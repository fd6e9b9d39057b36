"""Seeded, deterministic synthetic agent sessions with planted facts: the ground truth of the tests and
benchmarks.

``generate(scenario, n_messages, seed=..., format=..., tool_heavy=...)`` returns a
:class:`GeneratedTranscript`: provider-format messages (OpenAI, or Anthropic with a separate
``system``) of a realistic agent session, and the :class:`PlantedFact` s hidden in it with the index
of the message that holds each one.

Scenarios:

* ``coding`` - a coding agent on a Python service: tickets, grep, file reads, failing test runs
  with tracebacks, edits, re-runs, lint, git; CI and service logs (some outputs over 50,000 chars).
* ``job_search`` - a daily job search: the search prompt and its scoring rubric, LinkedIn
  searches, long job descriptions (some in German, French or Japanese), JobServe alert emails,
  scoring tables, the ``todays-jobs-YYYY-MM-DD.md`` report.
* ``research`` - web searches, long fetched pages (some Chinese), papers, screenshots, notes.
* ``mixed`` - the three, one task after another in one session.

Every session has heavy-tailed tool output sizes (lognormal plus a tail of huge outputs), parallel
tool calls (1-4), failed tools (``is_error`` / non-zero exit codes), images (real PNGs of varying
dimensions, base64), code, CJK and mixed-language text. Every tool call has its results right after
it, and Anthropic sessions alternate roles, so ``compaction.pairs.validate`` finds nothing.

Planted facts (categories in :data:`CATEGORIES`) are unique values placed at evenly spread
positions through the whole session: file paths, URLs, identifiers (git hashes, UUIDs, ticket
ids), error messages, numbers with units, commands, decisions with their reason, user constraints
and next steps. :func:`retention` checks which of those inside a compacted zone survive verbatim.

    python -m compaction.testing.transcripts --scenario coding --messages 2000 --format anthropic --seed 1 \\
        --out session.json --facts facts.json
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import math
import random
import string
import struct
import sys
import zlib
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

Scenario = Literal["coding", "job_search", "research", "mixed"]
Format = Literal["openai", "anthropic"]
Phrasing = Literal["templated", "paraphrased"]

SCENARIOS: tuple[str, ...] = ("coding", "job_search", "research", "mixed")
FORMATS: tuple[str, ...] = ("openai", "anthropic")
PHRASINGS: tuple[str, ...] = ("templated", "paraphrased")
CATEGORIES: tuple[str, ...] = (
    "path",
    "url",
    "identifier",
    "error",
    "number",
    "command",
    "decision",
    "constraint",
    "next_step",
)
MIN_MESSAGES = 10
MAX_MESSAGES = 200_000

# Planted facts per message, by category (at least 2 of each in any session).
_FACT_RATES: dict[str, float] = {
    "path": 1 / 120,
    "url": 1 / 150,
    "identifier": 1 / 120,
    "error": 1 / 150,
    "number": 1 / 130,
    "command": 1 / 150,
    "decision": 1 / 180,
    "constraint": 1 / 350,
    "next_step": 1 / 220,
}


# ------------------------------------------------------------------------------------------------
# Public types
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlantedFact:
    """A fact with ground truth: ``value`` appears verbatim in ``messages[message_index]``.

    ``detail`` is the decision's reason for ``category == "decision"``, the measured quantity for
    numbers, the kind of identifier for identifiers (``commit``, ``ticket``...), else empty."""

    category: str
    value: str
    message_index: int
    detail: str = ""


@dataclass
class GeneratedTranscript:
    """A generated session. ``messages`` are in ``format``; ``system`` is set for Anthropic only
    (OpenAI sessions carry their system prompt as ``messages[0]``)."""

    messages: list[dict[str, Any]]
    system: str | None
    facts: list[PlantedFact]
    format: Format
    scenario: str = "coding"
    seed: int = 0
    tool_heavy: bool = False
    phrasing: str = "templated"

    def payload(self) -> list[dict[str, Any]] | dict[str, Any]:
        """What the CLI writes: the message list (OpenAI) or ``{system, messages}`` (Anthropic)."""
        if self.format == "anthropic":
            return {"system": self.system, "messages": self.messages}
        return self.messages

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.payload(), ensure_ascii=False, indent=indent)

    def facts_json(self) -> list[dict[str, Any]]:
        return [asdict(f) for f in self.facts]

    def facts_in(self, indices: Collection[int]) -> list[PlantedFact]:
        wanted = set(indices)
        return [f for f in self.facts if f.message_index in wanted]


# ------------------------------------------------------------------------------------------------
# Small helpers
# ------------------------------------------------------------------------------------------------

_ALNUM = string.ascii_letters + string.digits


def _hex(rng: random.Random, n: int) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def _uuid(rng: random.Random) -> str:
    h = _hex(rng, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[rng.randrange(4)]}{h[17:20]}-{h[20:32]}"


def _lognormal_size(rng: random.Random, median: float, sigma: float, lo: int, hi: int) -> int:
    return int(min(hi, max(lo, median * math.exp(rng.gauss(0.0, sigma)))))


def _fill(rng: random.Random, pool: Sequence[str], size: int, sep: str = "\n") -> str:
    """Lines drawn from ``pool`` until about ``size`` characters (cut at a line boundary)."""
    if size <= 0 or not pool:
        return ""
    avg = max(8, sum(len(p) for p in pool[:50]) // min(len(pool), 50) + len(sep))
    out: list[str] = []
    total = 0
    while total < size:
        batch = rng.choices(pool, k=max(1, (size - total) // avg + 1))
        for line in batch:
            out.append(line)
            total += len(line) + len(sep)
            if total >= size:
                break
    return sep.join(out)


def _title(text: str) -> str:
    return text[:1].upper() + text[1:]


def _slug(text: str) -> str:
    keep = [c.lower() if c.isalnum() else "-" for c in text]
    return "-".join(p for p in "".join(keep).split("-") if p)


# ------------------------------------------------------------------------------------------------
# Images: real PNG files (valid signature, IHDR, IDAT, IEND) of chosen dimensions
# ------------------------------------------------------------------------------------------------

IMAGE_SIZES: tuple[tuple[int, int], ...] = (
    (1280, 800),
    (1920, 1080),
    (2560, 1440),
    (390, 844),
    (800, 600),
    (3024, 1964),
    (64, 64),
    (512, 512),
    (1440, 900),
    (1024, 4096),
)


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


@lru_cache(maxsize=32)
def blank_png_base64(width: int, height: int) -> str:
    """A valid 1-bit grayscale PNG of ``width`` x ``height`` (small payload, large dimensions)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    row = b"\x00" + b"\xff" * ((width + 7) // 8)
    png = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
    png += _png_chunk(b"IDAT", zlib.compress(row * height, 9)) + _png_chunk(b"IEND", b"")
    return base64.b64encode(png).decode("ascii")


def noisy_png_base64(rng: random.Random, width: int, height: int) -> str:
    """A valid 8-bit grayscale PNG of random pixels: a payload as large as a real screenshot."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    raw = b"".join(b"\x00" + rng.randbytes(width) for _ in range(height))
    png = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
    png += _png_chunk(b"IDAT", zlib.compress(raw, 1)) + _png_chunk(b"IEND", b"")
    return base64.b64encode(png).decode("ascii")


@dataclass(frozen=True)
class _Image:
    width: int
    height: int
    data: str  # base64 PNG


def _image(rng: random.Random, *, big: bool = False) -> _Image:
    if big:
        w, h = rng.choice(((480, 320), (640, 400), (400, 300)))
        return _Image(w, h, noisy_png_base64(rng, w, h))
    w, h = rng.choice(IMAGE_SIZES)
    return _Image(w, h, blank_png_base64(w, h))


# ------------------------------------------------------------------------------------------------
# Vocabulary
# ------------------------------------------------------------------------------------------------

# Background code base (planted paths use a disjoint vocabulary, see _FactMaker).
_PKGS = (
    *("billing", "ledger", "auth", "api", "worker", "scheduler", "notifications", "storage"),
    *("search", "reports", "users", "payments", "inventory", "gateway", "metrics"),
)
_MODS = (
    *("models", "service", "handlers", "client", "utils", "schemas", "routes", "tasks", "config"),
    *("errors", "repository", "serializers", "validators", "cache", "events"),
)
_VERBS = (
    *("get", "load", "apply", "build", "parse", "validate", "compute", "sync", "fetch", "render"),
    *("normalize", "merge", "flush", "resolve", "dispatch", "retry", "schedule", "emit", "persist", "refresh"),
)
_NOUNS = (
    *("invoice", "line_item", "customer", "account", "payload", "batch", "token", "session", "record"),
    *("entry", "order", "refund", "balance", "event", "cursor", "page", "report", "limit", "window", "schema"),
)
_CONDS = (
    *("when_empty", "with_credit_note", "on_retry", "rounding", "handles_unicode", "after_timeout"),
    *("with_zero_amount", "for_new_customer", "concurrently", "twice", "with_missing_currency", "on_conflict"),
)
_TYPES = ("int", "str", "bool", "Decimal", "dict[str, Any]", "list[str]", "None", "datetime", "UUID")
_EXC = (
    "ValueError",
    "KeyError",
    "TypeError",
    "AttributeError",
    "RuntimeError",
    "IndexError",
    "ZeroDivisionError",
    "TimeoutError",
)
_CJK_COMMENTS = (
    "# 注意: 金额必须使用 Decimal, 不能用 float",
    "# TODO(王): 这里的重试逻辑需要加上指数退避",
    "# この関数はスレッドセーフではありません",
    "# 一時的な回避策: 上流のバグが直るまで残す",
    "# 이 값은 캐시에서 읽습니다",
    "# 兼容旧版本的 API 返回格式",
)
_LOG_LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARNING", "ERROR")

# Job search
_COMPANIES = (
    *("Contoso", "Northwind Traders", "Fabrikam", "Tailspin Toys", "Wide World Importers", "Adventure Works"),
    *("Litware", "Proseware", "Woodgrove Bank", "Blue Yonder Airlines", "Coho Vineyard", "Lucerne Publishing"),
    *("Trey Research", "Alpine Ski House", "Fourth Coffee", "Humongous Insurance", "Relecloud", "VanArsdel"),
    *("Wingtip Toys", "A. Datum", "Consolidated Messenger", "City Power & Light", "Nod Publishers"),
    *("Hyperion Grid", "Kestrel Analytics", "Halcyon Payments", "Brightwater Energy", "Sable Logistics"),
    *("Quill & Ledger", "Pennine Digital", "Ironbridge Health", "Mersey Cloud", "Tessellate Labs"),
)
_JOB_TITLES = (
    *("Senior .NET Developer", "Lead .NET Engineer", "C# Architect", "Senior C# Developer"),
    *("Senior Software Engineer (.NET)", "Principal .NET Engineer", "Azure .NET Developer", "Backend Engineer (C#)"),
    *(".NET Tech Lead", "Senior Full Stack Developer (.NET/React)", "Senior Platform Engineer (.NET, Azure)"),
)
_LOCATIONS = (
    *("Remote (UK)", "Remote (UK)", "Remote (UK)", "Sheffield (hybrid)", "Leeds (hybrid)", "Manchester (hybrid)"),
    *("London (hybrid, 2 days)", "Nottingham (remote)", "Berlin (remote, EU)", "Tokyo (remote)"),
)
_INDUSTRIES = (
    *("fintech", "insurance", "healthcare", "logistics", "energy", "retail", "gambling", "crypto", "defence"),
    *("publishing", "travel", "public sector", "telecoms", "education"),
)
_SKILLS = (
    *("C# 12", ".NET 8", "ASP.NET Core", "Azure Functions", "Azure Service Bus", "AKS", "SQL Server"),
    *("PostgreSQL", "Entity Framework Core", "event-driven design", "Kafka", "Terraform", "Bicep", "React"),
    *("gRPC", "Docker", "GitHub Actions", "Azure DevOps", "Redis", "Cosmos DB", "domain-driven design"),
)

# Research
_TOPICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("vector database recall at 10M vectors", ("HNSW", "IVF-PQ", "DiskANN", "ScaNN", "recall@10", "ef_search")),
    ("CRDT performance in collaborative editors", ("Yjs", "Automerge", "RGA", "tombstones", "merge time", "OT")),
    ("KV-cache quantization for LLM inference", ("INT8", "FP8", "KIVI", "perplexity", "throughput", "paged attention")),
    ("heat pump efficiency in cold climates", ("COP", "SCOP", "R290", "defrost cycles", "flow temperature", "kWh")),
    ("Postgres logical replication lag", ("WAL", "pgoutput", "replication slot", "LSN", "apply worker", "lag")),
    ("battery degradation in grid storage", ("LFP", "NMC", "cycle life", "depth of discharge", "calendar ageing")),
)
_SITES = (
    *("blog.acolyte.dev", "engineering.kestrel.io", "www.vldb.org", "dl.acm.org", "www.usenix.org"),
    *("zhuanlan.zhihu.com", "qiita.com", "news.ycombinator.com", "www.energy-institute.org", "pgbench.example.org"),
)

_CJK_USER = (
    "请顺便检查一下这个模块的类型注解。",
    "这个问题在生产环境里每天都会出现几次, 请优先处理。",
    "先别改数据库结构, 只改代码。",
    "テストが通ったら教えてください。",
    "このエラーは昨日から出ています。",
    "結果は日本語で簡単にまとめてください。",
    "麻烦把结论写得简短一点。",
)
_CJK_PROSE = (
    "在一千万向量的规模下, HNSW 的召回率明显高于 IVF-PQ, 但内存占用也更大。",
    "我们在三台机器上重复了实验, 每次都先预热缓存。",
    "结果表明, 参数调整对延迟的影响远大于对召回率的影响。",
    "该方法的主要局限在于构建索引的时间较长。",
    "作者没有公开完整的测试脚本, 因此结果难以复现。",
    "本文比较了五种常见方案在真实负载下的表现。",
    "実験ではデータセットを三つに分けて評価しました。",
    "このベンチマークはウォームアップなしで測定されています。",
    "性能の差は主にメモリ帯域によるものと考えられます。",
)
_DE_PROSE = (
    "Wir suchen eine erfahrene .NET-Entwicklerin oder einen erfahrenen .NET-Entwickler für unser Plattform-Team.",
    "Du arbeitest eng mit Produktmanagement und Architektur zusammen.",
    "Remote-Arbeit innerhalb der EU ist möglich; ein Teamtreffen pro Quartal findet in Berlin statt.",
    "Wir bieten 30 Urlaubstage, ein Weiterbildungsbudget und flexible Arbeitszeiten.",
    "Sehr gute Kenntnisse in C#, ASP.NET Core und Azure setzen wir voraus.",
)
_FR_PROSE = (
    "Nous recherchons un développeur .NET senior pour renforcer notre équipe produit.",
    "Vous participerez aux choix d'architecture et à la revue de code.",
    "Le poste est ouvert au télétravail complet depuis le Royaume-Uni ou la France.",
    "Une bonne maîtrise de l'anglais est indispensable; le français est un plus.",
)
_JA_PROSE = (
    "当社はリモートで働けるシニア .NET エンジニアを募集しています。",
    "英語でのコミュニケーションが可能な方を歓迎します。",
    "Azure 上のマイクロサービス開発の経験がある方を優遇します。",
    "勤務時間は英国時間に合わせることができます。",
)


# ------------------------------------------------------------------------------------------------
# Planted fact values: unique, distinctive, never produced by the background generators
# ------------------------------------------------------------------------------------------------

_P_ROOTS = ("services", "libs", "apps", "packages", "internal", "platform")
_P_AREAS = (
    *("settlement", "dunning", "fx", "payouts", "ratelimit", "webhooks", "backfill", "ingest"),
    *("rollup", "quota", "retention", "audit", "refunds", "pricing", "tax", "sharding"),
)
_P_SUBS = ("core", "adapters", "jobs", "domain", "infra", "policies", "codec", "sinks")
_P_LEAVES = (
    *("watermark", "token_bucket", "outbox", "late_events", "batch_window", "idempotency", "checkpoint"),
    *("cursor_codec", "merge_policy", "sweeper", "ledger_sync", "fanout", "spill_buffer", "handoff", "jitter"),
)
_P_EXTS = ("py", "py", "py", "ts", "go", "yaml", "sql", "rs", "toml")
_P_PEOPLE = ("Priya", "Tomasz", "Aiko", "Marcus", "Lena", "Oluwaseun", "Hana", "Diego")
_P_ENVS = ("staging-2", "staging-eu", "preprod", "perf-lab", "canary-1", "qa-blue")
_P_ORGS = ("acme-platform", "ledgerworks", "northwind-eng", "kestrel-io")


class _FactMaker:
    """Makes the value of a planted fact for a category and a scenario flavour (unique per session)."""

    def __init__(self, rng: random.Random, phrasing: str = "templated") -> None:
        self.rng = rng
        self.used: set[str] = set()
        self.phrasing = phrasing

    def _worded(self, templated: str, paraphrased: str) -> str:
        """The value as this session words it: a fact whose templated value itself holds a cue word
        (a constraint's "Never ...", a decision's "instead of") has a paraphrased value too; both are
        built from the same random draws, so the templated sessions do not change."""
        return paraphrased if self.phrasing == "paraphrased" else templated

    def make(self, category: str, flavor: str) -> tuple[str, str]:
        maker: Callable[[], tuple[str, str]] = getattr(self, f"_{flavor}_{category}", None) or getattr(
            self, f"_coding_{category}"
        )
        for _ in range(60):
            value, detail = maker()
            if value not in self.used:
                self.used.add(value)
                return value, detail
        value, detail = maker()
        value = f"{value}-{len(self.used)}"
        self.used.add(value)
        return value, detail

    # --- coding (also the default) ---
    def _coding_path(self) -> tuple[str, str]:
        r = self.rng
        return (
            f"{r.choice(_P_ROOTS)}/{r.choice(_P_AREAS)}/{r.choice(_P_SUBS)}/{r.choice(_P_LEAVES)}.{r.choice(_P_EXTS)}",
            "",
        )

    def _coding_url(self) -> tuple[str, str]:
        r = self.rng
        org, area = r.choice(_P_ORGS), r.choice(_P_AREAS)
        return r.choice(
            (
                f"https://github.com/{org}/{area}-service/issues/{r.randint(100, 9999)}",
                f"https://github.com/{org}/{area}-service/pull/{r.randint(100, 9999)}",
                f"https://ci.{org}.dev/{area}/builds/{r.randint(10000, 99999)}",
                f"https://sentry.io/organizations/{org}/issues/{r.randint(10**9, 10**10 - 1)}/",
                f"https://docs.{org}.dev/runbooks/{area}/{r.choice(_P_LEAVES).replace('_', '-')}"
                f"#step-{r.randint(2, 9)}",
            )
        ), ""

    def _coding_identifier(self) -> tuple[str, str]:
        r = self.rng
        kind = r.choice(("commit", "commit", "ticket", "request id", "trace id", "migration"))
        if kind == "commit":
            return (_hex(r, 40) if r.random() < 0.5 else _hex(r, 12)), kind
        if kind == "ticket":
            return f"{r.choice(('SETL', 'DUN', 'FXR', 'OPS', 'INC', 'PLAT'))}-{r.randint(100, 99999)}", kind
        if kind == "migration":
            return _hex(r, 12), "alembic revision"
        return _uuid(r), kind

    def _coding_error(self) -> tuple[str, str]:
        r = self.rng
        n, area, leaf = r.randint(1000, 99999), r.choice(_P_AREAS), r.choice(_P_LEAVES)
        return r.choice(
            (
                f"ValueError: settlement batch {n} is out of balance by {r.randint(1, 999) / 100:.2f} EUR",
                f"KeyError: '{area}_{leaf}_{n}'",
                f"TimeoutError: lock on {area} partition {n} not acquired after {r.randint(5, 120)} s",
                f'psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "{area}_{leaf}_key"'
                f" (id={n})",
                f"AssertionError: expected {n} {area} webhook deliveries, got {n - r.randint(1, 40)}",
                f"RuntimeError: {leaf} watermark regressed from {n} to {n - r.randint(1, 500)}",
                f"OverflowError: {leaf} refill of {n} exceeds capacity {r.randint(100, 999)}",
            )
        ), ""

    def _coding_number(self) -> tuple[str, str]:
        r = self.rng
        label, value = r.choice(
            (
                ("p95 latency", f"{r.uniform(5, 900):.1f} ms"),
                ("peak RSS", f"{r.uniform(80, 4000):,.1f} MB"),
                ("throughput", f"{r.randint(800, 90000):,} req/s"),
                ("line coverage", f"{r.uniform(50, 99):.1f}%"),
                ("cold start", f"{r.uniform(0.2, 9):.2f} s"),
                ("payload size", f"{r.uniform(1, 900):.1f} KiB"),
                ("error rate", f"{r.uniform(0.01, 9):.2f}%"),
                ("queue depth", f"{r.randint(1000, 900000):,} messages"),
            )
        )
        return value, label

    def _coding_command(self) -> tuple[str, str]:
        r = self.rng
        area, leaf = r.choice(_P_AREAS), r.choice(_P_LEAVES)
        return r.choice(
            (
                f"pytest tests/{area}/test_{leaf}.py -k '{r.choice(_P_LEAVES)} and not slow' -x -q",
                f"alembic upgrade {_hex(r, 12)}",
                f"kubectl -n {area}-{r.choice(_P_ENVS)} rollout restart deployment/{area}-{leaf.replace('_', '-')}",
                f"make bench ITER={r.randint(3, 500)} FILTER={leaf}",
                f"git rebase --onto main {_hex(r, 9)} fix/{area}-{leaf.replace('_', '-')}",
                f"python -m {area}.tools.{leaf} --dry-run --since 2025-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
                f"docker compose -f deploy/compose.{r.choice(_P_ENVS)}.yml up -d {area}-{leaf.replace('_', '-')}",
            )
        ), ""

    def _coding_decision(self) -> tuple[str, str]:
        r = self.rng
        area, leaf, sub = r.choice(_P_AREAS), r.choice(_P_LEAVES), r.choice(_P_SUBS)
        other = r.choice([a for a in _P_AREAS if a != area])
        return r.choice(
            (
                (
                    f"move the {leaf.replace('_', ' ')} logic from {area}/{sub} into {other}",
                    f"{other} already owns the {leaf.replace('_', ' ')} lifecycle",
                ),
                (
                    f"keep {leaf.replace('_', '-')}-client pinned at 2.{r.randint(0, 30)}.{r.randint(0, 9)}",
                    f"version 3 changes how {area} retries are counted",
                ),
                (
                    f"drop the in-process cache in {area}.{leaf}",
                    f"it served stale {area} data for up to {r.randint(2, 90)} minutes after a deploy",
                ),
                (
                    f"use a {r.choice(('bounded queue', 'token bucket', 'sliding window', 'lease'))} for {area} {leaf}",
                    f"the current design drops events when {area} spikes above {r.randint(2, 50)}k per minute",
                ),
                (
                    f"split the {area} {leaf.replace('_', ' ')} migration into {r.randint(2, 6)} steps",
                    f"the {area} table is too large to lock in one transaction",
                ),
            )
        )

    def _coding_constraint(self) -> tuple[str, str]:
        r = self.rng
        area, leaf = r.choice(_P_AREAS), r.choice(_P_LEAVES)
        w = self._worded
        month, root, other_root = f"{r.randint(1, 12):02d}", r.choice(_P_ROOTS), r.choice(_P_ROOTS)
        env, check, branch = (
            r.choice(_P_ENVS),
            r.choice(("mypy", "bandit", "license", "coverage")),
            leaf.replace("_", "-"),
        )
        return r.choice(
            (
                w(f"Never push directly to release/2025.{month}", f"release/2025.{month} takes no direct pushes"),
                w(
                    f"Do not modify anything under {root}/{area}/migrations/",
                    f"{root}/{area}/migrations/ is off limits for edits",
                ),
                w(
                    f"Keep the public signature of {area}.{leaf}() unchanged",
                    f"the public signature of {area}.{leaf}() stays exactly as it is",
                ),
                w(
                    f"Don't add new dependencies to {other_root}/{area}/pyproject.toml",
                    f"{other_root}/{area}/pyproject.toml gets zero new dependencies",
                ),
                w(
                    f"Never run migrations against the {env} database",
                    f"the {env} database is off limits for migrations",
                ),
                w(f"Don't disable the {check} check for {area}", f"the {check} check for {area} stays switched on"),
                w(f"Never force-push to {area}/{branch}", f"{area}/{branch} is off limits for force-pushes"),
            )
        ), ""

    def _coding_next_step(self) -> tuple[str, str]:
        r = self.rng
        area, leaf = r.choice(_P_AREAS), r.choice(_P_LEAVES)
        return r.choice(
            (
                f"re-run the {area} integration suite against {r.choice(_P_ENVS)} "
                + self._worded("once the fixture fix is merged", "when the fixture fix lands"),
                f"open a PR from fix/{area}-{leaf.replace('_', '-')} and ask {r.choice(_P_PEOPLE)} for review",
                f"backfill the {area}_{leaf} table for 2025-{r.randint(1, 12):02d}",
                f"profile {area}.{leaf}() with {r.randint(10, 900) * 1000:,} events",
            )
        ), ""

    # --- job search ---
    def _job_search_path(self) -> tuple[str, str]:
        r = self.rng
        company, title = _slug(r.choice(_COMPANIES)), _slug(r.choice(_JOB_TITLES))
        date = f"2026-{r.randint(1, 6):02d}-{r.randint(1, 28):02d}"
        return r.choice(
            (
                f"job-search/shortlist/{date}/{company}-{title}.md",
                f"job-search/cover-letters/drafts/{company}-{title}-v{r.randint(2, 5)}.docx",
                f"job-search/archive/{date}/rejected-{company}.md",
            )
        ), ""

    def _job_search_url(self) -> tuple[str, str]:
        r = self.rng
        company = _slug(r.choice(_COMPANIES))
        return r.choice(
            (
                f"https://careers.{company.replace('-', '')}.com/jobs/{r.randint(1000, 99999)}-"
                f"{_slug(r.choice(_JOB_TITLES))}",
                f"https://www.glassdoor.co.uk/Reviews/{company}-Reviews-E{r.randint(10000, 9999999)}.htm",
                f"https://www.jobserve.com/gb/en/job/{_hex(r, 16).upper()}/",
            )
        ), ""

    def _job_search_identifier(self) -> tuple[str, str]:
        r = self.rng
        kind = r.choice(("application id", "Gmail message id", "JobServe reference", "recruiter ticket"))
        if kind == "application id":
            return _uuid(r), kind
        if kind == "Gmail message id":
            return _hex(r, 16), kind
        if kind == "JobServe reference":
            return f"JSR{r.randint(100000, 999999)}{r.choice(string.ascii_uppercase)}", kind
        return f"REQ-{r.randint(10000, 99999)}", kind

    def _job_search_error(self) -> tuple[str, str]:
        r = self.rng
        return r.choice(
            (
                f"linkedin_job_detail failed: HTTP 429 Too Many Requests (retry after {r.randint(11, 299)} s)",
                f"gmail_read failed: message {_hex(r, 16)} not found (404)",
                f"LinkedInSessionError: session expired, re-authentication required (code {r.randint(4000, 4999)})",
                f"write_file failed: [Errno 13] Permission denied: 'job-search/locked-{r.randint(100, 999)}.md'",
            )
        ), ""

    def _job_search_number(self) -> tuple[str, str]:
        r = self.rng
        label, value = r.choice(
            (
                ("base salary", f"£{r.randint(60, 130)},{r.choice(('250', '500', '750'))}"),
                ("weighted score", f"{r.randint(50, 95) / 10 + r.choice((0.05, 0.15, 0.25, 0.35)):.2f}/10"),
                ("commute", f"{r.randint(21, 99)} minutes by train"),
                ("applicant count", f"{r.randint(101, 999)} applicants"),
            )
        )
        return value, label

    def _job_search_command(self) -> tuple[str, str]:
        r = self.rng
        date = f"2026-{r.randint(1, 6):02d}-{r.randint(1, 28):02d}"
        return r.choice(
            (
                f"python scripts/score_jobs.py --date {date} --min-score {r.randint(60, 80) / 10:.1f}",
                f"grep -ril '{r.choice(_COMPANIES)}' job-search/shortlist/{date}/",
                f"python scripts/dedupe.py --since {date} --source jobserve",
            )
        ), ""

    def _job_search_decision(self) -> tuple[str, str]:
        r = self.rng
        a, b = r.sample(_COMPANIES, 2)
        title = r.choice(_JOB_TITLES)
        return r.choice(
            (
                (f"rank the {a} {title} role above {b}", f"{a} pays more and is fully remote"),
                (
                    f"drop the {a} {title} role from the shortlist",
                    r.choice(
                        (
                            "it needs SC clearance",
                            "it is a crypto exchange",
                            "it wants four office days a week",
                            f"the posting is {r.randint(9, 40)} days old",
                        )
                    ),
                ),
                (f"treat the {a} contract as inside IR35", "the contract names a line manager and fixed hours"),
                (
                    self._worded(f"score {a}'s stack 6/10 instead of 8/10", f"score {a}'s stack 6/10, down from 8/10"),
                    "the advert lists .NET Framework 4.8, not .NET 8",
                ),
            )
        )

    def _job_search_constraint(self) -> tuple[str, str]:
        r = self.rng
        w = self._worded
        company, days, industry = r.choice(_COMPANIES), r.randint(1, 4), r.choice(_INDUSTRIES)
        age, banned = r.randint(3, 14), r.choice(_COMPANIES)
        return r.choice(
            (
                w(
                    f"Don't contact {company}'s recruiters on my behalf",
                    f"{company}'s recruiters hear from me directly, not from you",
                ),
                w(
                    f"Skip anything that needs more than {days} office days a month",
                    f"over {days} office days a month rules a role out",
                ),
                w(f"Exclude {industry} companies from the results", f"{industry} companies stay out of the results"),
                w(
                    f"Only include roles posted in the last {age} days",
                    f"roles posted over {age} days ago are out of scope",
                ),
                w(f"Never apply to {banned} again", f"{banned} is off my list for good"),
            )
        ), ""

    def _job_search_next_step(self) -> tuple[str, str]:
        r = self.rng
        return r.choice(
            (
                f"score the {r.randint(3, 19)} JobServe roles from the 2026-{r.randint(1, 6):02d}-"
                f"{r.randint(1, 28):02d} alert",
                f"check {r.choice(_COMPANIES)}'s Glassdoor reviews before shortlisting it",
                f"add the {r.choice(_COMPANIES)} {r.choice(_JOB_TITLES)} role to the report",
            )
        ), ""

    # --- research ---
    def _research_path(self) -> tuple[str, str]:
        r = self.rng
        topic = _slug(r.choice(_TOPICS)[0])
        return r.choice(
            (
                f"notes/{topic}/{r.choice(('sources', 'open-questions', 'numbers', 'draft'))}-{r.randint(2, 99)}.md",
                f"papers/{r.randint(2201, 2412)}.{r.randint(10000, 29999)}.pdf",
                f"data/{topic}/measurements-{r.randint(2019, 2025)}-{r.choice(('q1', 'q2', 'q3', 'q4'))}.csv",
            )
        ), ""

    def _research_url(self) -> tuple[str, str]:
        r = self.rng
        return r.choice(
            (
                f"https://arxiv.org/abs/{r.randint(2201, 2412)}.{r.randint(10000, 29999)}",
                f"https://doi.org/10.{r.randint(1000, 9999)}/{_slug(r.choice(_TOPICS)[0])[:24]}.{r.randint(100, 9999)}",
                f"https://{r.choice(_SITES)}/posts/{_slug(r.choice(_TOPICS)[0])}-{r.randint(100, 9999)}",
            )
        ), ""

    def _research_identifier(self) -> tuple[str, str]:
        r = self.rng
        kind = r.choice(("arXiv id", "DOI", "dataset revision", "ISBN"))
        if kind == "arXiv id":
            return f"{r.randint(2201, 2412)}.{r.randint(10000, 29999)}v{r.randint(1, 4)}", kind
        if kind == "DOI":
            return f"10.{r.randint(1000, 9999)}/{r.randint(1000000, 9999999)}.{r.randint(1000000, 9999999)}", kind
        if kind == "dataset revision":
            return _hex(r, 40), kind
        return f"978-{r.randint(0, 1)}-{r.randint(100, 999)}-{r.randint(10000, 99999)}-{r.randint(0, 9)}", kind

    def _research_error(self) -> tuple[str, str]:
        r = self.rng
        return r.choice(
            (
                f"read_pdf failed: PDF object {r.randint(10, 9999)} is encrypted",
                f"TimeoutError: page did not finish loading after {r.randint(15, 90)}.{r.randint(0, 9)} s",
                f"web_fetch failed: 403 Forbidden (cf-ray {_hex(r, 16)}-LHR)",
            )
        ), ""

    def _research_number(self) -> tuple[str, str]:
        r = self.rng
        label, value = r.choice(
            (
                ("recall@10", f"0.{r.randint(700, 999)}{r.randint(1, 9)}"),
                ("p99 latency", f"{r.uniform(0.5, 90):.2f} ms"),
                ("index size", f"{r.uniform(1, 400):.1f} GB"),
                ("throughput", f"{r.randint(1000, 90000):,} QPS"),
                ("seasonal COP", f"COP {r.uniform(1.8, 4.9):.2f}"),
                ("energy use", f"{r.randint(1000, 20000):,} kWh per year"),
            )
        )
        return value, label

    def _research_command(self) -> tuple[str, str]:
        r = self.rng
        return r.choice(
            (
                f"python analysis/compare.py --metric recall@{r.choice((1, 10, 100))} --dataset "
                f"{r.choice(('sift-10m', 'deep-10m', 'msmarco-v2'))} --k {r.randint(10, 400)}",
                f"curl -s 'https://api.openalex.org/works?search={_slug(r.choice(_TOPICS)[0])}&per_page="
                f"{r.randint(20, 200)}' | jq '.results | length'",
                f"pdftotext -layout papers/{r.randint(2201, 2412)}.{r.randint(10000, 29999)}.pdf -",
            )
        ), ""

    def _research_decision(self) -> tuple[str, str]:
        r = self.rng
        topic, terms = r.choice(_TOPICS)
        a, b = r.sample(terms, 2)
        year = r.randint(2019, 2025)
        return r.choice(
            (
                (
                    self._worded(
                        f"compare {a} and {b} only on the {year} benchmarks",
                        f"compare {a} and {b} on the {year} benchmarks alone",
                    ),
                    "older runs used other hardware",
                ),
                (f"exclude the vendor's {a} numbers", "they were measured without warm-up"),
                (f"report {a} as the primary metric for {topic}", f"{b} is not reported consistently"),
            )
        )

    def _research_constraint(self) -> tuple[str, str]:
        r = self.rng
        w = self._worded
        year, site, words, subject = r.randint(2015, 2023), r.choice(_SITES), r.randint(8, 30) * 100, r.choice(_TOPICS)
        return r.choice(
            (
                w(f"Ignore anything published before {year}", f"sources published before {year} are out of scope"),
                w(f"Don't use {site} as a source", f"{site} is not a usable source here"),
                w(f"Keep the final report under {words} words", f"the final report is capped at {words} words"),
                w(
                    f"Cite a primary source for every number about {subject[1][0]}",
                    f"numbers about {subject[1][0]} come with a primary source citation",
                ),
            )
        ), ""

    def _research_next_step(self) -> tuple[str, str]:
        r = self.rng
        topic, terms = r.choice(_TOPICS)
        return r.choice(
            (
                f"fetch the {r.choice(('VLDB', 'SIGMOD', 'OSDI', 'NeurIPS'))} {r.randint(2019, 2025)} paper on "
                f"{r.choice(terms)} and check its results table",
                f"rebuild the comparison table for {topic} with {r.randint(3, 9)} sources",
            )
        ), ""


# ------------------------------------------------------------------------------------------------
# Paraphrased facts: the same kinds of fact, worded without the classifier's cue words
# ------------------------------------------------------------------------------------------------
#
# Held out: these phrasings are for measuring only. They must never be used to tune the offline
# summarizer's classifier (its cue lists, patterns or tests), or the measure they give is void.
# The templated forms above speak the classifier's language ("Decision: I'll ..., because ...",
# "Important: ...", "Next step: ..."); these say the same with none of :data:`CUE_WORDS`: a choice
# with its reason, a rule stated as a fact about the world, a pending task as an item on a list.
# The sentence forms are below; a value that itself holds a cue word is worded both ways by its
# maker above (:meth:`_FactMaker._worded`).

CUE_WORDS: tuple[str, ...] = (
    "decision",
    "decided",
    "decide",
    "because",
    "since",
    "the reason",
    "i'll",
    "i will",
    "i'm going to",
    "we'll",
    "let's",
    "next step",
    "next,",
    "then",
    "after this",
    "after that",
    "afterwards",
    "important",
    "rule",
    "must",
    "never",
    "always",
    "only",
    "don't",
    "do not",
    "should",
    "todo",
    "pending",
    "remaining",
    "instead of",
    "rather than",
    "please",
    "from now on",
    "going forward",
    "not allowed",
    "required",
)
"""Words and phrases the templated facts and the classifier's cues use: no paraphrased sentence
that plants a decision, constraint or next step holds one (as a whole word, any case)."""


_USER_TPL_PLAIN: dict[str, tuple[str, ...]] = {
    "decision": ("My call: {v}, seeing that {d}.", "Better to {v}; {d}."),
    "constraint": ("For the record, {v}.", "Heads-up: {v}.", "Worth knowing: {v}."),
    "next_step": ("Queued for you behind this: {v}.", "On the list for when this lands: {v}."),
}
_ASSISTANT_TPL_PLAIN: dict[str, tuple[str, ...]] = {
    "decision": (
        "Weighing it up, the better option is to {v}: {d}.",
        "Having compared the options, the way forward is to {v}. What tipped it: {d}.",
    ),
    "next_step": ("Still open on my list: {v}.", "Queued up behind this fix: {v}."),
}


# ------------------------------------------------------------------------------------------------
# Planting: a schedule of facts spread over the whole session, injected where a message can hold them
# ------------------------------------------------------------------------------------------------

_HOSTS: dict[str, frozenset[str]] = {
    "user": frozenset(CATEGORIES),
    "assistant": frozenset(c for c in CATEGORIES if c != "constraint"),
    "result": frozenset(("path", "url", "identifier", "error", "number")),
}
_USER_TPL: dict[str, tuple[str, ...]] = {
    "path": (
        "The problem is probably somewhere in {v}.",
        "Please also have a look at {v} while you're in there.",
        "I touched {v} last week, so check that too.",
    ),
    "url": ("Background is here: {v}", "The details are at {v} if you need them.", "Someone reported this at {v}"),
    "identifier": ("This is tracked as {d} {v}.", "For reference, the {d} is {v}.", "Use {d} {v} as the baseline."),
    "error": ("When I try it I get `{v}`.", "The logs from this morning say: {v}", "It fails with {v}"),
    "number": ("The {d} we need is {v}.", "Last time the {d} was {v}, so use that as the baseline."),
    "command": ("Run `{v}` before you finish.", "You can reproduce it with `{v}`."),
    "decision": ("Let's {v}, because {d}.", "I've decided to {v}, since {d}."),
    "constraint": ("{v}.", "Important: {v}.", "One rule for this: {v}."),
    "next_step": ("When that's done, {v}.", "After this, please {v}."),
}
_ASSISTANT_TPL: dict[str, tuple[str, ...]] = {
    "path": ("The relevant part is in {v}.", "I'll also need to change {v}.", "Found it: {v} handles this."),
    "url": ("According to {v}, this is expected.", "Source: {v}"),
    "identifier": ("That is {d} {v}.", "Noted the {d}: {v}."),
    "error": ("The root cause is `{v}`.", "It fails with `{v}`."),
    "number": ("The {d} is now {v}.", "Measured {d}: {v}."),
    "command": ("I'll run `{v}` to confirm.", "To reproduce: `{v}`."),
    "decision": ("Decision: I'll {v}, because {d}.", "I'm going to {v}; the reason is that {d}."),
    "next_step": ("Next step: {v}.", "Next, I will {v}."),
}
_RESULT_TPL: dict[str, tuple[str, ...]] = {
    "path": ("saved {v}", "  -> {v}", "file: {v}", "\tmodified:   {v}"),
    "url": ("See also: {v}", "link: {v}", "  {v}"),
    "identifier": ("{d}: {v}", "{d} {v}"),
    "error": ("{v}", "ERROR {v}", "E   {v}"),
    "number": ("{d}: {v}", "{d} = {v}"),
}


class _Planter:
    def __init__(self, rng: random.Random, n: int, maker: _FactMaker) -> None:
        self.rng = rng
        self.maker = maker
        self.plain = maker.phrasing == "paraphrased"
        self.flavor = "coding"
        self.facts: list[PlantedFact] = []
        self.queues: dict[str, deque[int]] = {}
        for category in CATEGORIES:
            count = max(2, round(n * _FACT_RATES[category]))
            self.queues[category] = deque(int((i + rng.random()) * n / count) for i in range(count))

    def _due(self, host: str, index: int, limit: int) -> list[str]:
        out: list[str] = []
        for category in CATEGORIES:
            queue = self.queues[category]
            if queue and queue[0] <= index and category in _HOSTS[host]:
                queue.popleft()
                out.append(category)
                if len(out) >= limit:
                    break
        return out

    def _new(self, category: str, index: int) -> tuple[str, str]:
        value, detail = self.maker.make(category, self.flavor)
        self.facts.append(PlantedFact(category, value, index, detail))
        return value, detail

    def text(self, host: str, text: str, index: int) -> str:
        """``text`` with the facts due at ``index`` woven in as sentences (user or assistant)."""
        templates = _USER_TPL if host == "user" else _ASSISTANT_TPL
        plain = _USER_TPL_PLAIN if host == "user" else _ASSISTANT_TPL_PLAIN
        for category in self._due(host, index, 2):
            value, detail = self._new(category, index)
            forms = plain[category] if self.plain and category in plain else templates[category]
            sentence = self.rng.choice(forms).format(v=value, d=detail)
            if not text:
                text = sentence
            elif self.rng.random() < (0.75 if host == "user" else 0.5):
                text = f"{text.rstrip()} {sentence}"
            else:
                text = f"{sentence} {text}"
        return text

    def result(self, text: str, index: int, limit: int = 1) -> str:
        """``text`` (a tool result) with the facts due at ``index`` as lines at random positions."""
        for category in self._due("result", index, limit):
            value, detail = self._new(category, index)
            line = self.rng.choice(_RESULT_TPL[category]).format(v=value, d=detail)
            if not text:
                text = line
                continue
            cut = text.find("\n", self.rng.randrange(len(text)))
            text = f"{text}\n{line}" if cut < 0 else f"{text[: cut + 1]}{line}\n{text[cut + 1 :]}"
        return text


# ------------------------------------------------------------------------------------------------
# Steps and the writer that turns them into provider messages
# ------------------------------------------------------------------------------------------------


@dataclass
class _Call:
    name: str
    args: dict[str, Any]
    result: str
    is_error: bool = False
    image: _Image | None = None  # shown in the result (Anthropic); OpenAI gets a text note


@dataclass
class _User:
    text: str
    images: list[_Image] = field(default_factory=list)


@dataclass
class _Say:
    text: str


@dataclass
class _Tools:
    calls: list[_Call]
    text: str = ""


Step = _User | _Say | _Tools

_WRAP_UPS = (
    "Done. Let me know what you'd like next.",
    "That's finished; tell me if you want anything else.",
    "All set for now.",
    "Finished. Anything else?",
)
_NUDGES = ("Go ahead.", "Yes, continue.", "OK, carry on.", "Sounds good, go ahead.")
_CLOSING_USER = ("Thanks, let's stop here for today.", "OK, that's enough for now.", "Great, thanks.")


class _Writer:
    def __init__(self, fmt: Format, n: int, rng: random.Random, planter: _Planter, system: str) -> None:
        self.fmt = fmt
        self.n = n
        self.rng = rng
        self.planter = planter
        self.messages: list[dict[str, Any]] = []
        self.last: str | None = None  # "user" (tool results count as user) or "assistant"
        self.call_ids: set[str] = set()
        if fmt == "openai":
            self.messages.append({"role": "system", "content": system})

    @property
    def remaining(self) -> int:
        return self.n - len(self.messages)

    @property
    def index(self) -> int:
        return len(self.messages)

    def emit(self, step: Step) -> None:
        if self.remaining <= 0:
            return
        if isinstance(step, _User):
            self._user(step)
        elif isinstance(step, _Say):
            self._say(step.text)
        else:
            self._tools(step)

    # --- one message each ---
    def _user(self, step: _User) -> None:
        if self.last == "user":
            if self.remaining < 2:
                self._say(self.rng.choice(_WRAP_UPS))
                return
            self._say(self.rng.choice(_WRAP_UPS))
        text = self.planter.text("user", step.text, self.index)
        content: str | list[dict[str, Any]] = text
        if step.images:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
            for image in step.images:
                if self.fmt == "openai":
                    url = f"data:image/png;base64,{image.data}"
                    detail = self.rng.choice(("auto", "auto", "high", "low"))
                    blocks.append({"type": "image_url", "image_url": {"url": url, "detail": detail}})
                else:
                    source = {"type": "base64", "media_type": "image/png", "data": image.data}
                    blocks.append({"type": "image", "source": source})
            content = blocks
        self.messages.append({"role": "user", "content": content})
        self.last = "user"

    def _say(self, text: str) -> None:
        if self.last != "user":
            if self.last is None or self.remaining < 2:
                self._user(_User(self.rng.choice(_CLOSING_USER if self.remaining < 2 else _NUDGES)))
                return
            self._user(_User(self.rng.choice(_NUDGES)))
        text = self.planter.text("assistant", text, self.index)
        self.messages.append({"role": "assistant", "content": text})
        self.last = "assistant"

    def _call_id(self) -> str:
        while True:
            if self.fmt == "openai":
                cid = "call_" + "".join(self.rng.choices(_ALNUM, k=24))
            else:
                cid = "toolu_01" + "".join(self.rng.choices(_ALNUM, k=22))
            if cid not in self.call_ids:
                self.call_ids.add(cid)
                return cid

    def _tools(self, step: _Tools) -> None:
        calls = step.calls
        if self.last != "user":
            if self.remaining < 3:
                self._say(self.rng.choice(_WRAP_UPS))
                return
            self._user(_User(self.rng.choice(_NUDGES)))
        if self.fmt == "openai":
            if self.remaining < 2:
                self._say(self.rng.choice(_WRAP_UPS))
                return
            calls = calls[: self.remaining - 1]
        elif self.remaining < 2:
            self._say(self.rng.choice(_WRAP_UPS))
            return
        text = self.planter.text("assistant", step.text, self.index) if step.text else ""
        ids = [self._call_id() for _ in calls]
        if self.fmt == "openai":
            tool_calls = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.args, ensure_ascii=False)},
                }
                for cid, c in zip(ids, calls, strict=True)
            ]
            self.messages.append({"role": "assistant", "content": text or None, "tool_calls": tool_calls})
            for cid, c in zip(ids, calls, strict=True):
                body = c.result
                if c.image is not None:
                    body += f"\n[screenshot saved: {c.image.width}x{c.image.height} PNG]"
                body = self.planter.result(body, self.index)
                if c.is_error and not body.startswith(("Error", "Exit code")):
                    body = "Error: " + body
                self.messages.append({"role": "tool", "tool_call_id": cid, "content": body})
        else:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            blocks += [
                {"type": "tool_use", "id": cid, "name": c.name, "input": c.args}
                for cid, c in zip(ids, calls, strict=True)
            ]
            self.messages.append({"role": "assistant", "content": blocks})
            index = self.index
            results: list[dict[str, Any]] = []
            budget = 2
            for cid, c in zip(ids, calls, strict=True):
                before = len(self.planter.facts)
                body = self.planter.result(c.result, index, limit=budget) if budget > 0 else c.result
                budget -= len(self.planter.facts) - before
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": cid}
                if c.image is not None:
                    source = {"type": "base64", "media_type": "image/png", "data": c.image.data}
                    block["content"] = [{"type": "text", "text": body}, {"type": "image", "source": source}]
                else:
                    block["content"] = body
                if c.is_error:
                    block["is_error"] = True
                results.append(block)
            self.messages.append({"role": "user", "content": results})
        self.last = "user"


# ------------------------------------------------------------------------------------------------
# Content: a code base, command outputs, job adverts and emails, web pages and papers
# ------------------------------------------------------------------------------------------------


def _ident(rng: random.Random) -> str:
    return f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}"


def _camel(rng: random.Random) -> str:
    noun = rng.choice(_NOUNS).replace("_", " ").title().replace(" ", "")
    return noun + rng.choice(("Service", "Repository", "Client", "Handler", "Config", "Schema", "Policy"))


def _py_block(rng: random.Random) -> list[str]:
    """One realistic-looking Python definition (function, method group, dataclass, constants)."""
    kind = rng.random()
    name, noun = _ident(rng), rng.choice(_NOUNS)
    lines: list[str] = []
    if rng.random() < 0.08:
        lines.append(rng.choice(_CJK_COMMENTS))
    if kind < 0.45:
        args = ", ".join(f"{rng.choice(_NOUNS)}: {rng.choice(_TYPES)}" for _ in range(rng.randint(1, 3)))
        prefix = "async def" if rng.random() < 0.3 else "def"
        lines += [
            f"{prefix} {name}({args}) -> {rng.choice(_TYPES)}:",
            f'    """{_title(name.replace("_", " "))} for the given {noun.replace("_", " ")}."""',
        ]
        for _ in range(rng.randint(2, 10)):
            r = rng.random()
            if r < 0.25:
                lines.append(f"    if {rng.choice(_NOUNS)} is None:")
                lines.append(f'        raise {rng.choice(_EXC)}(f"missing {noun}: {{{rng.choice(_NOUNS)}!r}}")')
            elif r < 0.5:
                lines.append(f"    {rng.choice(_NOUNS)} = {_ident(rng)}({rng.choice(_NOUNS)}, {rng.choice(_NOUNS)})")
            elif r < 0.7:
                lines.append(f"    for item in {rng.choice(_NOUNS)}s:")
                lines.append(f"        total += item.amount * Decimal('{rng.randint(1, 99) / 100:.2f}')")
            elif r < 0.85:
                lines.append(f'    logger.info("{name} done", extra={{"{noun}_id": {noun}.id}})')
            else:
                lines.append(f"    await self._{rng.choice(_NOUNS)}_repo.save({noun})")
        lines.append(f"    return {rng.choice(_NOUNS)}")
    elif kind < 0.7:
        cls = _camel(rng)
        lines += [
            f"class {cls}:",
            f'    """Owns the {noun.replace("_", " ")} lifecycle."""',
            "",
            f"    def __init__(self, {noun}_repo: {_camel(rng)}, *, timeout: float = {rng.randint(1, 60)}.0) -> None:",
            f"        self._{noun}_repo = {noun}_repo",
            "        self._timeout = timeout",
            "",
            f"    def {name}(self, {noun}_id: UUID) -> {rng.choice(_TYPES)}:",
            f"        {noun} = self._{noun}_repo.get({noun}_id)",
            f"        return {_ident(rng)}({noun}, timeout=self._timeout)",
        ]
    elif kind < 0.85:
        cls = noun.replace("_", " ").title().replace(" ", "") + rng.choice(("Row", "Event", "Snapshot", "Request"))
        lines += ["@dataclass(frozen=True)", f"class {cls}:"]
        lines += [f"    {rng.choice(_NOUNS)}: {rng.choice(_TYPES)}" for _ in range(rng.randint(2, 7))]
    else:
        lines += [
            f"{rng.choice(_NOUNS).upper()}_{rng.choice(('LIMIT', 'TIMEOUT_S', 'RETRIES', 'BATCH'))} = "
            f"{rng.randint(1, 5000)}"
            for _ in range(rng.randint(2, 5))
        ]
    return [*lines, "", ""]


def _log_line(rng: random.Random) -> str:
    stamp = (
        f"2025-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    )
    svc = f"{rng.choice(_PKGS)}-{rng.choice(('api', 'worker', 'cron'))}"
    return (
        f"{stamp}.{rng.randint(0, 999):03d}Z {rng.choice(_LOG_LEVELS):<7} {svc} "
        f"{_ident(rng)} {rng.choice(_NOUNS)}_id={rng.randint(1, 99999)} took {rng.randint(1, 9999)}ms"
    )


class _Codebase:
    """A Python service: files with stable (lazily generated) contents, edits applied to them."""

    def __init__(self, rng: random.Random, heavy: bool) -> None:
        self.rng = rng
        self.heavy = heavy
        self.blocks = [_py_block(rng) for _ in range(320)]
        self.code_lines = [line for b in self.blocks for line in b if line.strip()]
        self.log_pool = [_log_line(rng) for _ in range(600)]
        pkgs = rng.sample(_PKGS, 8)
        self.modules = [f"src/{p}/{m}.py" for p in pkgs for m in rng.sample(_MODS, 6)]
        self.tests = [f"tests/{p}/test_{m}.py" for p in pkgs for m in rng.sample(_MODS, 3)]
        self.fixtures = [f"tests/fixtures/{p}_{rng.choice(_NOUNS)}s.json" for p in pkgs[:4]]
        self.files: dict[str, str] = {}
        self.head = _hex(rng, 40)

    def content(self, path: str) -> str:
        if path not in self.files:
            rng = self.rng
            if path.endswith(".json"):
                size = _lognormal_size(rng, 40_000, 0.7, 5_000, 400_000)
                row = '  {{"id": {}, "{}": "{}", "amount": "{}.{:02d}", "currency": "{}"}},'
                rows = [
                    row.format(
                        rng.randint(1, 10**6),
                        rng.choice(_NOUNS),
                        _ident(rng),
                        rng.randint(0, 9999),
                        rng.randint(0, 99),
                        rng.choice(("EUR", "GBP", "USD", "JPY")),
                    )
                    for _ in range(80)
                ]
                self.files[path] = "[\n" + _fill(rng, rows, size) + "\n]"
            else:
                size = _lognormal_size(rng, 2_400, 0.9, 300, 120_000)
                pkg = path.split("/")[1]
                head = [
                    f'"""{_title(pkg)}: {path.rsplit("/", 1)[1][:-3]} for the {pkg} service."""',
                    "",
                    "from __future__ import annotations",
                    "",
                    "import logging",
                    "from dataclasses import dataclass",
                    "from decimal import Decimal",
                    "from typing import Any",
                    "from uuid import UUID",
                    "",
                    f"from {pkg}.{rng.choice(_MODS)} import {_camel(rng)}",
                    "",
                    "logger = logging.getLogger(__name__)",
                    "",
                    "",
                ]
                body: list[str] = []
                total = 0
                while total < size:
                    block = rng.choice(self.blocks)
                    body.extend(block)
                    total += sum(len(x) + 1 for x in block)
                self.files[path] = "\n".join(head + body)
        return self.files[path]

    def numbered(self, path: str) -> str:
        lines = self.content(path).split("\n")
        return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(lines, 1))

    def snippet(self, path: str) -> tuple[str, int]:
        lines = self.content(path).split("\n")
        start = self.rng.randrange(max(1, len(lines) - 4))
        return "\n".join(lines[start : start + self.rng.randint(1, 4)]), start + 1

    def edit(self, path: str) -> tuple[str, str]:
        old, _ = self.snippet(path)
        if not old.strip():
            old = self.content(path).split("\n")[0]
        new = old.replace("float", "Decimal") if "float" in old else old + f"  # {self.rng.choice(_CONDS)}"
        if new == old:
            new = old + "  # fixed"
        self.files[path] = self.content(path).replace(old, new, 1)
        return old, new

    def grep(self, word: str) -> str:
        """``grep -rn word``: the definition, call sites, imports and tests that mention it."""
        rng = self.rng
        shapes = (
            "    {n} = {w}({n}, {n2})",
            "from {pkg}.{mod} import {w}",
            "    assert {w}({n}) == {n2}",
            "        result = await self.{w}({n}_id)",
            "    # {w} must be idempotent",
        )
        home = rng.choice(self.modules)
        hits = [f"{home}:{rng.randint(10, 600)}:def {word}({rng.choice(_NOUNS)}: {rng.choice(_TYPES)}) -> None:"]
        for _ in range(rng.choice((0, 1, 2, 4, 7, 12, 39))):
            path = rng.choice(self.modules + self.tests)
            line = rng.choice(shapes).format(
                w=word, n=rng.choice(_NOUNS), n2=rng.choice(_NOUNS), pkg=path.split("/")[1], mod=rng.choice(_MODS)
            )
            hits.append(f"{path}:{rng.randint(1, 900)}:{line}")
        if rng.random() < 0.02:  # an unbounded grep that walked into a vendored tree
            hits += [
                f"vendor/{rng.choice(_PKGS)}/{rng.choice(_MODS)}.py:{i}:{rng.choice(self.code_lines)} # {word}"
                for i in range(rng.randint(300, 2500))
            ]
        return "\n".join(hits)

    def logs(self, size: int) -> str:
        return _fill(self.rng, self.log_pool, size)


def _traceback(rng: random.Random, cb: _Codebase, error: str) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for _ in range(rng.randint(2, 7)):
        path = rng.choice(cb.modules)
        lines.append(f'  File "/home/dev/acme/{path}", line {rng.randint(10, 900)}, in {_ident(rng)}')
        lines.append(f"    {rng.choice(cb.code_lines).strip()}")
    return [*lines, error]


def _background_error(rng: random.Random) -> str:
    noun = rng.choice(_NOUNS)
    return rng.choice(
        (
            f"AssertionError: assert Decimal('{rng.randint(1, 9999)}.{rng.randint(0, 99):02d}') "
            f"== Decimal('{rng.randint(1, 9999)}.00')",
            f"KeyError: '{noun}_id'",
            "TypeError: unsupported operand type(s) for +: 'Decimal' and 'float'",
            f"AttributeError: 'NoneType' object has no attribute '{noun}'",
            f"ValueError: invalid {noun}: {rng.randint(-99, -1)}",
            f"sqlalchemy.exc.IntegrityError: NOT NULL constraint failed: {noun}s.{rng.choice(_NOUNS)}_id",
        )
    )


def _pytest_output(
    rng: random.Random, cb: _Codebase, target: str, *, fail: bool, verbose: bool = False
) -> tuple[str, str]:
    """Output of a pytest run and its last error line ('' when it passed)."""
    collected = rng.randint(20, 900)
    failed = rng.randint(1, 4) if fail else 0
    out = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.7, pytest-8.3.3, pluggy-1.5.0",
        "rootdir: /home/dev/acme",
        "configfile: pyproject.toml",
        "plugins: asyncio-0.24.0, hypothesis-6.112.1, cov-5.0.0",
        f"collected {collected} items",
        "",
    ]
    if verbose:
        for i in range(collected):
            path = rng.choice(cb.tests)
            out.append(f"{path}::test_{_ident(rng)}_{rng.choice(_CONDS)} PASSED [{100 * (i + 1) // collected:3d}%]")
    else:
        done = 0
        while done < collected:
            k = min(collected - done, rng.randint(5, 60))
            done += k
            dots = "".join("F" if fail and rng.random() < 0.02 else "." for _ in range(k))
            out.append(f"{rng.choice(cb.tests)} {dots:<60} [{100 * done // collected:3d}%]")
    error = ""
    if fail:
        out += ["", "=================================== FAILURES ==================================="]
        for _ in range(failed):
            name = f"test_{_ident(rng)}_{rng.choice(_CONDS)}"
            error = _background_error(rng)
            out.append(f"{'_' * 20} {name} {'_' * 20}")
            out += ["", f"    def {name}():"]
            out += [f"        {rng.choice(cb.code_lines).strip()}" for _ in range(rng.randint(2, 6))]
            out += [f">       {rng.choice(cb.code_lines).strip()}", f"E       {error}", ""]
            out += _traceback(rng, cb, error) if rng.random() < 0.5 else []
            out.append(f"{target}:{rng.randint(10, 400)}: {error.split(':')[0]}")
        out += ["=========================== short test summary info ============================"]
        out += [f"FAILED {target}::test_{_ident(rng)} - {error}" for _ in range(failed)]
        out.append(f"========== {failed} failed, {collected - failed} passed in {rng.uniform(0.5, 90):.2f}s ==========")
    else:
        out.append(f"========== {collected} passed in {rng.uniform(0.5, 90):.2f}s ==========")
    return "\n".join(out), error


def _git_log(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        out += [
            f"commit {_hex(rng, 40)}",
            f"Author: {rng.choice(('Sam Lee', 'Ana Costa', 'Jon Park', 'Mia Weber'))} <dev@acme.example>",
            f"Date:   Mon Nov {rng.randint(1, 28)} {rng.randint(8, 19)}:{rng.randint(0, 59):02d}:00 2025 +0000",
            "",
            f"    {rng.choice(('Fix', 'Add', 'Refactor', 'Speed up', 'Handle'))} {_ident(rng).replace('_', ' ')}",
            "",
        ]
    return "\n".join(out)


# --- job search content ---

_SEARCH_PROMPT = """# Daily job search

Run this every weekday morning.

## What I'm looking for
- Role: senior .NET / C# developer (lead or architect titles are fine if the role is hands-on)
- Location: remote within the UK; at most one office day a month.
- Contract: £500-700/day, outside IR35 preferred. Permanent: £85,000-£110,000 base.
- Stack: C# 12 / .NET 8, ASP.NET Core, Azure (Functions, Service Bus, AKS), SQL Server or PostgreSQL.
- Leave out: gambling, crypto, defence, and anything that needs SC/DV clearance.

## Sources
1. LinkedIn job search (remote filter on).
2. JobServe alert emails in Gmail (from alerts@jobserve.com).

## Scoring rubric (0-10 per criterion, then weight)
| criterion | weight | 10 means |
|---|---|---|
| technical stack match | 30% | .NET 8, Azure, event-driven design |
| remote policy | 20% | fully remote, UK hours |
| salary / rate | 25% | top of my range or above |
| growth | 25% | ownership, architecture input, good engineering culture |

Overall = weighted sum, one decimal. Shortlist 7.0 and above.

## Output
Write todays-jobs-YYYY-MM-DD.md: a table sorted by score (company, title, rate, remote, score, link)
and one line on why each shortlisted role scored well. Never apply and never contact recruiters.
"""


@dataclass
class _Job:
    job_id: str
    company: str
    title: str
    location: str
    pay: str
    posted: int
    url: str
    lang: str


def _job(rng: random.Random) -> _Job:
    job_id = str(rng.randint(3_900_000_000, 4_199_999_999))
    contract = rng.random() < 0.5
    pay = f"£{rng.randrange(450, 800, 25)}/day" if contract else f"£{rng.randrange(60_000, 130_000, 5_000):,}"
    lang = rng.choices(("en", "de", "fr", "ja"), weights=(85, 6, 5, 4))[0]
    location = {"de": "Berlin (remote, EU)", "ja": "Tokyo (remote)"}.get(lang, rng.choice(_LOCATIONS[:8]))
    return _Job(
        job_id,
        rng.choice(_COMPANIES),
        rng.choice(_JOB_TITLES),
        location,
        pay,
        rng.randint(0, 12),
        f"https://www.linkedin.com/jobs/view/{job_id}/",
        lang,
    )


_JD_SENTENCES = tuple(
    dict.fromkeys(
        s.format(skill=skill, ind=ind)
        for s in (
            "You will design and build services on {skill} for our {ind} platform.",
            "Our teams own their services end to end, from design to production support on {skill}.",
            "Experience with {skill} is essential; experience in {ind} is a bonus.",
            "We value clear writing, pragmatic testing and calm incident response.",
            "You'll mentor two mid-level engineers and take part in architecture reviews.",
            "The team ships to production several times a day behind feature flags.",
            "We are a {ind} business with 400 staff and a 40-strong engineering team.",
            "Most of the work is greenfield, with some migration of legacy services to {skill}.",
            "Interviews are a 30-minute call, a take-home exercise and a final technical conversation.",
        )
        for skill in _SKILLS
        for ind in _INDUSTRIES[:8]
    )
)


def _job_description(rng: random.Random, job: _Job, size: int) -> str:
    prose = {"de": _DE_PROSE, "fr": _FR_PROSE, "ja": _JA_PROSE}.get(job.lang)
    out = [
        f"{job.title}",
        f"{job.company} · {job.location} · posted {job.posted} days ago · {rng.randint(3, 240)} applicants",
        f"Pay: {job.pay}",
        f"Job id: {job.job_id}",
        f"Link: {job.url}",
        "",
        "About the job",
    ]
    if prose:
        out += [" ".join(rng.sample(prose, min(3, len(prose)))), ""]
    out += [" ".join(rng.choices(_JD_SENTENCES, k=rng.randint(3, 6))), "", "Responsibilities"]
    out += [f"- {rng.choice(_JD_SENTENCES)}" for _ in range(rng.randint(4, 9))]
    out += ["", "Requirements"] + [
        f"- {rng.choice(_SKILLS)} ({rng.randint(2, 8)}+ years)" for _ in range(rng.randint(4, 8))
    ]
    out += ["", "Benefits", "- 25 days holiday plus bank holidays", "- Pension matched to 6%", "- Learning budget"]
    text = "\n".join(out)
    if len(text) < size:
        filler = _fill(rng, _JD_SENTENCES, size - len(text), sep=" ")
        similar = [
            f"  {rng.choice(_JOB_TITLES)} — {rng.choice(_COMPANIES)} — {rng.choice(_LOCATIONS)} — "
            f"https://www.linkedin.com/jobs/view/{rng.randint(3_900_000_000, 4_199_999_999)}/"
            for _ in range(max(1, (size - len(text)) // 600))
        ]
        text += "\n\nMore about us\n" + filler + "\n\nSimilar jobs\n" + "\n".join(similar)
    return text


# --- research content ---


def _web_sentences(rng: random.Random, terms: Sequence[str]) -> list[str]:
    templates = (
        "In our runs, {a} beat {b} on most workloads, but the gap narrowed at larger scales.",
        "The authors report that {a} is sensitive to how {b} is tuned.",
        "Few papers describe how {a} was configured, which makes the comparison with {b} hard.",
        "{A} scaled almost linearly until memory ran out; {b} degraded earlier.",
        "A common mistake is to measure {a} without warming up {b} first.",
        "We repeated each measurement five times and report the median for {a} and {b}.",
        "Practitioners on the forum disagree about whether {a} matters more than {b}.",
        "The vendor documentation recommends tuning {a} before touching {b}.",
    )
    out = []
    for _ in range(200):
        a, b = rng.sample(list(terms), 2)
        out.append(rng.choice(templates).format(a=a, b=b, A=_title(a)))
    return out


def _web_page(rng: random.Random, url: str, topic: str, sentences: Sequence[str], size: int) -> str:
    out = [
        f"URL: {url}",
        "Skip to content | Sign in | Subscribe",
        "We use cookies to improve your experience. Accept all | Manage preferences",
        "",
        f"# {_title(topic)}: what the numbers say",
        "",
    ]
    if "zhihu" in url or "qiita" in url or rng.random() < 0.08:
        out += [" ".join(rng.choices(_CJK_PROSE, k=rng.randint(3, 8))), ""]
    text = "\n".join(out)
    body: list[str] = []
    while len(text) + sum(len(p) for p in body) < size:
        body.append(" ".join(rng.choices(sentences, k=rng.randint(3, 7))))
        if rng.random() < 0.15:
            body.append(
                "| setup | metric | value |\n|---|---|---|\n"
                + "\n".join(
                    f"| run {i} | {rng.choice(('latency', 'recall', 'throughput'))} | {rng.randint(1, 999)} |"
                    for i in range(5)
                )
            )
    refs = [f"[{i}] https://{rng.choice(_SITES)}/ref/{rng.randint(1, 99999)}" for i in range(1, rng.randint(3, 12))]
    return text + "\n\n".join(body) + "\n\nReferences\n" + "\n".join(refs) + "\n\n© 2025 · Privacy · Terms"


# ------------------------------------------------------------------------------------------------
# Episodes: one task each, as a stream of steps
# ------------------------------------------------------------------------------------------------

_SYSTEM_PROMPTS: dict[str, str] = {
    "coding": (
        "You are a coding agent working in the acme monorepo at /home/dev/acme (Python 3.11 services under src/, "
        "tests under tests/). Use the tools to search, read, edit and run code. Read a file before editing it. "
        "Run the relevant tests after every change and report failures exactly. Work on a feature branch; "
        "commit with a message that names the ticket. Keep answers short and factual."
    ),
    "job_search": (
        "You are Scout, a job-search assistant for Daniel Okafor, a senior .NET developer in Sheffield. You can "
        "read and write files in his job-search folder, search LinkedIn and read his Gmail (read-only). Be factual, "
        "give the link for every role, and score consistently with the rubric in search-prompt.txt."
    ),
    "research": (
        "You are a research assistant. Search the web, read pages and papers, and keep notes under notes/. "
        "Prefer primary sources, quote numbers with their units and conditions, and cite a URL for every claim."
    ),
    "mixed": (
        "You are a general agent with file, shell, web and mail tools. Work carefully, keep notes of what you did, "
        "and report results with exact paths, links and numbers."
    ),
}


@dataclass
class _Ctx:
    rng: random.Random
    heavy: bool
    planter: _Planter
    cb: _Codebase
    day: int = 17
    rounds: int = 0
    web: dict[str, list[str]] = field(default_factory=dict)

    def size(self, median: float, sigma: float = 1.0) -> int:
        """A tool output size: lognormal body plus a tail of huge outputs (some over 50,000 chars)."""
        rng = self.rng
        scale = 1.6 if self.heavy else 1.0
        if rng.random() < (0.07 if self.heavy else 0.03):
            return _lognormal_size(rng, 30_000 * scale, 0.8, 8_000, 400_000)
        return _lognormal_size(rng, median * scale, sigma, 60, 200_000)

    def parallel(self) -> int:
        weights = (40, 35, 15, 10) if self.heavy else (70, 18, 8, 4)
        return self.rng.choices((1, 2, 3, 4), weights=weights)[0]

    def chatter(self) -> bool:
        return self.rng.random() < (0.08 if self.heavy else 0.3)


def _cjk_maybe(rng: random.Random, text: str, p: float = 0.12) -> str:
    return f"{text} {rng.choice(_CJK_USER)}" if rng.random() < p else text


def _coding_episode(c: _Ctx) -> Iterator[Step]:
    rng, cb = c.rng, c.cb
    kind = rng.choices(("bugfix", "feature", "ci", "perf"), weights=(45, 25, 15, 15))[0]
    ticket = f"{rng.choice(('PAY', 'API', 'BUG', 'CORE'))}-{rng.randint(100, 9999)}"
    module = rng.choice(cb.modules)
    pkg, mod = module.split("/")[1], module.rsplit("/", 1)[1]
    test = f"tests/{pkg}/test_{mod}"
    func = _ident(rng)
    images: list[_Image] = []
    if kind == "bugfix":
        symptom = rng.choice(
            (
                f"{func}() returns the wrong total when a {rng.choice(_NOUNS).replace('_', ' ')} is involved.",
                f"the {pkg} worker crashes on some {rng.choice(_NOUNS).replace('_', ' ')}s since yesterday's deploy.",
                f"{pkg} requests time out under load; {func} looks suspicious.",
            )
        )
        text = f"{ticket}: {symptom} Can you fix it?"
        if rng.random() < 0.25:
            images.append(_image(rng))
            text += " Screenshot of the error attached."
    elif kind == "feature":
        text = f"{ticket}: add {func.replace('_', ' ')} support to {module}, with tests."
    elif kind == "ci":
        text = f"CI is red on the {pkg} pipeline ({ticket}). Please find out why and fix it."
    else:
        text = f"{ticket}: {func}() got slow after the last release. Profile it and speed it up."
    yield _User(_cjk_maybe(rng, text), images)

    # investigate
    if kind == "ci":
        log, _ = _pytest_output(rng, cb, test, fail=True, verbose=rng.random() < 0.3)
        log = cb.logs(c.size(8_000)) + "\n" + log + "\n##[error]Process completed with exit code 1."
        yield _Tools(
            [_Call("bash", {"command": f"gh run view --log-failed --job {rng.randint(10**9, 10**10)}"}, log)],
            "Let me pull the failing job's log.",
        )
    elif kind == "perf":
        rows = "\n".join(
            f"{rng.randint(1, 90000):>9} {rng.uniform(0, 9):>9.3f} {rng.uniform(0, 0.01):>9.5f} "
            f"{rng.uniform(0, 20):>9.3f} {rng.choice(cb.modules)}:{rng.randint(1, 900)}({_ident(rng)})"
            for _ in range(rng.randint(15, 60))
        )
        prof = "   ncalls  tottime  percall  cumtime  filename:lineno(function)\n" + rows
        yield _Tools(
            [_Call("bash", {"command": f"python -m cProfile -s cumtime -m {pkg}.bench {func}"}, prof)],
            "I'll profile it first.",
        )
    calls = [_Call("grep", {"pattern": func, "path": "src/", "-n": True}, cb.grep(func))]
    if c.parallel() > 1:
        word = rng.choice(_NOUNS)
        calls.append(_Call("grep", {"pattern": word, "path": f"src/{pkg}/"}, cb.grep(word)))
    yield _Tools(calls, rng.choice(("Let me find where this is handled.", "Searching for the definition.", "")))
    reads = [module, test, *rng.sample(cb.modules, 3)][: c.parallel()]
    results = []
    for path in reads:
        if rng.random() < 0.04:
            results.append(_Call("read_file", {"path": path + ".bak"}, f"File not found: {path}.bak", is_error=True))
        else:
            results.append(_Call("read_file", {"path": path}, cb.numbered(path)))
    yield _Tools(results)
    if rng.random() < 0.15:
        fixture = rng.choice(cb.fixtures)
        yield _Tools([_Call("read_file", {"path": fixture}, cb.content(fixture))], "Checking the fixture data.")
    if rng.random() < 0.2:
        yield _Tools(
            [_Call("list_dir", {"path": f"src/{pkg}"}, "\n".join(sorted(m for m in cb.modules if f"/{pkg}/" in m)))]
        )

    # reproduce, fix, re-run
    command = f"pytest {test} -x -q" if rng.random() < 0.7 else f"pytest {test} -q -k {func}"
    if kind != "feature":
        out, err = _pytest_output(rng, cb, test, fail=True)
        yield _Tools(
            [_Call("bash", {"command": command}, "Exit code 1\n" + out, is_error=True)],
            rng.choice(("Reproducing with the tests.", "Running the failing tests.", "")),
        )
        if c.chatter():
            yield _Say(f"The failure is `{err}`. I think {func} mishandles the edge case; fixing it now.")
            yield _User(
                _cjk_maybe(rng, rng.choice(("OK.", "Makes sense, go ahead.", "Fine, but keep the change small.")))
            )
    attempts = rng.randint(1, 3) * (2 if c.heavy else 1)
    for attempt in range(attempts):
        if rng.random() < 0.3:
            other = rng.choice(cb.modules)
            yield _Tools([_Call("read_file", {"path": other}, cb.numbered(other))])
        if kind == "feature" and attempt == 0:
            new_path = f"src/{pkg}/{rng.choice(_NOUNS)}_{rng.choice(_MODS)}.py"
            code = "\n".join(line for b in rng.sample(cb.blocks, rng.randint(2, 6)) for line in b)
            yield _Tools(
                [_Call("write_file", {"path": new_path, "content": code}, f"Wrote {len(code):,} bytes to {new_path}")],
                f"Creating {new_path}.",
            )
        old, new = cb.edit(module)
        if rng.random() < 0.07:
            yield _Tools(
                [
                    _Call(
                        "edit_file",
                        {"path": module, "old_string": old + "x", "new_string": new},
                        f"Error: old_string not found in {module}. Read the file again before editing.",
                        is_error=True,
                    )
                ]
            )
        yield _Tools(
            [
                _Call(
                    "edit_file",
                    {"path": module, "old_string": old, "new_string": new},
                    f"The file {module} has been updated.",
                )
            ],
            rng.choice(("Applying the fix.", f"Updating {func}.", "")),
        )
        passed = attempt == attempts - 1 or rng.random() < 0.3
        out, err = _pytest_output(rng, cb, test, fail=not passed, verbose=c.heavy and rng.random() < 0.1)
        yield _Tools(
            [_Call("bash", {"command": command}, out if passed else "Exit code 1\n" + out, is_error=not passed)]
        )
        if passed:
            break
    if rng.random() < 0.5:
        ok = rng.random() < 0.8
        lint = (
            "All checks passed!\nSuccess: no issues found in 41 source files"
            if ok
            else (
                f"{module}:{rng.randint(1, 300)}:{rng.randint(1, 80)}: E501 Line too long (131 > 120)\nFound 1 error."
            )
        )
        yield _Tools(
            [
                _Call(
                    "bash",
                    {"command": f"ruff check src/{pkg} && mypy src/{pkg}"},
                    lint if ok else "Exit code 1\n" + lint,
                    is_error=not ok,
                )
            ]
        )
    if rng.random() < 0.25:
        yield _Tools([_Call("bash", {"command": "git log -n 8"}, _git_log(rng, 8))])
    short = _hex(rng, 7)
    commit = f'git add -A && git commit -m "{ticket}: fix {func.replace("_", " ")}"'
    out = (
        f"[fix/{ticket.lower()} {short}] {ticket}: fix {func.replace('_', ' ')}\n"
        f" 2 files changed, {rng.randint(2, 80)} insertions(+), {rng.randint(0, 40)} deletions(-)"
    )
    yield _Tools([_Call("bash", {"command": commit}, out)])
    yield _Say(
        f"{ticket} is done: {func} in {module} now handles the case, the tests in {test} pass, "
        f"and the change is committed on fix/{ticket.lower()} as {short}."
    )
    if c.chatter():
        yield _User(
            _cjk_maybe(rng, rng.choice(("Thanks!", "Great, thanks.", "Nice. Push the branch but don't merge.")))
        )


def _job_search_episode(c: _Ctx) -> Iterator[Step]:
    rng = c.rng
    date = f"2026-02-{c.day:02d}" if c.day <= 28 else f"2026-03-{c.day - 28:02d}"
    c.day = c.day + 1 if c.day < 58 else 17
    first = c.rounds == 0
    c.rounds += 1
    if first:
        yield _User("Execute the job search prompt from search-prompt.txt.")
    else:
        yield _User(
            _cjk_maybe(
                rng,
                rng.choice(
                    (
                        f"Run today's search again ({date}).",
                        f"New day: please run the job search for {date}.",
                        f"Run the search for {date}, and include contract roles in Leeds this time.",
                    )
                ),
                0.04,
            ),
            [_image(rng)] if rng.random() < 0.1 else [],
        )
    if first or rng.random() < 0.2:
        yield _Tools(
            [_Call("read_file", {"path": "search-prompt.txt"}, _SEARCH_PROMPT)], "I'll read the search prompt first."
        )
    jobs = [_job(rng) for _ in range(rng.randint(8, 25))]
    queries = rng.sample(
        ("senior .net developer", "lead c# engineer", ".net azure remote", "c# architect", "dotnet contract"),
        c.parallel(),
    )
    calls = []
    for q in queries:
        listing = [
            f"{i}. {j.title} — {j.company} — {j.location} — posted {j.posted}d ago — {j.pay} — {j.url}"
            for i, j in enumerate(rng.sample(jobs, min(len(jobs), rng.randint(6, 15))), 1)
        ]
        calls.append(
            _Call(
                "linkedin_search",
                {"keywords": q, "location": "United Kingdom", "remote": True, "posted_within_days": 7},
                f"{len(listing)} results for '{q}'\n" + "\n".join(listing),
            )
        )
    yield _Tools(calls, "Searching LinkedIn with the criteria.")
    detail_jobs = rng.sample(jobs, min(len(jobs), rng.randint(3, 10) * (2 if c.heavy else 1)))
    while detail_jobs:
        batch, detail_jobs = detail_jobs[: c.parallel()], detail_jobs[c.parallel() :]
        calls = []
        for j in batch:
            if rng.random() < 0.05:
                calls.append(
                    _Call(
                        "linkedin_job_detail",
                        {"job_id": j.job_id},
                        "HTTP 404: this job is no longer accepting applications",
                        is_error=True,
                    )
                )
            else:
                size = _lognormal_size(rng, 6_000 * (1.5 if c.heavy else 1), 0.5, 2_500, 30_000)
                if rng.random() < 0.03:
                    size = _lognormal_size(rng, 60_000, 0.4, 40_000, 150_000)
                calls.append(_Call("linkedin_job_detail", {"job_id": j.job_id}, _job_description(rng, j, size)))
        yield _Tools(calls, rng.choice(("", "Reading the full adverts.", "Next batch of job descriptions.")))
        if c.chatter():
            j = batch[0]
            yield _Say(
                f"{j.company} ({j.title}, {j.pay}) looks promising: {rng.choice(_SKILLS)} and {j.location.lower()}."
            )
            yield _User(rng.choice(("Keep going.", "OK, continue.", "Good, continue with the rest.")))
    # Gmail
    ids = [_hex(rng, 16) for _ in range(rng.randint(2, 6))]
    inbox = "\n".join(
        f"id: {i}  from: alerts@jobserve.com  subject: {rng.randint(3, 19)} new jobs matching 'Senior .NET'  "
        f"date: {date}"
        for i in ids
    )
    yield _Tools(
        [_Call("gmail_search", {"query": "from:alerts@jobserve.com newer_than:1d"}, inbox)],
        "Now the JobServe alerts in Gmail.",
    )
    for i in range(0, len(ids), 2):
        calls = []
        for mid in ids[i : i + 2]:
            roles = [
                f"{j.title} | {j.company} | {j.location} | {j.pay} | "
                f"https://www.jobserve.com/gb/en/job/{_hex(rng, 16).upper()}/"
                for j in (_job(rng) for _ in range(rng.randint(3, 12)))
            ]
            footer = (
                "You are receiving this email because you created a job alert on JobServe. "
                "Unsubscribe: https://www.jobserve.com/gb/en/alerts/ " * rng.randint(1, 4)
            )
            calls.append(
                _Call(
                    "gmail_read",
                    {"message_id": mid},
                    f"From: JobServe <alerts@jobserve.com>\nDate: {date}\nSubject: New jobs\n\n"
                    + "\n".join(roles)
                    + "\n\n"
                    + footer,
                )
            )
        yield _Tools(calls)
    # score and write
    scored = sorted(((round(rng.uniform(4.5, 9.2), 1), j) for j in jobs[:12]), key=lambda t: t[0], reverse=True)
    table = "| company | title | rate | remote | score | link |\n|---|---|---|---|---|---|\n" + "\n".join(
        f"| {j.company} | {j.title} | {j.pay} | {j.location} | {s} | {j.url} |" for s, j in scored
    )
    shortlist = [j for s, j in scored if s >= 7.0]
    yield _Say(f"Scores for {date}, using the rubric (stack 30%, remote 20%, rate 25%, growth 25%):\n\n{table}")
    report = f"# Jobs for {date}\n\n{table}\n\nShortlisted: {len(shortlist)} roles at 7.0 or above.\n"
    path = f"todays-jobs-{date}.md"
    yield _Tools(
        [_Call("write_file", {"path": path, "content": report}, f"Wrote {len(report.encode()):,} bytes to {path}")],
        "Writing the report.",
    )
    yield _Say(
        f"Done: {path} lists {len(scored)} roles, {len(shortlist)} shortlisted. "
        "I have not applied to anything or contacted anyone."
    )
    if c.chatter():
        yield _User(
            rng.choice(
                (
                    "Thanks. Exclude anything that wants more than one office day a month from now on.",
                    "Good. Can you double-check the Halcyon Payments rate?",
                    "Great, thanks.",
                )
            )
        )


def _research_episode(c: _Ctx) -> Iterator[Step]:
    rng = c.rng
    topic, terms = rng.choice(_TOPICS)
    sentences = c.web.setdefault(topic, _web_sentences(rng, terms))
    a, b = rng.sample(terms, 2)
    attach = rng.random() < 0.2
    yield _User(
        _cjk_maybe(
            rng,
            rng.choice(
                (
                    "Research {t}: what do recent measurements say about {a} vs {b}?",
                    "Find production numbers on {t}, especially how {a} affects {b}.",
                    "I need a short, sourced overview of {t}. Start with {a}.",
                    "Compare what papers and blogs say about {a} and {b} ({t}).",
                )
            ).format(t=topic, a=a, b=b)
            + (" The chart I mean is attached." if attach else ""),
            0.15,
        ),
        [_image(rng)] if attach else [],
    )
    for _ in range(rng.randint(1, 3) * (2 if c.heavy else 1)):
        queries = [f"{topic} {rng.choice(terms)} benchmark {rng.randint(2021, 2025)}" for _ in range(c.parallel())]
        calls = []
        for q in queries:
            urls = [
                f"https://{rng.choice(_SITES)}/{_slug(topic)}/{rng.randint(100, 99999)}"
                for _ in range(rng.randint(5, 10))
            ]
            c.web.setdefault("_urls", []).extend(urls)
            calls.append(_Call("web_search", {"query": q}, "\n\n".join(f"{u}\n{rng.choice(sentences)}" for u in urls)))
        yield _Tools(calls, rng.choice(("Searching.", "Let me look for sources.", "")))
        fetch = rng.sample(c.web["_urls"][-20:], min(c.parallel(), len(c.web["_urls"][-20:])))
        calls = []
        for url in fetch:
            if rng.random() < 0.08:
                calls.append(_Call("web_fetch", {"url": url}, "Error: 403 Forbidden", is_error=True))
            else:
                calls.append(
                    _Call("web_fetch", {"url": url}, _web_page(rng, url, topic, sentences, c.size(6_000, 0.9)))
                )
        yield _Tools(calls)
        if rng.random() < 0.25:
            url = rng.choice(fetch)
            shot = _image(rng, big=rng.random() < 0.15)
            yield _Tools(
                [_Call("screenshot", {"url": url, "full_page": False}, f"Screenshot of {url}", image=shot)],
                "Taking a screenshot of the chart.",
            )
        if rng.random() < 0.3:
            paper = f"papers/{rng.randint(2201, 2412)}.{rng.randint(10000, 29999)}.pdf"
            text = (
                "Abstract\n"
                + " ".join(rng.choices(sentences, k=8))
                + "\n\n1 Introduction\n"
                + _fill(rng, sentences, c.size(12_000, 0.6), sep=" ")
            )
            yield _Tools([_Call("read_pdf", {"path": paper}, text)], "Reading the paper.")
        if rng.random() < 0.35:
            out = "\n".join(f"{t:<14} {rng.uniform(0, 1):.3f} {rng.randint(1, 999):>5} ms" for t in terms)
            yield _Tools(
                [
                    _Call(
                        "python",
                        {
                            "code": f"import pandas as pd\ndf = pd.read_csv('data/{_slug(topic)}.csv')\n"
                            "print(df.groupby('system').median())"
                        },
                        out,
                    )
                ]
            )
        if c.chatter():
            yield _Say(f"So far: {rng.choice(sentences)}")
            yield _User(
                _cjk_maybe(
                    rng, rng.choice(("Good, continue.", "Focus on production numbers, not vendor blogs.", "OK."))
                )
            )
    notes = f"# {topic}\n\n" + "\n".join(f"- {s}" for s in rng.sample(sentences, 6))
    path = f"notes/{_slug(topic)}.md"
    yield _Tools(
        [_Call("write_file", {"path": path, "content": notes}, f"Wrote {len(notes.encode()):,} bytes to {path}")],
        "Saving my notes.",
    )
    yield _Say(f"Summary for {topic}: " + " ".join(rng.sample(sentences, 3)))


_EPISODES: dict[str, Callable[[_Ctx], Iterator[Step]]] = {
    "coding": _coding_episode,
    "job_search": _job_search_episode,
    "research": _research_episode,
}


# ------------------------------------------------------------------------------------------------
# The entry point
# ------------------------------------------------------------------------------------------------


def generate(
    scenario: Scenario | str = "coding",
    n_messages: int = 2000,
    *,
    seed: int = 0,
    format: Format | str = "openai",
    tool_heavy: bool = False,
    phrasing: Phrasing | str = "templated",
) -> GeneratedTranscript:
    """A deterministic synthetic session of exactly ``n_messages`` messages (for OpenAI, the
    system message is ``messages[0]`` and counts; for Anthropic it is ``.system``).

    ``phrasing="paraphrased"`` plants decisions, constraints and next steps in the held-out
    paraphrased wording (no :data:`CUE_WORDS`); ``"templated"`` (the default) in the cue-phrase
    templates."""
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}, not {scenario!r}")
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    if not MIN_MESSAGES <= n_messages <= MAX_MESSAGES:
        raise ValueError(f"n_messages must be within {MIN_MESSAGES}..{MAX_MESSAGES}, got {n_messages}")
    if phrasing not in PHRASINGS:
        raise ValueError(f"phrasing must be one of {', '.join(PHRASINGS)}, not {phrasing!r}")
    key = f"{scenario}:{n_messages}:{seed}:{format}:{int(tool_heavy)}"
    if phrasing != "templated":
        key += f":{phrasing}"
    rng = random.Random(zlib.crc32(key.encode()) ^ (seed * 0x9E3779B1))
    planter = _Planter(rng, n_messages, _FactMaker(rng, phrasing))
    system = _SYSTEM_PROMPTS[scenario]
    writer = _Writer(format, n_messages, rng, planter, system)  # type: ignore[arg-type]
    ctx = _Ctx(rng=rng, heavy=tool_heavy, planter=planter, cb=_Codebase(rng, tool_heavy))
    order = ("coding", "job_search", "research")
    turn = 0
    while writer.remaining > 0:
        kind = scenario if scenario != "mixed" else order[turn % 3] if rng.random() < 0.7 else rng.choice(order)
        turn += 1
        planter.flavor = kind
        for step in _EPISODES[kind](ctx):
            writer.emit(step)
            if writer.remaining <= 0:
                break
    return GeneratedTranscript(
        messages=writer.messages,
        system=system if format == "anthropic" else None,
        facts=planter.facts,
        format=format,  # type: ignore[arg-type]
        scenario=scenario,
        seed=seed,
        tool_heavy=tool_heavy,
        phrasing=phrasing,
    )


# ------------------------------------------------------------------------------------------------
# Metrics helpers
# ------------------------------------------------------------------------------------------------


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        kind = value.get("type")
        for key, item in value.items():
            if kind == "base64" and key == "data":
                continue  # image bytes
            if key == "url" and isinstance(item, str) and item.startswith("data:"):
                continue
            if key == "arguments" and isinstance(item, str):
                with contextlib.suppress(ValueError):
                    _strings(json.loads(item), out)
            _strings(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _strings(item, out)


def text_strings(value: Any) -> list[str]:
    """Every string of a provider-format value (a message, a list of them, a system prompt), tool
    arguments decoded, image payloads left out: what :func:`message_text` joins."""
    out: list[str] = []
    _strings(value, out)
    return out


def message_text(message: Mapping[str, Any]) -> str:
    """Every string of a provider-format message (text, tool arguments decoded, tool results),
    without image payloads: what a verbatim fact check looks in."""
    out: list[str] = []
    _strings(message, out)
    return "\n".join(out)


def transcript_text(messages: Sequence[Mapping[str, Any]], system: Any = None) -> str:
    """:func:`message_text` of every message (and the Anthropic system prompt)."""
    out: list[str] = []
    if system is not None:
        _strings(system, out)
    for message in messages:
        _strings(message, out)
    return "\n".join(out)


def retention(
    facts: Sequence[PlantedFact], text: str, zone: Collection[int] | None = None
) -> dict[str, tuple[int, int]]:
    """Per category, ``(kept, total)``: how many planted facts appear verbatim in ``text``.

    Only facts whose ``message_index`` is in ``zone`` (the compacted messages' indices) count;
    ``zone=None`` counts every fact."""
    wanted = set(zone) if zone is not None else None
    counts: dict[str, list[int]] = {}
    for fact in facts:
        if wanted is not None and fact.message_index not in wanted:
            continue
        slot = counts.setdefault(fact.category, [0, 0])
        slot[0] += fact.value in text
        slot[1] += 1
    return {c: (counts[c][0], counts[c][1]) for c in CATEGORIES if c in counts}


def retention_total(result: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    """Sum of a :func:`retention` result over all categories."""
    return sum(k for k, _ in result.values()), sum(t for _, t in result.values())


# ------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compaction.testing.transcripts", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--scenario", choices=SCENARIOS, default="coding")
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--format", choices=FORMATS, default="openai")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tool-heavy", action="store_true")
    parser.add_argument(
        "--phrasing", choices=PHRASINGS, default="templated", help="paraphrased: facts without the classifier's cues"
    )
    parser.add_argument("--out", type=Path, help="write the transcript here (default: stdout)")
    parser.add_argument("--facts", type=Path, help="write the planted facts here as JSON")
    parser.add_argument("--indent", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        transcript = generate(
            args.scenario,
            args.messages,
            seed=args.seed,
            format=args.format,
            tool_heavy=args.tool_heavy,
            phrasing=args.phrasing,
        )
    except ValueError as exc:
        parser.error(str(exc))
    data = transcript.to_json(indent=args.indent)
    if args.out is None:
        sys.stdout.write(data + "\n")
    else:
        args.out.write_text(data, encoding="utf-8")
    if args.facts is not None:
        args.facts.write_text(json.dumps(transcript.facts_json(), ensure_ascii=False, indent=1), encoding="utf-8")
    if args.out is not None:
        print(
            f"{len(transcript.messages):,} messages, {len(data):,} chars, "
            f"{len(transcript.facts)} planted facts -> {args.out}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

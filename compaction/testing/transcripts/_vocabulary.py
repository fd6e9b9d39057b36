"""The words the content is made of: a code base's names, job adverts, research topics, prose in
several languages, and the disjoint vocabulary of planted paths."""

from __future__ import annotations

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

"""Planted fact values: unique, distinctive, never produced by the background generators."""

from __future__ import annotations

import random
import string
from collections.abc import Callable

from compaction.testing.transcripts._draw import _hex, _slug, _uuid
from compaction.testing.transcripts._vocabulary import (
    _COMPANIES,
    _INDUSTRIES,
    _JOB_TITLES,
    _P_AREAS,
    _P_ENVS,
    _P_EXTS,
    _P_LEAVES,
    _P_ORGS,
    _P_PEOPLE,
    _P_ROOTS,
    _P_SUBS,
    _SITES,
    _TOPICS,
)


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

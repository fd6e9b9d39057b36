"""The job-search episode: the search prompt, job adverts and alert emails, scoring and the report."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from compaction.testing.transcripts._draw import _fill, _hex, _lognormal_size
from compaction.testing.transcripts._episode import _cjk_maybe, _Ctx
from compaction.testing.transcripts._images import _image
from compaction.testing.transcripts._vocabulary import (
    _COMPANIES,
    _DE_PROSE,
    _FR_PROSE,
    _INDUSTRIES,
    _JA_PROSE,
    _JOB_TITLES,
    _LOCATIONS,
    _SKILLS,
)
from compaction.testing.transcripts._writer import Step, _Call, _Say, _Tools, _User

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


def _job_search_episode(c: _Ctx) -> Iterator[Step]:
    """A day's search: asked for, LinkedIn searched, the adverts and the alert emails read, the roles
    scored and the report written."""
    date = f"2026-02-{c.day:02d}" if c.day <= 28 else f"2026-03-{c.day - 28:02d}"
    c.day = c.day + 1 if c.day < 58 else 17
    first = c.rounds == 0
    c.rounds += 1
    yield from _ask_for_the_search(c, date, first=first)
    jobs = [_job(c.rng) for _ in range(c.rng.randint(8, 25))]
    yield _search_linkedin(c, jobs)
    yield from _read_adverts(c, jobs)
    yield from _read_alert_emails(c, date)
    yield from _score_and_report(c, date, jobs)


def _ask_for_the_search(c: _Ctx, date: str, *, first: bool) -> Iterator[Step]:
    """The user's request (the first names the prompt file, which the agent then reads)."""
    rng = c.rng
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


def _search_linkedin(c: _Ctx, jobs: list[_Job]) -> _Tools:
    rng = c.rng
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
    return _Tools(calls, "Searching LinkedIn with the criteria.")


def _read_adverts(c: _Ctx, jobs: list[_Job]) -> Iterator[Step]:
    """Some adverts in full, a few parallel reads at a time (one may be gone)."""
    rng = c.rng
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


def _read_alert_emails(c: _Ctx, date: str) -> Iterator[Step]:
    """The day's JobServe alerts found in Gmail and read two at a time."""
    rng = c.rng
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


def _score_and_report(c: _Ctx, date: str, jobs: list[_Job]) -> Iterator[Step]:
    rng = c.rng
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

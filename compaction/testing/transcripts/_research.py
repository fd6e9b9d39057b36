"""The research episode: web searches, fetched pages and papers, notes."""

from __future__ import annotations

import random
from collections.abc import Generator, Iterator, Sequence

from compaction.testing.transcripts._draw import _fill, _slug, _title
from compaction.testing.transcripts._episode import _cjk_maybe, _Ctx
from compaction.testing.transcripts._images import _image
from compaction.testing.transcripts._vocabulary import _CJK_PROSE, _SITES, _TOPICS
from compaction.testing.transcripts._writer import Step, _Call, _Say, _Tools, _User


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


def _research_episode(c: _Ctx) -> Iterator[Step]:
    """A topic asked about, searched and read over a few rounds, then notes saved and a summary given."""
    rng = c.rng
    topic, terms = rng.choice(_TOPICS)
    sentences = c.web.setdefault(topic, _web_sentences(rng, terms))
    yield _ask_about(c, topic, terms)
    for _ in range(rng.randint(1, 3) * (2 if c.heavy else 1)):
        fetched = yield from _search_and_fetch(c, topic, terms, sentences)
        yield from _dig_deeper(c, topic, terms, sentences, fetched)
    yield from _save_notes(c, topic, sentences)


def _ask_about(c: _Ctx, topic: str, terms: Sequence[str]) -> _User:
    rng = c.rng
    a, b = rng.sample(terms, 2)
    attach = rng.random() < 0.2
    return _User(
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


def _search_and_fetch(
    c: _Ctx, topic: str, terms: Sequence[str], sentences: Sequence[str]
) -> Generator[Step, None, list[str]]:
    """A round of parallel searches, then some of the pages found fetched (one may refuse): returns
    the fetched addresses."""
    rng = c.rng
    queries = [f"{topic} {rng.choice(terms)} benchmark {rng.randint(2021, 2025)}" for _ in range(c.parallel())]
    calls = []
    for q in queries:
        urls = [
            f"https://{rng.choice(_SITES)}/{_slug(topic)}/{rng.randint(100, 99999)}" for _ in range(rng.randint(5, 10))
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
            calls.append(_Call("web_fetch", {"url": url}, _web_page(rng, url, topic, sentences, c.size(6_000, 0.9))))
    yield _Tools(calls)
    return fetch


def _dig_deeper(
    c: _Ctx, topic: str, terms: Sequence[str], sentences: Sequence[str], fetched: Sequence[str]
) -> Iterator[Step]:
    """Sometimes a screenshot of a fetched page, a paper, an analysis of the data; sometimes a word with the user."""
    rng = c.rng
    if rng.random() < 0.25:
        url = rng.choice(fetched)
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
            _cjk_maybe(rng, rng.choice(("Good, continue.", "Focus on production numbers, not vendor blogs.", "OK.")))
        )


def _save_notes(c: _Ctx, topic: str, sentences: Sequence[str]) -> Iterator[Step]:
    rng = c.rng
    notes = f"# {topic}\n\n" + "\n".join(f"- {s}" for s in rng.sample(sentences, 6))
    path = f"notes/{_slug(topic)}.md"
    yield _Tools(
        [_Call("write_file", {"path": path, "content": notes}, f"Wrote {len(notes.encode()):,} bytes to {path}")],
        "Saving my notes.",
    )
    yield _Say(f"Summary for {topic}: " + " ".join(rng.sample(sentences, 3)))

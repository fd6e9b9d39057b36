"""Recall of what compaction archived: the in-memory index and the SQLite store answer alike, the
tool answer is bounded, paged and redacted, and exact identifiers are found by one query."""

from __future__ import annotations

import doctest
import importlib
import json
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from compaction.recall import (
    RECALL_TOOL_NAME,
    MemoryRecallIndex,
    RecallSource,
    StoreRecall,
    answer_recall,
    archive_text,
    recall_tool,
)
from compaction.sqlite_store import _SCHEMA, SCHEMA_VERSION, SQLiteSessionStore
from compaction.store import CompactionEntry, SessionStore
from compaction.tokens import counter_for_model

Archive = dict[str, dict[str, Any]]

OPENAI_KEY = "sk-proj-" + "a1B2c3D4" * 6
HASH = "3f9a2c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"
URL = "https://example.com/search?q=refund%20KRW&page=2&sort=desc#results"
PATH = "/pydicom__pydicom/pydicom/dataset.py"
COMMAND = "pytest tests/billing/test_refunds.py -k 'krw and not slow' -x -q"


def tool_call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        ],
    }


def identifier_archive() -> Archive:
    """Each identifier in one message, among messages holding look-alikes (its words, other spacing)."""
    return {
        "m_dunder": {"role": "assistant", "content": "The fix: call super().__init__(**kwargs) first."},
        "m_init": {"role": "assistant", "content": "init the kwargs, then call super and init again"},
        "m_ab": {"role": "user", "content": "rename a__b to a_b everywhere"},
        "m_a_b": {"role": "user", "content": "a_b and a b are fine, a.b too"},
        "m_stars": {"role": "user", "content": "never pass **kwargs through the public API"},
        "m_url": tool_call("c1", "fetch", url=URL),
        "m_url_result": {"role": "tool", "tool_call_id": "c1", "content": "200 OK, 3 results"},
        "m_path": tool_call("c2", "read_file", path=PATH),
        "m_path_result": {"role": "tool", "tool_call_id": "c2", "content": "class Dataset(dict):\n    pass"},
        "m_other_path": {"role": "user", "content": "pydicom/pydicom/dataset.py is the wrong copy"},
        "m_hash": {"role": "tool", "tool_call_id": "c3", "content": f"commit {HASH}\nAuthor: dev"},
        "m_cmd": tool_call("c4", "bash", command=COMMAND),
        "m_cmd_result": {"role": "tool", "tool_call_id": "c4", "content": "1 failed, 12 passed"},
        "m_ticket": {"role": "user", "content": "Billing reports PAY-1437: KRW refunds show two decimals."},
        "m_dotted": {"role": "assistant", "content": "compaction.recall.text.Phrase does the matching"},
    }


def store_source(archive: Mapping[str, Mapping[str, Any]], store: SQLiteSessionStore | None = None) -> StoreRecall:
    store = store or SQLiteSessionStore(":memory:")
    save(store, "s1", archive)
    return StoreRecall(store, "s1")


def save(store: SQLiteSessionStore, session_id: str, archive: Mapping[str, Mapping[str, Any]]) -> None:
    """One compaction of ``session_id`` that archived ``archive``."""
    store.create_session(session_id)
    through = store.context(session_id).summary_through_id
    new = store.append(session_id, [{"role": "user", "content": "next"}])[0]
    entry = CompactionEntry(
        at=0.0, tokens_before=10, tokens_after=5, messages_compacted=len(archive), fallback_level="full",
        summary="s", summary_through_id=new,
    )  # fmt: skip
    assert store.save_compaction(
        session_id, expected_through_id=through, new_through_id=new, summary="s", entry=entry, archive=archive
    )


SOURCES: dict[str, Callable[[Archive], RecallSource]] = {"memory": MemoryRecallIndex, "sqlite": store_source}


@pytest.fixture(params=sorted(SOURCES))
def make_source(request: pytest.FixtureRequest) -> Callable[[Archive], RecallSource]:
    return SOURCES[request.param]


# --- exact identifiers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "archive_id"),
    [
        ("super().__init__(**kwargs)", "m_dunder"),
        ("__init__", "m_dunder"),
        ("a__b", "m_ab"),
        ("**kwargs", "m_stars"),  # the first message holding it with the stars, exact case
        (URL, "m_url"),
        ("q=refund%20KRW&page=2", "m_url"),
        (PATH, "m_path"),
        (HASH, "m_hash"),
        (HASH[:7], "m_hash"),  # a short hash finds the full one
        (COMMAND, "m_cmd"),
        ("PAY-1437", "m_ticket"),
        ("compaction.recall.text.Phrase", "m_dotted"),
    ],
)
def test_an_exact_identifier_is_found_by_one_query(
    make_source: Callable[[Archive], RecallSource], query: str, archive_id: str
) -> None:
    source = make_source(identifier_archive())
    found = source.search(query)
    assert found.verbatim == found.total >= 1
    assert all(hit.verbatim and query.lower() in hit.text.lower() for hit in found)
    assert archive_id in [hit.archive_id for hit in found]
    answer = answer_recall(source, {"query": query})
    assert f"archive id {archive_id} " in answer
    assert query in answer


def test_look_alikes_are_not_verbatim_hits(make_source: Callable[[Archive], RecallSource]) -> None:
    source = make_source(identifier_archive())
    assert [hit.archive_id for hit in source.search("a__b")] == ["m_ab"]
    assert [hit.archive_id for hit in source.search(PATH)] == ["m_path"]
    # "**kwargs" is in two messages; a plain "kwargs" also in the one without the stars.
    assert {hit.archive_id for hit in source.search("**kwargs")} == {"m_dunder", "m_stars"}
    assert {hit.archive_id for hit in source.search("kwargs")} == {"m_dunder", "m_stars", "m_init"}


def test_case_insensitive_with_exact_case_first(make_source: Callable[[Archive], RecallSource]) -> None:
    source = make_source(
        {
            "m_upper": {"role": "user", "content": "the KRW amounts"},
            "m_lower": {"role": "user", "content": "krw krw krw krw (lower case, said often)"},
        }
    )
    assert [hit.archive_id for hit in source.search("KRW")] == ["m_upper", "m_lower"]
    assert [hit.archive_id for hit in source.search("krw")] == ["m_lower", "m_upper"]


def test_whitespace_in_the_query_matches_any_whitespace(make_source: Callable[[Archive], RecallSource]) -> None:
    source = make_source({"m_1": {"role": "user", "content": "run\tmake   bench\nITER=3 now"}})
    assert [hit.archive_id for hit in source.search("make bench ITER=3")] == ["m_1"]


def test_words_rank_by_bm25_when_nothing_is_verbatim(make_source: Callable[[Archive], RecallSource]) -> None:
    source = make_source(
        {
            "m_both": {"role": "user", "content": "the receipt email shows KRW refunds with decimals"},
            "m_one": {"role": "user", "content": "a receipt was sent"},
            "m_none": {"role": "user", "content": "unrelated text about lint"},
        }
    )
    found = source.search("refund decimals in the receipt email")
    assert found.verbatim == 0
    assert [hit.archive_id for hit in found] == ["m_both", "m_one"]
    assert found.hits[0].score > found.hits[1].score > 0
    assert "share its words" in answer_recall(source, {"query": "refund decimals in the receipt email"})


def test_equal_bm25_scores_list_the_later_message_first(make_source: Callable[[Archive], RecallSource]) -> None:
    """Ties (the same words as often, in messages of the same length) go to the later message: the
    agent's most recent attempt is the one it most likely wants back. Paging keeps that order."""
    archive = {f"m_{i}": {"role": "user", "content": f"retry the flaky deploy, attempt {i}"} for i in range(6)}
    archive["m_other"] = {"role": "user", "content": "lint passes on the main branch"}
    source = make_source(archive)
    found = source.search("deploy flaky")  # not verbatim: the words in another order
    assert found.verbatim == 0
    assert len({hit.score for hit in found}) == 1
    assert [hit.archive_id for hit in found] == [f"m_{i}" for i in reversed(range(6))]
    paged = [hit.archive_id for offset in (0, 2, 4) for hit in source.search("deploy flaky", limit=2, offset=offset)]
    assert paged == [hit.archive_id for hit in found]


def test_search_arguments_are_checked_and_a_zero_limit_only_counts(
    make_source: Callable[[Archive], RecallSource],
) -> None:
    source = make_source(many(5))
    with pytest.raises(ValueError, match=r"^the query is empty$"):
        source.search("   ")
    for limit, offset in ((-1, 0), (1, -1), (-1, -1)):
        with pytest.raises(ValueError, match=rf"^limit and offset must be >= 0, got {limit} and {offset}$"):
            source.search("deploy.sh", limit=limit, offset=offset)
    assert len(make_source(many(20)).search("deploy.sh").hits) == 8  # the default page
    counted = source.search("deploy.sh", limit=0)
    assert (counted.hits, counted.total, counted.verbatim) == ((), 5, 5)
    verbatim = source.search("deploy.sh", limit=5).hits
    assert all(hit.verbatim is True and isinstance(hit.score, float) and hit.score > 0 for hit in verbatim)
    assert source.search("deploy.sh", limit=2, offset=2).offset == 2
    assert source.search("host deploy.sh", limit=2, offset=1).offset == 1  # not verbatim: the BM25 path
    for hit in source.search("host deploy.sh").hits:
        assert (hit.verbatim, hit.role) == (False, "user")


def test_no_match_and_blank_queries(make_source: Callable[[Archive], RecallSource]) -> None:
    source = make_source(identifier_archive())
    assert source.search("zzqx-nothing-like-it").total == 0
    assert answer_recall(source, {"query": "zzqx"}).startswith('recall: no archived message matches "zzqx"')
    with pytest.raises(ValueError, match="empty"):
        source.search("   ")


def test_short_and_punctuation_queries(make_source: Callable[[Archive], RecallSource]) -> None:
    source = make_source({"m_1": {"role": "user", "content": "x -> y"}, "m_2": {"role": "user", "content": "ok go"}})
    assert [hit.archive_id for hit in source.search("->")] == ["m_1"]
    assert [hit.archive_id for hit in source.search("go")] == ["m_2"]


# --- formats -----------------------------------------------------------------------------------


def anthropic_archive() -> Archive:
    return {
        "toolu_call": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading the settings."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "conf/app.yaml"}},
            ],
        },
        "toolu_result": {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "retry_limit: 7\nregion: eu-west-1"}],
                    "is_error": False,
                }
            ],
        },
        "toolu_error": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "ENOENT", "is_error": True}],
        },
    }


def test_both_formats_index_calls_arguments_and_results(make_source: Callable[[Archive], RecallSource]) -> None:
    source = make_source({**anthropic_archive(), **identifier_archive()})
    assert [(h.archive_id, h.role) for h in source.search("conf/app.yaml")] == [("toolu_call", "assistant")]
    assert [(h.archive_id, h.role) for h in source.search("eu-west-1")] == [("toolu_result", "tool")]
    assert {h.archive_id for h in source.search("read_file")} == {"m_path", "toolu_call"}
    assert source.search("ENOENT").hits[0].text == "[tool error] ENOENT"
    assert [h.archive_id for h in source.search("1 failed, 12 passed")] == ["m_cmd_result"]


def test_archive_text_renders_arguments_verbatim() -> None:
    role, text = archive_text(tool_call("c1", "bash", command='grep -rn "__init__" src\nwc -l', timeout=30))
    assert role == "assistant"
    assert text == '[tool call] bash\ncommand: grep -rn "__init__" src\nwc -l\ntimeout: 30'
    # Something the adapters cannot read is still searchable as JSON.
    assert archive_text({"role": "narrator", "content": "odd"})[1] == '{"role": "narrator", "content": "odd"}'


# --- the answer: paging, token cap, redaction, errors ------------------------------------------


def many(n: int, word: str = "deploy.sh") -> Archive:
    return {f"m_{i:02d}": {"role": "user", "content": f"step {i}: run {word} on host {i}"} for i in range(n)}


def test_search_pages(make_source: Callable[[Archive], RecallSource]) -> None:
    source = make_source(many(20))
    answers = [answer_recall(source, {"query": "deploy.sh", "page": page}) for page in (1, 2, 3)]
    assert answers[0].startswith('recall: 20 archived messages hold "deploy.sh" verbatim (page 1 of 3).')
    assert 'More: recall {"query": "deploy.sh", "page": 2}.' in answers[0]
    assert "More:" not in answers[2]
    ids = [line.split()[3] for answer in answers for line in answer.splitlines() if line.startswith("[")]
    assert sorted(ids) == sorted(many(20))
    assert answer_recall(source, {"query": "deploy.sh", "page": 4}) == (
        'recall error: page 4 is past the last page (3) for "deploy.sh".'
    )
    assert answer_recall(source, {"query": "deploy.sh", "page": 3}).count("[") == 4


def test_search_offsets_are_consistent(make_source: Callable[[Archive], RecallSource]) -> None:
    source = make_source(many(20))
    whole = [hit.archive_id for hit in source.search("deploy.sh", limit=20)]
    pieces = [hit.archive_id for offset in (0, 7, 14) for hit in source.search("deploy.sh", limit=7, offset=offset)]
    assert whole == pieces
    assert len(set(whole)) == 20


@pytest.mark.parametrize("counter_model", [None, "gpt-4o"])
def test_the_answer_stays_under_the_token_cap(
    make_source: Callable[[Archive], RecallSource], counter_model: str | None
) -> None:
    counter = counter_for_model(counter_model) if counter_model else None
    count = counter.count_text if counter else (lambda text: (len(text) + 3) // 4)
    filler = "\n".join(f"line {i}: 東京 log output {i * 7919 % 1000}" for i in range(1500))
    archive = {
        f"m_{i}": {"role": "tool", "tool_call_id": f"c{i}", "content": f"{filler}\nNEEDLE-{i}\n{filler}"}
        for i in range(10)
    }
    source = make_source(archive)
    answer = answer_recall(source, {"query": "NEEDLE"}, counter=counter, max_tokens=1_000)
    assert count(answer) <= 1_000
    assert answer.count("NEEDLE-") == 8  # the whole match is in every snippet
    # Read by id: every part fits, the parts are the whole text, with the query: its part first.
    text = source.fetch("m_3")
    assert text is not None
    parts = []
    page = 1
    while True:
        answer = answer_recall(source, {"archive_id": "m_3", "page": page}, counter=counter, max_tokens=1_000)
        assert count(answer) <= 1_000
        head, _, body = answer.partition("\n")
        assert head.startswith(f"recall: archive id m_3 (tool), part {page} of ")
        more = body.rfind("\nMore: recall {")
        parts.append(body if more < 0 else body[:more])
        if more < 0:
            break
        page += 1
    assert "".join(parts) == text.text
    located = answer_recall(source, {"archive_id": "m_3", "query": "NEEDLE-3"}, counter=counter, max_tokens=1_000)
    position, seen = text.text.index("NEEDLE-3"), 0
    holding = next(i for i, part in enumerate(parts, start=1) if (seen := seen + len(part)) > position)
    assert located.splitlines()[0].endswith(f"part {holding} of {len(parts)}. Part {holding} holds the query.")
    assert "NEEDLE-3" in located


def test_secrets_are_redacted_in_index_and_answers(make_source: Callable[[Archive], RecallSource]) -> None:
    archive = {
        "m_env": {"role": "user", "content": f"export OPENAI_API_KEY={OPENAI_KEY} then run deploy.sh"},
        "m_curl": tool_call("c1", "bash", command="curl -H 'Authorization: Bearer abcdef123456' https://api.x"),
    }
    source = make_source(archive)
    for arguments in ({"query": "deploy.sh"}, {"query": "OPENAI_API_KEY"}, {"archive_id": "m_env"}):
        answer = answer_recall(source, arguments)
        assert OPENAI_KEY not in answer
        assert "[REDACTED:openai_key]" in answer
    answer = answer_recall(source, {"query": "Authorization"})
    assert "abcdef123456" not in answer
    assert "[REDACTED:bearer_token]" in answer
    assert source.search(OPENAI_KEY).total == 0  # a secret is not in the index at all


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ("{not json", "the arguments are not valid JSON"),
        ("[1, 2]", "the arguments must be a JSON object, got list"),
        ({"q": "x"}, "unknown argument 'q'; the arguments are query, archive_id, page"),
        ({}, "give `query` (an exact identifier or words) or `archive_id`"),
        ({"query": "   "}, "give `query`"),
        ({"query": 42}, "query must be a string, got int 42"),
        ({"query": "x", "page": 0}, "page must be a whole number from 1, got 0"),
        ({"query": "x", "page": "two"}, "page must be a whole number from 1, got 'two'"),
        ({"query": "x", "page": True}, "page must be a whole number from 1, got True"),
        ({"query": "x" * 1_001}, "the query is 1,001 characters; search for at most 1,000"),
        ({"archive_id": "m_nope"}, 'no archived message has the id "m_nope"'),
        ({"archive_id": "m_dunder", "page": 2}, 'page 2 is past the last part (1) of archive id "m_dunder"'),
    ],
)
def test_bad_calls_get_an_error_answer(
    make_source: Callable[[Archive], RecallSource], arguments: Any, error: str
) -> None:
    answer = answer_recall(make_source(identifier_archive()), arguments)
    assert answer.startswith("recall error: ")
    assert error in answer


def test_page_as_a_numeric_string_is_accepted(make_source: Callable[[Archive], RecallSource]) -> None:
    assert "(page 2 of 3)" in answer_recall(make_source(many(20)), '{"query": "deploy.sh", "page": "2"}')


def test_answer_recall_rejects_a_bad_configuration() -> None:
    with pytest.raises(ValueError, match="max_tokens must be >= 200"):
        answer_recall(MemoryRecallIndex(), {"query": "x"}, max_tokens=10)
    with pytest.raises(ValueError, match="page_size must be >= 1"):
        answer_recall(MemoryRecallIndex(), {"query": "x"}, page_size=0)


def test_tool_definitions() -> None:
    openai = recall_tool()
    assert openai["type"] == "function"
    assert openai["function"]["name"] == RECALL_TOOL_NAME == "recall"
    schema = openai["function"]["parameters"]
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"query", "archive_id", "page", "from_id", "to_id"}
    anthropic = recall_tool("anthropic")
    assert set(anthropic) == {"name", "description", "input_schema"}
    assert anthropic["input_schema"] == schema
    assert json.loads(json.dumps(anthropic)) == anthropic
    recall_tool()["function"]["parameters"]["properties"].clear()  # a fresh copy every time
    assert recall_tool()["function"]["parameters"] == schema
    with pytest.raises(ValueError, match="format must be"):
        recall_tool("gemini")  # type: ignore[arg-type]


# --- the in-memory index -----------------------------------------------------------------------


def test_memory_index_is_extendable_and_keeps_first_versions() -> None:
    index = MemoryRecallIndex(many(3))
    assert len(index) == 3
    assert (
        index.add_archive(
            {
                "m_00": {"role": "user", "content": "pruned copy"},
                "m_new": {"role": "user", "content": "later deploy.sh"},
            }
        )
        == 1
    )
    assert len(index) == 4
    assert "m_new" in index
    assert index.fetch("m_00") is not None
    assert "deploy.sh" in index.fetch("m_00").text
    assert [hit.archive_id for hit in index.search("later deploy.sh")] == ["m_new"]
    assert index.search("deploy.sh").total == 4
    assert index.fetch("m_missing") is None
    assert isinstance(index, RecallSource)


# --- the SQLite store --------------------------------------------------------------------------


def test_store_index_stays_in_sync_and_is_scoped_per_session() -> None:
    store = SQLiteSessionStore(":memory:")
    assert isinstance(store, SessionStore)
    save(store, "s1", {"m_1": {"role": "user", "content": "first deploy.sh run"}})
    save(store, "s1", {"m_2": {"role": "user", "content": "later deploy.sh run"}})
    # The same archive id in another session is that session's own message.
    save(store, "s2", {"m_1": {"role": "user", "content": "other tenant: deploy.sh secrets"}})
    assert [h.archive_id for h in store.search_archive("s1", "deploy.sh")] == ["m_2", "m_1"]
    assert [h.text for h in store.search_archive("s2", "deploy.sh")] == ["other tenant: deploy.sh secrets"]
    assert store.search_archive("s1", "tenant").total == 0
    assert store.archived("m_1", session_id="s2") == {"role": "user", "content": "other tenant: deploy.sh secrets"}
    assert store.archived("m_1") == {"role": "user", "content": "first deploy.sh run"}  # the first archived
    recall = StoreRecall(store, "s2")
    assert recall.fetch("m_1") is not None
    assert recall.fetch("m_2") is None
    with pytest.raises(KeyError):
        store.search_archive("nope", "x")


def test_store_archive_is_append_only(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    with SQLiteSessionStore(db) as store:
        save(store, "s1", {"m_1": {"role": "user", "content": "deploy.sh"}})
    raw = sqlite3.connect(db)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("UPDATE archive SET text = 'x'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("DELETE FROM archive")
    assert raw.execute("SELECT text FROM archive").fetchall() == [("deploy.sh",)]
    raw.close()


def version_1_database(db: Path, archive: Mapping[str, Mapping[str, Any]]) -> None:
    """A database as the previous release wrote it: schema version 1, archive keyed by archive id."""
    raw = sqlite3.connect(db)
    for statement in _SCHEMA:
        raw.execute(statement)
    raw.execute("PRAGMA user_version = 1")
    raw.execute("INSERT INTO sessions VALUES ('old', NULL, 'gpt-4o', 's', NULL, 0, 0)")
    raw.execute(
        'INSERT INTO messages (session_id, message, created_at) VALUES (\'old\', \'{"role":"user","content":"hi"}\', 0)'
    )
    for archive_id, message in archive.items():
        raw.execute("INSERT INTO archive VALUES (?, 'old', ?, 0)", (archive_id, json.dumps(message)))
    raw.commit()
    raw.close()


def test_an_old_database_gets_the_index_on_open(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    version_1_database(db, identifier_archive())
    with SQLiteSessionStore(db) as store:
        assert [h.archive_id for h in store.search_archive("old", PATH)] == ["m_path"]
        assert [h.archive_id for h in store.search_archive("old", HASH[:7])] == ["m_hash"]
        assert store.archived("m_dunder", session_id="old") == identifier_archive()["m_dunder"]
        save(store, "old", {"m_new": {"role": "user", "content": f"again {PATH}"}})
        assert [h.archive_id for h in store.search_archive("old", PATH)] == ["m_new", "m_path"]
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    assert "tokens" in {row[1] for row in raw.execute("PRAGMA table_info(messages)")}  # counts carried (5)
    tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "archive" in tables
    assert not tables & {"archive_v1", "archive_phrases", "archive_words"}  # no index shared by all sessions
    raw.close()
    with SQLiteSessionStore(db) as store:  # opening again migrates nothing more
        assert store.search_archive("old", PATH).total == 2


# --- documented examples -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "module",
    [
        "compaction.recall",
        "compaction.recall.text",
        "compaction.recall._memory",
        "compaction.recall._tool",
        "compaction.recall._snippets",
    ],
)
def test_documented_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module} has no examples"
    assert result.failed == 0


# --- the ContextManager answers recall by itself -----------------------------------------------

NEEDLE = "/srv/billing/refunds/krw_rounding.py"
TASK = "Fix the KRW refund rounding; never push to main."


def agent_session(turns: int = 12) -> list[dict[str, Any]]:
    """A task, then read_file turns; the first tool result names NEEDLE (it will be compacted)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for i in range(turns):
        body = f"rounding helper lives in {NEEDLE} (line 88)\n" if i == 0 else ""
        messages += [
            tool_call(f"call_{i}", "read_file", path=f"src/mod_{i}.py"),
            {"role": "tool", "tool_call_id": f"call_{i}", "content": body + f"mod_{i}: log line 12345\n" * 120},
        ]
    return messages


def anthropic_session(turns: int = 12) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for i in range(turns):
        body = f"rounding helper lives in {NEEDLE} (line 88)\n" if i == 0 else ""
        messages += [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "read_file", "input": {"path": f"m{i}.py"}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": body + "log line\n" * 300}],
            },
        ]
    return messages


def manager(messages: list[dict[str, Any]], **options: Any) -> Any:
    from compaction.compactor import Compactor
    from compaction.config import CompactionConfig
    from compaction.middleware import ContextManager
    from compaction.tokens import EstimateCounter

    config = CompactionConfig(
        window=40_000, reserve_tokens=8_000, threshold=0.5, keep_recent_messages=4, max_summary_tokens=800
    )
    compactor = Compactor(options.pop("model", "test-model"), None, config, counter=EstimateCounter())
    return ContextManager(compactor, messages=messages, **options)


def openai_response(*calls: tuple[str, str, dict[str, Any]], text: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for i, name, args in calls
        ]
    return {"choices": [{"message": message}], "usage": {"prompt_tokens": 900, "completion_tokens": 20}}


def anthropic_response(*calls: tuple[str, str, dict[str, Any]], text: str = "") -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": name, "input": args} for i, name, args in calls]
    return {
        "type": "message",
        "role": "assistant",
        "content": content,
        "usage": {"input_tokens": 900, "output_tokens": 20},
    }


def pairs_ok(cm: Any) -> bool:
    from compaction.adapters import to_canonical
    from compaction.pairs import validate

    return validate(to_canonical(cm.messages, cm.system)) == []


async def test_manager_offers_recall_only_after_a_compaction() -> None:
    cm = manager(agent_session())
    assert cm.tools == []
    assert cm.recall_source is None
    tokens = cm.tokens
    result = await cm.compact_now()
    assert result.compacted
    assert [t["function"]["name"] for t in cm.tools] == [RECALL_TOOL_NAME]
    assert cm.recall_source is not None
    assert cm.recall_source.search(NEEDLE).total == 1
    assert cm.tokens < tokens
    cm.set_tools([recall_tool(), {"type": "function", "function": {"name": "bash", "parameters": {}}}])
    assert [t["function"]["name"] for t in cm.tools] == ["bash", RECALL_TOOL_NAME]  # offered once
    off = manager(agent_session(), recall=False)
    await off.compact_now()
    assert off.tools == []
    assert off.recall_source is None


async def test_manager_answers_recall_calls_and_calls_the_model_again() -> None:
    cm = manager(agent_session())
    await cm.compact_now()
    sent: list[list[dict[str, Any]]] = []

    async def call(messages: list[dict[str, Any]], system: Any) -> Any:
        sent.append(messages)
        if len(sent) == 1:
            return openai_response(("r1", RECALL_TOOL_NAME, {"query": NEEDLE}))
        return openai_response(text="The helper is in krw_rounding.py.")

    response = await cm.complete(call=call)
    assert response["choices"][0]["message"]["content"] == "The helper is in krw_rounding.py."
    assert len(sent) == 2
    answer = sent[1][-1]
    assert answer["role"] == "tool"
    assert answer["tool_call_id"] == "r1"
    assert NEEDLE in answer["content"]
    assert "(line 88)" in answer["content"]
    assert sent[1][-2]["tool_calls"][0]["function"]["name"] == RECALL_TOOL_NAME
    assert cm.messages[-2:] == sent[1][-2:]
    assert cm.measure().source == "usage"
    assert pairs_ok(cm)


async def test_manager_recall_rounds_are_bounded() -> None:
    cm = manager(agent_session(), max_recall_rounds=2)
    await cm.compact_now()
    calls = 0

    async def call(messages: list[dict[str, Any]], system: Any) -> Any:
        nonlocal calls
        calls += 1
        return openai_response((f"r{calls}", RECALL_TOOL_NAME, {"query": "log line", "page": min(calls, 2)}))

    response = await cm.complete(call=call)
    assert calls == 3  # two rounds answered by the manager, the third response returned
    assert response["choices"][0]["message"]["tool_calls"][0]["id"] == "r3"
    cm.append(response["choices"][0]["message"])  # the caller appends it as always
    assert cm.messages[-1]["role"] == "tool"
    assert cm.messages[-1]["tool_call_id"] == "r3"
    assert "(page 2 of 2)" in cm.messages[-1]["content"]
    assert pairs_ok(cm)


async def test_mixed_calls_openai_the_answers_follow_the_appended_assistant_message() -> None:
    cm = manager(agent_session())
    await cm.compact_now()

    async def call(messages: list[dict[str, Any]], system: Any) -> Any:
        return openai_response(("r1", RECALL_TOOL_NAME, {"query": NEEDLE}), ("b1", "bash", {"command": "ls"}))

    response = await cm.complete(call=call)
    message = response["choices"][0]["message"]
    assert [c["id"] for c in message["tool_calls"]] == ["r1", "b1"]
    cm.append(message)
    assert cm.messages[-1]["tool_call_id"] == "r1"
    assert NEEDLE in cm.messages[-1]["content"]
    cm.append({"role": "tool", "tool_call_id": "b1", "content": "README.md"})  # the caller runs the rest
    assert [m.get("tool_call_id") for m in cm.messages[-3:]] == [None, "r1", "b1"]
    assert pairs_ok(cm)


async def test_mixed_calls_anthropic_the_answers_join_the_next_user_message() -> None:
    cm = manager(anthropic_session(), system="Be brief.")
    await cm.compact_now()

    async def call(messages: list[dict[str, Any]], system: Any) -> Any:
        return anthropic_response(("toolu_r", RECALL_TOOL_NAME, {"query": NEEDLE}), ("toolu_b", "bash", {"cmd": "ls"}))

    assert "input_schema" in cm.tools[0]  # Anthropic messages, no tools of the caller: Anthropic format
    response = await cm.complete(call=call)
    theirs = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_b", "content": "ok"}]}
    cm.append({"role": "assistant", "content": response["content"]}, theirs)
    assert theirs["content"] == [{"type": "tool_result", "tool_use_id": "toolu_b", "content": "ok"}]  # not mutated
    last = cm.messages[-1]["content"]
    assert [b["tool_use_id"] for b in last] == ["toolu_r", "toolu_b"]
    assert NEEDLE in last[0]["content"]
    assert pairs_ok(cm)
    # When the caller appends only the assistant message, the answers go in before the next call.
    sent: list[list[dict[str, Any]]] = []

    async def record(messages: list[dict[str, Any]], system: Any) -> Any:
        sent.append(messages)
        if len(sent) == 1:
            return anthropic_response(("toolu_r2", RECALL_TOOL_NAME, {"query": NEEDLE}), ("toolu_b2", "bash", {}))
        return anthropic_response(text="done")

    response = await cm.complete(call=record)
    cm.append({"role": "assistant", "content": response["content"]})
    await cm.complete(call=record)
    assert sent[1][-1]["content"][0]["tool_use_id"] == "toolu_r2"


async def test_all_recall_anthropic_rounds_keep_the_anthropic_format() -> None:
    cm = manager(anthropic_session(), system="Be brief.")
    await cm.compact_now()
    sent: list[list[dict[str, Any]]] = []

    async def call(messages: list[dict[str, Any]], system: Any) -> Any:
        sent.append(messages)
        if len(sent) == 1:  # an OpenAI-shaped response (litellm) to an Anthropic-format context
            return openai_response(("r1", RECALL_TOOL_NAME, {"query": NEEDLE}), text="Looking it up.")
        return anthropic_response(text="found it")

    await cm.complete(call=call)
    assistant, answer = sent[1][-2:]
    assert assistant["content"][0] == {"type": "text", "text": "Looking it up."}
    assert assistant["content"][1]["type"] == "tool_use"
    assert assistant["content"][1]["input"] == {"query": NEEDLE}
    assert answer["content"][0]["tool_use_id"] == "r1"
    assert NEEDLE in answer["content"][0]["content"]
    assert pairs_ok(cm)


async def test_store_mode_answers_from_the_session_archive(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    save(store, "other", {"m_x": {"role": "user", "content": f"another session also saw {NEEDLE}"}})
    cm = manager(agent_session(), store=store, session_id="job-1")
    assert cm.tools == []
    await cm.compact_now()
    assert isinstance(cm.recall_source, StoreRecall)
    sent: list[list[dict[str, Any]]] = []

    async def call(messages: list[dict[str, Any]], system: Any) -> Any:
        sent.append(messages)
        if len(sent) == 1:
            return openai_response(("r1", RECALL_TOOL_NAME, {"query": NEEDLE}))
        return openai_response(text="ok")

    await cm.complete(call=call)
    answer = sent[1][-1]["content"]
    assert answer.startswith(f'recall: 1 archived message holds "{NEEDLE}" verbatim')  # not the other session's
    assert "another session" not in answer
    stored = [m.message for m in store.messages("job-1")]
    assert stored[-1] == sent[1][-1]  # the recall round is stored like any other message
    reopened = manager([], store=store, session_id="job-1")
    assert [t["function"]["name"] for t in reopened.tools] == [RECALL_TOOL_NAME]


async def test_without_recall_a_recall_call_is_returned_untouched() -> None:
    cm = manager(agent_session(), recall=False)
    await cm.compact_now()

    async def call(messages: list[dict[str, Any]], system: Any) -> Any:
        return openai_response(("r1", RECALL_TOOL_NAME, {"query": NEEDLE}))

    before = len(cm.messages)
    await cm.complete(call=call)
    assert len(cm.messages) == before


async def test_manager_against_litellm_and_the_fake_provider_gets_the_original_text_back() -> None:
    """Round 1: litellm's mock returns a real ModelResponse with a recall call; round 2 goes over
    HTTP to the fake provider, whose recorded request holds the archived original."""
    from compaction.litellm_loader import load_litellm
    from compaction.testing import FakeProvider

    litellm = load_litellm()
    cm = manager(agent_session())
    await cm.compact_now()
    async with FakeProvider() as server:
        rounds = 0

        async def call(messages: list[dict[str, Any]], system: Any) -> Any:
            nonlocal rounds
            rounds += 1
            common = {"messages": messages, "tools": cm.tools, "api_key": "k", "_skip_mcp_handler": True}
            if rounds == 1:
                mock = [
                    {
                        "id": "call_r1",
                        "type": "function",
                        "function": {"name": "recall", "arguments": json.dumps({"query": NEEDLE})},
                    }
                ]
                return await litellm.acompletion(model="openai/agent", mock_tool_calls=mock, **common)
            return await litellm.acompletion(model="openai/agent", api_base=server.openai_api_base, **common)

        response = await cm.complete(call=call)
        assert rounds == 2
        request = server.completion_requests[-1]
        assert [t["function"]["name"] for t in request.body["tools"]] == [RECALL_TOOL_NAME]
        role, text = request.messages[-1]
        assert role == "tool"
        assert NEEDLE in text
        assert "(line 88)" in text
        assert request.body["messages"][-2]["tool_calls"][0]["id"] == "call_r1"
    assert response.choices[0].message.content
    assert cm.measure().source == "usage"


# --- the command line --------------------------------------------------------------------------


def test_cli_recall(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from compaction.cli import main

    db = tmp_path / "sessions.db"
    with SQLiteSessionStore(db) as store:
        save(store, "job-1", identifier_archive())
        store.create_session("empty")
    assert main(["recall", str(db), "--session", "job-1", PATH]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f'recall: 1 archived message holds "{PATH}" verbatim (page 1 of 1).')
    assert "archive id m_path (assistant)" in out
    assert main(["recall", str(db), "--session", "job-1", "--id", "m_hash", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["hits"] == [{"archive_id": "m_hash", "role": "tool", "verbatim": False, "score": 0.0}]
    assert HASH in body["answer"]
    assert main(["recall", str(db), "--session", "empty", PATH]) == 1  # nothing matched
    assert "no archived message matches" in capsys.readouterr().out
    cases = [
        (["recall", str(db), "--session", "job-1"], 2, "give a QUERY or --id ARCHIVE_ID"),
        (["recall", str(db), "--session", "job-1", "x", "--max-tokens", "50"], 2, "--max-tokens must be at least"),
        (["recall", str(db), "--session", "job-1", PATH, "--page", "3"], 2, "page 3 is past the last page (1)"),
        (["recall", str(tmp_path / "nope.db"), "--session", "job-1", "x"], 3, "no such file"),
        (["recall", str(db), "--session", "nobody", "x"], 8, "no session 'nobody'"),
        (["recall", str(db), "--session", "job-1", "--id", "m_zz"], 8, 'no archived message has the id "m_zz"'),
    ]
    for argv, code, message in cases:
        assert main(argv) == code, argv
        assert message in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("not a database " * 100)
    assert main(["recall", str(tmp_path / "notes.txt"), "--session", "job-1", "x"]) == 3
    assert "is not a session store" in capsys.readouterr().err


def test_cli_recall_searches_an_archive_id_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from compaction.cli import main

    db = tmp_path / "sessions.db"
    with SQLiteSessionStore(db) as store:
        save(store, "job-1", identifier_archive())
    base = ["recall", str(db), "--session", "job-1"]
    assert main([*base, PATH, "--from-id", "m_url", "--to-id", "m_path_result"]) == 0
    out = capsys.readouterr().out
    assert "from m_url to m_path_result" in out
    assert "archive id m_path (assistant)" in out
    assert main([*base, PATH, "--from-id", "m_hash", "--json"]) == 1  # the path is archived before the range
    body = json.loads(capsys.readouterr().out)
    assert body["total"] == 0
    assert "from m_hash" in body["answer"]
    cases = [
        ([*base, "--from-id", "m_url", "--to-id", "m_path"], "give a QUERY too"),
        ([*base, PATH, "--from-id", "m_zz"], "archive id 'm_zz' is not in the archive"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        assert message in capsys.readouterr().err


def test_bench_recall_finds_every_archived_identifier(tmp_path: Path) -> None:
    from benchmarks import bench_recall

    row = bench_recall.bench_scenario("coding", 400, counter_for_model("gpt-4o"), tmp_path)
    assert row["facts"] > 0
    for kind in ("memory", "sqlite"):
        figures = row["indexes"][kind]
        assert figures["queries"] == row["facts"]
        assert figures["found"] == figures["queries"], figures["missed"]
    text = bench_recall.markdown({"model": "gpt-4o", "window": 128_000, "seed": 3, "size": 400, "rows": [row]}, "cmd")
    assert text.startswith("Command: `cmd`")
    assert "Sessions of 400 messages" in text
    assert "| coding (openai) |" in text


@pytest.mark.parametrize("query", ["make deploy ENV=staging", "ake deploy ENV=stag", "deploy ENV=s", "ENV=staging"])
def test_partial_words_at_the_ends_and_many_hits(make_source: Callable[[Archive], RecallSource], query: str) -> None:
    """More hits than the store's first probe takes (64): the whole phrase narrows them instead."""
    archive = {f"m_{i:03d}": {"role": "user", "content": f"run make deploy ENV=staging{i} now"} for i in range(100)}
    archive["m_other"] = {"role": "user", "content": "make deploy ENV=prod; staging later"}
    found = make_source(archive).search(query, limit=200)
    assert found.total == found.verbatim == len(found.hits) == 100
    assert "m_other" not in {hit.archive_id for hit in found}


def test_one_word_answers_equal_checking_every_text_with_phrase() -> None:
    """The word-index answer to a one-word query (no text read) is the answer of checking every
    message with Phrase: same hits, order and scores, case and partial words included."""
    import random

    from compaction.recall.text import Phrase, rank_verbatim

    rng = random.Random(7)
    syllables = ["ab", "Ab", "x", "X", "12", "re", "fund", "KRW", "krw", "tes", "t_", "é", "日本"]
    texts = [
        " ".join("".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(0, 12)))
        + rng.choice(["", ".", " -> ", "\n"])
        for _ in range(300)
    ]
    index = MemoryRecallIndex({f"m_{i}": {"role": "user", "content": text} for i, text in enumerate(texts)})
    for query in ["ab", "Ab", "x", "X", "12", "refund", "KRW", "krw", "tes", "t_", "fundab", "é", "日本", "zz"]:
        phrase = Phrase(query)
        ranked = [(i, *phrase.rank(t)) for i, t in enumerate(texts) if phrase.find(t) is not None]
        expected = [f"m_{i}" for i in rank_verbatim(ranked)]
        found = index.search(query, limit=1_000)
        assert [h.archive_id for h in found] == expected, query
        scores = {f"m_{i}": score for i, _, score in ranked}
        assert [h.score for h in found] == pytest.approx([scores[h.archive_id] for h in found]), query


# -- the index's word lists, built in bulk, equal word-by-word indexing ----------------------------

_TRICKY_TEXTS = [
    "Fix super().__init__(**kwargs) in src/a__b.py -> 3f9a2c1b7e4d",
    "İstanbul office: DEPLOY_KEY rotated; Straße ß ẞ; Kelvin \u212a and ohm \u2126",
    "x² + y³ = ½; e\u0301t\u00e9 (combining acute) and \u0130I\u0131i ΣΑΣ σας",
    "tabs\tand\x1cfile\x1dseparators\x1e\x1fand\u00a0nbsp\u2028line\u3000ideographic",
    "日本語のテキスト と ASCII mixed_words_123 und Ärger ÄRGER ärger",
    "",
    "---- ++++ ;;;; (only punctuation)",
    "FAILED tests/test_money.py::test_refund - KeyError: 'JPY'",
]


def _reference_postings(
    texts: list[str],
) -> tuple[dict[str, list[int]], dict[str, list[int]], dict[str, set[int]], list[int]]:
    """Word-by-word indexing with the word pattern itself (what the index must equal)."""
    from collections import Counter

    from compaction.recall.text import WORD

    postings: dict[str, list[int]] = {}
    freqs: dict[str, list[int]] = {}
    written: dict[str, set[int]] = {}
    lengths: list[int] = []
    for doc, text in enumerate(texts):
        counts = Counter(WORD.findall(text.lower()))
        for word, count in counts.items():
            postings.setdefault(word, []).append(doc)
            freqs.setdefault(word, []).append(count)
        for word in WORD.findall(text):
            written.setdefault(word, set()).add(doc)
        lengths.append(sum(counts.values()))
    return postings, freqs, written, lengths


@pytest.mark.parametrize("batch", [1, 3, 100])
def test_bulk_indexing_equals_word_by_word_indexing(batch: int) -> None:
    import random

    rng = random.Random(7)
    texts = [*_TRICKY_TEXTS]
    pieces = " ".join(_TRICKY_TEXTS).split(" ")
    texts += [" ".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))) for _ in range(120)]
    index = MemoryRecallIndex()
    entries = [(f"m{i}", "tool", text) for i, text in enumerate(texts)]
    for start in range(0, len(entries), batch):
        assert index.add(entries[start : start + batch]) == len(entries[start : start + batch])
    postings, freqs, written, lengths = _reference_postings(texts)
    assert {w: list(p) for w, p in index._postings.items()} == postings
    assert list(index._postings) == list(postings)  # new words in the order first seen
    assert {w: list(f) for w, f in index._freqs.items()} == freqs
    assert {w: set(p) for w, p in index._case_postings.items()} == written
    assert all(list(p) == sorted(p) for p in index._case_postings.values())
    assert list(index._lengths) == lengths
    assert index.add(entries[:5]) == 0  # ids seen before keep their first version

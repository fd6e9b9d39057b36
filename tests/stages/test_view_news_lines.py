"""The summarizer view reads, line by line, only the lines that can show news.

A cut result keeps its error lines and the salient lines (paths, URLs, ids, measurements) that show
a word no other result shows; a line every word of which other results show too would come after
all of those, so it is not looked for, and a result with no word of its own is not read line by
line at all.
"""

from __future__ import annotations

import pytest

import compaction.stages.fit as fit
from compaction._cache import memo_scope
from compaction.stages.fit import fit_results, trim_to_chars
from compaction.stages.prune import PruneSettings
from compaction.transcript import Message, ToolResultPart

_FILLER = "\n".join(f"collecting worker batch number {'x' * (i % 7)} please wait" for i in range(40))


def _result(call_id: str, text: str) -> Message:
    return Message(role="tool", id=f"t-{call_id}", parts=(ToolResultPart(call_id=call_id, content=text),))


def _repeated_run(extra: str = "") -> str:
    return "\n".join(
        [
            "$ make test",
            _FILLER,
            "tests/payments/test_refunds.py::test_partial FAILED",
            "see src/payments/refunds.py for the handler",
            "ValueError: amount must be positive",
            extra,
            _FILLER,
            "1 failed, 41 passed",
        ]
    )


def test_a_result_with_no_word_of_its_own_is_not_read_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    original = fit._salient_kind

    def counting(line: str) -> fit.SalientKind | None:
        checked.append(line)
        return original(line)

    monkeypatch.setattr(fit, "_salient_kind", counting)
    unique = "commit: 3f9a2c1b7e4d deployed to https://deploy.example.org/r/4451"
    zone = [_result("c1", _repeated_run()), _result("c2", _repeated_run()), _result("c3", _repeated_run(unique))]
    with memo_scope():  # as in a run: each result's lines are found once for its weight and its cut
        fitted, level = fit_results(zone, room_chars=900, settings=PruneSettings())
    assert level >= 0, "the results must have been cut"
    # Only the third result has words of its own, and only its line holding them is checked.
    assert checked == [unique]
    assert unique in fitted[2].tool_results[0].text


def test_a_repeated_result_keeps_its_error_lines_not_its_repeated_paths() -> None:
    text = _repeated_run()
    common = fit._result_words(text)  # every word of it is found in another result
    cut = trim_to_chars(text, 400, common=common)
    assert cut is not None
    assert "ValueError: amount must be positive" in cut
    assert "tests/payments/test_refunds.py::test_partial FAILED" in cut  # an error line (FAILED)
    # A path line that says nothing new gives its room to the head and tail instead.
    assert "see src/payments/refunds.py for the handler" not in cut


def test_a_line_whose_new_word_sits_inside_another_word_is_not_news() -> None:
    # "handler" is in no other result; the path line holds it only inside a common word.
    text = "\n".join([_FILLER, "see src/payments/handler_v2.py", _FILLER, "handler at 0x7f3a"])
    common = fit._result_words(text) - {"handler", "0x7f3a"}
    candidates, _ = fit._salient_candidates(text, common)
    assert candidates == ()
    # The same line is a candidate once a word of its own is news.
    candidates, _ = fit._salient_candidates(text, common - {"src/payments/handler_v2.py"})
    assert candidates == ("see src/payments/handler_v2.py",)


def test_a_rare_kind_of_line_is_a_candidate_among_hundreds_of_another() -> None:
    # A grep listing 700 matching lines, each with a path of its own, and one timing line after
    # the first 200: the cap on candidates gives each kind its share, so the timing line is one.
    listing = [f"vendor/mod{i}/file{i}.py:{i}:    value_{i} = compute_{i}()" for i in range(700)]
    listing.insert(400, "cold start: 3.98 s")
    text = "\n".join(listing)
    candidates, kinds = fit._salient_candidates(text, frozenset())
    assert len(candidates) == fit._SALIENT_CANDIDATES
    assert "cold start: 3.98 s" in candidates
    assert kinds[candidates.index("cold start: 3.98 s")] == "measure"
    cut = trim_to_chars(text, 600)
    assert cut is not None
    assert "cold start: 3.98 s" in cut


def test_a_cut_shows_one_line_of_each_kind_before_denser_lines_of_one_kind() -> None:
    # A profile's rows hold many numbers of their own each (dense news); its one error line and its
    # one labelled measurement show fewer new words per character, and are kept first all the same.
    rows = [
        f"{40_000 + 137 * i}     {i % 9}.{i:03d}   0.{i:05d}    {i % 7}.{i:03d} src/pkg/mod{i}.py:{i}(fn_{i})"
        for i in range(60)
    ]
    rows.insert(20, "E   KeyError: 'rollup_token_bucket_61912'")
    rows.insert(45, "line coverage: 98.2%")
    text = "\n".join(["   ncalls  tottime  percall  cumtime  filename:lineno(function)", *rows])
    cut = trim_to_chars(text, 500)
    assert cut is not None
    assert "E   KeyError: 'rollup_token_bucket_61912'" in cut
    assert "line coverage: 98.2%" in cut


def test_a_url_in_a_git_log_is_kept_beside_its_commit_ids() -> None:
    entries = []
    for i in range(12):
        entries += [f"commit {i:02d}{'ab3f9c' * 6}{i:02d}", "Author: Jon Park <dev@acme.example>", ""]
        if i == 7:
            entries.append("    https://github.com/kestrel-io/retention-service/issues/4248")
        entries += [f"    Fix persist payload {i}", ""]
    text = "\n".join(entries)
    cut = trim_to_chars(text, 400)
    assert cut is not None
    assert "https://github.com/kestrel-io/retention-service/issues/4248" in cut


def test_a_kind_over_its_share_keeps_its_densest_lines() -> None:
    # A test log: 150 error lines, then 300 lines naming a test file each, one saved path among them
    # after the first 200: paths get what the errors leave, the densest first, so it is one.
    errors = [f"E   AssertionError: case {i} failed in module_{i}" for i in range(150)]
    passed = [
        f"tests/unit/test_module_{i}.py::test_case_number_{i}_with_a_long_name PASSED [ {i % 100}%]" for i in range(300)
    ]
    passed.insert(250, "saved packages/settlement/infra/merge_policy.py")
    candidates, _ = fit._salient_candidates("\n".join(errors + passed), frozenset())
    assert len(candidates) == fit._SALIENT_CANDIDATES
    assert "saved packages/settlement/infra/merge_policy.py" in candidates

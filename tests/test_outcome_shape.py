"""outcome._shape is a necessary condition for equal _raw_key dumps (it lets _archive skip the dump)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from compaction.outcome import _raw_key, _shape

_text = st.sampled_from(["", "a", "ab", "ba", "é", "x" * 3])
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_content = st.none() | _text | st.lists(st.dictionaries(_text, _json, max_size=2), max_size=2)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"])},
    optional={"content": _content, "name": _text, "tool_call_id": _text},
)


@given(_message, _message)
def test_equal_dumps_have_equal_shapes(a: dict[str, Any], b: dict[str, Any]) -> None:
    if _raw_key(a) == _raw_key(b):
        assert _shape(a) == _shape(b)


@given(_message)
def test_a_copy_has_the_same_shape(a: dict[str, Any]) -> None:
    b = dict(reversed(list(a.items())))  # key order does not matter to the dump either
    assert _raw_key(a) == _raw_key(b)
    assert _shape(a) == _shape(b)

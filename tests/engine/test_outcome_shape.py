"""outcome._shape is a necessary condition for equal _raw_key dumps (it lets _archive skip the dump).

Two independent messages almost never dump alike, so a property over independent pairs would only
see its premise hold for equal inputs. Each pair here is a message and a variant of it made for one
purpose: the same dump from a different object (keys in another order, nested too), or one
difference the shape has to see (role, a field, the length of a string content), or one it does not
need to see (a string content of the same length).
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from compaction.outcome import _raw_key, _shape

_text = st.sampled_from(["", "a", "ab", "ba", "é", "x" * 3])
_nonempty_text = st.sampled_from(["a", "ab", "ba", "é", "x" * 3])
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
_ROLES = ("user", "assistant", "tool", "system")
VARIANTS = ("reordered", "other_role", "field_dropped", "field_added", "content_resized", "content_same_length")


def _reordered(value: Any) -> Any:
    """The same value with every mapping's keys reversed (a different object, the same dump)."""
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


def _variant(message: dict[str, Any], kind: str, data: st.DataObject) -> dict[str, Any] | None:
    """``message`` changed as ``kind`` says, or None when it has nothing to change that way."""
    other = copy.deepcopy(message)
    content = message.get("content")
    if kind == "reordered":
        return _reordered(other)
    if kind == "other_role":
        other["role"] = data.draw(st.sampled_from([r for r in _ROLES if r != message["role"]]))
        return other
    if kind == "field_dropped":
        optional = [k for k in message if k != "role"]
        if not optional:
            return None
        del other[data.draw(st.sampled_from(optional))]
        return other
    if kind == "field_added":
        missing = [k for k in ("content", "name", "tool_call_id") if k not in message]
        if not missing:
            return None
        other[data.draw(st.sampled_from(missing))] = None
        return other
    if not isinstance(content, str):
        return None
    if kind == "content_resized":
        other["content"] = content + data.draw(st.sampled_from(["a", "é", " more"]))
        return other
    other["content"] = content[::-1] if content[::-1] != content else "z" * len(content)
    return other


@given(_message, st.sampled_from(VARIANTS), st.data())
def test_equal_dumps_have_equal_shapes_and_changes_the_shape_sees_differ(
    a: dict[str, Any], kind: str, data: st.DataObject
) -> None:
    if kind.startswith("content_") and not (isinstance(a.get("content"), str) and a["content"]):
        a = {**a, "content": data.draw(_nonempty_text)}  # the kinds that change a string content
    if kind == "field_added" and "name" in a:
        a = {k: v for k, v in a.items() if k != "name"}
    if kind == "field_dropped" and len(a) == 1:
        a = {**a, "name": data.draw(_text)}
    b = _variant(a, kind, data)
    assert b is not None, (kind, a)
    event(kind)
    same_dump = _raw_key(a) == _raw_key(b)
    if same_dump:
        assert _shape(a) == _shape(b)
    if kind == "reordered":
        assert same_dump
        assert _shape(a) == _shape(b)
    elif kind == "content_same_length":
        assert not same_dump
        assert _shape(a) == _shape(b)  # a shape is a filter, not a key
    else:
        assert not same_dump
        assert _shape(a) != _shape(b), kind  # what lets _archive skip the dump


@given(_message)
def test_a_copy_has_the_same_shape(a: dict[str, Any]) -> None:
    b = dict(reversed(list(a.items())))  # key order does not matter to the dump either
    assert _raw_key(a) == _raw_key(b)
    assert _shape(a) == _shape(b)

"""`from_ext`'s compiled straight-line path agrees with the cattrs converter on every header
class of the protocol package: the same value for what both accept, the same `HeaderError` for
what the converter refuses (the compiled path hands anything unusual to the converter)."""

from __future__ import annotations

import inspect
import typing
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol import headers, pop_headers, serde
from rocketrio.protocol.pop_headers import AckMessageRequestHeader
from rocketrio.protocol.serde import HeaderError, from_ext


def _classes() -> list[type]:
    out = []
    for mod in (headers, pop_headers):
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == mod.__name__ and attrs.has(cls):
                out.append(cls)
    return out


CLASSES = _classes()
COMPILED = [c for c in CLASSES if serde._compile_from_ext(c) is not None]

# values a client may send, and ones the converter must judge
TEXT = st.one_of(
    st.sampled_from(["", "0", "1", "-7", " 12 ", "true", "false", "TRUE", "x", "1.5", "9" * 20]),
    st.text(max_size=6),
    st.none(),
    st.integers(-5, 5),
    st.booleans(),
)


def _cattrs(cls: type, ext: dict[str, Any]) -> Any:
    try:
        return ("ok", serde._from_ext_cattrs(cls, ext))
    except HeaderError as e:
        return ("error", str(e))


def _fast(cls: type, ext: dict[str, Any]) -> Any:
    try:
        return ("ok", from_ext(cls, ext))
    except HeaderError as e:
        return ("error", str(e))


def test_most_header_classes_are_compiled() -> None:
    assert len(COMPILED) >= 0.8 * len(CLASSES)
    assert AckMessageRequestHeader in COMPILED
    assert headers.EndTransactionRequestHeader in COMPILED


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_compiled_agrees_with_the_converter(data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(COMPILED))
    names = [a.name for a in attrs.fields(cls)]
    ext = data.draw(
        st.dictionaries(st.sampled_from([*names, "extra"]), TEXT, max_size=len(names) + 1)
    )
    assert _fast(cls, ext) == _cattrs(cls, ext)


@pytest.mark.parametrize("flag", ["true", "false", "1", "0", ""])
@pytest.mark.parametrize("cls", COMPILED, ids=lambda c: c.__name__)
def test_a_full_valid_header_takes_the_compiled_path(cls: type, flag: str) -> None:
    # every field present, so the compiled path decides every value (a random dict of the
    # test above rarely holds all the required fields of a class with a bool among them)
    hints = typing.get_type_hints(cls)
    ext = {}
    for a in attrs.fields(cls):
        args = typing.get_args(hints[a.name])
        base = next((x for x in args if x is not type(None)), None) if args else hints[a.name]
        ext[a.name] = {str: "s", int: "42", bool: flag}[base]
    fast = serde._compile_from_ext(cls)
    assert fast(ext) == serde._from_ext_cattrs(cls, ext)


def test_the_ack_header_as_a_client_sends_it() -> None:
    ext = {
        "consumerGroup": "g",
        "topic": "T",
        "queueId": "2",
        "extraInfo": "1234 1764360000000 60000 3 0 b 2 1240",
        "offset": "1240",
    }
    h = from_ext(AckMessageRequestHeader, ext)
    assert (h.queueId, h.offset, h.bname) == (2, 1240, None)
    with pytest.raises(HeaderError, match="offset"):
        from_ext(AckMessageRequestHeader, {**ext, "offset": "x"})
    with pytest.raises(HeaderError, match="extraInfo"):
        from_ext(AckMessageRequestHeader, {k: v for k, v in ext.items() if k != "extraInfo"})

"""The compiled read of an ACK_MESSAGE's fields and receipt (protocol/speedups/ack_request.c)
against its Python twin `pop_headers.ack_request_py`: whatever the compiled one takes, it takes
with the twin's values and types; whatever the twin declines, so does it (it may decline more:
the Python steps then decide). A client's plain ACK is taken, not declined."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol import compiled, pop_headers
from rocketrio.protocol.pop_headers import ack_request_py
from tests.harness.speedups import extension_in


@pytest.fixture(scope="module")
def c_ext() -> Iterator[Any]:
    with extension_in(pop_headers) as mod:
        yield mod


def test_the_compiled_read_is_chosen() -> None:
    if compiled.speedups is not None:  # the product's choice at import (not pure Python)
        assert pop_headers.ack_request is compiled.speedups.ack_request


# numbers as a client writes them, and what int() reads otherwise (or refuses)
plain = st.integers(-(10**18) + 1, 10**18 - 1).map(str)
odd = st.sampled_from(
    ["", "-", "+5", " 5", "5 ", "0_1", "\u0663", "-0", "007", "1" * 19, "-" + "9" * 18, "1.0",
     "0x1", "5\n", "\t5", "\uff11"]
)  # fmt: skip
number = plain | odd
ascii_word = st.sampled_from(["0", "1", "%RETRY%", "broker-a", ""]) | st.text(
    st.characters(min_codepoint=33, max_codepoint=126), max_size=6
)
word = (
    st.sampled_from(["0", "1", "%RETRY%", "broker-a", "é", ""])
    | st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=6)
    | st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
)


@st.composite
def receipts(draw: st.DrawFn) -> str:
    n = draw(st.sampled_from([7, 8, 7, 8, 7, 8, 6, 9]))
    fields = [draw(plain) for _ in range(n)]
    for k in (4, 5):
        if k < n:
            fields[k] = draw(ascii_word)
    if draw(st.integers(0, 3)) == 0:  # one odd change in a quarter
        k = draw(st.integers(0, n - 1))
        fields[k] = draw(number | word)
    sep = draw(st.sampled_from([" "] * 8 + ["  ", "\t"]))
    return sep.join(fields) if sep != "\t" else " ".join(fields[:-1]) + "\t" + fields[-1]


def value(s: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return s | st.sampled_from([None, 5, True, b"5"])


@st.composite
def exts(draw: st.DrawFn) -> Any:
    ext: dict[Any, Any] = {
        "consumerGroup": draw(word),
        "topic": draw(word),
        "queueId": draw(number),
        "extraInfo": draw(receipts()),
        "offset": draw(number),
    }
    if draw(st.integers(0, 3)) == 0:  # one odd key or value in a quarter
        key = draw(st.sampled_from(sorted(ext)))
        what = draw(st.sampled_from(["drop", "value", "extra"]))
        if what == "drop":
            del ext[key]
        elif what == "value":
            ext[key] = draw(value(number | word))
        else:
            ext["bname"] = draw(word)
    return ext


@settings(max_examples=800)
@given(fields=exts())
def test_the_compiled_read_agrees_with_its_twin(c_ext: Any, fields: Any) -> None:
    got = c_ext.ack_request(fields)
    want = ack_request_py(fields)
    if got is not None:
        assert got == want
        assert [type(x) for x in got] == [type(x) for x in want]  # type: ignore[union-attr]
    if want is None:
        assert got is None


@pytest.mark.parametrize("receipt", ["1234 1764360000000 60000 3 0 broker-a 2 1250",
                                     "0 1 2 0 %RETRY% b 0", "-1 0 0 1 x  0"])  # fmt: skip
def test_a_plain_ack_is_taken(c_ext: Any, receipt: str) -> None:
    fields = {"consumerGroup": "G", "topic": "T", "queueId": "2", "extraInfo": receipt}
    fields["offset"] = "1250"
    want = ack_request_py(fields)
    assert want is not None and c_ext.ack_request(fields) == want


def test_a_ninth_field_or_a_sixth_is_declined(c_ext: Any) -> None:
    for receipt in ["1 2 3 4 0 b 6 7 8", "1 2 3 4 0 b"]:
        fields = {"consumerGroup": "G", "topic": "T", "queueId": "2", "extraInfo": receipt}
        fields["offset"] = "1"
        assert c_ext.ack_request(fields) is None and ack_request_py(fields) is None

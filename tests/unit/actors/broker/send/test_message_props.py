"""The send processor's property helpers (actors/broker/send/processor.py), table-driven."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.broker.send.message_props import append_props, prop_value
from rocketrio.protocol.message import decode_properties, encode_properties

_prop_text = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1
)


@given(st.dictionaries(_prop_text, _prop_text, max_size=6), _prop_text)
def test_prop_value_agrees_with_decoding(props: dict[str, str], key: str) -> None:
    text = encode_properties(props)
    assert prop_value(text, key) == decode_properties(text).get(key)
    extended = append_props(text, f"{key}\x01v\x02")
    assert decode_properties(extended)[key] == "v"


def test_append_props_repairs_a_missing_separator() -> None:
    assert decode_properties(append_props("A\x011", "B\x012\x02")) == {"A": "1", "B": "2"}

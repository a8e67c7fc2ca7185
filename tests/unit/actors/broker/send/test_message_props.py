"""The send processor's property helpers (actors/broker/send/processor.py), table-driven."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from rocketrio.actors.broker.send.message_props import append_props, prop_value, stamp_props
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


def _stamp_by_parts(props: str, cluster: str, new: str) -> tuple[str, str]:
    """What the send did before `stamp_props`: `prop_value`, then `append_props` twice."""
    uniq = prop_value(props, "UNIQ_KEY")
    if not uniq:
        uniq = new
        props = append_props(props, f"UNIQ_KEY\x01{uniq}\x02")
    return append_props(props, cluster), uniq


_texts = st.lists(
    st.sampled_from(["UNIQ_KEY", "\x01", "\x02", "K", "v", "é", " "]), max_size=12
).map("".join)


@given(
    st.one_of(
        st.dictionaries(_prop_text | st.just("UNIQ_KEY"), _prop_text | st.just(""), max_size=5).map(
            encode_properties
        ),
        _texts,
        _texts.map(lambda t: t.rstrip("\x02")),
    ),
    st.sampled_from(["CLUSTER\x01DefaultCluster\x02", ""]),
)
# the shapes a random draw may miss: the client's UNIQ_KEY after another property (ended or not),
# first, empty, and no properties at all
@example("TAGS\x01a\x02UNIQ_KEY\x01C0A8000100002A9F\x02", "CLUSTER\x01DefaultCluster\x02")
@example("KEYS\x01k\x02UNIQ_KEY\x01C0A8000100002A9F", "CLUSTER\x01DefaultCluster\x02")
@example("UNIQ_KEY\x01C0A8000100002A9F\x02TAGS\x01a\x02", "CLUSTER\x01DefaultCluster\x02")
@example("TAGS\x01a\x02UNIQ_KEY\x01\x02", "CLUSTER\x01DefaultCluster\x02")
@example("", "CLUSTER\x01DefaultCluster\x02")
def test_stamp_props_is_prop_value_then_append_props(props: str, cluster: str) -> None:
    assert stamp_props(props, cluster, lambda: "NEWUNIQ") == _stamp_by_parts(
        props, cluster, "NEWUNIQ"
    )

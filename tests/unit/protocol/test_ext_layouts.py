"""Compiled extFields decoders (`protocol/ext_layouts.py`, issue 28 item 1): a remembered shape
decodes a header exactly as the generic entry-by-entry decoder does, anything else misses."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol import remoting
from rocketrio.protocol.codes import SERIALIZE_ROCKETMQ
from rocketrio.protocol.ext_layouts import ExtLayouts
from rocketrio.protocol.remoting import FrameDecoder, RemotingCommand, encode_command

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
ascii_text = st.text(st.characters(max_codepoint=127), max_size=12)
ext_dicts = st.dictionaries(st.one_of(ascii_text, text), st.one_of(ascii_text, text), max_size=14)


def ext_bytes(ext: dict[str, str]) -> bytes:
    """extFields on the wire, built by hand (upstream's layout)."""
    out = b""
    for k, v in ext.items():
        kb, vb = k.encode(), v.encode()
        out += struct.pack(">h", len(kb)) + kb + struct.pack(">i", len(vb)) + vb
    return out


def generic(raw: bytes) -> dict[str, str]:
    return remoting._decode_ext_entries(raw, raw.decode("latin-1"), 0, len(raw))


def send_v2(queue_id: str, uniq: str) -> dict[str, str]:
    """A Java SEND_MESSAGE_V2 header's fields."""
    props = f"UNIQ_KEY\x01{uniq}\x02WAIT\x01true\x02"
    return {
        "a": "producer_group", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": queue_id,
        "f": "0", "g": "1764370000123", "h": "0", "i": props, "j": "0", "k": "false",
        "m": "16", "n": "broker-a",
    }  # fmt: skip


@settings(max_examples=200)
@given(first=ext_dicts, second=ext_dicts)
def test_a_learned_shape_decodes_like_the_generic_decoder(
    first: dict[str, str], second: dict[str, str]
) -> None:
    layouts = ExtLayouts()
    raw1, raw2 = ext_bytes(first), ext_bytes(second)
    if all(s.isascii() for s in [*first, *first.values()]):  # what the decoder offers
        layouts.learn(generic(raw1))
        layouts.learn(generic(raw1))
    for raw in (raw1, raw2):
        got = layouts.match(raw.decode("latin-1"), 0, len(raw))
        assert got is None or got == generic(raw)


@settings(max_examples=100)
@given(ext=st.dictionaries(ascii_text, ascii_text, min_size=4, max_size=14), data=st.data())
def test_same_lengths_other_values_match_and_decode_right(
    ext: dict[str, str], data: st.DataObject
) -> None:
    layouts = ExtLayouts()
    layouts.learn(ext)
    layouts.learn(dict(ext))
    other = {
        k: data.draw(st.text(st.characters(max_codepoint=127), min_size=len(v), max_size=len(v)))
        for k, v in ext.items()
    }
    raw = b"\x00pad" + ext_bytes(other) + b"tail"
    assert layouts.match(raw.decode("latin-1"), 4, len(raw) - 4) == other == generic(raw[4:-4])


def test_what_misses_a_learned_shape() -> None:
    layouts = ExtLayouts()
    ext = send_v2("3", "7F0000010000" + "0" * 20)
    layouts.learn(ext)
    assert len(layouts) == 0  # seen once: not compiled
    layouts.learn(dict(ext))
    assert len(layouts) == 1

    def match(fields: dict[str, str], extra: bytes = b"") -> dict[str, str] | None:
        raw = ext_bytes(fields) + extra
        return layouts.match(raw.decode("latin-1"), 0, len(raw))

    assert match(send_v2("5", "7F0000010000" + "1" * 20)) == send_v2("5", "7F0000010000" + "1" * 20)
    assert match(send_v2("12", "7F0000010000" + "0" * 20)) is None  # a value of another length
    assert match(send_v2("\u00e9", "7F0000010000" + "0" * 20)) is None  # 2 UTF-8 bytes
    assert match({**ext, "m": "\u00e9"}) is None  # as many bytes as "16", not ASCII
    assert match(ext, b"\x00\x01z\x00\x00\x00\x00") is None  # one entry more
    assert match({**ext, "a": ext["a"].upper()}) is not None  # values are free, lengths are not
    assert match({("A" if k == "a" else k): v for k, v in ext.items()}) is None  # another key


def test_bounds() -> None:
    layouts = ExtLayouts(max_layouts=3, max_tries=2, max_seen=8)
    for i in range(20):  # shapes seen once: nothing compiled, the seen table stays small
        layouts.learn({"a": "x" * i, "b": "1", "c": "2", "d": "3"})
    assert len(layouts) == 0 and len(layouts._seen) <= 8
    assert layouts.learn({"a": "x"}) is None and len(layouts) == 0  # short headers are not kept
    shapes = [{"a": "x" * i, "b": "1", "c": "2", "d": "3"} for i in range(5)]
    for ext in shapes:
        layouts.learn(ext)
        layouts.learn(ext)
    assert len(layouts) == 3
    raw = ext_bytes(shapes[2])  # third newest: beyond max_tries, so a miss
    assert layouts.match(raw.decode("latin-1"), 0, len(raw)) is None
    layouts.learn(shapes[2])
    layouts.learn(shapes[2])  # compiled again: to the front, not twice
    assert len(layouts) == 3 and layouts.match(raw.decode("latin-1"), 0, len(raw)) == shapes[2]


def test_a_java_send_header_through_the_frame_decoder_learns_then_matches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(remoting, "_LAYOUTS", ExtLayouts())
    # the layouts serve the pure-Python decoder (the compiled one reads entries directly)
    monkeypatch.setattr(remoting, "_decode_rocketmq_header", remoting._decode_rocketmq_header_py)
    monkeypatch.setattr(remoting, "_next_rocketmq_frame", None)  # the decoder's Python path
    dec = FrameDecoder()
    for i in range(4):
        fields = send_v2(str(i), f"{i:032X}")
        cmd = RemotingCommand(
            310, opaque=i, ext_fields=fields, body=b"b" * 10, language="JAVA", version=453,
            serialize_type=SERIALIZE_ROCKETMQ,
        )  # fmt: skip
        dec.feed(encode_command(cmd))
        got = dec.next_command()
        assert got is not None and got.ext_fields == fields and list(got.ext_fields) == list(fields)
        assert len(remoting._LAYOUTS) == (1 if i >= 1 else 0)

"""The compiled twins (`rocketrio.protocol._speedups`) against their pure-Python references.

Every compiled function must give the bytes its twin gives and, for bad input, an exception
of the same class with the same text. The inputs are built to reach every branch: well-formed
batches with hostile properties (separators, stale ``__CRC32#`` pairs, repeated or empty
UNIQ_KEY / TAGS, non-UTF-8), bodies on both sides of the CRC-combine threshold, properties
over 32767 bytes, offsets at the int64 edge, then truncated, spliced and random bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol import compiled, message_build, remoting
from rocketrio.protocol.message_build import BatchConstants, build_batch_records

BORN = (b"\x0a\x00\x00\x02", 50000)
STORE = (b"\x7f\x00\x00\x01", 10911)
INT64_MAX = 2**63 - 1


@pytest.fixture(scope="module", autouse=True)
def _compiled_twins() -> Iterator[None]:
    """The twins are compared even in a run that asked for pure Python
    (ROCKETRIO_PURE_PYTHON=1 leaves the product on the Python twins, not these tests)."""
    with pytest.MonkeyPatch.context() as m:
        if compiled.speedups is None:
            m.delenv("ROCKETRIO_PURE_PYTHON", raising=False)
            ext = compiled.load()
            assert ext is not None, "the extension is not built"
            ext.configure_record(message_build._append_record_py)
            ext.configure_remoting(
                remoting.RemotingCommand, remoting._LANG_NAME_BY_CODE,
                remoting._LANG_CODE_BY_NAME, remoting._LANG_OTHER,
            )  # fmt: skip
            m.setattr(message_build, "_speedups", ext)
            m.setattr(remoting, "_speedups", ext)
        yield


def test_the_extension_is_built_and_used() -> None:
    """CI must test the compiled path: the test venv has the extension and picks it."""
    from rocketrio.protocol import _speedups  # type: ignore[attr-defined]

    assert compiled.load() is _speedups
    if compiled.speedups is not None:  # the product's choice at import (not pure Python)
        assert message_build._build_records is message_build._build_records_c
        assert message_build.append_record is _speedups.append_record
        assert remoting._decode_rocketmq_header is remoting._decode_rocketmq_header_c


def test_pure_python_is_asked_for_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETRIO_PURE_PYTHON", "1")
    assert compiled.load() is None


# ------------------------------------------------------------------ batch bodies

# property bytes that hit the lookups' corner cases
prop_atoms = st.sampled_from(
    [
        b"UNIQ_KEY\x01", b"TAGS\x01", b"KEYS\x01", b"__CRC32#\x01", b"__CRC32#", b"\x01",
        b"\x02", b"a", b"TagA", b"k\x01v\x02", b"UNIQ_KEY\x01U1\x02", b"TAGS\x01t\x02",
        b"TAGS\x01\x02", b"UNIQ_KEY\x01\x02", b"\xff\xfe", "é".encode(), b"__CRC32#\x011\x02",
    ]
)  # fmt: skip
prop_bytes = st.lists(prop_atoms | st.binary(max_size=6), max_size=8).map(b"".join)
bodies = st.one_of(
    st.binary(max_size=40),
    st.integers(2040, 2100).map(lambda n: bytes(range(256)) * (n // 256) + b"x" * (n % 256)),
)


def encode_item(flag: int, body: bytes, props: bytes, total_delta: int = 0) -> bytes:
    total = 20 + len(body) + 2 + len(props) + total_delta
    return (
        struct.pack(">iiiii", total, 0, 0, flag, len(body))
        + body
        + struct.pack(">H", len(props) & 0xFFFF)
        + props
    )


items = st.tuples(st.integers(-(2**31), 2**31 - 1), bodies, prop_bytes)
well_formed = st.lists(items, max_size=5).map(lambda xs: b"".join(encode_item(*x) for x in xs))


@st.composite
def batch_bodies(draw: st.DrawFn) -> bytes:
    """A well-formed body, or one cut, spliced with random bytes, or random altogether."""
    data = draw(well_formed)
    how = draw(st.sampled_from(["keep", "cut", "splice", "random", "lengths"]))
    if how == "cut" and data:
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "splice":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(max_size=30)) + data[at:]
    if how == "random":
        return draw(st.binary(max_size=80))
    if how == "lengths":
        flag, body, props = draw(items)
        return data + encode_item(flag, body, props, draw(st.integers(-25, 25)))
    return data


consts = st.builds(
    BatchConstants,
    topic=st.sampled_from(["T", "TopicB", "x" * 130]),
    queue_id=st.integers(0, 2**31 - 1),
    sys_flag=st.integers(0, 0xFF),
    born_timestamp=st.integers(0, 2**40),
    born_host=st.sampled_from([BORN, (bytes(range(16)), 7)]),
    store_timestamp=st.integers(0, 2**40),
    store_host=st.just(STORE),
    reconsume_times=st.integers(0, 16),
    properties=st.sampled_from(
        [b"", b"CLUSTER\x01c\x02", b"UNIQ_KEY\x01BATCH\x02", b"TAGS\x01BT\x02KEYS\x01k1 k2\x02",
         b"__CRC32#\x010000000000\x02A\x01b\x02", b"TAGS\x01\x02"]
    ),
)  # fmt: skip


def outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """What a call gives: its value, or its exception's class and text; with the uniq keys
    it asked for."""
    asked: list[str] = []

    def new_uniq_key() -> str:
        asked.append(f"GEN{len(asked)}")
        return asked[-1]

    if "gen" in kwargs:  # the twins take it positionally (None: no new ids)
        args = (*args, new_uniq_key if kwargs.pop("gen") else None)
    else:
        kwargs["new_uniq_key"] = new_uniq_key
    try:
        value = fn(*args, **kwargs)
    except Exception as e:
        return ("raised", type(e), str(e), asked)
    return ("returned", value, asked)


@settings(max_examples=300, deadline=None)
@given(
    data=batch_bodies(),
    const=consts,
    first_qo=st.integers(0, INT64_MAX) | st.just(INT64_MAX),
    first_phy=st.integers(0, INT64_MAX) | st.sampled_from([INT64_MAX - 100, 2**63]),
    max_body=st.sampled_from([0, 30, 4096, 2**70]),
    strip_crc=st.booleans(),
    gen=st.booleans(),
)
def test_build_records_twins_agree(
    data: bytes,
    const: BatchConstants,
    first_qo: int,
    first_phy: int,
    max_body: int,
    strip_crc: bool,
    gen: bool,
) -> None:
    args = (data, const, first_qo, first_phy, max_body)
    py = outcome(message_build._build_records_py, *args, strip_crc=strip_crc, gen=gen)
    c = outcome(message_build._build_records_c, *args, strip_crc=strip_crc, gen=gen)
    assert c == py


@settings(max_examples=150, deadline=None)
@given(data=batch_bodies(), const=consts, big=st.integers(0, 3))
def test_build_batch_records_agrees_on_both_paths(
    data: bytes, const: BatchConstants, big: int
) -> None:
    """The public entry (replay after a stale __CRC32#, UTF-8 check, KEYS) on either twin;
    ``big`` pads one property past 32767 bytes."""
    if big == 3:
        data += encode_item(0, b"b", b"P\x01" + b"v" * 32760 + b"\x02")
    results = []
    for twin in (message_build._build_records_py, message_build._build_records_c):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(message_build, "_build_records", twin)
            results.append(
                outcome(
                    build_batch_records,
                    data,
                    const,
                    first_queue_offset=7,
                    first_physical_offset=1000,
                    max_body_size=4096,
                )
            )
    assert results[0] == results[1]


@pytest.mark.parametrize("twin", ["_build_records_py", "_build_records_c"])
def test_a_batch_builds_on_each_path(twin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both paths seal records that decode back (the pure path stays tested in this venv)."""
    from rocketrio.protocol.message_decode import decode_stored

    monkeypatch.setattr(message_build, "_build_records", getattr(message_build, twin))
    body = encode_item(1, b"hello", b"TAGS\x01t1\x02") + encode_item(2, b"x" * 3000, b"")
    const = BatchConstants("T", 2, 0, 5, BORN, 6, STORE, 0, b"KEYS\x01k\x02")
    built = build_batch_records(
        body, const, first_queue_offset=0, first_physical_offset=100, max_body_size=4096,
        new_uniq_key=lambda: "U",
    )  # fmt: skip
    assert built.tags == [b"t1", b""] and built.uniq_keys == [b"U", b"U"]
    first, end = decode_stored(built.data, check_crc=True)
    second, _ = decode_stored(built.data, end, check_crc=True)
    assert first.body == b"hello" and first.properties["KEYS"] == "k"
    assert second.body == b"x" * 3000 and second.queue_offset == 1


# ------------------------------------------------------------------ remoting header

texts = st.text(max_size=12) | st.sampled_from(["", "a\udcff", "é", "x" * 40])


def header_bytes(
    code: int, lang: int, version: int, opaque: int, flag: int, remark: bytes,
    entries: list[tuple[bytes, bytes]], overlong: int = 0,
) -> bytes:  # fmt: skip
    """A ROCKETMQ header; ``overlong`` adds to the last value's declared length."""
    ext = b"".join(
        struct.pack(">h", len(k)) + k + struct.pack(">i", len(v) + overlong * (i == 0)) + v
        for i, (k, v) in enumerate(reversed(entries))
    )
    head = struct.pack(">hbhiii", code, lang, version, opaque, flag, len(remark))
    return head + remark + struct.pack(">i", len(ext)) + ext


utf8ish = st.one_of(
    st.text(max_size=8).map(str.encode),
    st.text(st.characters(max_codepoint=127), max_size=13).map(str.encode),
    st.binary(max_size=4),
)
java_keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"i", b"j", b"k"])


@st.composite
def rocketmq_headers(draw: st.DrawFn) -> bytes:
    """A ROCKETMQ header, well formed or cut, spliced, re-lengthed or random."""
    raw = header_bytes(
        draw(st.integers(-32768, 32767)),
        draw(st.integers(-128, 127)),
        draw(st.integers(-32768, 32767)),
        draw(st.integers(-(2**31), 2**31 - 1)),
        draw(st.integers(-(2**31), 2**31 - 1)),
        draw(st.just(b"") | utf8ish),
        draw(st.lists(st.tuples(java_keys | utf8ish, utf8ish), max_size=14)),
        draw(st.just(0) | st.integers(1, 40)),
    )
    how = draw(st.sampled_from(["keep", "keep", "cut", "splice", "random", "poke"]))
    if how == "cut":
        return raw[: draw(st.integers(0, len(raw)))]
    if how == "splice":
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + draw(st.binary(max_size=8)) + raw[at:]
    if how == "random":
        return draw(st.binary(max_size=60))
    if how == "poke":  # one byte changed: a length, a flag or text
        at = draw(st.integers(0, len(raw) - 1) | st.integers(17, len(raw) - 1))
        return raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1 :]
    return raw


def remoting_outcome(fn: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    try:
        return ("returned", fn(*args))
    except Exception as e:
        return ("raised", type(e), str(e), getattr(e, "reason", None))


@settings(max_examples=300, deadline=None)
@given(raw=rocketmq_headers(), body=st.binary(max_size=5))
def test_decode_rocketmq_header_twins_agree(raw: bytes, body: bytes) -> None:
    from rocketrio.protocol import _speedups  # type: ignore[attr-defined]

    py = remoting_outcome(remoting._decode_rocketmq_header_py, raw, body)
    assert remoting_outcome(remoting._decode_rocketmq_header_c, raw, body) == py
    # the compiled twin decodes every header the reference accepts (declines only the rest)
    direct = _speedups.decode_rocketmq_header(raw, body)
    assert direct == (py[1] if py[0] == "returned" else None)


@settings(max_examples=250, deadline=None)
@given(
    code=st.integers(-40000, 40000),
    language=st.sampled_from(["JAVA", "PYTHON", "CPP", "GO", "nope", ""]),
    version=st.integers(-40000, 40000) | st.integers(0, 500),
    opaque=st.integers(-(2**31), 2**31 - 1) | st.integers(-(2**33), 2**33),
    flag=st.integers(0, 3),
    remark=st.none() | texts,
    ext=st.dictionaries(texts | st.just("k" * 40000), texts, max_size=6),
)
def test_rocketmq_header_twins_agree(
    code: int, language: str, version: int, opaque: int, flag: int, remark: str | None,
    ext: dict[str, str],
) -> None:  # fmt: skip
    from rocketrio.protocol import _speedups  # type: ignore[attr-defined]

    args = (code, language, version, opaque, flag, remark, ext)
    py = remoting_outcome(remoting._rocketmq_header_of_py, *args)
    assert remoting_outcome(remoting._rocketmq_header_of_c, *args) == py
    direct = _speedups.rocketmq_header(*args)
    assert direct == (py[1] if py[0] == "returned" else None)


@pytest.mark.parametrize("compiled_path", [False, True])
def test_a_java_send_frame_decodes_on_each_path(
    compiled_path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frame decoder on both paths (the pure one stays tested in this venv)."""
    twin = "_decode_rocketmq_header_c" if compiled_path else "_decode_rocketmq_header_py"
    monkeypatch.setattr(remoting, "_decode_rocketmq_header", getattr(remoting, twin))
    if not compiled_path:  # the decoder's Python path too (frame.c takes whole frames)
        monkeypatch.setattr(remoting, "_next_rocketmq_frame", None)
    fields = {"a": "PG", "b": "TopicTest", "e": "3", "i": "UNIQ_KEY\x01AB\x02", "m": "false"}
    cmd = remoting.RemotingCommand(
        310, opaque=9, remark="r", ext_fields=fields, body=b"payload", language="JAVA",
        version=453, serialize_type=1,
    )  # fmt: skip
    dec = remoting.FrameDecoder()
    dec.feed(remoting.encode_command(cmd) * 2)
    assert dec.next_command() == cmd and dec.next_command() == cmd
    dec.feed(b"\x00\x00\x00\x20\x01\x00\x00\x15" + b"\x00" * 13 + b"\xff\xff\xff\xff" * 5)
    with pytest.raises(remoting.RemoteProtocolError, match="remark length out of range"):
        dec.next_command()


# ------------------------------------------------------------------ one record (put_messages)

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), INT64_MAX)
IPS = [b"\x7f\x00\x00\x01", bytes(range(16))]
# one argument made unfit at a time (argument index -> what it becomes), or none (most runs)
BREAKS: dict[int, Any] = {
    0: "x" * 128, 1: 2**31, 5: -(2**31) - 1, 6: 2**63, 7: (b"\x01\x02", 1), 9: (IPS[0], 2**31),
    12: 2**63, 4: b"P\x01" + b"v" * 32760,
}  # fmt: skip
records = st.tuples(
    st.sampled_from(["T", "TopicA", "é", "x" * 127, "a\udcff"]),
    I32, bodies, I32, prop_bytes, I32, I64,
    st.tuples(st.sampled_from(IPS), I32), I64, st.tuples(st.sampled_from(IPS), I32),
    I32, I64, I64, I64,
)  # fmt: skip


def fast_path(args: tuple[Any, ...]) -> bool:
    """Whether the compiled append_record takes these arguments itself (else its twin)."""
    topic, props = args[0].encode("utf-8", "replace"), args[4]
    i32 = [args[1], args[3], args[5], args[10], args[7][1], args[9][1]]
    i64 = [args[6], args[8], args[11], args[12], args[13]]
    props_len = len(props) + (1 if props and props[-1] != 2 else 0) + 20
    return (
        len(topic) <= 127
        and "\udcff" not in args[0]
        and all(-(2**31) <= v < 2**31 for v in i32)
        and all(-(2**63) <= v < 2**63 for v in i64)
        and all(len(h[0]) in (4, 16) for h in (args[7], args[9]))
        and props_len <= 32767
    )


@settings(max_examples=300, deadline=None)
@given(args=records, broken=st.none() | st.none() | st.sampled_from(sorted(BREAKS)))
def test_append_record_twins_agree(args: tuple[Any, ...], broken: int | None) -> None:
    from rocketrio.protocol import _speedups  # type: ignore[attr-defined]

    if broken is not None:
        args = (*args[:broken], BREAKS[broken], *args[broken + 1 :])
    outs: list[list[Any]] = [[], []]
    py = remoting_outcome(message_build._append_record_py, outs[0], *args)
    c = remoting_outcome(_speedups.append_record, outs[1], *args)
    assert c == py
    assert b"".join(outs[1]) == b"".join(outs[0])
    # one part when the compiled twin built it, the reference's four when it declined
    assert len(outs[1]) == (1 if fast_path(args) else len(outs[0]))

"""`empty_answer_frame` is `encode_command(request.make_response(code))` byte for byte, for
every opaque of either serialize type (the template is only a faster way to the same bytes)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketrio.protocol.answer_frames import answer_frame_of, answer_frames_of, empty_answer_frame
from rocketrio.protocol.codes import SERIALIZE_JSON, SERIALIZE_ROCKETMQ, RequestCode, ResponseCode
from rocketrio.protocol.remoting import FrameDecoder, RemotingCommand, encode_command


@given(
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from([SERIALIZE_JSON, SERIALIZE_ROCKETMQ]),
    st.sampled_from([ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR]),
    st.sampled_from(["PYTHON", "JAVA", "GO"]),
)
def test_the_template_is_the_encoded_answer(
    opaque: int, serialize_type: int, code: int, language: str
) -> None:
    request = RemotingCommand(
        RequestCode.ACK_MESSAGE,
        opaque=opaque,
        ext_fields={"topic": "T", "extraInfo": "1 2 3 4 0 b 0 7"},
        language=language,
        serialize_type=serialize_type,
    )
    frame = empty_answer_frame(request, code)
    assert frame == encode_command(request.make_response(code))
    d = FrameDecoder(1 << 20)
    d.feed(frame)
    answer = d.next_command()
    assert answer is not None and answer.opaque == opaque and answer.code == code
    assert answer.is_response


def test_an_unknown_serialize_type_has_no_template() -> None:
    assert empty_answer_frame(RemotingCommand(1, serialize_type=7), 0) is None


@given(
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=20),
    st.sampled_from([SERIALIZE_JSON, SERIALIZE_ROCKETMQ, 7]),
    st.sampled_from([ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR]),
)
def test_a_run_of_answers_is_each_answer_joined(
    opaques: list[int], serialize_type: int, code: int
) -> None:
    one_by_one = [answer_frame_of(serialize_type, o, code) for o in opaques]
    run = answer_frames_of(serialize_type, opaques, code)
    if serialize_type == 7:
        assert run is None
    else:
        assert run == b"".join(f for f in one_by_one if f is not None)

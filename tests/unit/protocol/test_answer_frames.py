"""`empty_answer_frame` is `encode_command(request.make_response(code))` byte for byte, for
every opaque of either serialize type (the template is only a faster way to the same bytes)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketrio.protocol.answer_frames import empty_answer_frame
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

"""Answers that are the same bytes but for the opaque, encoded once per serialize type.

An ACK_MESSAGE's SUCCESS answer (code, flag, language, version, no remark, no extFields, no
body) differs from the next one only by the request's opaque, and a broker sends one per
acknowledged message. `empty_answer_frame` returns the frame `encode_command` would give for
``request.make_response(code)``, built from a template (the frame around a marker opaque, split
once) instead of a header encoded per answer. A JSON header writes the opaque in decimal (its
length words follow the digits); a ROCKETMQ header as a fixed int32.

Pure: bytes in, bytes out. tests/unit/protocol/test_answer_frames.py holds it to
`encode_command` byte for byte.
"""

from __future__ import annotations

import struct

from rocketrio.protocol.codes import SERIALIZE_JSON, SERIALIZE_ROCKETMQ
from rocketrio.protocol.remoting import RemotingCommand, encode_command

_MARK = 1592614637  # a marker opaque (an int32) whose encodings occur once in a header
_I32 = struct.Struct(">i")
_HDR = struct.Struct(">ii")
# (serialize type, code) -> (before the opaque, after it, their length) for JSON; the whole
# frame split around the opaque's four bytes for ROCKETMQ
_TEMPLATES: dict[tuple[int, int], tuple[bytes, bytes, int]] = {}


def _template(serialize_type: int, code: int) -> tuple[bytes, bytes, int]:
    request = RemotingCommand(code=0, opaque=_MARK, serialize_type=serialize_type)
    frame = encode_command(request.make_response(code))
    mark = _I32.pack(_MARK) if serialize_type == SERIALIZE_ROCKETMQ else str(_MARK).encode()
    if serialize_type == SERIALIZE_JSON:
        frame = frame[_HDR.size :]  # the length words are written per answer
    before, found, after = frame.partition(mark)
    if not found or mark in after:  # cannot happen with these headers; fail loudly if it does
        raise ValueError(f"the marker opaque is not once in the {serialize_type} template")
    return before, after, len(before) + len(after)


def json_template(code: int) -> tuple[bytes, bytes, int]:
    """A JSON answer's template of ``code`` (before the opaque's digits, after them, their
    length): its frame is ``>ii`` (4 + length + digits, length + digits), before, the digits,
    after. For a caller that writes one per message inline (pop/direct_ack.py)."""
    parts = _TEMPLATES.get((SERIALIZE_JSON, code))
    if parts is None:
        parts = _TEMPLATES[(SERIALIZE_JSON, code)] = _template(SERIALIZE_JSON, code)
    return parts


def empty_answer_frame(request: RemotingCommand, code: int) -> bytes | None:
    """encode_command(request.make_response(code)), or None for a serialize type without a
    template (the caller then encodes the answer itself)."""
    return answer_frame_of(request.serialize_type, request.opaque, code)


def answer_frame_of(st: int, opaque: int, code: int) -> bytes | None:
    """`empty_answer_frame` of a request of serialize type ``st`` and opaque ``opaque`` (all a
    response takes of its request), for a path that has no RemotingCommand."""
    parts = _TEMPLATES.get((st, code))
    if parts is None:
        if st not in (SERIALIZE_JSON, SERIALIZE_ROCKETMQ):
            return None
        parts = _TEMPLATES[(st, code)] = _template(st, code)
    before, after, fixed = parts
    if st == SERIALIZE_ROCKETMQ:
        return before + _I32.pack(opaque) + after
    digits = b"%d" % opaque
    hlen = fixed + len(digits)
    return _HDR.pack(4 + hlen, hlen) + before + digits + after

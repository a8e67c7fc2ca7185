"""The RocketMQ remoting frame, sans-io: bytes in, `RemotingCommand` out, and back.

Frame: ``int32 total | int32 (serializeType << 24 | headerLength) | header | body`` (big-endian),
where ``total = 4 + headerLength + bodyLength``. The header is JSON (serialize type 0) or
RocketMQ's binary layout (type 1); both decode, we answer in the type the request used.

`FrameDecoder` is fed raw bytes and yields whole commands (h11 style: ``feed`` then
``next_command`` until it returns None). Any malformed input raises `RemoteProtocolError`; after
that the decoder refuses further input, and the connection owner closes the connection.
The ROCKETMQ header's decode and encode have compiled twins (`rocketrio.protocol._speedups`,
chosen in `compiled.py`); the ``_py`` functions are the reference and the fallback. With the
extension, `FrameDecoder` takes a whole ROCKETMQ frame in one compiled call (frame.c) and runs
its Python path for everything else (JSON, a partial frame, anything it refuses).
"""

from __future__ import annotations

import struct
from typing import Any, NoReturn

import attrs
import orjson

from rocketrio.protocol.codes import (
    CURRENT_VERSION,
    RPC_ONEWAY,
    RPC_TYPE_RESPONSE,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    LanguageCode,
)
from rocketrio.protocol.compiled import speedups as _speedups
from rocketrio.protocol.ext_layouts import ExtLayouts

DEFAULT_MAX_FRAME = 16 * 1024 * 1024  # com.rocketmq.remoting.frameMaxLength
# the smallest header of each serialize type: "{}" for JSON; code, language, version, opaque,
# flag and the two (empty) length-prefixed parts for ROCKETMQ
MIN_HEADER = {SERIALIZE_JSON: 2, SERIALIZE_ROCKETMQ: 13 + 4 + 4}
MIN_FRAME = 4 + MIN_HEADER[SERIALIZE_JSON]  # total length: header-length word + header
_MIN_JSON_HEADER = MIN_HEADER[SERIALIZE_JSON]
_MIN_ROCKETMQ_HEADER = MIN_HEADER[SERIALIZE_ROCKETMQ]
_I32 = struct.Struct(">i")
_HDR = struct.Struct(">ii")
_LANG_CODE_BY_NAME = {m.name: int(m) for m in LanguageCode}
_LANG_NAME_BY_CODE = {int(m): m.name for m in LanguageCode}
_LANG_OTHER = int(LanguageCode.OTHER)
_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remark length
_I16_FROM = struct.Struct(">h").unpack_from
_I16_PACK = struct.Struct(">h").pack
_KEY_PARTS: dict[str, bytes] = {}
_KEY_PARTS_MAX = 1024
_I32_FROM = _I32.unpack_from
# a body above this is copied out of the decoder's buffer through a memoryview (a bytearray
# slice of 70 KiB, a batch, cost 7x the view's copy; below a few KiB the view costs more)
_VIEW_COPY_MIN = 4096
_IS_STR = str.__instancecheck__  # one C call per value: isinstance(v, str)
_LAYOUTS = ExtLayouts()  # the extFields shapes producers repeat, compiled (process-wide)
_loads, _JSONDecodeError = orjson.loads, orjson.JSONDecodeError


class RemoteProtocolError(Exception):
    """The peer sent bytes that are not a valid remoting frame.

    ``reason`` is a short snake_case name of what was wrong (for logs and metrics); the message
    says it for a person, with the numbers.
    """

    def __init__(self, message: str, reason: str = "malformed") -> None:
        super().__init__(message)
        self.reason = reason


class LocalProtocolError(Exception):
    """We tried to encode something that cannot be a valid frame."""


@attrs.define(slots=True)
class RemotingCommand:
    """One request or response. ``ext_fields`` values are always strings on the wire."""

    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = attrs.field(factory=dict)
    body: bytes = b""
    language: str = "PYTHON"
    version: int = CURRENT_VERSION
    serialize_type: int = SERIALIZE_JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """A response to this request: same opaque and serialize type, response flag set."""
        return RemotingCommand(
            code=code,
            opaque=self.opaque,
            flag=RPC_TYPE_RESPONSE,
            remark=remark,
            ext_fields=ext_fields if ext_fields is not None else {},
            body=body,
            serialize_type=self.serialize_type,
        )


def _json_header(cmd: RemotingCommand) -> bytes:
    h: dict[str, Any] = {
        "code": cmd.code,
        "flag": cmd.flag,
        "language": cmd.language,
        "opaque": cmd.opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": cmd.version,
    }
    if cmd.remark is not None:
        h["remark"] = cmd.remark
    if cmd.ext_fields:
        h["extFields"] = cmd.ext_fields
    return orjson.dumps(h)


def _key_part(key: str) -> bytes:
    """An ext key's wire part (short length + UTF-8), remembered for the next header: header
    keys are the header classes' field names, a small set (bounded by _KEY_PARTS_MAX)."""
    kb = key.encode()
    part = _I16_PACK(len(kb)) + kb
    if len(_KEY_PARTS) < _KEY_PARTS_MAX:
        _KEY_PARTS[key] = part
    return part


def _rocketmq_header(cmd: RemotingCommand) -> bytes:
    return _rocketmq_header_of(
        cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields
    )


def _rocketmq_header_of_c(
    code: int,
    language: str,
    version: int,
    opaque: int,
    flag: int,
    remark_text: str | None,
    ext_fields: dict[str, str],
) -> bytes:
    """`_rocketmq_header_of_py` by the compiled twin; the twin itself for what the compiled
    one declines (a field out of range, a value that is not a str: the twin raises)."""
    args = (code, language, version, opaque, flag, remark_text, ext_fields)
    header = _speedups.rocketmq_header(*args)  # type: ignore[union-attr]
    return header if header is not None else _rocketmq_header_of_py(*args)


def _rocketmq_header_of_py(
    code: int,
    language: str,
    version: int,
    opaque: int,
    flag: int,
    remark_text: str | None,
    ext_fields: dict[str, str],
) -> bytes:
    if not -32768 <= code <= 32767:
        raise LocalProtocolError(f"code {code} does not fit the ROCKETMQ header (short)")
    lang = _LANG_CODE_BY_NAME.get(language, _LANG_OTHER)
    remark = remark_text.encode() if remark_text else b""
    parts: list[bytes] = []  # per ext field: short key length + key, int value length, value
    i32, keys = _I32.pack, _KEY_PARTS
    for k, v in ext_fields.items():
        key = keys.get(k)
        if key is None:
            key = _key_part(k)
        vb = v.encode()
        parts += (key, i32(len(vb)), vb)
    ext = b"".join(parts)
    return b"".join(
        (
            _FIXED.pack(code, lang, version, opaque, flag, len(remark)),
            remark,
            _I32.pack(len(ext)),
            ext,
        )
    )


def encode_command(cmd: RemotingCommand) -> bytes:
    """One whole frame, length prefix included."""
    if cmd.serialize_type == SERIALIZE_ROCKETMQ:
        header = _rocketmq_header(cmd)
    else:
        header = _json_header(cmd)
    hlen = len(header)
    if hlen > 0xFFFFFF:
        raise LocalProtocolError("header longer than 16 MiB")
    return b"".join(
        (_HDR.pack(4 + hlen + len(cmd.body), (cmd.serialize_type << 24) | hlen), header, cmd.body)
    )


def encode_response(
    request: RemotingCommand, code: int, remark: str | None, ext_fields: dict[str, str]
) -> bytes:
    """The frame of ``request.make_response(code, remark, ext_fields)`` without building that
    command (a stored send's answer, the hot path): the same bytes as `encode_command` of it
    (a test checks it)."""
    if request.serialize_type == SERIALIZE_ROCKETMQ:
        header = _rocketmq_header_of(
            code, "PYTHON", CURRENT_VERSION, request.opaque, RPC_TYPE_RESPONSE, remark, ext_fields
        )
        stype = SERIALIZE_ROCKETMQ << 24
    else:
        h: dict[str, Any] = {
            "code": code,
            "flag": RPC_TYPE_RESPONSE,
            "language": "PYTHON",
            "opaque": request.opaque,
            "serializeTypeCurrentRPC": "JSON",
            "version": CURRENT_VERSION,
        }
        if remark is not None:
            h["remark"] = remark
        if ext_fields:
            h["extFields"] = ext_fields
        header = orjson.dumps(h)
        stype = SERIALIZE_JSON << 24
    hlen = len(header)
    if hlen > 0xFFFFFF:
        raise LocalProtocolError("header longer than 16 MiB")
    return _HDR.pack(4 + hlen, stype | hlen) + header


def _ext_str(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else str(v)


def _decode_json_header(raw: bytes, body: bytes) -> RemotingCommand:
    return _json_command(_loads_header(raw), body)


def _loads_header(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise RemoteProtocolError(f"header is not valid JSON: {e}") from None


def _json_command(h: Any, body: bytes) -> RemotingCommand:
    """The command of a parsed JSON header (or the RemoteProtocolError of one that is not)."""
    if not isinstance(h, dict):
        raise RemoteProtocolError("header JSON is not an object")
    code = h.get("code")
    opaque = h.get("opaque", 0)
    flag = h.get("flag", 0)
    version = h.get("version", 0)
    if not (
        type(code) is int and type(opaque) is int and type(flag) is int and type(version) is int
    ):
        raise RemoteProtocolError("header code/opaque/flag/version must be integers")
    ext = h.get("extFields") or {}
    if not isinstance(ext, dict):
        raise RemoteProtocolError("extFields must be an object")
    ext_fields: dict[str, str] = ext
    if not all(map(_IS_STR, ext.values())):  # rare: numbers or booleans sent; normalise
        ext_fields = {k: _ext_str(v) for k, v in ext.items() if v is not None}
    remark = h.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = str(remark)
    language = h.get("language", "JAVA")
    if not isinstance(language, str):
        language = "OTHER"
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext_fields,
        body=body,
        language=language,
        version=version,
        serialize_type=SERIALIZE_JSON,
    )


def _decode_ext_fields(raw: bytes, pos: int, end: int) -> dict[str, str]:
    """The ROCKETMQ header's extFields between ``pos`` and ``end``: (short key length, key,
    int value length, value) entries, UTF-8. The header is decoded once as latin-1 (one char a
    byte, so offsets agree); a shape seen before is decoded by its compiled expression
    (`ExtLayouts`), else entry by entry, where an ASCII key or value (nearly all) is that
    text's slice and only a key or value with other bytes is decoded again as UTF-8."""
    text = raw.decode("latin-1")
    ext = _LAYOUTS.match(text, pos, end)
    if ext is not None:
        return ext
    ext = _decode_ext_entries(raw, text, pos, end)
    if all(map(str.isascii, ext.values())) and all(map(str.isascii, ext)):
        _LAYOUTS.learn(ext)
    return ext


def _decode_ext_entries(raw: bytes, text: str, pos: int, end: int) -> dict[str, str]:
    """`_decode_ext_fields` entry by entry."""
    ext: dict[str, str] = {}
    i16, i32 = _I16_FROM, _I32_FROM
    ascii_only = raw.isascii()  # then no entry needs its own check
    while pos < end:
        (klen,) = i16(raw, pos)
        pos += 2
        kend = pos + klen
        (vlen,) = i32(raw, kend)
        vpos = kend + 4
        if klen < 0 or vlen < 0 or vpos + vlen > end:
            raise RemoteProtocolError("extFields entry out of range")
        key, value = text[pos:kend], text[vpos : vpos + vlen]
        if not ascii_only and not (key.isascii() and value.isascii()):
            key, value = raw[pos:kend].decode(), raw[vpos : vpos + vlen].decode()
        ext[key] = value
        pos = vpos + vlen
    return ext


def _decode_rocketmq_header_c(raw: bytes, body: bytes) -> RemotingCommand:
    """`_decode_rocketmq_header_py` by the compiled twin; a header it declines (malformed, or
    not UTF-8) goes to the twin, which raises the same RemoteProtocolError as ever."""
    cmd = _speedups.decode_rocketmq_header(raw, body)  # type: ignore[union-attr]
    return cmd if cmd is not None else _decode_rocketmq_header_py(raw, body)


def _decode_rocketmq_header_py(raw: bytes, body: bytes) -> RemotingCommand:
    try:
        code, lang, version, opaque, flag, rlen = _FIXED.unpack_from(raw, 0)
        pos = 17
        if rlen < 0 or pos + rlen > len(raw):
            raise RemoteProtocolError("remark length out of range")
        remark = raw[pos : pos + rlen].decode() if rlen else None
        pos += rlen
        (elen,) = _I32_FROM(raw, pos)
        pos += 4
        if elen < 0 or pos + elen != len(raw):
            raise RemoteProtocolError("extFields length does not match the header")
        ext = _decode_ext_fields(raw, pos, pos + elen)
    except (struct.error, UnicodeDecodeError) as e:
        raise RemoteProtocolError(f"bad ROCKETMQ header: {e}") from None
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        body=body,
        language=_LANG_NAME_BY_CODE.get(lang, "OTHER"),
        version=version,
        serialize_type=SERIALIZE_ROCKETMQ,
    )


# The compiled twins when the extension imports and ROCKETRIO_PURE_PYTHON is not set
if _speedups is not None:
    _speedups.configure_remoting(
        RemotingCommand, _LANG_NAME_BY_CODE, _LANG_CODE_BY_NAME, _LANG_OTHER
    )
    _decode_rocketmq_header = _decode_rocketmq_header_c
    _rocketmq_header_of = _rocketmq_header_of_c
    # the whole next ROCKETMQ frame of a FrameDecoder's buffer, or None for its Python path
    _next_rocketmq_frame = _speedups.next_rocketmq_frame
    # the whole next plain JSON request of a direct code as a DirectRequest, or None (the same)
    _next_direct_json = _speedups.next_direct_json
else:
    _decode_rocketmq_header = _decode_rocketmq_header_py
    _rocketmq_header_of = _rocketmq_header_of_py
    _next_rocketmq_frame = None
    _next_direct_json = None


# A request frame handed over without its RemotingCommand (the connection's direct paths):
# (code, opaque, extFields, body, serialize type, source), where source is what
# `command_of` rebuilds the command from (a JSON header's parsed object, its bytes when the
# compiled reader took the frame (speedups/direct_json.c), or the command).
# Only a plain request: flag 0 (neither a response nor oneway), every extFields value a str.
DirectRequest = tuple[int, int, dict[str, str], bytes, int, Any]


def _direct_json(h: Any, body: bytes, codes: frozenset[int]) -> DirectRequest | None:
    """A parsed JSON header as a `DirectRequest` when its code is one of ``codes`` and
    `_json_command` would take it as is (the integers integers, extFields an object of strs,
    flag 0); None for anything else, which then goes the whole way (and fails there as ever)."""
    if h.__class__ is not dict:
        return None
    code = h.get("code")
    if code.__class__ is not int or code not in codes:
        return None
    opaque = h.get("opaque", 0)
    flag = h.get("flag", 0)
    ext = h.get("extFields")
    if (
        opaque.__class__ is int
        and flag.__class__ is int
        and not flag
        and h.get("version", 0).__class__ is int
        and ext.__class__ is dict
        and all(map(_IS_STR, ext.values()))
    ):
        return code, opaque, ext, body, SERIALIZE_JSON, h
    return None


def command_of(request: DirectRequest) -> RemotingCommand:
    """The RemotingCommand the generic path would have decoded from the same frame."""
    source = request[5]
    if source.__class__ is dict:
        return _json_command(source, request[3])
    if source.__class__ is bytes:  # a header the compiled reader took: plain JSON, parsed now
        return _json_command(_loads_header(source), request[3])
    assert isinstance(source, RemotingCommand)
    return source


def decode_frame_payload(payload: bytes) -> RemotingCommand:
    """Decode a frame without its leading total-length field."""
    if len(payload) < 4:
        raise RemoteProtocolError("frame shorter than its header-length field", "frame_too_short")
    (hword,) = _I32.unpack_from(payload, 0)
    error = header_word_error(len(payload), hword)
    if error is not None:
        raise error
    stype = (hword >> 24) & 0xFF
    hlen = hword & 0xFFFFFF
    raw = payload[4 : 4 + hlen]
    body = payload[4 + hlen :]
    if stype == SERIALIZE_JSON:
        return _decode_json_header(raw, body)
    return _decode_rocketmq_header(raw, body)


def length_error(total: int, max_frame: int) -> RemoteProtocolError | None:
    """Why a frame's total-length word is unacceptable, or None."""
    if MIN_FRAME <= total <= max_frame:
        return None
    if total < 0:
        return RemoteProtocolError(f"negative frame length {total}", "negative_length")
    if total < MIN_FRAME:
        return RemoteProtocolError(
            f"frame length {total} is shorter than the smallest frame ({MIN_FRAME})",
            "frame_too_short",
        )
    return RemoteProtocolError(
        f"frame length {total} exceeds the maximum {max_frame} (frameMaxLength)", "frame_too_long"
    )


def header_word_error(total: int, hword: int) -> RemoteProtocolError | None:
    """Why a frame's serialize-type/header-length word does not fit its total length, or None."""
    stype = (hword >> 24) & 0xFF
    hlen = hword & 0xFFFFFF
    least = MIN_HEADER.get(stype)
    if least is None:
        return RemoteProtocolError(f"unknown serialize type {stype}", "unknown_serialize_type")
    if 4 + hlen > total:
        return RemoteProtocolError(
            f"header length {hlen} exceeds frame length {total}", "header_longer_than_frame"
        )
    if hlen < least:
        return RemoteProtocolError(
            f"header length {hlen} is shorter than the smallest header ({least})",
            "header_too_short",
        )
    return None


class FrameDecoder:
    """Incremental frame decoder: ``feed(bytes)``, then ``next_command()`` until None.

    A frame's two length words are checked as soon as they are in, before any more of the
    frame is buffered: a total length that is negative, shorter than a header or over
    ``max_frame`` fails the decoder after 4 bytes, an unknown serialize type or a header length
    that does not fit the total after 8 (`RemoteProtocolError.reason` names which).
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._max = max_frame
        self._failed: RemoteProtocolError | None = None
        # request codes whose plain JSON frames are handed over as a DirectRequest
        self.direct_codes: frozenset[int] = frozenset()

    def feed(self, data: bytes) -> None:
        if self._failed is not None:
            raise self._failed
        self._buf += data

    def next_command(self) -> RemotingCommand | DirectRequest | None:
        """The next whole frame's command; a `DirectRequest` instead for a plain JSON request
        whose code is in ``direct_codes`` (none unless the owner sets them)."""
        if self._failed is not None:
            raise self._failed
        buf = self._buf
        pos = self._pos
        if self.direct_codes and _next_direct_json is not None:  # direct_json.c: POP's ACKs
            got = _next_direct_json(buf, pos, self._max, self.direct_codes)
            if got is not None:
                req, self._pos = got
                return req  # type: ignore[no-any-return]
        if _next_rocketmq_frame is not None:  # a Java client's frames, compiled (frame.c)
            got = _next_rocketmq_frame(buf, pos, self._max)
            if got is not None:
                cmd, self._pos = got
                return cmd  # type: ignore[no-any-return]
        avail = len(buf) - pos
        if avail < 8:
            if avail >= 4:
                (total,) = _I32.unpack_from(buf, pos)
                if not MIN_FRAME <= total <= self._max:
                    self._fail(length_error(total, self._max))
            self._compact()
            return None
        total, hword = _HDR.unpack_from(buf, pos)
        if not MIN_FRAME <= total <= self._max:
            self._fail(length_error(total, self._max))
        stype, hlen = hword >> 24, hword & 0xFFFFFF
        if stype == SERIALIZE_JSON:
            least = _MIN_JSON_HEADER
        elif stype == SERIALIZE_ROCKETMQ:
            least = _MIN_ROCKETMQ_HEADER
        else:
            least = total  # refused just below, as an unknown serialize type
        if not least <= hlen <= total - 4:
            self._fail(header_word_error(total, hword))
        if avail < 4 + total:
            self._compact()
            return None
        start = pos + 8
        end = pos + 4 + total
        raw = bytes(buf[start : start + hlen])
        if end - start - hlen > _VIEW_COPY_MIN:  # a big body: one copy through a view
            with memoryview(buf) as view:
                body = bytes(view[start + hlen : end])
        else:  # a small one: the slice is cheaper than making a view
            body = bytes(buf[start + hlen : end])
        self._pos = end
        try:
            if stype == SERIALIZE_JSON:
                try:
                    h = _loads(raw)
                except _JSONDecodeError as e:
                    raise RemoteProtocolError(f"header is not valid JSON: {e}") from None
                if self.direct_codes:
                    direct = _direct_json(h, body, self.direct_codes)
                    if direct is not None:
                        return direct
                return _json_command(h, body)
            return _decode_rocketmq_header(raw, body)
        except RemoteProtocolError as e:
            self._failed = e
            raise

    def _fail(self, error: RemoteProtocolError | None) -> NoReturn:
        assert error is not None
        self._failed = error
        raise error

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def missing(self) -> int:
        """Bytes still missing from the frame being assembled (0 when none is known yet)."""
        avail = len(self._buf) - self._pos
        if avail < 4:
            return 0
        (total,) = _I32.unpack_from(self._buf, self._pos)
        return max(0, 4 + total - avail) if MIN_FRAME <= total <= self._max else 0

    def release(self) -> None:
        """Drop whatever is buffered (the connection is gone): the memory goes at once, not
        when the decoder is garbage collected."""
        self._buf = bytearray()
        self._pos = 0

    def _compact(self) -> None:
        if self._pos:
            del self._buf[: self._pos]  # CPython gives back most of the capacity of a big one
            self._pos = 0

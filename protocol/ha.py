"""The AutoSwitch HA channel (RIP-44), sans-io: slave <-> master bytes and typed events.

Plain TCP from the slave to the master's HA port (haListenPort); every integer big-endian; no
magic, version or checksum: ``bodySize`` is the only length field. ``state`` is the ordinal of
`HAConnectionState`; only HANDSHAKE (1) and TRANSFER (2) are ever sent.

Slave -> master (decoded on the master by `SlaveStreamDecoder`):

- `SlaveHandshake` (16 bytes): state=1 | int16 isSyncFromLastFile | int16 isAsyncLearner |
  int64 slave brokerId (the controller-assigned id, >= 1).
- `SlaveAck` (12 bytes): state=2 | int64 the slave's max offset (whole records it holds). Also
  sent as a heartbeat after haSendHeartbeatInterval without writing.

Master -> slave (decoded on the slave by `MasterStreamDecoder`):

- `MasterHandshake` (20 + 12N bytes): state=1 | int32 bodySize=12N | int64 master max offset |
  int32 master's last epoch | N x (int32 epoch, int64 startOffset), ascending by epoch.
- `Transfer` (36 + bodySize bytes): state=2 | int32 bodySize | int64 CommitLog offset of the
  body's first byte (for a heartbeat: the next offset the master will send) | int32 epoch |
  int64 that epoch's startOffset | int64 master confirmOffset | raw CommitLog bytes. A body
  never crosses an epoch boundary nor a CommitLog segment boundary.

Decoders follow h11: ``receive_data(bytes)``, then ``next_event()`` until it returns
`NEED_DATA`. Malformed input (unknown state, negative or oversized length, an epoch list that is
not strictly ascending) raises `RemoteProtocolError`; the decoder then refuses further input and
the connection owner closes the connection. Unlike upstream's master reader, a handshake is
decoded only once all 16 of its bytes have arrived.
"""

from __future__ import annotations

import enum
import struct
from typing import Final

import attrs

from rocketrio.protocol.remoting import LocalProtocolError, RemoteProtocolError

__all__ = [
    "MAX_EPOCH_ENTRIES",
    "MAX_TRANSFER_BODY",
    "NEED_DATA",
    "HAConnectionState",
    "HaEpoch",
    "LocalProtocolError",
    "MasterHandshake",
    "MasterStreamDecoder",
    "NeedData",
    "RemoteProtocolError",
    "SlaveAck",
    "SlaveHandshake",
    "SlaveStreamDecoder",
    "Transfer",
    "encode_master_handshake",
    "encode_slave_ack",
    "encode_slave_handshake",
    "encode_transfer_header",
]


class HAConnectionState(enum.IntEnum):
    READY = 0
    HANDSHAKE = 1
    TRANSFER = 2
    SUSPEND = 3
    SHUTDOWN = 4


# a transfer body is at most one CommitLog segment's worth; 64 MiB bounds a hostile peer
MAX_TRANSFER_BODY: Final = 64 * 1024 * 1024
# upstream's handshake buffer overflows past ~1000 entries; we accept many more, but bounded
MAX_EPOCH_ENTRIES: Final = 100_000

_SH = struct.Struct(">ihhq")  # state, isSyncFromLastFile, isAsyncLearner, brokerId
_SA = struct.Struct(">iq")  # state, max offset
_MH = struct.Struct(">iiqi")  # state, bodySize, max offset, last epoch
_EPOCH = struct.Struct(">iq")  # epoch, startOffset
_MT = struct.Struct(">iiqiqq")  # state, bodySize, offset, epoch, epochStartOffset, confirm
_STATE = struct.Struct(">i")

SLAVE_HANDSHAKE_SIZE: Final = _SH.size  # 16
SLAVE_ACK_SIZE: Final = _SA.size  # 12
MASTER_HANDSHAKE_HEADER_SIZE: Final = _MH.size  # 20
TRANSFER_HEADER_SIZE: Final = _MT.size  # 36


class NeedData:
    """`next_event` has nothing whole to return yet; feed more bytes."""

    _instance: NeedData | None = None

    def __new__(cls) -> NeedData:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = NeedData()


@attrs.frozen(slots=True)
class SlaveHandshake:
    broker_id: int
    sync_from_last_file: bool = False
    async_learner: bool = False


@attrs.frozen(slots=True)
class SlaveAck:
    max_offset: int


@attrs.frozen(slots=True)
class HaEpoch:
    """One `<epoch, startOffset>` entry as the handshake carries it."""

    epoch: int
    start_offset: int


@attrs.frozen(slots=True)
class MasterHandshake:
    max_offset: int
    last_epoch: int
    epochs: tuple[HaEpoch, ...]


@attrs.frozen(slots=True)
class Transfer:
    """A data batch (or, with an empty body, a heartbeat) from the master."""

    offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    body: bytes

    @property
    def end(self) -> int:
        return self.offset + len(self.body)


SlaveEvent = SlaveHandshake | SlaveAck
MasterEvent = MasterHandshake | Transfer


# ---------------------------------------------------------------------------------- encoders


def encode_slave_handshake(h: SlaveHandshake) -> bytes:
    if h.broker_id < 0:
        raise LocalProtocolError(f"slave brokerId must be >= 0, got {h.broker_id}")
    return _SH.pack(
        HAConnectionState.HANDSHAKE, int(h.sync_from_last_file), int(h.async_learner), h.broker_id
    )


def encode_slave_ack(max_offset: int) -> bytes:
    if max_offset < 0:
        raise LocalProtocolError(f"ack offset must be >= 0, got {max_offset}")
    return _SA.pack(HAConnectionState.TRANSFER, max_offset)


def encode_master_handshake(h: MasterHandshake) -> bytes:
    if len(h.epochs) > MAX_EPOCH_ENTRIES:
        raise LocalProtocolError(f"{len(h.epochs)} epoch entries exceed {MAX_EPOCH_ENTRIES}")
    _check_epochs(h.epochs, LocalProtocolError)
    head = _MH.pack(
        HAConnectionState.HANDSHAKE, _EPOCH.size * len(h.epochs), h.max_offset, h.last_epoch
    )
    return head + b"".join(_EPOCH.pack(e.epoch, e.start_offset) for e in h.epochs)


def encode_transfer_header(
    offset: int, epoch: int, epoch_start_offset: int, confirm_offset: int, body_size: int
) -> bytes:
    """The 36-byte header; the caller sends the body after it (no copy of the body here)."""
    if not 0 <= body_size <= MAX_TRANSFER_BODY:
        raise LocalProtocolError(
            f"transfer body of {body_size} bytes outside 0..{MAX_TRANSFER_BODY}"
        )
    if offset < 0 or epoch_start_offset < 0 or epoch_start_offset > offset + body_size:
        raise LocalProtocolError(
            f"transfer at {offset} (+{body_size}) cannot belong to an epoch starting at "
            f"{epoch_start_offset}"
        )
    return _MT.pack(
        HAConnectionState.TRANSFER,
        body_size,
        offset,
        epoch,
        epoch_start_offset,
        confirm_offset,
    )


def _check_epochs(epochs: tuple[HaEpoch, ...], error: type[Exception]) -> None:
    prev: HaEpoch | None = None
    for e in epochs:
        if e.start_offset < 0:
            raise error(f"epoch {e.epoch} starts at a negative offset {e.start_offset}")
        if prev is not None and (e.epoch <= prev.epoch or e.start_offset < prev.start_offset):
            raise error(
                f"epoch entry {e.epoch}-{e.start_offset} does not follow "
                f"{prev.epoch}-{prev.start_offset} (epochs must grow, offsets must not shrink)"
            )
        prev = e


# ---------------------------------------------------------------------------------- decoders


class _Decoder:
    """Shared buffering and failure latch of the two stream decoders.

    Bytes received while nothing is buffered are kept as they came (no copy) and each
    message is taken out of them with one slice; only a message split across reads is joined
    in a bytearray first."""

    def __init__(self) -> None:
        self._buf: bytes | bytearray = b""
        self._pos = 0
        self._failed: RemoteProtocolError | None = None

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._failed is not None:
            raise self._failed
        if self._pos == len(self._buf):
            self._buf = data if isinstance(data, bytes) else bytes(data)
            self._pos = 0
            return
        buf = self._buf
        if isinstance(buf, bytes):
            buf = self._buf = bytearray(memoryview(buf)[self._pos :])
            self._pos = 0
        buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def _fail(self, reason: str) -> RemoteProtocolError:
        self._failed = RemoteProtocolError(reason)
        return self._failed

    def _take(self, n: int) -> bytes:
        start = self._pos
        end = start + n
        buf = self._buf
        if isinstance(buf, bytes):
            self._pos = end
            return buf[start:end]
        with memoryview(buf) as view:
            out = bytes(view[start:end])
        self._consumed(end)
        return out

    def _consumed(self, end: int) -> None:
        """Everything before ``end`` is decoded; a joined buffer drops it once it is large."""
        self._pos = end
        buf = self._buf
        if isinstance(buf, bytearray) and end > 1 << 20 and end * 2 > len(buf):
            del buf[:end]
            self._pos = 0


class SlaveStreamDecoder(_Decoder):
    """Runs on the MASTER: decodes what a slave sends (`SlaveHandshake`, `SlaveAck`)."""

    def next_event(self) -> SlaveEvent | NeedData:
        if self._failed is not None:
            raise self._failed
        if self.buffered < 4:
            return NEED_DATA
        (state,) = _STATE.unpack_from(self._buf, self._pos)
        if state == HAConnectionState.HANDSHAKE:
            if self.buffered < _SH.size:
                return NEED_DATA
            _, sync_last, learner, broker_id = _SH.unpack(self._take(_SH.size))
            if broker_id < 0 or sync_last not in (0, 1) or learner not in (0, 1):
                raise self._fail(
                    f"bad slave handshake: brokerId {broker_id}, flags {sync_last}/{learner}"
                )
            return SlaveHandshake(broker_id, bool(sync_last), bool(learner))
        if state == HAConnectionState.TRANSFER:
            if self.buffered < _SA.size:
                return NEED_DATA
            _, offset = _SA.unpack(self._take(_SA.size))
            if offset < 0:
                raise self._fail(f"slave acked a negative offset {offset}")
            return SlaveAck(offset)
        raise self._fail(f"slave sent HA state {state}; only 1 (HANDSHAKE) and 2 (TRANSFER) exist")


class MasterStreamDecoder(_Decoder):
    """Runs on the SLAVE: decodes what the master sends (`MasterHandshake`, `Transfer`).

    With ``merge_transfers`` a Transfer also takes the transfers buffered right behind it that
    continue it: each whole and valid, with a body, at the offset where the previous one ends,
    in the same epoch (same start offset) and with a confirmOffset no lower. The event is then
    their bodies joined, at the first one's offset, with the last one's confirmOffset: what a
    slave does with it is what it does with the packets one by one (their appends are
    contiguous and its confirmOffset is the last one's, `SlaveCore._on_transfer`), with one
    join and one event per read instead of a copy and an event per haTransferBatchSize packet.
    A header it does not merge (another kind, a gap, another epoch, a bad field, one not all
    buffered) is left for the next call, which decodes or refuses it as ever."""

    def __init__(self, max_body: int = MAX_TRANSFER_BODY, *, merge_transfers: bool = False) -> None:
        super().__init__()
        self._max_body = max_body
        self._merge = merge_transfers

    def next_event(self) -> MasterEvent | NeedData:
        if self._failed is not None:
            raise self._failed
        if self.buffered < 8:
            return NEED_DATA
        state, size = struct.unpack_from(">ii", self._buf, self._pos)
        if state == HAConnectionState.HANDSHAKE:
            if size < 0 or size % _EPOCH.size or size // _EPOCH.size > MAX_EPOCH_ENTRIES:
                raise self._fail(
                    f"master handshake body size {size} is not 12 x 0..{MAX_EPOCH_ENTRIES}"
                )
            if self.buffered < _MH.size + size:
                return NEED_DATA
            _, _, max_offset, last_epoch = _MH.unpack(self._take(_MH.size))
            raw = self._take(size)
            epochs = tuple(HaEpoch(e, s) for e, s in _EPOCH.iter_unpack(raw))
            try:
                _check_epochs(epochs, RemoteProtocolError)
            except RemoteProtocolError as e:
                raise self._fail(f"master handshake: {e}") from None
            if max_offset < 0:
                raise self._fail(f"master handshake: negative max offset {max_offset}")
            return MasterHandshake(max_offset, last_epoch, epochs)
        if state == HAConnectionState.TRANSFER:
            if not 0 <= size <= self._max_body:
                raise self._fail(f"transfer body size {size} outside 0..{self._max_body}")
            if self.buffered < _MT.size + size:
                return NEED_DATA
            _, _, offset, epoch, epoch_start, confirm = _MT.unpack(self._take(_MT.size))
            if offset < 0 or epoch_start < 0 or epoch_start > offset + size:
                raise self._fail(
                    f"transfer at offset {offset} (+{size}) claims epoch {epoch} starting at "
                    f"{epoch_start}"
                )
            if size and self._merge:
                return self._merged(offset, epoch, epoch_start, confirm, size)
            return Transfer(offset, epoch, epoch_start, confirm, self._take(size) if size else b"")
        raise self._fail(f"master sent HA state {state}; only 1 (HANDSHAKE) and 2 (TRANSFER) exist")

    def _merged(
        self, offset: int, epoch: int, epoch_start: int, confirm: int, size: int
    ) -> Transfer:
        """The transfer whose header was just taken, with the buffered ones continuing it
        (class doc)."""
        buf, at = self._buf, self._pos
        spans = [(at, at + size)]
        at += size
        end, limit, whole = offset + size, self._max_body, len(buf)
        while whole - at >= _MT.size:
            state, n, off, ep, start, conf = _MT.unpack_from(buf, at)
            if (
                state != HAConnectionState.TRANSFER
                or not 0 < n <= limit
                or off != end
                or ep != epoch
                or start != epoch_start
                or conf < confirm
                or whole - at - _MT.size < n
            ):
                break
            at += _MT.size
            spans.append((at, at + n))
            at += n
            end += n
            confirm = conf
        if len(spans) == 1:
            return Transfer(offset, epoch, epoch_start, confirm, self._take(size))
        with memoryview(buf) as view:
            body = b"".join([view[a:b] for a, b in spans])
        self._consumed(at)
        return Transfer(offset, epoch, epoch_start, confirm, body)

"""MessageStore's data types: `StoreConfig`, the put/get records and results, the errors.

Plain values shared by the store (message_store.py) and the broker actors that call it.
`StoreConfig` keeps upstream's MessageStoreConfig key names (camelCase) so a broker config file
maps onto it with no alias table.
"""

from __future__ import annotations

import enum

import attrs

from rocketrio.protocol.config import positive
from rocketrio.storage.commitlog import CommitLogRecovery

_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _cq_file_size(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value <= 0 or value % 20:
        raise ValueError(f"{attribute.name} must be a positive multiple of 20, got {value}")


def parse_delay_levels(text: str) -> list[int]:
    """``"1s 5s 1m 2h"`` -> delays in ms, level 1 first (upstream messageDelayLevel)."""
    out = []
    for item in text.split():
        unit = _UNIT_MS.get(item[-1:])
        if unit is None or not item[:-1].isdigit():
            raise ValueError(f"messageDelayLevel: bad level {item!r} (use e.g. 5s, 1m, 2h, 1d)")
        out.append(int(item[:-1]) * unit)
    return out


def _whole_bytes(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value <= 0 or value % 8:
        raise ValueError(f"{attribute.name} must be a positive multiple of 8, got {value}")


@attrs.define
class StoreConfig:
    """The MessageStoreConfig keys the store uses, with upstream names and defaults."""

    mappedFileSizeCommitLog: int = attrs.field(default=1024 * 1024 * 1024, validator=positive)
    mappedFileSizeConsumeQueue: int = attrs.field(default=300_000 * 20, validator=_cq_file_size)
    maxMessageSize: int = attrs.field(default=4 * 1024 * 1024, validator=positive)
    messageIndexEnable: bool = True
    # key index files (index_file.py): hash slots per file and entries per file (upstream's)
    maxHashSlotNum: int = attrs.field(default=5_000_000, validator=positive)
    maxIndexNum: int = attrs.field(default=5_000_000 * 4, validator=positive)
    # check every record's CRC when recovery scans the CommitLog (upstream key and default)
    checkCRCOnRecover: bool = True
    # rocketrio: check the CRC of every record a pull serves that this process did not write
    # or check itself (CommitLog.check_read); off, a damaged record could reach a consumer
    checkCRCOnPull: bool = True
    # ConsumeQueue ext with the SQL92 filter bit-maps (cq_ext.py; upstream keys and defaults;
    # the broker sets the length to its bloom filter's bits, as upstream's ConsumerFilterManager)
    enableConsumeQueueExt: bool = False
    bitMapLengthConsumeQueueExt: int = attrs.field(default=112, validator=_whole_bytes)
    messageDelayLevel: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

    def __attrs_post_init__(self) -> None:
        parse_delay_levels(self.messageDelayLevel)


class InvalidMessage(ValueError):
    """A message the store refuses (nothing of its batch was written)."""


class MessageTooLarge(InvalidMessage):
    """Body above maxMessageSize, properties above 32767 bytes, or a record above a segment."""


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@attrs.define(slots=True)
class MessageToStore:
    """One message for `MessageStore.put_messages` (upstream MessageExtBrokerInner)."""

    topic: str
    queue_id: int
    body: bytes
    flag: int = 0
    properties: dict[str, str] | str = attrs.field(factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[bytes, int] = (b"\x7f\x00\x00\x01", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


@attrs.define(slots=True)  # not frozen: a frozen init costs ~1 us per message
class PutResult:
    commitlog_offset: int
    size: int
    queue_offset: int
    msg_id: str  # offset message id
    store_timestamp: int


@attrs.define(slots=True)
class BatchPutResult:
    """What `MessageStore.put_batch_body` stored, compactly: message i of the batch is at
    ``commitlog_offsets[i]`` (``sizes[i]`` bytes) with queue offset ``first_queue_offset + i``.
    """

    topic: str
    queue_id: int
    first_queue_offset: int
    commitlog_offsets: list[int]
    sizes: list[int]
    uniq_keys: list[bytes]  # b"" for a message stored without one
    store_timestamp: int
    msg_id_prefix: str  # hex store ip + port: an offset message id is this + 16 hex digits

    @property
    def count(self) -> int:
        return len(self.sizes)

    @property
    def total_size(self) -> int:
        return sum(self.sizes)

    @property
    def next_queue_offset(self) -> int:
        """The queue's max offset after this batch (what a long-polling pull waits for)."""
        return self.first_queue_offset + len(self.sizes)

    def msg_ids(self) -> list[str]:
        """Offset message ids, like PutResult.msg_id."""
        return list(map(f"{self.msg_id_prefix}%016X".__mod__, self.commitlog_offsets))

    def msg_ids_csv(self) -> str:
        """The SendMessageResponseHeader msgId of a batch: offset ids joined by commas."""
        return ",".join(map(f"{self.msg_id_prefix}%016X".__mod__, self.commitlog_offsets))

    def uniq_keys_csv(self) -> str:
        """The SendMessageResponseHeader msgId the client expects: UNIQ_KEYs joined by commas."""
        return b",".join(self.uniq_keys).decode()

    def put_results(self) -> list[PutResult]:
        """The same answer as `MessageStore.put_messages` would give, one PutResult each."""
        ts, qo = self.store_timestamp, self.first_queue_offset
        return [
            PutResult(pos, n, qo + i, msg_id, ts)
            for i, (pos, n, msg_id) in enumerate(
                zip(self.commitlog_offsets, self.sizes, self.msg_ids(), strict=True)
            )
        ]


@attrs.define(slots=True)
class GetResult:
    """A pull answer: ``buffers`` are whole stored records, one per message, in queue order."""

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[bytes] = attrs.field(factory=list)
    message_count: int = 0

    @property
    def body(self) -> bytes:
        """The pull response body: the records back to back."""
        return b"".join(self.buffers)


@attrs.frozen
class RecoveryReport:
    commitlog: CommitLogRecovery
    redispatch_from: int
    redispatched: int
    cq_entries_dropped: int
    cq_torn_bytes: int
    index_records_dropped: int
    index_rebuilt: bool
    queues: int
    confirm_offset: int = 0  # what recovery made visible (the log end without replication)
    unclean_shutdown: bool = False  # the abort marker was found: every segment was checked


@attrs.frozen
class StoreStats:
    put_message_count: int
    put_message_bytes: int
    get_message_count: int
    commitlog_min_offset: int
    commitlog_max_offset: int
    commitlog_flushed_offset: int

"""What the broker's processors answer, independent of any wire protocol.

A processor returns a typed outcome or a `Refusal`; each package's ``handlers()`` (remoting)
and the gRPC proxy turn those into wire replies. Nothing here knows a RemotingCommand.

- `Refusal(code, remark)`: the request was refused before anything changed. ``code`` is a
  RocketMQ ResponseCode (the vocabulary both the remoting and the gRPC side map from) and the
  remark says what to change.
- `PutStatus`: how the store actor answered a put (upstream PutMessageStatus names). Statuses
  with `PutStatus.stored` true mean the message is in the CommitLog (a flush or replica wait may
  still have timed out); the others mean nothing was written. `PutStatus.acknowledged`: stored
  and as durable as an acknowledged send (no replica wait timed out).
- Send outcomes, delivered to the send's callback once the store actor answered: `SendStored`
  (one message or a batch) or `PutFailed`; CONSUMER_SEND_MSG_BACK delivers `SentBack` or
  `PutFailed`.
- Pull outcome `Pulled`: the store's answer (records, offsets, store status) and the
  `PullStatus` the consumer acts on. A held pull delivers its outcome (or a Refusal) later to
  its `Waiter` (dispatch/long_poll.py).
- `Done`: a request that changed or checked something and has nothing to return.

Outcomes on the hot paths are `attrs.define(slots=True)`, not frozen: a frozen init costs
three times as much and they are built once per send.
"""

from __future__ import annotations

import enum
from typing import Final

import attrs

from rocketrio.storage.message_store import GetResult


@attrs.frozen
class Refusal:
    """A request refused with a ResponseCode and a remark a person can act on."""

    code: int
    remark: str


class PutStatus(enum.Enum):
    """Upstream PutMessageStatus, the statuses this broker produces (store actor callbacks)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # stored; the SYNC_FLUSH fsync took too long
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"  # stored; replicas did not ack in time
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"  # stored; no replica to wait for
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # store stopped or not writable
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"  # the request's fault (size, fields)
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"  # the store failed (I/O error, failed fsync)

    @property
    def stored(self) -> bool:
        """True when the message is in the CommitLog (upstream's sendOK statuses)."""
        return self in _STORED

    @property
    def acknowledged(self) -> bool:
        """True when the message is as durable as the broker's acknowledgement promises:
        fsynced with SYNC_FLUSH (FLUSH_DISK_TIMEOUT is answered after its slow fsync ended) and
        held by every replica the ack policy needs. FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE
        are stored on the master only: a failover may cut them."""
        return self is PutStatus.PUT_OK or self is PutStatus.FLUSH_DISK_TIMEOUT

    @property
    def kept_by_failover(self) -> bool:
        """Stored, and no failover cuts it: acknowledged, or SLAVE_NOT_AVAILABLE, which only a
        classic SYNC_MASTER with no slave answers (nothing replaces a classic master). Not
        FLUSH_SLAVE_TIMEOUT: the replicas did not take it in time, and the next master may lack
        it. A POP hands its messages out only on a CK kept so (pop/pop_nowait.py)."""
        return self.acknowledged or self is PutStatus.SLAVE_NOT_AVAILABLE


_STORED: Final = frozenset(
    {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
)


@attrs.define(slots=True)
class SendStored:
    """A send the store actor took: ``status`` is one of the `PutStatus.stored` statuses.

    For a batch, ``msg_id`` and ``uniq_key`` are comma-joined (one per message, in order) and
    ``queue_offset`` is the first message's.
    """

    status: PutStatus
    remark: str | None
    msg_id: str  # offset message id: store host + CommitLog offset
    queue_id: int
    queue_offset: int
    uniq_key: str  # UNIQ_KEY, what clients report as SendResult.msgId


@attrs.define(slots=True)
class PutFailed:
    """The store actor wrote nothing; ``status`` says why, ``remark`` in detail."""

    status: PutStatus
    remark: str | None


@attrs.frozen
class SentBack:
    """CONSUMER_SEND_MSG_BACK done: the message is in the retry topic or the DLQ (or the
    group has no retry queues, so there was nothing to do)."""


SENT_BACK: Final = SentBack()

SendOutcome = SendStored | PutFailed
SendBackOutcome = SentBack | PutFailed


class PullStatus(enum.Enum):
    """What the consumer should do next (upstream's client PullStatus)."""

    FOUND = "FOUND"  # records in the answer
    NO_NEW_MSG = "NO_NEW_MSG"  # caught up: pull again later (or the pull was held)
    NO_MATCHED_MSG = "NO_MATCHED_MSG"  # nothing passed the filter or was readable: retry now
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"  # the offset is outside the queue: move it


@attrs.define(slots=True)
class Pulled:
    """A pull's answer: ``result`` holds the records (when FOUND), the next offset, the queue's
    min/max offsets and the store's own status (upstream sends its name as the remark)."""

    status: PullStatus
    result: GetResult
    suggest_broker_id: int = 0  # upstream suggestWhichBrokerId: 0 = the master


PullOutcome = Pulled | Refusal


@attrs.frozen
class Done:
    """Success with nothing to return."""


DONE: Final = Done()

"""The POP buffer's task (upstream PopBufferMergeService's thread): every ``interval_s`` it runs
`PopBuffer.scan` on the master and writes what the scan asks for; anywhere else it empties the
buffer. The buffer and its promises are buffer_merge.py's; this shell only builds the records
(the CK as the pop builds it, a ``bAck`` of the ACKs a CK holds) and tells the buffer what the
store answered: a CK counts as stored only where no failover cuts it
(`PutStatus.kept_by_failover`), an ACK record when it is stored at all (an ACK lost means one
more delivery, as on the usual path). A write the store cannot take now (its inbox full, or
stopped) is left to the next round. A graceful shutdown `drain`s the buffer: every CK and its
ACKs written, the offsets moved past them, before the broker persists its offsets.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import assert_never

import trio

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.pop.buffer_merge import AckWrite, CkWrite, Entry, PopBuffer, Write
from rocketrio.actors.broker.pop.revive_log import Host, ack_message, ck_message
from rocketrio.actors.broker.store.messages import StoreWriter
from rocketrio.actors.kernel.runtime import ActorStopped
from rocketrio.protocol.pop_checkpoint import AckMsg
from rocketrio.storage.message_store import PutResult

SCAN_INTERVAL_S = 0.05  # upstream scans every 5 ms; a round looks at what changed only
DRAIN_TIMEOUT_S = 5.0  # at shutdown, how long the buffer's last writes may take
DRAIN_POLL_S = 0.01


class PopBufferService:
    """Runs the buffer's rounds on the master (module docstring)."""

    def __init__(
        self,
        buffer: PopBuffer,
        writer: StoreWriter,
        revive_topic: str,
        store_host: Host,
        now_ms: Callable[[], int],
        serving: Callable[[], bool],
        *,
        interval_s: float = SCAN_INTERVAL_S,
    ) -> None:
        self.buffer = buffer
        self.writer = writer
        self.revive_topic = revive_topic
        self.store_host = store_host
        self.now_ms = now_ms
        self.serving = serving  # the master, not a slave acting for one
        self.interval_s = interval_s

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.round()  # on from the start on a master
        task_status.started()
        while True:
            await trio.sleep(self.interval_s)
            self.round()

    async def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """Graceful shutdown, before the offsets are persisted: every CK still in memory and
        its ACKs written, and the offsets moved past them (upstream stores its buffer on
        shutdown too); what the store does not take within ``timeout_s`` is left (popped
        again after the restart, as after a crash)."""
        if not self.buffer.enabled:
            return
        self.buffer.flush_all()
        with trio.move_on_after(timeout_s):
            while True:
                self.round()
                if self.buffer.settled():
                    break
                await trio.sleep(DRAIN_POLL_S)
        self.round()  # the offsets of what was stored meanwhile

    def round(self) -> None:
        """One scan and its writes; on anything but a serving master, the buffer emptied and
        off until the next round that serves."""
        buffer = self.buffer
        if not self.serving():
            buffer.enabled = False
            buffer.clear()
            return
        buffer.enabled = True
        for w in buffer.scan(self.now_ms()):
            self._write(w)

    def _write(self, w: Write) -> None:
        now = self.now_ms()
        match w:
            case CkWrite(entry=e):
                assert e.ck is not None
                msg = ck_message(e.ck, self.revive_topic, e.revive_qid, now, self.store_host)
                on_done = partial(self._ck_done, e)
            case AckWrite(entry=e, bits=bits, offsets=offsets):
                assert e.ck is not None
                ack = AckMsg.of_key(e.ck.merge_key, offsets, batch=True)
                msg = ack_message(ack, self.revive_topic, e.revive_qid, now, self.store_host)
                on_done = partial(self._acks_done, e, bits)
            case _:
                assert_never(w)
        try:
            self.writer.put_nowait([msg], on_done)
        except (trio.WouldBlock, ActorStopped):
            on_done([], PutStatus.SERVICE_NOT_AVAILABLE, None)  # the next round writes it

    def _ck_done(
        self, e: Entry, results: list[PutResult], status: PutStatus, remark: str | None
    ) -> None:
        self.buffer.ck_stored(e, bool(results) and status.kept_by_failover)

    def _acks_done(
        self, e: Entry, bits: int, results: list[PutResult], status: PutStatus, remark: str | None
    ) -> None:
        self.buffer.acks_stored(e, bits, bool(results) and status.stored)

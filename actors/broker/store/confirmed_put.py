"""A broker's own put that moves an offset elsewhere: it waits until the put is as durable as
a client's acknowledged send.

The schedule service re-puts a due delay message and then moves its delay offset; the POP
revive service re-puts unacknowledged messages and then moves its revive offset; the
transaction check renews a half and moves its half offset. Those offsets live outside the
CommitLog (delayOffset.json, the consumer offsets) and reach the slaves by
slave sync, so the CommitLog's own order does not protect them: an offset moved past a re-put
that only the master held (FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) survives the failover
that cuts the re-put, and the message is gone (cluster simulation seed 303789: a consumer's
send-back never came back).

`put_confirmed` stores the messages and, when the store answered "stored on the master only",
waits until the master's confirmOffset passes them in the same mastership (the replicas the
ack policy needs have them, or the controller let the SyncStateSet shrink to the copies that
do). A mastership that ends first (a role change, another epoch) is a failure: the offset stays
and the next master re-puts (at least once; the first copy may survive as a duplicate). Upstream's
ScheduleMessageService counts only PUT_OK as delivered and re-puts anything else at once; waiting
for confirmOffset instead writes no extra copy while a replica is slow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import trio

from rocketrio.actors.broker.store.messages import PutAnswer, StoreWriter, put_and_wait
from rocketrio.storage.message_store import MessageToStore

CONFIRM_POLL_S = 0.1  # how often a waiting put looks at confirmOffset and the mastership


class ConfirmingWriter(StoreWriter, Protocol):
    """The store actor as a broker's own re-puts see it: its puts, and its mastership and
    confirmOffset."""

    def master_epoch(self) -> int | None: ...  # the mastership's epoch; None: not master

    def confirm_offset(self) -> int: ...


async def put_confirmed(
    writer: ConfirmingWriter,
    messages: list[MessageToStore],
    *,
    give_up: Callable[[], bool] = lambda: False,
) -> PutAnswer | str:
    """Store ``messages``; the store's answer once they are as durable as an acknowledged
    send, else why not (module doc). ``give_up``: stop waiting (the caller is stopping); the
    put then counts as not done."""
    epoch = writer.master_epoch()
    answer = await put_and_wait(writer, messages)
    if not answer.stored:
        return f"{answer.status.value}: {answer.remark or ''}"
    if answer.status.acknowledged:
        return answer
    end = max(r.commitlog_offset + r.size for r in answer.results)
    while True:
        now = writer.master_epoch()
        if epoch is None or now != epoch:
            return (
                f"{answer.status.value}: the mastership (epoch {epoch}) ended before its "
                f"replicas confirmed the put (now {now})"
            )
        if writer.confirm_offset() >= end:
            return answer
        if give_up():
            return f"{answer.status.value}: stopped before its replicas confirmed the put"
        await trio.sleep(CONFIRM_POLL_S)

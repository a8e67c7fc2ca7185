"""A client's answer to GET_CONSUMER_RUNNING_INFO (307), forwarded to it by a broker for
``mqadmin consumerStatus`` (upstream ClientRemotingProcessor.getConsumerRunningInfo,
MQClientInstance.consumerRunningInfo, DefaultMQPushConsumerImpl.consumerRunningInfo).

`consumer_running_info` reads one consumer's live state, nothing cached: its config keys
(upstream puts every field of the consumer object, as strings) and the ``PROP_*`` keys, its
subscriptions, per owned queue the process-queue figures (commit offset as the offset store
holds it in memory, cached messages still being consumed, last pull and consume times) and per
subscribed topic the `ConsumerStatsManager` figures. An orderly consumer reports consumeOrderly
true and, per queue, whether it holds the broker lock (locked, lastLockTimestamp); a queue
being given up is no longer listed, so tryUnlockTimes and the transaction fields stay at
upstream's defaults. `answer` is the 307 handler of
the client core: an unknown group is SYSTEM_ERROR with upstream's remark. With jstackEnable
the answer carries this process's Python stacks (threads and Trio tasks), labelled as such:
there is no JVM to take a jstack of.
"""

from __future__ import annotations

import enum
import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any

import attrs

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.orderly import OrderlyProcessQueue
from rocketrio.protocol import fastjson
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    PROP_THREADPOOL_CORE_SIZE,
    ConsumerRunningInfo,
    GetConsumerRunningInfoRequestHeader,
    ProcessQueueInfo,
    sorted_mq_table,
    sorted_subscriptions,
)
from rocketrio.protocol.serde import from_ext

if TYPE_CHECKING:
    from rocketrio.actors.client.consumer_core import ConsumerCore
    from rocketrio.actors.client.mq_client import MQClientInstance

CLIENT_VERSION_DESC = "V5_2_0"  # MQVersion.getVersionDesc(CURRENT_VERSION = 453)
MIB = 1024 * 1024
JSTACK_LABEL = "# Python stacks of this rocketrio client (threads, then tasks); not a JVM jstack\n"


def _prop(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, enum.Enum):
        return str(v.value)
    return str(v)


def consumer_running_info(consumer: ConsumerCore) -> ConsumerRunningInfo:
    props = {k: _prop(v) for k, v in attrs.asdict(consumer.settings, recurse=False).items()}
    props[PROP_CONSUME_ORDERLY] = _prop(consumer.consume_orderly)
    props[PROP_THREADPOOL_CORE_SIZE] = str(getattr(consumer.settings, "consumeThreadMax", 0))
    props[PROP_CONSUMER_START_TIMESTAMP] = str(consumer.start_timestamp_ms)
    store = consumer.offset_store
    queues = []
    for mq, st in list(consumer.queues.items()):
        pq = st.pq
        lo = pq.min_inflight()
        orderly = pq if isinstance(pq, OrderlyProcessQueue) else None
        queues.append(
            (
                mq,
                ProcessQueueInfo(
                    commitOffset=store.table.read(mq) if store is not None else -1,
                    cachedMsgMinOffset=lo if lo is not None else 0,
                    cachedMsgMaxOffset=pq.max_inflight() if lo is not None else 0,
                    cachedMsgCount=pq.msg_count,
                    cachedMsgSizeInMiB=pq.msg_size // MIB,
                    droped=pq.dropped,
                    lastPullTimestamp=pq.last_pull_at,
                    lastConsumeTimestamp=pq.last_consume_at,
                    locked=orderly.locked if orderly is not None else False,
                    lastLockTimestamp=orderly.last_lock_timestamp if orderly is not None else 0,
                ),
            )
        )
    subs = sorted_subscriptions(consumer.subscriptions.values())
    return ConsumerRunningInfo(
        properties=props,
        subscriptionSet=subs,
        mqTable=sorted_mq_table(queues),
        statusTable={t: consumer.stats.consume_status(t) for t in sorted({s.topic for s in subs})},
    )


def python_stacks() -> str:
    """Every thread's stack, then every task's await stack on the running loop."""
    out = [JSTACK_LABEL]
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        out.append(f"{names.get(ident, '?'):<40}TID: {ident} (thread)\n")
        for line in traceback.format_stack(frame):
            out.append(line)
        out.append("\n")
    out.extend(f"{block}\n" for block in aio.task_stacks())
    return "".join(out)


def answer(client: MQClientInstance, cmd: RemotingCommand) -> RemotingCommand:
    """GET_CONSUMER_RUNNING_INFO of one of this client's consumer groups."""
    h = from_ext(GetConsumerRunningInfoRequestHeader, cmd.ext_fields)
    consumer = client.consumers.get(h.consumerGroup)
    if consumer is None:
        return cmd.make_response(
            ResponseCode.SYSTEM_ERROR,
            f"The Consumer Group <{h.consumerGroup}> not exist in this consumer",
        )
    info = consumer.consumer_running_info()
    info.properties[PROP_NAMESERVER_ADDR] = "".join(f"{a};" for a in client.config.namesrv_addrs)
    info.properties[PROP_CONSUME_TYPE] = consumer.consume_type
    info.properties[PROP_CLIENT_VERSION] = CLIENT_VERSION_DESC
    if h.jstackEnable:
        info.jstack = python_stacks()
    return cmd.make_response(ResponseCode.SUCCESS, body=fastjson.encode(info))

"""rocketrio's Python client: the public, stable API.

Everything a producer or consumer needs is importable from here::

    from rocketrio.client import Message, Producer

    async with Producer("my_producer", "127.0.0.1:9876") as p:
        result = await p.send(Message("Orders", b"hello", tags="new"))

The same objects run natively on **asyncio** and on **Trio** (the client is written on anyio:
it uses whichever event loop awaits it, with no thread of its own); plain synchronous code uses
the ``Blocking*`` facades, which run the async client on a loop in a background thread.

Producers: `Producer` (sync, async with callback, oneway, batch, ordered via a queue selector,
delayed via `Message.delay_time_level` / `Message.deliver_time_ms`), `TransactionProducer`.
Consumers: `PushConsumer` (concurrent), `OrderlyPushConsumer` (ordered with queue locks),
`SimpleConsumer` (POP: receive, ack, change invisible time), `LitePullConsumer` (poll, commit).

Everything not named in ``__all__`` (``rocketrio.actors.client.*`` and the rest) is internal
and may change between releases; the deep imports used by older docs keep working.
"""

from __future__ import annotations

from rocketrio.actors.client.async_send import SendFuture
from rocketrio.actors.client.blocking import (
    BlockingOrderlyPushConsumer,
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    BlockingTransactionProducer,
)
from rocketrio.actors.client.config import (
    ClientConfig,
    ConsumeFromWhere,
    LitePullConsumerConfig,
    MessageModel,
    ProducerConfig,
    PushConsumerConfig,
)
from rocketrio.actors.client.errors import (
    MQBrokerError,
    MQClientError,
    NotFound,
    TopicRouteNotFound,
    UsageError,
)
from rocketrio.actors.client.message import (
    ConsumeStatus,
    Message,
    MessageExt,
    MessageQueue,
    SendResult,
    SendStatus,
)
from rocketrio.actors.client.orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from rocketrio.actors.client.orderly_consumer import MessageListenerOrderly, OrderlyPushConsumer
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.pull_consumer import LitePullConsumer
from rocketrio.actors.client.push_consumer import MessageListener, PushConsumer
from rocketrio.actors.client.queue_select import MessageQueueSelector, SelectMessageQueueByHash
from rocketrio.actors.client.remoting import RemotingError, RemotingTimeout
from rocketrio.actors.client.simple_consumer import ReceivedMessage, SimpleConsumer
from rocketrio.actors.client.transaction_producer import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)
from rocketrio.protocol.pop_extra_info import INIT_MODE_MAX, INIT_MODE_MIN

__all__ = [
    "INIT_MODE_MAX",
    "INIT_MODE_MIN",
    "BlockingOrderlyPushConsumer",
    "BlockingProducer",
    "BlockingPullConsumer",
    "BlockingPushConsumer",
    "BlockingTransactionProducer",
    "ClientConfig",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "LitePullConsumer",
    "LitePullConsumerConfig",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageExt",
    "MessageListener",
    "MessageListenerOrderly",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
    "NotFound",
    "OrderlyPushConsumer",
    "Producer",
    "ProducerConfig",
    "PushConsumer",
    "PushConsumerConfig",
    "ReceivedMessage",
    "RemotingError",
    "RemotingTimeout",
    "SelectMessageQueueByHash",
    "SendFuture",
    "SendResult",
    "SendStatus",
    "SimpleConsumer",
    "TopicRouteNotFound",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "UsageError",
]

"""The public client API (`rocketrio.client`): every documented name stays importable.

`PUBLIC` is the promise: removing or renaming one of these names fails here, and so does a new
public name nobody added to the list (so the list, the docs and ``__all__`` agree).
"""

from __future__ import annotations

import importlib
import inspect
import warnings

import rocketrio.client as client

PUBLIC = {
    # producers
    "Producer", "TransactionProducer", "TransactionListener", "LocalTransactionState",
    "TransactionSendResult", "SendFuture", "MessageQueueSelector", "SelectMessageQueueByHash",
    # consumers
    "INIT_MODE_MIN", "INIT_MODE_MAX",
    "PushConsumer", "OrderlyPushConsumer", "SimpleConsumer", "LitePullConsumer",
    "MessageListener", "MessageListenerOrderly", "ConsumeOrderlyContext", "ReceivedMessage",
    # blocking facades for plain code
    "BlockingProducer", "BlockingPushConsumer", "BlockingOrderlyPushConsumer",
    "BlockingPullConsumer", "BlockingTransactionProducer",
    # messages and results
    "Message", "MessageExt", "MessageQueue", "SendResult", "SendStatus", "ConsumeStatus",
    "ConsumeOrderlyStatus",
    # config
    "ClientConfig", "ProducerConfig", "PushConsumerConfig", "LitePullConsumerConfig",
    "MessageModel", "ConsumeFromWhere",
    # errors
    "MQClientError", "MQBrokerError", "NotFound", "TopicRouteNotFound", "UsageError",
    "RemotingError", "RemotingTimeout",
}  # fmt: skip

# deep imports the README and docs used before rocketrio.client existed: they keep working
DEEP = {
    "rocketrio.actors.client.message": ("Message", "SendResult"),
    "rocketrio.actors.client.producer": ("Producer",),
    "rocketrio.actors.client.push_consumer": ("ConsumeStatus", "PushConsumer"),
    "rocketrio.actors.client.blocking": ("BlockingProducer", "BlockingPushConsumer"),
    "rocketrio.actors.client.transaction_producer": ("TransactionProducer",),
    "rocketrio.actors.client.simple_consumer": ("SimpleConsumer",),
}


def test_every_public_name_is_exported_and_importable() -> None:
    assert set(client.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(client, name) is not None, name


def test_star_import_gives_exactly_the_public_names() -> None:
    ns: dict[str, object] = {}
    exec("from rocketrio.client import *", ns)
    assert {k for k in ns if not k.startswith("__")} == PUBLIC


def test_old_deep_imports_keep_working_and_are_the_same_objects() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for module, names in DEEP.items():
            mod = importlib.import_module(module)
            for name in names:
                assert getattr(mod, name) is getattr(client, name), f"{module}.{name}"


def test_public_classes_are_documented() -> None:
    for name in PUBLIC:
        obj = getattr(client, name)
        if inspect.isclass(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring (the API reference shows it)"

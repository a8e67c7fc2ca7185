"""Produce and consume from plain (synchronous) code with the blocking facades."""

import threading

from _common import NAMESRV, name

from rocketrio.client import BlockingProducer, BlockingPushConsumer, ConsumeStatus, Message

COUNT = 10


def main() -> None:
    topic = name("QuickstartPlain")
    with BlockingProducer(name("quickstart_producer"), NAMESRV) as producer:
        for i in range(COUNT):
            result = producer.send(Message(topic, f"hello-{i}".encode()))
            print("sent", result.msg_id, result.send_status.name)

    got: set[bytes] = set()
    done = threading.Event()

    def listener(msgs: list) -> ConsumeStatus:  # runs in a worker thread: may block
        got.update(m.body for m in msgs)
        if len(got) >= COUNT:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = BlockingPushConsumer(
        name("quickstart_group"), NAMESRV, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    with consumer:
        if not done.wait(30):
            raise SystemExit(f"only {len(got)} of {COUNT} messages consumed")
    print(f"consumed {len(got)} messages")


if __name__ == "__main__":
    main()

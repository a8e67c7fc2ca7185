"""Produce and consume on Trio: the same client objects as on asyncio."""

import trio
from _common import NAMESRV, name

from rocketrio.client import ConsumeStatus, Message, Producer, PushConsumer

COUNT = 10


async def main() -> None:
    topic = name("QuickstartTrio")
    async with Producer(name("quickstart_producer"), NAMESRV) as producer:
        async with trio.open_nursery() as nursery:  # concurrent sends
            for i in range(COUNT):
                nursery.start_soon(producer.send, Message(topic, f"hello-{i}".encode()))
    print(f"sent {COUNT} messages")

    got: set[bytes] = set()
    done = trio.Event()

    def listener(msgs: list) -> ConsumeStatus:
        got.update(m.body for m in msgs)
        if len(got) >= COUNT:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        name("quickstart_group"), NAMESRV, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    async with consumer:
        with trio.fail_after(30):
            await done.wait()
    print(f"consumed {len(got)} messages")


if __name__ == "__main__":
    trio.run(main)

"""Produce and consume on asyncio: the client runs inside asyncio's own loop (no thread)."""

import asyncio

from _common import NAMESRV, name

from rocketrio.client import ConsumeStatus, Message, Producer, PushConsumer

COUNT = 10


async def main() -> None:
    topic = name("QuickstartAsyncio")
    async with Producer(name("quickstart_producer"), NAMESRV) as producer:
        for i in range(COUNT):
            result = await producer.send(Message(topic, f"hello-{i}".encode(), tags="greeting"))
            print("sent", result.msg_id, result.send_status.name)

    got: set[bytes] = set()
    done = asyncio.Event()

    def listener(msgs: list) -> ConsumeStatus:
        got.update(m.body for m in msgs)
        if len(got) >= COUNT:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        name("quickstart_group"), NAMESRV, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(topic, "greeting")
    consumer.register_listener(listener)
    async with consumer:
        await asyncio.wait_for(done.wait(), 30)
    print(f"consumed {len(got)} messages")


if __name__ == "__main__":
    asyncio.run(main())

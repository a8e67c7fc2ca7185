"""POP consumption with the SimpleConsumer on asyncio: receive a batch, ack each message; an
unacked message would come back after its invisible duration."""

import asyncio

from _common import NAMESRV, name

from rocketrio.client import INIT_MODE_MIN, Message, Producer, SimpleConsumer

COUNT = 5


async def main() -> None:
    topic = name("PopJobs")
    async with Producer(name("pop_producer"), NAMESRV) as producer:
        for i in range(COUNT):
            await producer.send(Message(topic, f"job-{i}".encode()))
    print(f"sent {COUNT} jobs")

    done: set[bytes] = set()
    async with SimpleConsumer(
        name("pop_group"), NAMESRV, await_duration=2.0, init_mode=INIT_MODE_MIN
    ) as consumer:
        consumer.subscribe(topic)
        async with asyncio.timeout(30):
            while len(done) < COUNT:
                for msg in await consumer.receive(max_messages=16, invisible_duration=30.0):
                    done.add(msg.body)
                    await consumer.ack(msg)
    print("processed", sorted(done))


if __name__ == "__main__":
    asyncio.run(main())

"""Ordered messages on asyncio: each order's steps go to one queue (hash of the order id) and an
`OrderlyPushConsumer` takes them in that order, one batch per queue at a time."""

import asyncio

from _common import NAMESRV, name

from rocketrio.client import (
    ConsumeOrderlyStatus,
    Message,
    OrderlyPushConsumer,
    Producer,
    SelectMessageQueueByHash,
)

ORDERS, STEPS = 3, 5


async def main() -> None:
    topic = name("OrderedSteps")
    async with Producer(name("ordered_producer"), NAMESRV) as producer:
        for step in range(STEPS):
            for order in range(ORDERS):
                body = f"order-{order}:step-{step}".encode()
                await producer.send(Message(topic, body), SelectMessageQueueByHash, order)
    print(f"sent {ORDERS} orders of {STEPS} steps")

    seen: dict[str, list[int]] = {}
    done = asyncio.Event()

    def listener(msgs: list, _context: object) -> ConsumeOrderlyStatus:
        for m in msgs:
            order, step = m.body.decode().split(":step-")
            seen.setdefault(order, []).append(int(step))
        if sum(len(s) for s in seen.values()) >= ORDERS * STEPS:
            done.set()
        return ConsumeOrderlyStatus.SUCCESS

    consumer = OrderlyPushConsumer(
        name("ordered_group"), NAMESRV, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    async with consumer:
        await asyncio.wait_for(done.wait(), 30)
    for order, steps in sorted(seen.items()):
        assert steps == sorted(steps), f"{order} out of order: {steps}"
        print(order, "steps", steps)


if __name__ == "__main__":
    asyncio.run(main())

"""A delayed message on Trio: delay level 1 (1 s) keeps it from consumers until it is due."""

import time

import trio
from _common import NAMESRV, name

from rocketrio.client import ConsumeStatus, Message, Producer, PushConsumer


async def main() -> None:
    topic = name("Reminders")
    arrived = trio.Event()
    delays: list[float] = []

    def listener(msgs: list) -> ConsumeStatus:
        for m in msgs:
            delays.append(time.time() - m.born_timestamp / 1000)
        arrived.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        name("reminder_group"), NAMESRV, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    async with consumer, Producer(name("reminder_producer"), NAMESRV) as producer:
        await producer.send(Message(topic, b"call back", delay_time_level=1))
        print("sent a message due in 1 s")
        with trio.fail_after(30):
            await arrived.wait()
    print(f"delivered {delays[0]:.2f} s after it was sent")
    assert delays[0] >= 0.9, delays


if __name__ == "__main__":
    trio.run(main)

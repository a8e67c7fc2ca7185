"""A transactional message on asyncio: the half message is stored, the local transaction runs,
and only a committed message reaches consumers (a rolled-back one never does)."""

import asyncio

from _common import NAMESRV, name

from rocketrio.client import (
    ConsumeStatus,
    LocalTransactionState,
    Message,
    PushConsumer,
    TransactionProducer,
)


class Orders:
    """The local transaction: commit order 1, roll back order 2."""

    async def execute_local_transaction(self, msg: Message, arg: int) -> LocalTransactionState:
        await asyncio.sleep(0)  # e.g. write the order row to your database
        if arg == 1:
            return LocalTransactionState.COMMIT_MESSAGE
        return LocalTransactionState.ROLLBACK_MESSAGE

    def check_local_transaction(self, msg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE  # the broker asks when the outcome was lost


async def main() -> None:
    topic = name("Payments")
    async with TransactionProducer(name("tx_producer"), NAMESRV, Orders()) as producer:
        for order in (1, 2):
            r = await producer.send_message_in_transaction(
                Message(topic, f"order-{order}".encode()), order
            )
            print(f"order-{order}: {r.local_transaction_state.name}")

    got: list[bytes] = []
    arrived = asyncio.Event()

    def listener(msgs: list) -> ConsumeStatus:
        got.extend(m.body for m in msgs)
        arrived.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        name("payments_group"), NAMESRV, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    async with consumer:
        await asyncio.wait_for(arrived.wait(), 30)
        await asyncio.sleep(1)  # a rolled-back message would have arrived by now
    print("consumed", got)
    assert got == [b"order-1"], got


if __name__ == "__main__":
    asyncio.run(main())

"""RESUME_CHECK_HALF_MESSAGE (323) on the simulated network (MockClock): a half given up after
transactionCheckMax checks is put back with a check count of 0 (`rocketrio admin
resumeCheckHalfMessage`), its producer is asked again and the commit is consumed once; a message
that is not a half, an id that names nothing, and a slave are refused SYSTEM_ERROR with nothing
written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
import trio.testing

from rocketrio.actors.broker.transaction.policy import CHECK_MAX_TIME_TOPIC, HALF_TOPIC
from rocketrio.actors.broker.transaction.resume import PUT_ERROR, PUT_FAILED
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.transaction_producer import (
    LocalTransactionState,
    TransactionProducer,
)
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import ResumeCheckHalfMessageRequestHeader
from rocketrio.protocol.message import (
    PROPERTY_TRANSACTION_CHECK_TIMES,
    MessageExt,
    decode_stored,
)
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.clients import Cluster, Collector, cluster, consumer, create_topic, wait_for

S = LocalTransactionState
CHECK_INTERVAL_MS = 5_000


class Listener:
    """Executes UNKNOW; answers checks with ``check`` (changeable); records the checks."""

    def __init__(self) -> None:
        self.check = S.UNKNOW
        self.checked: list[MessageExt] = []

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return S.UNKNOW

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.append(msg)
        return self.check


def read_queue(c: Cluster, topic: str, queue_id: int = 0) -> list[MessageExt]:
    got = c.brokers["broker-a"].store.view.get_messages(topic, queue_id, 0, 10_000, 64 << 20)
    return [decode_stored(b)[0] for b in got.buffers]


async def start(c: Cluster) -> None:
    await c.start_broker(
        "broker-a",
        "10.0.1.1",
        transactionCheckInterval=CHECK_INTERVAL_MS,
        transactionTimeOut=6_000,
        transactionCheckMax=1,
    )
    await create_topic(c, "T")


async def cli(capsys: pytest.CaptureFixture[str], c: Cluster, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    with structlog.testing.capture_logs():
        code = await main_async(["admin", *argv], Wiring(c.net.transport(c.client_host())))
    out, err = capsys.readouterr()
    return code, out + err


async def resume(c: Cluster, msg_id: str | None) -> RemotingCommand:
    header = ResumeCheckHalfMessageRequestHeader(msg_id)
    async with c.admin() as admin:
        return await admin.api.call(  # type: ignore[no-any-return]
            c.addr("broker-a"),
            RequestCode.RESUME_CHECK_HALF_MESSAGE,
            header,
            ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
        )


async def test_a_discarded_half_is_checked_again_and_committed_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster(tmp_path, ()) as c:
        await start(c)
        listener = Listener()
        async with TransactionProducer("pg", c.ns_addr, listener, **c.kwargs()) as p:
            r = await p.send_message_in_transaction(Message("T", b"late"))
            await wait_for(lambda: len(read_queue(c, CHECK_MAX_TIME_TOPIC)) == 1)
            assert len(listener.checked) == 1
            halves = len(read_queue(c, HALF_TOPIC))
            dropped = read_queue(c, CHECK_MAX_TIME_TOPIC)[0]
            listener.check = S.COMMIT_MESSAGE
            code, out = await cli(
                capsys, c, "resumeCheckHalfMessage", "-n", c.ns_addr, "-i", dropped.offset_msg_id
            )
            assert code == 0, out
            assert out.strip() == f"resume check half message {dropped.offset_msg_id} success."
            again = read_queue(c, HALF_TOPIC)
            assert len(again) == halves + 1
            assert again[-1].properties[PROPERTY_TRANSACTION_CHECK_TIMES] == "0"
            assert again[-1].msg_id == r.msg_id and again[-1].body == b"late"
            await wait_for(lambda: sum(len(read_queue(c, "T", q)) for q in range(4)) == 1)
            assert len(listener.checked) == 2
            assert listener.checked[1].properties[PROPERTY_TRANSACTION_CHECK_TIMES] == "1"
            await trio.sleep(3 * CHECK_INTERVAL_MS / 1000)
            assert len(listener.checked) == 2  # decided: no further check
        got = Collector()
        async with consumer(c, "cg", got, consume_from_where="CONSUME_FROM_FIRST_OFFSET"):
            await wait_for(lambda: len(got.msgs) >= 1)
            await trio.sleep(20)
        assert got.bodies() == [b"late"]


async def test_bad_ids_non_halves_and_a_slave_are_refused_with_nothing_written(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c:
        await start(c)
        async with Producer("pp", c.ns_addr, **c.kwargs()) as p:
            sent = await p.send(Message("T", b"plain"))
        for msg_id, detail in (
            (None, "msgId is missing"),
            ("not-hex", "offset message id"),
            (sent.offset_msg_id[:-4] + "FFFF", "no message at offset"),
            (sent.offset_msg_id, "is not a transaction half message"),
        ):
            resp = await resume(c, msg_id)
            assert resp.code == ResponseCode.SYSTEM_ERROR, msg_id
            assert resp.remark is not None and resp.remark.startswith(PUT_ERROR), resp.remark
            assert detail in resp.remark, resp.remark
        assert read_queue(c, HALF_TOPIC) == []
        # a half on a slave: upstream's put failure
        listener = Listener()
        async with TransactionProducer("pg", c.ns_addr, listener, **c.kwargs()) as tp:
            r = await tp.send_message_in_transaction(Message("T", b"half"))
        c.brokers["broker-a"].transactions.is_master = lambda: False
        resp = await resume(c, r.offset_msg_id)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark is not None and resp.remark.startswith(PUT_FAILED)
        assert len(read_queue(c, HALF_TOPIC)) == 1

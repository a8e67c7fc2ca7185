"""Transactional messages end to end on the simulated network under a MockClock: a real
NameServer and Broker, the TransactionProducer and a push consumer (SPEC M5, M7)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import structlog
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerRole, FlushDiskType
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.roles.role_service import RoleChange
from rocketrio.actors.broker.transaction.half_store import host_of
from rocketrio.actors.broker.transaction.policy import (
    CHECK_MAX_TIME_TOPIC,
    CID_SYS_RMQ_TRANS,
    HALF_TOPIC,
    OP_TOPIC,
    committed_message,
    decode_op_body,
    op_message,
)
from rocketrio.actors.client.admin import wait_for_route
from rocketrio.actors.client.config_admin import update_broker_config
from rocketrio.actors.client.message import Message, SendStatus
from rocketrio.actors.client.transaction_producer import (
    LocalTransactionState,
    TransactionProducer,
)
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import EndTransactionRequestHeader
from rocketrio.protocol.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageExt,
    decode_stored,
    parse_offset_msg_id,
)
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.clients import Cluster, Collector, cluster, consumer, create_topic, wait_for

S = LocalTransactionState
CHECK_INTERVAL_MS = 5_000
TIMEOUT_MS = 6_000


class Listener:
    """Executes with ``execute`` (a state, or a function of the body) and answers checks with
    ``check``; records what it was asked."""

    def __init__(
        self,
        execute: S | Callable[[bytes], S] = S.COMMIT_MESSAGE,
        check: S | Callable[[bytes], S] = S.COMMIT_MESSAGE,
    ) -> None:
        self.execute = execute
        self.check = check
        self.executed: list[Message] = []
        self.checked: list[MessageExt] = []

    def execute_local_transaction(self, msg: Message, arg: Any) -> S:
        self.executed.append(msg)
        return self.execute(msg.body) if callable(self.execute) else self.execute

    def check_local_transaction(self, msg: MessageExt) -> S:
        self.checked.append(msg)
        return self.check(msg.body) if callable(self.check) else self.check


def read_queue(
    c: Cluster, topic: str, queue_id: int = 0, broker: str = "broker-a"
) -> list[MessageExt]:
    view = c.brokers[broker].store.view
    got = view.get_messages(topic, queue_id, 0, 10_000, 64 << 20)
    return [decode_stored(b)[0] for b in got.buffers]


def read_topic(c: Cluster, topic: str, queues: int = 4) -> list[MessageExt]:
    return [m for q in range(queues) for m in read_queue(c, topic, q)]


@asynccontextmanager
async def tx_cluster(tmp_path: Path, **overrides: Any) -> AsyncIterator[Cluster]:
    """One broker (check round every 5 s, transactionTimeOut 6 s) and topic T (4 queues)."""
    async with cluster(tmp_path, ()) as c:
        await c.start_broker("broker-a", "10.0.1.1", **broker_config(**overrides))
        await create_topic(c, "T")
        yield c


def broker_config(**overrides: Any) -> dict[str, Any]:
    return {
        "transactionCheckInterval": CHECK_INTERVAL_MS,
        "transactionTimeOut": TIMEOUT_MS,
        **overrides,
    }


def tx_producer(c: Cluster, listener: Listener, group: str = "pg") -> TransactionProducer:
    return TransactionProducer(group, c.ns_addr, listener, **c.kwargs())


async def consume_all(c: Cluster, n: int, settle_s: float = 20.0, group: str = "cg") -> list[bytes]:
    """Bodies a fresh consumer gets from the first offset: waits for ``n``, then ``settle_s``
    more for any extra delivery."""
    got = Collector()
    pc = consumer(c, group, got, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    async with pc:
        await wait_for(lambda: len(got.msgs) >= n)
        await trio.sleep(settle_s)
    return got.bodies()


async def test_a_committed_transaction_is_consumed_once_and_a_rolled_back_one_never(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with tx_cluster(tmp_path) as c:
        listener = Listener(lambda body: S.COMMIT_MESSAGE if body == b"yes" else S.ROLLBACK_MESSAGE)
        async with tx_producer(c, listener) as p:
            yes = await p.send_message_in_transaction(Message("T", b"yes", tags="a"), arg=1)
            no = await p.send_message_in_transaction(Message("T", b"no"), arg=2)
            assert yes.send_status is SendStatus.SEND_OK
            assert yes.local_transaction_state is S.COMMIT_MESSAGE
            assert no.local_transaction_state is S.ROLLBACK_MESSAGE
            assert yes.transaction_id == yes.msg_id
            # the listener saw the transaction id, the same as the half's UNIQ_KEY
            assert listener.executed[0].properties[PROPERTY_TRANSACTION_ID] == yes.msg_id
            await wait_for(lambda: len(read_queue(c, OP_TOPIC)) == 2)
            # halves: in the half topic, queue 0, with the real topic and queue
            halves = read_queue(c, HALF_TOPIC)
            assert [h.properties[PROPERTY_REAL_TOPIC] for h in halves] == ["T", "T"]
            assert halves[0].properties[PROPERTY_REAL_QUEUE_ID] == str(yes.message_queue.queueId)
            assert halves[0].properties[PROPERTY_TRANSACTION_PREPARED] == "true"
            assert halves[0].properties[PROPERTY_PRODUCER_GROUP] == "pg"
            assert halves[0].sys_flag & 0xC == 0
            # the answer quotes the half (its queue offset and CommitLog offset)
            assert yes.queue_offset == halves[0].queue_offset
            assert parse_offset_msg_id(yes.offset_msg_id)[2] == halves[0].commitlog_offset
            ops = read_queue(c, OP_TOPIC)
            assert sorted(o for op in ops for o in decode_op_body(op.body)) == [0, 1]
            assert {op.tags for op in ops} == {"d"}
            # the real topic holds the committed one only, sysFlag commit, no TRAN_MSG
            real = read_topic(c, "T")
            assert [m.body for m in real] == [b"yes"]
            assert real[0].sys_flag & 0xC == TRANSACTION_COMMIT_TYPE
            assert PROPERTY_TRANSACTION_PREPARED not in real[0].properties
            assert PROPERTY_REAL_TOPIC not in real[0].properties
            assert real[0].msg_id == yes.msg_id
            assert real[0].tags == "a"
            assert real[0].prepared_transaction_offset == halves[0].commitlog_offset
        assert await consume_all(c, 1) == [b"yes"]
        assert listener.checked == []  # decided at once: never checked


async def test_an_unknown_transaction_is_checked_then_committed_by_the_check(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with tx_cluster(tmp_path) as c:
        listener = Listener(S.UNKNOW, check=S.COMMIT_MESSAGE)
        async with tx_producer(c, listener) as p:
            t0 = trio.current_time()
            r = await p.send_message_in_transaction(Message("T", b"later"))
            assert r.local_transaction_state is S.UNKNOW
            await trio.sleep(TIMEOUT_MS / 1000 - 1)
            assert listener.checked == [] and read_topic(c, "T") == []  # immune
            await wait_for(lambda: len(read_topic(c, "T")) == 1)
            assert len(listener.checked) == 1
            assert trio.current_time() - t0 >= TIMEOUT_MS / 1000
            checked = listener.checked[0]
            assert checked.topic == "T" and checked.msg_id == r.msg_id
            assert checked.properties[PROPERTY_TRANSACTION_CHECK_TIMES] == "1"
            await trio.sleep(3 * CHECK_INTERVAL_MS / 1000)
            assert len(listener.checked) == 1  # decided: no second check
        assert await consume_all(c, 1) == [b"later"]


async def test_a_shorter_check_interval_applies_to_the_sleep_in_progress(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """UPDATE_BROKER_CONFIG transactionCheckInterval 60 s -> 2 s while the check service sleeps:
    the next round comes 2 s after the last one began its sleep, not after the 60 s."""
    async with tx_cluster(tmp_path, transactionCheckInterval=60_000) as c:
        listener = Listener(S.UNKNOW, check=S.COMMIT_MESSAGE)
        async with tx_producer(c, listener) as p:
            r = await p.send_message_in_transaction(Message("T", b"orphan"))
            assert r.local_transaction_state is S.UNKNOW
            await trio.sleep(TIMEOUT_MS / 1000 + 1)  # past its immunity, checked by no round yet
            assert listener.checked == []
            async with c.admin() as admin:
                await update_broker_config(
                    admin, c.brokers["broker-a"].addr, {"transactionCheckInterval": "2000"}
                )
            changed_at = trio.current_time()
            await wait_for(lambda: len(read_topic(c, "T")) == 1)
            assert len(listener.checked) == 1
            # the sleep began at the broker's start, well over 2 s ago: the round runs at once
            assert trio.current_time() - changed_at < 1.0
            await trio.sleep(2.5)
            assert len(listener.checked) == 1  # decided: the next rounds check nothing


async def test_a_check_answered_unknown_is_discarded_after_transaction_check_max(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with tx_cluster(tmp_path, transactionCheckMax=3) as c:
        listener = Listener(S.UNKNOW, check=S.UNKNOW)
        with structlog.testing.capture_logs() as logs:
            async with tx_producer(c, listener) as p:
                r = await p.send_message_in_transaction(Message("T", b"never"))
                await wait_for(lambda: len(read_queue(c, CHECK_MAX_TIME_TOPIC)) == 1)
                await trio.sleep(3 * CHECK_INTERVAL_MS / 1000)
        assert len(listener.checked) == 3
        assert [m.properties[PROPERTY_TRANSACTION_CHECK_TIMES] for m in listener.checked] == [
            "1",
            "2",
            "3",
        ]
        dropped = read_queue(c, CHECK_MAX_TIME_TOPIC)
        assert dropped[0].msg_id == r.msg_id and dropped[0].body == b"never"
        discarded = [e for e in logs if e["event"] == "transaction_check_discarded"]
        assert len(discarded) == 1 and discarded[0]["msg_id"] == r.msg_id
        assert discarded[0]["reason"] == "check_max"
        assert read_topic(c, "T") == []
        # the scan moved past every copy, and the progress is committed for restarts
        b = c.brokers["broker-a"]
        half_end = b.store.view.get_max_offset(HALF_TOPIC, 0)
        assert b.tables.offsets.query(CID_SYS_RMQ_TRANS, HALF_TOPIC, 0) == half_end


async def test_a_duplicate_or_late_end_transaction_commits_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with tx_cluster(tmp_path) as c:
        listener = Listener(S.COMMIT_MESSAGE)
        async with tx_producer(c, listener) as p:
            r = await p.send_message_in_transaction(Message("T", b"once"))
            await wait_for(lambda: len(read_topic(c, "T")) == 1)
        b = c.brokers["broker-a"]
        h = EndTransactionRequestHeader(
            producerGroup="pg",
            tranStateTableOffset=r.queue_offset,
            commitLogOffset=parse_offset_msg_id(r.offset_msg_id)[2],
            commitOrRollback=TRANSACTION_COMMIT_TYPE,
            msgId=r.msg_id,
            fromTransactionCheck=True,
        )
        assert await b.transactions.end_transaction(h) is None
        rollback = EndTransactionRequestHeader(**{**_fields(h), "commitOrRollback": 12})
        assert await b.transactions.end_transaction(rollback) is None
        wrong = EndTransactionRequestHeader(**{**_fields(h), "producerGroup": "other"})
        refusal = await b.transactions.end_transaction(wrong)
        assert refusal is not None and refusal.code == ResponseCode.SYSTEM_ERROR
        assert refusal.remark == "The producer group wrong"
        await trio.sleep(2 * CHECK_INTERVAL_MS / 1000)
        # after a graceful restart the op is read back: still no second commit
        c.scopes["broker-a"].cancel()
        await trio.sleep(1)
        await c.start_broker("broker-a", "10.0.1.1", **broker_config())
        b = c.brokers["broker-a"]
        # the scan passed the half before the restart: refused as ended, nothing written
        again = await b.transactions.end_transaction(h)
        assert again is not None
        assert again.remark == "the transaction was already ended or discarded"
        assert [m.body for m in read_topic(c, "T")] == [b"once"]
        assert len(read_queue(c, OP_TOPIC)) == 1


def _fields(h: EndTransactionRequestHeader) -> dict[str, Any]:
    return attrs.asdict(h)


@pytest.mark.parametrize("index", [True, False], ids=["index", "no_index"])
async def test_a_broker_crash_among_pending_halves_loses_none_and_commits_none_twice(
    tmp_path: Path, mock_clock: trio.testing.MockClock, index: bool
) -> None:
    """Without the key index the restarted broker cannot look a commit up: only the decided
    keys read back from the ops keep the original half of u0 from a second commit."""
    # consumer offsets (the scan progress among them) are never written before the crash
    config = {
        "flushDiskType": FlushDiskType.SYNC_FLUSH,
        "flushConsumerOffsetInterval": 600_000,
        "messageIndexEnable": index,
    }
    async with tx_cluster(tmp_path, **config) as c:
        decide_now = {b"c0", b"c1", b"c2"}
        listener = Listener(
            lambda body: S.COMMIT_MESSAGE if body in decide_now else S.UNKNOW,
            check=lambda body: S.COMMIT_MESSAGE if body == b"u0" else S.UNKNOW,
        )
        async with tx_producer(c, listener) as p:
            for i in range(3):
                await p.send_message_in_transaction(Message("T", f"c{i}".encode()))
                await p.send_message_in_transaction(Message("T", f"u{i}".encode()))
            # a round checks (re-puts) the unknown halves: u0 is committed through its copy,
            # u1 and u2 stay unknown
            await wait_for(lambda: b"u0" in {m.body for m in read_topic(c, "T")})
            await trio.sleep(0.5)
            c.crash_broker("broker-a")  # kill -9
            offsets_file = tmp_path / "broker-a" / "config" / "consumerOffset.json"
            assert not offsets_file.exists() or CID_SYS_RMQ_TRANS not in offsets_file.read_text()
            await trio.sleep(1)
            listener.check = S.COMMIT_MESSAGE
            await c.start_broker("broker-a", "10.0.1.1", **broker_config(**config))
            await wait_for(lambda: len(read_topic(c, "T")) >= 6)
            await trio.sleep(4 * CHECK_INTERVAL_MS / 1000)
        bodies = sorted(m.body for m in read_topic(c, "T"))
        assert bodies == sorted([b"c0", b"c1", b"c2", b"u0", b"u1", b"u2"])
        assert sorted(await consume_all(c, 6)) == bodies


async def test_the_check_goes_only_to_a_live_producer_of_the_halfs_group(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with tx_cluster(tmp_path) as c:
        gone = Listener(S.UNKNOW, check=S.COMMIT_MESSAGE)
        other = Listener(S.COMMIT_MESSAGE, check=S.COMMIT_MESSAGE)
        async with tx_producer(c, other, group="other") as bystander:
            # every CHECK_TRANSACTION_STATE that reaches the other group's client
            seen: list[RemotingCommand] = []
            bystander.producer.client.transaction_checkers["spy"] = lambda _a, cmd: bool(
                seen.append(cmd)
            )
            # it sends, so it knows the broker and heartbeats it: the broker knows its group
            await bystander.send_message_in_transaction(Message("T", b"side"))
            with structlog.testing.capture_logs() as logs:
                async with tx_producer(c, gone) as p:
                    await p.send_message_in_transaction(Message("T", b"orphan"))
                await trio.sleep(3 * CHECK_INTERVAL_MS / 1000)
            assert gone.checked == [] and other.checked == []
            assert any(e["event"] == "transaction_check_no_producer" for e in logs)
            assert [m.body for m in read_topic(c, "T")] == [b"side"]
            # a producer heartbeats the brokers of the routes it knows: this one sends first
            heir = Listener(S.COMMIT_MESSAGE, check=S.COMMIT_MESSAGE)
            async with tx_producer(c, heir) as p:
                await p.send_message_in_transaction(Message("T", b"own"))
                await wait_for(lambda: len(read_topic(c, "T")) == 3)
            assert [m.body for m in heir.checked] == [b"orphan"] and other.checked == []
            assert seen == []


async def test_the_check_service_runs_only_while_master(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with tx_cluster(tmp_path) as c:
        listener = Listener(S.UNKNOW, check=S.COMMIT_MESSAGE)
        async with tx_producer(c, listener) as p:
            await p.send_message_in_transaction(Message("T", b"m"))
            b = c.brokers["broker-a"]
            b.config.brokerRole = BrokerRole.SLAVE
            await trio.sleep(5 * CHECK_INTERVAL_MS / 1000)
            assert listener.checked == []
            b.config.brokerRole = BrokerRole.ASYNC_MASTER
            await wait_for(lambda: len(read_topic(c, "T")) == 1)
            assert len(listener.checked) == 1


async def test_end_transaction_on_a_slave_is_refused(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with tx_cluster(tmp_path) as c:
        b = c.brokers["broker-a"]
        b.config.brokerRole = BrokerRole.SLAVE
        h = EndTransactionRequestHeader(
            producerGroup="pg",
            tranStateTableOffset=0,
            commitLogOffset=0,
            commitOrRollback=TRANSACTION_ROLLBACK_TYPE,
            msgId="x",
        )
        refusal = await b.transactions.end_transaction(h)
        assert refusal is not None and refusal.code == ResponseCode.SLAVE_NOT_AVAILABLE


async def test_admin_shows_a_pending_half_as_a_prepared_transaction(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    async with tx_cluster(tmp_path, transactionTimeOut=600_000) as c:
        listener = Listener(S.UNKNOW)
        async with tx_producer(c, listener) as p:
            r = await p.send_message_in_transaction(Message("T", b"pending"))
        async with c.admin() as admin:
            await wait_for_route(admin, HALF_TOPIC)
            half = await admin.query_msg_by_id(r.offset_msg_id)
            assert half.topic == HALF_TOPIC and half.queue_id == 0
            assert half.properties[PROPERTY_TRANSACTION_PREPARED] == "true"
            assert half.properties[PROPERTY_PRODUCER_GROUP] == "pg"
            assert half.properties[PROPERTY_REAL_TOPIC] == "T"
            assert half.msg_id == r.msg_id
            status = await admin.topic_status(HALF_TOPIC)
            assert [(q.queueId, q.minOffset, q.maxOffset) for q in status] == [(0, 0, 1)]
            assert all(q.maxOffset == 0 for q in await admin.topic_status("T"))
        # the same through the CLI: queryMsgById names the transaction, topicStatus the queue
        out = await cli(capsys, c, "queryMsgById", "-n", c.ns_addr, "-i", r.offset_msg_id)
        assert "Transaction:         PREPARED (PGROUP=pg, REAL_TOPIC=T, REAL_QID=" in out
        assert f"Topic:               {HALF_TOPIC}" in out
        out = await cli(capsys, c, "topicStatus", "-n", c.ns_addr, "-t", HALF_TOPIC)
        row = next(line for line in out.splitlines() if "broker-a" in line)
        assert row.split()[1:4] == ["0", "0", "1"], out  # queue 0, min 0, max 1


async def cli(capsys: pytest.CaptureFixture[str], c: Cluster, *argv: str) -> str:
    """``rocketrio admin ...`` in process; its stdout (it must exit 0)."""
    capsys.readouterr()
    with structlog.testing.capture_logs():
        code = await main_async(["admin", *argv], Wiring(c.net.transport(c.client_host())))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


async def test_a_commit_whose_op_was_lost_gets_its_op_not_a_second_commit(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with tx_cluster(tmp_path) as c:
        listener = Listener(S.UNKNOW, check=S.COMMIT_MESSAGE)
        async with tx_producer(c, listener) as p:
            await p.send_message_in_transaction(Message("T", b"torn"))
            # a crash between the two writes of a commit: the commit is on disk, the op is not
            b = c.brokers["broker-a"]
            half = read_queue(c, HALF_TOPIC)[0]
            put = await b.transactions.queues.put(committed_message(half, host_of(half.born_host)))
            assert not isinstance(put, Refusal)
            await trio.sleep(3 * CHECK_INTERVAL_MS / 1000)
            assert listener.checked == []  # repaired, not asked
            assert [m.body for m in read_topic(c, "T")] == [b"torn"]
            assert [decode_op_body(op.body) for op in read_queue(c, OP_TOPIC)] == [[0]]


async def test_a_late_end_for_a_half_re_put_by_a_check_decides_the_pending_copy(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with tx_cluster(tmp_path) as c:
        listener = Listener(S.UNKNOW, check=S.UNKNOW)
        async with tx_producer(c, listener) as p:
            r = await p.send_message_in_transaction(Message("T", b"slow"))
            await wait_for(lambda: len(listener.checked) == 1)  # copy at half offset 1
            b = c.brokers["broker-a"]
            late = EndTransactionRequestHeader(
                producerGroup="pg",
                tranStateTableOffset=r.queue_offset,
                commitLogOffset=parse_offset_msg_id(r.offset_msg_id)[2],
                commitOrRollback=TRANSACTION_COMMIT_TYPE,
                msgId=r.msg_id,
                fromTransactionCheck=False,
            )
            assert await b.transactions.end_transaction(late) is None
            assert [m.body for m in read_topic(c, "T")] == [b"slow"]
            assert [decode_op_body(op.body) for op in read_queue(c, OP_TOPIC)] == [[0, 1]]
            await trio.sleep(4 * CHECK_INTERVAL_MS / 1000)
            assert len(listener.checked) == 1  # the copy is decided: never checked again
            assert [m.body for m in read_topic(c, "T")] == [b"slow"]


async def test_a_new_master_rebuilds_what_another_master_decided(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with tx_cluster(tmp_path, transactionTimeOut=600_000) as c:
        listener = Listener(S.UNKNOW)
        async with tx_producer(c, listener) as p:
            r = await p.send_message_in_transaction(Message("T", b"elsewhere"))
        b = c.brokers["broker-a"]
        await b.transactions.check_round()  # the service has loaded its state
        # while this broker was a slave, the master committed the half: the commit and its op
        # reach this store by replication (written here directly)
        b.config.brokerRole = BrokerRole.SLAVE
        b.on_role_change(RoleChange(BrokerRole.SLAVE, 1, 1))
        half = read_queue(c, HALF_TOPIC)[0]
        for msg in (
            committed_message(half, host_of(half.born_host)),
            op_message([half.queue_offset], "OP1", 0, host_of(half.born_host)),
        ):
            assert not isinstance(await b.transactions.queues.put(msg), Refusal)
        b.config.brokerRole = BrokerRole.ASYNC_MASTER
        b.on_role_change(RoleChange(BrokerRole.ASYNC_MASTER, 0, 2))
        # the producer's answer to an old check reaches the new master: nothing is written
        again = EndTransactionRequestHeader(
            producerGroup="pg",
            tranStateTableOffset=r.queue_offset,
            commitLogOffset=parse_offset_msg_id(r.offset_msg_id)[2],
            commitOrRollback=TRANSACTION_COMMIT_TYPE,
            msgId=r.msg_id,
            fromTransactionCheck=True,
        )
        assert await b.transactions.end_transaction(again) is None
        assert [m.body for m in read_topic(c, "T")] == [b"elsewhere"]
        assert len(read_queue(c, OP_TOPIC)) == 1


async def test_a_committed_transaction_with_a_timer_waits_for_its_time(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Upstream's put hook delays a committed transactional message that carries a timer (its
    client drops a DELAY level from transactions, not TIMER_*): the commit waits in the timer
    wheel and reaches its topic at its time, counted from the commit."""
    async with tx_cluster(tmp_path) as c:
        async with tx_producer(c, Listener()) as p:
            later = Message("T", b"later", properties={"TIMER_DELAY_SEC": "5"})
            r = await p.send_message_in_transaction(later, arg=1)
            committed_at = trio.current_time()
            assert r.local_transaction_state is S.COMMIT_MESSAGE
            await wait_for(lambda: len(read_queue(c, OP_TOPIC)) == 1)
            assert read_topic(c, "T") == []  # waiting in rmq_sys_wheel_timer
            await wait_for(lambda: len(read_topic(c, "T")) == 1)
            delivered_after = trio.current_time() - committed_at
            assert 5.0 <= delivered_after < 5.2, delivered_after
            got = read_topic(c, "T")[0]
            assert got.msg_id == r.msg_id and got.sys_flag & 0xC == TRANSACTION_COMMIT_TYPE

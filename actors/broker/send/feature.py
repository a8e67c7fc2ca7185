"""Sending as the broker builds it: the processor (processor.py) and its request codes
(handlers.py)."""

from __future__ import annotations

from collections.abc import Callable

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.clients.lock_manager import RebalanceLockManager
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.send.config import SendConfig
from rocketrio.actors.broker.send.direct import direct_send
from rocketrio.actors.broker.send.handlers import send_handlers
from rocketrio.actors.broker.send.processor import SendMessageProcessor, WriteGate
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.store.broker_store import BrokerStore
from rocketrio.actors.broker.tables.broker_tables import BrokerTables
from rocketrio.protocol.codes import RequestCode


class SendFeature:
    """The send path of one broker (module docstring)."""

    def __init__(
        self,
        io: BrokerIO,
        *,
        tables: BrokerTables,
        store: BrokerStore,
        locks: RebalanceLockManager,
        stats: BrokerStats,
        write_gate: WriteGate,
        new_uniq_key: Callable[[], str],
    ) -> None:
        self.processor = SendMessageProcessor(
            SendConfig.of(io.config),
            topics=tables.topics,
            groups=tables.groups,
            writer=store.actor,
            reader=store.view,
            locks=locks,
            new_uniq_key=new_uniq_key,
            stats=stats,
            write_gate=write_gate,
            rng=io.rng,
            now_ms=io.now_ms,
        )

    def handlers(self) -> Handlers:
        plain = send_handlers(self.processor)
        v2 = RequestCode.SEND_MESSAGE_V2  # a Java client's single send: one handler (direct.py)
        return {**plain, v2: direct_send(self.processor, plain[v2], None)}

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        self.processor.reconfigure(config, changed)

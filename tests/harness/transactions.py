"""A transaction listener that makes the broker ask: shared by the acting-master actor test and
the whole-cluster simulation's acting scenarios."""

from __future__ import annotations

from typing import Any

from rocketrio.actors.client.message import Message
from rocketrio.actors.client.transaction_producer import LocalTransactionState
from rocketrio.protocol.message import MessageExt


class CommitByBody:
    """Executes as UNKNOW (the broker must ask); a check commits bodies starting with b"commit"
    and rolls back the rest."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        if msg.body.startswith(b"commit"):
            return LocalTransactionState.COMMIT_MESSAGE
        return LocalTransactionState.ROLLBACK_MESSAGE

"""CONSUME_MESSAGE_DIRECTLY (309): its request header and the client's answer body.

`mqadmin queryMsgByUniqueKey -g group -d clientId` asks the broker that stored a message to have
one consumer client consume it now, outside its queues (upstream AdminBrokerProcessor
.consumeMessageDirectly, ClientRemotingProcessor.consumeMessageDirectly). The header is upstream's
ConsumeMessageDirectlyResultRequestHeader (the broker adds brokerName, topicSysFlag and
groupSysFlag before passing it on); the answer is a ConsumeMessageDirectlyResult in fastjson
(`fastjson.encode`), its consumeResult one of upstream's CMResult names.
"""

from __future__ import annotations

import enum

import attrs


@attrs.define(slots=True)
class ConsumeMessageDirectlyResultRequestHeader:
    consumerGroup: str
    clientId: str | None = None
    msgId: str | None = None  # the offset message id (store host + CommitLog offset)
    brokerName: str | None = None
    topic: str | None = None
    topicSysFlag: int | None = None
    groupSysFlag: int | None = None


class CMResult(enum.Enum):
    """How the listener took the message (upstream CMResult)."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


@attrs.define(slots=True)
class ConsumeMessageDirectlyResult:
    order: bool = False
    autoCommit: bool = True
    consumeResult: CMResult | None = None  # None: a status the mapping does not know
    remark: str | None = None
    spentTimeMills: int = 0

    def __str__(self) -> str:
        """As upstream's toString, which mqadmin prints."""
        order, auto = str(self.order).lower(), str(self.autoCommit).lower()
        result = self.consumeResult.value if self.consumeResult is not None else "null"
        return (
            f"ConsumeMessageDirectlyResult [order={order}, autoCommit={auto}, "
            f"consumeResult={result}, remark={self.remark or 'null'}, "
            f"spentTimeMills={self.spentTimeMills}]"
        )

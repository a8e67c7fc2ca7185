"""GET_BROKER_HA_STATUS (907): the broker's replication status, in upstream's HARuntimeInfo shape.

Field names and types are upstream's (remoting/src/main/java/org/apache/rocketmq/remoting/
protocol/body/HARuntimeInfo.java and its two nested classes); `protocol.fastjson` writes them
as upstream's fastjson does (alphabetical, ``masterAddr`` omitted while None). Upstream's
``HAClientRuntimeInfo.isActivated`` has no getter and is never written, so it is not here.

On a master: ``master`` true, its CommitLog end, how many slaves are in its SyncStateSet and
one `HAConnectionRuntimeInfo` per connected slave; ``haClientRuntimeInfo`` stays zeroed. On a
slave: ``master`` false and the `HAClientRuntimeInfo` of its connection to the master.
"""

from __future__ import annotations

import attrs


@attrs.define(slots=True)
class HAConnectionRuntimeInfo:
    """One slave connection as its master sees it."""

    addr: str = ""  # the slave's end of the HA connection
    slaveAckOffset: int = 0  # -1: no ack since the slave (re)connected
    diff: int = 0  # masterCommitLogMaxOffset - slaveAckOffset
    inSync: bool = False  # in the SyncStateSet
    transferredByteInSecond: int = 0  # bytes sent to it in the last whole second
    transferFromWhere: int = 0  # the next offset to send (-1: not decided yet)


@attrs.define(slots=True)
class HAClientRuntimeInfo:
    """A slave's connection to its master (all zero on a master)."""

    masterAddr: str | None = None  # the master's HA address
    transferredByteInSecond: int = 0  # bytes received in the last whole second
    maxOffset: int = 0  # the slave's CommitLog end
    lastReadTimestamp: int = 0  # epoch ms of the last bytes from the master (0: not connected)
    lastWriteTimestamp: int = 0  # epoch ms of the last ack sent
    masterFlushOffset: int = 0


@attrs.define(slots=True)
class HARuntimeInfo:
    master: bool = False
    masterCommitLogMaxOffset: int = 0
    inSyncSlaveNums: int = 0
    haConnectionInfo: list[HAConnectionRuntimeInfo] = attrs.field(factory=list)
    haClientRuntimeInfo: HAClientRuntimeInfo = attrs.field(factory=HAClientRuntimeInfo)

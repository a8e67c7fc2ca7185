"""GET_ALL_PRODUCER_INFO (328): every producer a broker knows, by group (upstream
ProducerTableInfo / ProducerInfo, what `mqadmin producer -b` prints). In fastjson
(`fastjson.encode`); ``language`` is the LanguageCode name, ``remoteIP`` the connection's remote
address as upstream's Netty channel prints it (``/ip:port``), ``lastUpdateTimestamp`` epoch ms
of the producer's last heartbeat.
"""

from __future__ import annotations

import attrs


@attrs.define(slots=True)
class ProducerInfo:
    clientId: str
    remoteIP: str
    language: str
    version: int
    lastUpdateTimestamp: int

    def __str__(self) -> str:
        """As upstream's toString, which mqadmin prints."""
        return (
            f"clientId={self.clientId},remoteIP={self.remoteIP}, language={self.language}, "
            f"version={self.version}, lastUpdateTimestamp={self.lastUpdateTimestamp}"
        )


@attrs.define(slots=True)
class ProducerTableInfo:
    data: dict[str, list[ProducerInfo]] = attrs.field(factory=dict)

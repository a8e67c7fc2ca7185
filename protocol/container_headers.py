"""Typed headers of the broker container's requests (upstream's container/ and tools).

ADD_BROKER (902) carries ``configPath``, the broker config file on the container's host
(nullable upstream; an empty one is refused). REMOVE_BROKER (903) names the broker by
``brokerName``, ``brokerClusterName`` and ``brokerId`` (all required). Attribute names are the
extField keys, so `serde.from_ext` / `serde.to_ext` convert them with no rename table.
"""

from __future__ import annotations

import attrs


@attrs.define(slots=True)
class AddBrokerRequestHeader:
    configPath: str | None = None


@attrs.define(slots=True)
class RemoveBrokerRequestHeader:
    brokerName: str
    brokerClusterName: str
    brokerId: int

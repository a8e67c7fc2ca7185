"""The message request modes (upstream MessageRequestModeManager): for a topic and a consumer
group, whether the broker assigns its consumers queues to PULL from or to POP from, and how many
of the other consumers' queues each one shares in POP mode (``popShareQueueNum``).

`RequestModeManager` is pure: `set_mode` (SET_MESSAGE_REQUEST_MODE, ``mqadmin setConsumeMode``),
`get_mode` (None when the pair was never set: the broker's defaultMessageRequestMode applies),
`snapshot` (GET_ALL_MESSAGE_REQUEST_MODE's body and the file's content) and `adopt` (what the
file or a slave's master says). `RequestModeTable` keeps it in
``storePathRootDir/config/messageRequestMode.json`` (upstream's file and shape), loaded at start;
SET_MESSAGE_REQUEST_MODE awaits `persist`, so its SUCCESS means "on disk", as upstream persists
before answering.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
import trio

from rocketrio.actors.broker.tables.json_table import OneFileTable
from rocketrio.protocol.assignment import (
    MessageRequestModeSerializeWrapper,
    SetMessageRequestModeRequestBody,
)
from rocketrio.storage.fs import OS_FS, FileSystem

REQUEST_MODE_FILE = "messageRequestMode.json"

RunBlocking = Callable[[Callable[[], None]], Awaitable[None]]


class RequestModeManager:
    """topic -> consumer group -> the mode set for them (module docstring)."""

    def __init__(self) -> None:
        self.modes: dict[str, dict[str, SetMessageRequestModeRequestBody]] = {}

    def set_mode(self, body: SetMessageRequestModeRequestBody) -> None:
        """Record ``body`` for its (topic, group): the last one set wins, as upstream's put."""
        self.modes.setdefault(body.topic, {})[body.consumerGroup] = attrs.evolve(body)

    def get_mode(self, topic: str, group: str) -> SetMessageRequestModeRequestBody | None:
        return self.modes.get(topic, {}).get(group)

    def snapshot(self) -> MessageRequestModeSerializeWrapper:
        return MessageRequestModeSerializeWrapper(
            {t: dict(groups) for t, groups in self.modes.items()}
        )

    def adopt(self, wrapper: MessageRequestModeSerializeWrapper) -> bool:
        """Replace every mode with ``wrapper``'s (the file at start, a slave's master's table);
        True when that changed anything."""
        modes = {t: dict(groups) for t, groups in wrapper.messageRequestModeMap.items()}
        changed, self.modes = modes != self.modes, modes
        return changed


class RequestModeTable(RequestModeManager, OneFileTable):
    """The modes in messageRequestMode.json (module docstring)."""

    def __init__(
        self,
        broker_name: str,
        store_root: str,
        *,
        run_blocking: RunBlocking = trio.to_thread.run_sync,
        fs: FileSystem = OS_FS,
    ) -> None:
        super().__init__()
        self.open_file(
            broker_name,
            store_root,
            REQUEST_MODE_FILE,
            MessageRequestModeSerializeWrapper,
            self.snapshot,
            run_blocking,
            fs=fs,
        )

    def _adopt(self, value: MessageRequestModeSerializeWrapper | None) -> None:
        self.adopt(value or MessageRequestModeSerializeWrapper())

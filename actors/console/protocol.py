"""The console's websocket protocol, version 1: every message is one JSON text frame with
``"v": 1`` and a ``"type"``; the records here are the only shapes either side sends.

Server -> browser:

- `Hello` once, first: protocol version, whether actions are possible at all (a token file was
  given) and the poll interval;
- `Section` whenever a part of the cluster view changed (``name`` is one of `SECTIONS`; ``data``
  is the whole section, so a viewer that missed an update is right again with the next one);
- `Samples` chart points (put/get TPS, consumer lag, replication lag), the history on connect;
- `Feed` feed items, one per cluster happening the console saw (elections, role changes,
  SyncStateSet changes, truncations), with ``dropped`` saying how many a slow viewer missed;
- `ActionResult` the answer to one `Action`, ``ok`` or an ``error`` naming what went wrong.

Browser -> server: `Action` (``id`` chosen by the page, ``action`` one of `ACTIONS`, its
``args``, the ``token``). `decode_client` refuses anything else with a `ProtocolError` whose text
names the problem; the server answers it with an error `ActionResult` and keeps the connection.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs
import cattrs
import orjson

VERSION = 1
SECTIONS = ("namesrvs", "controllers", "brokerSets", "topics", "groups")
ACTIONS = (
    "updateTopic",
    "deleteTopic",
    "updateSubGroup",
    "previewResetOffset",
    "resetOffset",
    "electMaster",
    "cleanBrokerMetadata",
)
MAX_CLIENT_MESSAGE = 16 * 1024  # an Action is small; more is refused by the websocket


class ProtocolError(ValueError):
    """A browser message that is not a valid version-1 `Action`."""


@attrs.frozen(kw_only=True)
class Hello:
    type: Literal["hello"] = "hello"
    v: int = VERSION
    actions: bool  # a token file was given: actions with the right token are carried out
    intervalMs: int
    historySeconds: int


@attrs.frozen(kw_only=True)
class Section:
    type: Literal["section"] = "section"
    v: int = VERSION
    name: str
    data: Any


@attrs.frozen(kw_only=True)
class Sample:
    """One chart point: ``t`` epoch ms, cluster put/get TPS, total consumer lag (messages),
    worst replication lag (bytes)."""

    t: int
    putTps: float
    getTps: float
    consumerLag: int
    replicationLagBytes: int


@attrs.frozen(kw_only=True)
class Samples:
    type: Literal["samples"] = "samples"
    v: int = VERSION
    points: list[Sample]


@attrs.frozen(kw_only=True)
class FeedItem:
    """One feed item, a cluster happening the console saw: ``kind`` is election, roleChange,
    syncStateSetChange, truncation, controllerLeader, brokerUp, brokerDown or action."""

    t: int
    kind: str
    text: str
    brokerName: str = ""
    epoch: int = 0


@attrs.frozen(kw_only=True)
class Feed:
    type: Literal["feed"] = "feed"
    v: int = VERSION
    items: list[FeedItem]
    dropped: int = 0


@attrs.frozen(kw_only=True)
class ActionResult:
    type: Literal["actionResult"] = "actionResult"
    v: int = VERSION
    id: str
    ok: bool
    error: str = ""
    data: Any = None


ServerMessage = Hello | Section | Samples | Feed | ActionResult


@attrs.frozen(kw_only=True)
class Action:
    type: Literal["action"]
    v: int
    id: str
    action: str
    args: dict[str, Any]
    token: str = ""


_conv = cattrs.Converter(forbid_extra_keys=True)


def encode(msg: ServerMessage) -> str:
    """The JSON text of one server message (fields in declaration order)."""
    return orjson.dumps(attrs.asdict(msg, recurse=True)).decode()


def decode_client(text: str | bytes) -> Action:
    """Parse one browser message; `ProtocolError` (with the reason) if it is not an Action."""
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ProtocolError(f"not JSON: {e}") from None
    if not isinstance(raw, dict):
        raise ProtocolError("a message is a JSON object")
    if raw.get("v") != VERSION:
        raise ProtocolError(f"unsupported protocol version {raw.get('v')!r} (this server: 1)")
    if raw.get("type") != "action":
        raise ProtocolError(f"unknown message type {raw.get('type')!r} (expected 'action')")
    try:
        msg = _conv.structure(raw, Action)
    except (cattrs.BaseValidationError, TypeError, ValueError) as e:
        details = "; ".join(cattrs.transform_error(e)) if isinstance(e, Exception) else str(e)
        raise ProtocolError(f"bad action message: {details}") from None
    if not isinstance(msg.args, dict) or not isinstance(msg.id, str) or len(msg.id) > 64:
        raise ProtocolError("bad action message: id must be a string of at most 64 characters")
    if msg.action not in ACTIONS:
        raise ProtocolError(f"unknown action {msg.action!r} (known: {', '.join(ACTIONS)})")
    return msg

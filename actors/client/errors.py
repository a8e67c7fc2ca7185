"""Client-side exceptions: what a caller of the producer, consumers or admin API can catch.

`MQClientError` is the base; `NotFound` means the thing asked for does not exist, `UsageError`
that the arguments are wrong. A broker or name server that answered with a failure code gives
`MQBrokerError` carrying the upstream response code and remark; network failures stay
`rocketrio.actors.kernel.remoting.RemotingError` (connect failure, closed connection, timeout).
"""

from __future__ import annotations

from rocketrio.protocol.codes import response_name


class MQClientError(Exception):
    """A client-side failure: bad argument, no route, client not started."""


class UsageError(MQClientError):
    """The caller's arguments are wrong or incomplete (the CLI exits with status 2)."""


class NotFound(MQClientError):
    """What was asked for (topic, group, broker, cluster, message) does not exist."""


class MQBrokerError(MQClientError):
    """A server answered a request with a failure response code."""

    def __init__(self, code: int, remark: str | None, addr: str = "") -> None:
        self.code = code
        self.remark = remark or ""
        self.addr = addr
        where = f" from {addr}" if addr else ""
        super().__init__(f"{response_name(code)} ({code}){where}: {self.remark}")


class TopicRouteNotFound(NotFound):
    """No name server knows a route for the topic."""

    def __init__(self, topic: str, detail: str = "") -> None:
        self.topic = topic
        super().__init__(f"no route for topic {topic}" + (f": {detail}" if detail else ""))

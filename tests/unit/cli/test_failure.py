"""Failure lines and exit codes of the CLI (cli/failure.py)."""

from __future__ import annotations

import pytest
import trio

from rocketrio.actors.client.errors import MQBrokerError, NotFound, TopicRouteNotFound, UsageError
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.cli.failure import describe_failure
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.serde import HeaderError


@pytest.mark.parametrize(
    ("exc", "code", "line"),
    [
        (UsageError("give -t"), 2, "tool: give -t"),
        (NotFound("group G is unknown"), 1, "tool: group G is unknown"),
        (TopicRouteNotFound("T"), 1, "tool: no route for topic T"),
        (
            MQBrokerError(ResponseCode.TOPIC_NOT_EXIST, "no\ntopic", "1.2.3.4:10911"),
            1,
            "tool: TOPIC_NOT_EXIST (17) from 1.2.3.4:10911: no topic",
        ),
        (
            RemotingError("cannot connect to 1.2.3.4:9876: all attempts to connect to x failed"),
            1,
            "tool: cannot connect to 1.2.3.4:9876",
        ),
        (HeaderError("bad field x"), 1, "tool: bad field x"),
        (trio.TooSlowError(), 1, "tool: no answer in time"),
        (ConnectionRefusedError("refused"), 1, "tool: ConnectionRefusedError: refused"),
        (KeyError("k"), 1, "tool: unexpected error (a bug): KeyError: 'k'"),
        # a nursery wraps the one real error in exception groups
        (ExceptionGroup("g", [ExceptionGroup("h", [NotFound("x")])]), 1, "tool: x"),
    ],
)
def test_describe_failure(exc: BaseException, code: int, line: str) -> None:
    f = describe_failure("tool", exc)
    assert (f.exit_code, f.line) == (code, line)

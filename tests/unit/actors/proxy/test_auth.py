"""MQv2-HMAC-SHA1 authentication of gRPC calls: the header as the official SDK builds it
passes, anything else is UNAUTHORIZED; switched off, nothing is checked."""

from __future__ import annotations

import hashlib
import hmac

import pytest
import trio
import trio.testing

from rocketrio.actors.proxy.auth import ProxyAuth, check, parse_authorization
from rocketrio.actors.proxy.mapping import BadRequest
from rocketrio.protocol.auth_bodies import UserInfo
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb

DATE = "20261127T223800Z"
ALICE = UserInfo("alice", "s3cret", "Normal", "enable")


def sdk_metadata(ak: str, sk: str, date: str = DATE) -> dict[str, str]:
    """What rocketmq-python-client 5.1.2's Signature.metadata sends (its format, rebuilt)."""
    sig = hmac.new(sk.encode(), date.encode(), hashlib.sha1).hexdigest()
    return {
        "x-mq-date-time": date,
        "x-mq-client-id": "c1",
        "authorization": (
            f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"
        ),
    }


def unauthorized(metadata: dict[str, str], user: UserInfo | None) -> str:
    with pytest.raises(BadRequest) as e:
        check(metadata, user)
    assert e.value.code == pb.UNAUTHORIZED
    return str(e.value)


def test_the_sdks_signature_passes() -> None:
    check(sdk_metadata("alice", "s3cret"), ALICE)
    assert parse_authorization(sdk_metadata("alice", "x")["authorization"]).access_key == "alice"


def test_wrong_secret_unknown_or_disabled_user_and_tampered_date() -> None:
    assert "signature" in unauthorized(sdk_metadata("alice", "wrong"), ALICE)
    assert "not found" in unauthorized(sdk_metadata("bob", "s3cret"), None)
    disabled = UserInfo("alice", "s3cret", "Normal", "disable")
    assert "disabled" in unauthorized(sdk_metadata("alice", "s3cret"), disabled)
    tampered = sdk_metadata("alice", "s3cret")
    tampered["x-mq-date-time"] = "20261127T223801Z"
    assert "signature" in unauthorized(tampered, ALICE)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "Basic abc",
        "MQv2-HMAC-SHA1 Credential=alice",
        "MQv2-HMAC-SHA1 Credential=alice, SignedHeaders=x-mq-date-time, garbage",
        "MQv2-HMAC-SHA1 Credential=alice, SignedHeaders=host, Signature=00",
    ],
)
def test_malformed_authorization(value: str) -> None:
    md = sdk_metadata("alice", "s3cret")
    md["authorization"] = value
    unauthorized(md, ALICE)


async def test_switched_off_nothing_is_checked_on_users_are_cached(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fetched: list[str] = []

    async def fetch(name: str) -> UserInfo | None:
        fetched.append(name)
        return ALICE if name == "alice" else None

    await ProxyAuth(False, fetch).authenticate({})  # no header at all: fine when off
    auth = ProxyAuth(True, fetch)
    with pytest.raises(BadRequest) as e:
        await auth.authenticate({"x-mq-client-id": "c1"})
    assert e.value.code == pb.UNAUTHORIZED
    await auth.authenticate(sdk_metadata("alice", "s3cret"))
    await auth.authenticate(sdk_metadata("alice", "s3cret"))
    assert fetched == ["alice"]  # cached
    await trio.sleep(11)  # past USER_CACHE_S (autojump clock)
    await auth.authenticate(sdk_metadata("alice", "s3cret"))
    assert fetched == ["alice", "alice"]

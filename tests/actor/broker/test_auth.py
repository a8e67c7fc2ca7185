"""ACL 2.0 on the broker (sim network, MockClock): the gate in front of every handler, the
admin calls 3001-3010, users/ACLs on disk across a restart, a slave holding its master's users,
and the broker's own calls signed with innerClientAuthenticationCredentials."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.protocol.acl_signature import RequestSigner, SessionCredentials
from rocketrio.protocol.auth_bodies import (
    AclInfo,
    CreateAclRequestHeader,
    CreateUserRequestHeader,
    GetUserRequestHeader,
    PolicyEntryInfo,
    PolicyInfo,
    UserInfo,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.config import ConfigError, build_config
from rocketrio.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicConfigRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_ext, to_json
from tests.harness.broker import BrokerHarness, harness
from tests.harness.classic_ha import M, S, classic, until

RC = ResponseCode
ROOT = SessionCredentials("root", "root-secret")
ALICE = SessionCredentials("alice", "alice-secret")
INNER = SessionCredentials("rocketrio-inner", "inner-secret")
AUTH_ON: dict[str, Any] = {
    "authenticationEnabled": True,
    "authorizationEnabled": True,
    "initAuthenticationUser": '{"username":"root","password":"root-secret"}',
    "innerClientAuthenticationCredentials": (
        '{"accessKey":"rocketrio-inner","secretKey":"inner-secret"}'
    ),
}


def as_user(h: BrokerHarness, creds: SessionCredentials | None) -> None:
    h.client.request_hook = None if creds is None else RequestSigner(creds)


def create_topic(topic: str) -> RemotingCommand:
    header = CreateTopicRequestHeader(
        topic=topic, defaultTopic="TBW102", readQueueNums=2, writeQueueNums=2, perm=6,
        topicFilterType="SINGLE_TAG",
    )  # fmt: skip
    return RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=to_ext(header))


def topic_config(topic: str) -> RemotingCommand:
    ext = to_ext(GetTopicConfigRequestHeader(topic))
    return RemotingCommand(RequestCode.GET_TOPIC_CONFIG, ext_fields=ext)


def delete_topic(topic: str) -> RemotingCommand:
    ext = to_ext(DeleteTopicRequestHeader(topic))
    return RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER, ext_fields=ext)


def create_user(name: str, password: str) -> RemotingCommand:
    return RemotingCommand(
        RequestCode.AUTH_CREATE_USER,
        ext_fields=to_ext(CreateUserRequestHeader(name)),
        body=to_json(UserInfo(name, password)),
    )


def create_acl(subject: str, resource: str, actions: list[str]) -> RemotingCommand:
    body = AclInfo(
        subject, [PolicyInfo("Custom", [PolicyEntryInfo(resource, actions, None, "Allow")])]
    )
    return RemotingCommand(
        RequestCode.AUTH_CREATE_ACL,
        ext_fields=to_ext(CreateAclRequestHeader(subject)),
        body=to_json(body),
    )


async def ok(h: BrokerHarness, cmd: RemotingCommand) -> RemotingCommand:
    resp = await h.invoke(cmd)
    assert resp.code == RC.SUCCESS, resp.remark
    return resp


async def alice_may_publish_orders(h: BrokerHarness) -> None:
    as_user(h, ROOT)
    await ok(h, create_topic("Orders"))
    await ok(h, create_user("alice", "alice-secret"))
    await ok(h, create_acl("User:alice", "Topic:Orders", ["Pub"]))


async def test_unsigned_admin_write_is_refused(tmp_path: Path, mock_clock: Any) -> None:
    async with harness(tmp_path, **AUTH_ON) as h:
        as_user(h, None)
        resp = await h.invoke(create_topic("Orders"))
        assert resp.code == RC.NO_PERMISSION
        assert "not signed (no AccessKey)" in (resp.remark or "")
        as_user(h, ROOT)
        assert (await h.invoke(topic_config("Orders"))).code != RC.SUCCESS  # nothing created
        assert h.broker is not None
        assert h.broker.requests.gate is not None and h.broker.requests.gate.refused == 1


async def test_wrong_signature_is_refused(tmp_path: Path, mock_clock: Any) -> None:
    async with harness(tmp_path, **AUTH_ON) as h:
        as_user(h, SessionCredentials("root", "guessed"))
        resp = await h.invoke(create_topic("Orders"))
        assert resp.code == RC.NO_PERMISSION
        assert "check signature failed" in (resp.remark or "")
        as_user(h, ROOT)
        assert (await h.invoke(topic_config("Orders"))).code != RC.SUCCESS


async def test_allowed_user_can_publish_but_not_delete_the_topic(
    tmp_path: Path, mock_clock: Any
) -> None:
    async with harness(tmp_path, **AUTH_ON) as h:
        await alice_may_publish_orders(h)
        as_user(h, ALICE)
        assert (await h.send("Orders", b"paid")).code == RC.SUCCESS
        resp = await h.invoke(delete_topic("Orders"))
        assert resp.code == RC.NO_PERMISSION
        assert (resp.remark or "").startswith("User:alice has no Delete on Topic:Orders")
        other = await h.send("Payments", b"x")
        assert other.code == RC.NO_PERMISSION and "Pub on Topic:Payments" in (other.remark or "")
        as_user(h, ROOT)
        assert (await h.invoke(topic_config("Orders"))).code == RC.SUCCESS  # still there
        # only a super user manages users: alice may not create one
        as_user(h, ALICE)
        resp = await h.invoke(create_user("mallory", "x"))
        assert resp.code == RC.NO_PERMISSION and "Update on Cluster:DefaultCluster" in (
            resp.remark or ""
        )


async def test_users_and_acls_survive_a_restart(tmp_path: Path, mock_clock: Any) -> None:
    async with harness(tmp_path, **AUTH_ON) as h:
        await alice_may_publish_orders(h)
        config_dir = os.path.join(tmp_path, "store", "config")
        # on disk before the answers came back
        with open(os.path.join(config_dir, "users.json")) as f:
            users = {u["username"]: u for u in json.load(f)["users"]}
        assert users["alice"] == {
            "username": "alice", "password": "alice-secret", "userType": "Normal",
            "userStatus": "enable",
        }  # fmt: skip
        assert users["root"]["userType"] == "Super"
        assert users["rocketrio-inner"]["userType"] == "Super"
        with open(os.path.join(config_dir, "acls.json")) as f:
            acls = json.load(f)["acls"]
        assert acls == [
            {
                "subject": "User:alice",
                "policies": [
                    {
                        "policyType": "Custom",
                        "entries": [
                            {"resource": "Topic:Orders", "actions": ["Pub"], "decision": "Allow"}
                        ],
                    }
                ],
            }
        ]
        await h.stop_broker()
        await h.start_broker(**AUTH_ON)
        as_user(h, ALICE)
        assert (await h.send("Orders", b"after restart")).code == RC.SUCCESS
        assert (await h.invoke(delete_topic("Orders"))).code == RC.NO_PERMISSION


async def test_admin_reads_and_masked_config(tmp_path: Path, mock_clock: Any) -> None:
    async with harness(tmp_path, **AUTH_ON) as h:
        await alice_may_publish_orders(h)
        get = RemotingCommand(
            RequestCode.AUTH_GET_USER, ext_fields=to_ext(GetUserRequestHeader("alice"))
        )
        info = from_json(UserInfo, (await ok(h, get)).body)
        assert (info.username, info.userType) == ("alice", "Normal")
        users = from_json(
            list[UserInfo], (await ok(h, RemotingCommand(RequestCode.AUTH_LIST_USER))).body
        )
        assert sorted(u.username for u in users) == ["alice", "rocketrio-inner", "root"]
        acls = from_json(
            list[AclInfo], (await ok(h, RemotingCommand(RequestCode.AUTH_LIST_ACL))).body
        )
        assert [a.subject for a in acls] == ["User:alice"]
        text = (await ok(h, RemotingCommand(RequestCode.GET_BROKER_CONFIG))).body.decode()
        assert "initAuthenticationUser=***" in text and "root-secret" not in text
        assert "inner-secret" not in text


async def test_auth_off_by_default_serves_unsigned_requests(
    tmp_path: Path, mock_clock: Any
) -> None:
    async with harness(tmp_path) as h:
        assert h.broker is not None and h.broker.requests.gate is None
        await ok(h, create_topic("Orders"))
        assert (await h.send("Orders", b"x")).code == RC.SUCCESS


def test_bad_auth_keys_are_start_up_errors() -> None:
    bad = {"initAuthenticationUser": "{'username': 'root'}"}
    try:
        build_config(BrokerConfig, bad, "broker.conf")
    except ConfigError as e:
        assert str(e).startswith("broker.conf: initAuthenticationUser is not valid JSON")
    else:
        raise AssertionError("a bad initAuthenticationUser was accepted")
    try:
        build_config(BrokerConfig, {"innerClientAuthenticationCredentials": '{"accessKey":"a"}'})
    except ConfigError as e:
        assert "innerClientAuthenticationCredentials must be" in str(e)
    else:
        raise AssertionError("incomplete credentials were accepted")


async def test_slave_has_its_masters_users_and_enforces_them(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with classic(tmp_path, 5) as c:
        m = await c.start(M, BrokerRole.SYNC_MASTER, 0, **AUTH_ON)
        s = await c.start(S, BrokerRole.SLAVE, 1, **AUTH_ON)
        assert c.client is not None
        c.client.request_hook = RequestSigner(ROOT)
        for cmd in (
            create_user("alice", "alice-secret"),
            create_acl("User:alice", "Topic:C", ["Sub"]),
            create_acl("User:alice", "Group:G", ["Sub"]),
        ):
            assert (await c.client.invoke(f"{M}:10911", cmd, 10)).code == RC.SUCCESS
        await until(
            lambda: (
                s.tables.auth.acls == m.tables.auth.acls and s.tables.auth.user("alice") is not None
            )
        )
        assert s.tables.auth.acls == m.tables.auth.acls
        assert s.slave_sync is not None and s.slave_sync.synced_from == f"{M}:10911"
        # on the slave's disk too
        with open(os.path.join(tmp_path, S, "config", "acls.json")) as f:
            assert json.load(f)["acls"][0]["subject"] == "User:alice"
        # the slave enforces them: alice may read C there, may not publish
        c.client.request_hook = RequestSigner(ALICE)
        pulled = await c.pull(S, 0)
        assert pulled.code != RC.NO_PERMISSION, pulled.remark
        sent = await c.send(S, b"x")
        assert sent.code == RC.NO_PERMISSION and "Pub on Topic:C" in (sent.remark or "")
        # a later change (a deleted user) reaches the slave as well
        c.client.request_hook = RequestSigner(ROOT)
        delete = RemotingCommand(RequestCode.AUTH_DELETE_USER, ext_fields={"username": "alice"})
        assert (await c.client.invoke(f"{M}:10911", delete, 10)).code == RC.SUCCESS
        await until(lambda: s.tables.auth.user("alice") is None)
        assert "User:alice" not in s.tables.auth.acls

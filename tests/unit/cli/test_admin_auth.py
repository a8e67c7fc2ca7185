"""The command line of ACL 2.0: `rocketrio admin createUser ... listAcl` arguments, the
--access-key/--secret-key flags of admin, produce and consume, and ClientConfig credentials."""

from __future__ import annotations

import pytest

from rocketrio.actors.client.auth_admin import acl_body
from rocketrio.actors.client.config import ClientConfig, request_signer
from rocketrio.actors.client.errors import UsageError
from rocketrio.cli import admin_auth
from rocketrio.cli.main import build_parser
from rocketrio.protocol.auth_bodies import AclInfo, PolicyEntryInfo, PolicyInfo


def parse(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(list(argv))


def test_create_acl_arguments_become_upstreams_acl_info() -> None:
    a = parse(
        "admin", "createAcl", "-c", "DefaultCluster", "-s", "User:alice",
        "-r", "Topic:Orders,Group:g", "-a", "Pub,admin", "-i", "10.0.0.0/8",
        "--access-key", "root", "--secret-key", "pw",
    )  # fmt: skip
    assert (a.cluster, a.access_key, a.secret_key) == ("DefaultCluster", "root", "pw")
    actions = ["Pub", "Create", "Update", "Delete", "Get", "List"]
    assert admin_auth._acl(a) == AclInfo(
        "User:alice",
        [
            PolicyInfo(
                "Custom",
                [
                    PolicyEntryInfo("Topic:Orders", actions, ["10.0.0.0/8"], "Allow"),
                    PolicyEntryInfo("Group:g", actions, ["10.0.0.0/8"], "Allow"),
                ],
            )
        ],
    )


def test_bad_acl_input_is_reported_before_sending() -> None:
    with pytest.raises(UsageError, match="not one of"):
        acl_body("User:alice", ["Topic:T"], ["Publish"])
    with pytest.raises(UsageError, match="must be Type:name"):
        acl_body("User:alice", ["Orders"], ["Pub"])


def test_a_target_is_required_and_users_take_mqadmin_options() -> None:
    with pytest.raises(SystemExit):
        parse("admin", "createUser", "-u", "alice", "-p", "pw")
    a = parse("admin", "createUser", "-b", "127.0.0.1:10911", "-u", "alice", "-p", "pw", "-t",
              "Super")  # fmt: skip
    assert (a.broker, a.username, a.password, a.user_type) == ("127.0.0.1:10911", "alice", "pw",
                                                               "Super")  # fmt: skip


def test_produce_and_consume_take_credentials() -> None:
    for cmd in ("produce", "consume"):
        a = parse(cmd, "-t", "T", "--access-key", "alice", "--secret-key", "s")
        assert (a.access_key, a.secret_key) == ("alice", "s")


def test_credentials_go_together() -> None:
    assert request_signer(None, None) is None
    with pytest.raises(UsageError, match="go together"):
        request_signer("alice", None)
    with pytest.raises(ValueError, match="set both or neither"):
        ClientConfig(accessKey="alice")
    signer = ClientConfig(accessKey="alice", secretKey="s").request_signer()
    assert signer is not None and signer.credentials.access_key == "alice"
    assert "topsecret" not in repr(ClientConfig(accessKey="alice", secretKey="topsecret"))

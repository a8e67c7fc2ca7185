"""The pure ACL 2.0 core: resources and policies (actors/auth/model.py), request rights
(rights.py), the gate's decisions (gate.py), the users/ACLs rules (metadata.py), config keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.auth.config import parse_credentials, parse_init_user, parse_whitelist
from rocketrio.actors.auth.gate import (
    Allowed,
    Denied,
    GateSettings,
    authorize,
    check_request,
    is_super_request,
)
from rocketrio.actors.auth.metadata import AuthMetadata
from rocketrio.actors.auth.model import (
    ADMIN_ACTIONS,
    Action,
    AuthDataError,
    Resource,
    ResourcePattern,
    ResourceType,
    acl_from_info,
    acl_to_info,
    ip_in,
    parse_actions,
)
from rocketrio.actors.auth.rights import Right, rights_of
from rocketrio.protocol.acl_signature import SIGNATURE, SessionCredentials, sign
from rocketrio.protocol.auth_bodies import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo
from rocketrio.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_json

RC = RequestCode
IP = "10.0.0.9"


def entry(resource: str, actions: list[str], decision: str = "Allow", ips=None) -> PolicyEntryInfo:
    return PolicyEntryInfo(resource, actions, ips, decision)


def acl(*entries: PolicyEntryInfo, subject: str = "User:alice") -> AclInfo:
    return AclInfo(subject, [PolicyInfo("Custom", list(entries))])


def meta(*entries: PolicyEntryInfo) -> AuthMetadata:
    m = AuthMetadata()
    m.init_user("root", "root-secret")
    assert m.create_user(UserInfo("alice", "alice-secret"), None) is None
    if entries:
        assert m.put_acl(acl(*entries), None) is None
    return m


def send_v2(topic: str, group: str = "pg") -> RemotingCommand:
    return RemotingCommand(RC.SEND_MESSAGE_V2, ext_fields={"a": group, "b": topic})


def decide(m: AuthMetadata, cmd: RemotingCommand, ip: str = IP) -> Allowed | Denied:
    return authorize("alice", rights_of(cmd, "C1"), ip, m.user, m.acl)


# ---------------------------------------------------------------------------- resources


@pytest.mark.parametrize(
    ("key", "rtype", "name", "pattern"),
    [
        ("*", ResourceType.ANY, None, ResourcePattern.ANY),
        ("Topic:*", ResourceType.TOPIC, None, ResourcePattern.ANY),
        ("Topic:Orders", ResourceType.TOPIC, "Orders", ResourcePattern.LITERAL),
        ("group:ord*", ResourceType.GROUP, "ord", ResourcePattern.PREFIXED),
        ("Cluster:C1", ResourceType.CLUSTER, "C1", ResourcePattern.LITERAL),
    ],
)
def test_resource_parse_and_key(key, rtype, name, pattern) -> None:
    r = Resource.parse(key)
    assert (r.type, r.name, r.pattern) == (rtype, name, pattern)
    assert Resource.parse(r.key) == r


@pytest.mark.parametrize("bad", ["", "Orders", "Topic:", "Queue:x", "Any:x"])
def test_bad_resources_are_named(bad: str) -> None:
    with pytest.raises(AuthDataError):
        Resource.parse(bad)


def test_resource_matching() -> None:
    orders = Resource.topic("Orders")
    assert Resource.parse("*").matches(orders)
    assert Resource.parse("Topic:*").matches(orders)
    assert Resource.parse("Topic:Ord*").matches(orders)
    assert Resource.parse("Topic:Orders").matches(orders)
    assert not Resource.parse("Topic:Order").matches(orders)
    assert not Resource.parse("Group:Orders").matches(orders)
    assert Resource.group("%RETRY%g") == Resource.group("g")


def test_actions_and_admin_shorthand() -> None:
    assert parse_actions(["pub", "SUB"]) == (Action.PUB, Action.SUB)
    assert parse_actions(["admin"], allow_admin=True) == ADMIN_ACTIONS
    with pytest.raises(AuthDataError, match="not one of"):
        parse_actions(["admin"])
    with pytest.raises(AuthDataError, match="Any"):
        acl_from_info(acl(entry("Topic:T", ["Any"])))


def test_source_ips() -> None:
    assert ip_in("10.0.0.9", ())
    assert ip_in("10.0.0.9", ("10.0.0.0/24",))
    assert ip_in("10.0.0.9", ("10.0.0.9",))
    assert not ip_in("10.0.1.9", ("10.0.0.0/24",))
    with pytest.raises(AuthDataError, match="CIDR"):
        acl_from_info(acl(entry("Topic:T", ["Pub"], ips=["10.0.0.300"])))


def test_acl_info_roundtrip() -> None:
    info = acl(entry("Topic:Ord*", ["Pub", "Sub"], ips=["10.0.0.0/8"]), entry("*", ["Get"], "Deny"))
    assert acl_to_info(acl_from_info(info)) == info


# ---------------------------------------------------------------------------- decisions


def test_allowed_user_can_publish_but_not_delete_the_topic() -> None:
    m = meta(entry("Topic:Orders", ["Pub"]))
    assert isinstance(decide(m, send_v2("Orders")), Allowed)
    delete = RemotingCommand(RC.DELETE_TOPIC_IN_BROKER, ext_fields={"topic": "Orders"})
    d = decide(m, delete)
    assert isinstance(d, Denied)
    assert d.remark.startswith("User:alice has no Delete on Topic:Orders")


def test_no_acl_means_no_right() -> None:
    d = decide(meta(), send_v2("Orders"))
    assert isinstance(d, Denied)
    assert "User:alice has no Pub on Topic:Orders" in d.remark


def test_most_specific_entry_decides_and_deny_wins_a_tie() -> None:
    m = meta(entry("Topic:*", ["Pub"]), entry("Topic:Secret*", ["Pub"], "Deny"))
    assert isinstance(decide(m, send_v2("Orders")), Allowed)
    assert isinstance(decide(m, send_v2("SecretPlans")), Denied)
    # a literal allow is more specific than the prefix deny
    m.put_acl(acl(entry("Topic:SecretOk", ["Pub"])), None)
    assert isinstance(decide(m, send_v2("SecretOk")), Allowed)
    # equally specific (one body naming a resource twice): deny wins, in either order
    for first, second in (("Allow", "Deny"), ("Deny", "Allow")):
        m2 = meta(entry("Topic:T", ["Pub"], first), entry("Topic:T", ["Pub"], second))
        assert isinstance(decide(m2, send_v2("T")), Denied)


def test_all_action_and_source_ip_condition() -> None:
    m = meta(entry("Topic:T", ["All"], ips=["10.0.0.0/24"]))
    assert isinstance(decide(m, send_v2("T")), Allowed)
    d = decide(m, send_v2("T"), ip="192.168.1.1")
    assert isinstance(d, Denied) and "from 192.168.1.1" in d.remark


@pytest.mark.parametrize("code", [RC.PULL_MESSAGE, RC.LITE_PULL_MESSAGE])
def test_pull_needs_sub_on_topic_and_group(code: int) -> None:
    pull = RemotingCommand(code, ext_fields={"topic": "T", "consumerGroup": "g"})
    assert rights_of(pull, "C1") == [
        Right(Resource.topic("T"), (Action.SUB,)),
        Right(Resource.group("g"), (Action.SUB,)),
    ]
    m = meta(entry("Topic:T", ["Sub"]))
    d = decide(m, pull)
    assert isinstance(d, Denied) and "Sub on Group:g" in d.remark
    m.put_acl(acl(entry("Group:g", ["Sub"])), None)
    assert isinstance(decide(m, pull), Allowed)


def test_send_to_retry_topic_needs_sub_on_the_group() -> None:
    assert rights_of(send_v2("%RETRY%g", group=""), "C1") == [
        Right(Resource.group("g"), (Action.SUB,))
    ]


def test_heartbeat_rights_come_from_its_body() -> None:
    body = HeartbeatData(
        "cid",
        consumerDataSet=[
            ConsumerData(
                "g",
                subscriptionDataSet=[SubscriptionData("T"), SubscriptionData("%RETRY%g")],
            )
        ],
    )
    cmd = RemotingCommand(RC.HEART_BEAT, body=to_json(body))
    assert rights_of(cmd, "C1") == [
        Right(Resource.group("g"), (Action.SUB,)),
        Right(Resource.topic("T"), (Action.SUB,)),
    ]
    bad = RemotingCommand(RC.HEART_BEAT, body=b"{not json")
    with pytest.raises(AuthDataError):
        rights_of(bad, "C1")


def test_super_user_needs_no_acl_and_auth_admin_needs_cluster_update() -> None:
    m = meta()
    create = RemotingCommand(RC.AUTH_CREATE_USER, ext_fields={"username": "x"})
    assert rights_of(create, "C1") == [Right(Resource.cluster("C1"), (Action.UPDATE,))]
    assert isinstance(authorize("root", rights_of(create, "C1"), IP, m.user, m.acl), Allowed)
    assert isinstance(authorize("alice", rights_of(create, "C1"), IP, m.user, m.acl), Denied)


# ---------------------------------------------------------------------------- the gate

ON = GateSettings(True, True, cluster="C1", node="broker b1")
ALICE = SessionCredentials("alice", "alice-secret")


def test_unsigned_request_refused_when_authentication_is_on() -> None:
    m = meta(entry("Topic:T", ["Pub"]))
    d = check_request(send_v2("T"), IP, ON, m.user, m.acl)
    assert isinstance(d, Denied) and "not signed" in d.remark


def test_wrong_signature_refused() -> None:
    m = meta(entry("Topic:T", ["Pub"]))
    cmd = send_v2("T")
    sign(cmd, SessionCredentials("alice", "not-alices-secret"))
    d = check_request(cmd, IP, ON, m.user, m.acl)
    assert isinstance(d, Denied) and "check signature failed" in d.remark
    cmd = send_v2("T")
    sign(cmd, ALICE)
    cmd.ext_fields["b"] = "Other"  # changed after signing
    assert isinstance(check_request(cmd, IP, ON, m.user, m.acl), Denied)


def test_signed_allowed_request_passes_and_unknown_or_disabled_users_do_not() -> None:
    m = meta(entry("Topic:T", ["Pub"]))
    cmd = send_v2("T")
    sign(cmd, ALICE)
    assert check_request(cmd, IP, ON, m.user, m.acl) is None
    m.update_user(UserInfo("alice", userStatus="disable"), None)
    d = check_request(cmd, IP, ON, m.user, m.acl)
    assert isinstance(d, Denied) and "disabled" in d.remark
    bob = send_v2("T")
    sign(bob, SessionCredentials("bob", "x"))
    d = check_request(bob, IP, ON, m.user, m.acl)
    assert isinstance(d, Denied) and "User:bob is not found" in d.remark


def test_off_by_default_and_whitelists() -> None:
    m = meta()
    assert check_request(send_v2("T"), IP, GateSettings(), m.user, m.acl) is None
    wl = GateSettings(True, True, frozenset({RC.SEND_MESSAGE_V2}), frozenset({RC.SEND_MESSAGE_V2}))
    assert check_request(send_v2("T"), IP, wl, m.user, m.acl) is None
    # authorization alone still needs to know who asks
    authz_only = GateSettings(False, True, cluster="C1")
    assert isinstance(check_request(send_v2("T"), IP, authz_only, m.user, m.acl), Denied)
    # requests with no rights (routes) pass authorization once authenticated
    route = RemotingCommand(RC.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "T"})
    sign(route, ALICE)
    assert check_request(route, IP, ON, m.user, m.acl) is None


def test_super_request_for_namesrv_and_controller_writes() -> None:
    m = meta()
    cmd = RemotingCommand(RC.DELETE_TOPIC_IN_NAMESRV, ext_fields={"topic": "T"})
    assert isinstance(is_super_request(cmd, m.user), Denied)
    sign(cmd, ALICE)
    d = is_super_request(cmd, m.user)
    assert isinstance(d, Denied) and "not a super user" in d.remark
    sign(cmd, SessionCredentials("root", "root-secret"))
    assert isinstance(is_super_request(cmd, m.user), Allowed)


# ---------------------------------------------------------------------------- metadata rules


def test_user_rules() -> None:
    m = meta()
    assert m.create_user(UserInfo("alice", "x"), None).code == ResponseCode.NO_PERMISSION
    assert m.create_user(UserInfo("", "x"), None).code == ResponseCode.INVALID_PARAMETER
    assert m.create_user(UserInfo("bob"), None).code == ResponseCode.NO_PERMISSION
    # only a super user creates a super user (unsigned = authentication off: allowed)
    f = m.create_user(UserInfo("eve", "x", "Super"), "alice")
    assert f is not None and "super user" in f.remark
    assert m.create_user(UserInfo("eve", "x", "Super"), "root") is None
    assert m.update_user(UserInfo("eve", "y"), "alice") is not None
    assert m.delete_user("eve", "alice") is not None
    assert m.update_user(UserInfo("nobody", "y"), None) is not None
    assert m.update_user(UserInfo("alice", "", "Super"), "root") is None
    assert m.users["alice"].password == "alice-secret" and m.users["alice"].is_super
    assert m.init_user("alice", "changed") is False  # an existing user is kept


def test_acl_rules() -> None:
    m = meta(entry("Topic:A", ["Pub"]))
    assert m.put_acl(acl(entry("Topic:B", ["Sub"])), None) is None
    assert [e.resource.key for e in m.acls["User:alice"].policies[0].entries] == [
        "Topic:A",
        "Topic:B",
    ]
    assert m.put_acl(acl(entry("Topic:A", ["Sub"]), subject="User:ghost"), None) is not None
    assert m.delete_acl("User:alice", None, "Topic:A") is None
    assert [e.resource.key for e in m.acls["User:alice"].policies[0].entries] == ["Topic:B"]
    assert [a.subject for a in m.list_acls(None, "Topic:B")] == ["User:alice"]
    assert m.list_acls(None, "Topic:A") == []
    assert m.delete_acl("User:alice", None, "Topic:B") is None
    assert "User:alice" not in m.acls  # emptied ACLs are dropped
    m.put_acl(acl(entry("Topic:A", ["Pub"])), None)
    assert m.delete_user("alice", "root") is None
    assert "User:alice" not in m.acls  # deleting a user deletes its ACL


# ---------------------------------------------------------------------------- config keys


def test_config_values() -> None:
    assert parse_init_user('{"username":"root","password":"pw"}') == ("root", "pw")
    assert parse_init_user("") is None
    assert parse_credentials('{"accessKey":"ak","secretKey":"sk"}') == SessionCredentials(
        "ak", "sk"
    )
    with pytest.raises(ValueError, match="initAuthenticationUser is not valid JSON"):
        parse_init_user("{username:root}")
    with pytest.raises(ValueError, match="innerClientAuthenticationCredentials must be"):
        parse_credentials('{"accessKey":"ak"}')
    assert parse_whitelist("10, 11", "authenticationWhitelist") == {10, 11}
    with pytest.raises(ValueError, match="authenticationWhitelist"):
        parse_whitelist("ten", "authenticationWhitelist")


# ---------------------------------------------------------------------------- invariants

names = st.sampled_from(["Orders", "OrdersEU", "Ord", "Pay", "X"])
keys = st.one_of(
    st.just("*"),
    st.just("Topic:*"),
    names.map(lambda n: f"Topic:{n}"),
    names.map(lambda n: f"Topic:{n[:2]}*"),
)
entries_st = st.lists(
    st.tuples(keys, st.sampled_from(["Allow", "Deny"])),
    min_size=1,
    max_size=5,
    unique_by=lambda t: t[0],
)


@given(entries_st, names)
def test_a_deny_on_the_exact_topic_always_refuses(entries, topic) -> None:
    """Whatever else the ACL says, a Deny entry naming the topic literally refuses it."""
    infos = [entry(k, ["Pub"], d) for k, d in entries if k != f"Topic:{topic}"]
    infos.append(entry(f"Topic:{topic}", ["Pub"], "Deny"))
    m = meta(*infos)
    assert isinstance(decide(m, send_v2(topic)), Denied)


@given(entries_st, names)
def test_no_allow_entry_means_refused(entries, topic) -> None:
    """A user is never allowed by an ACL without a matching Allow entry."""
    m = meta(*[entry(k, ["Pub"], d) for k, d in entries])
    allows = [
        k for k, d in entries if d == "Allow" and Resource.parse(k).matches(Resource.topic(topic))
    ]
    if not allows:
        assert isinstance(decide(m, send_v2(topic)), Denied)


def test_signature_field_is_not_trusted_on_its_own() -> None:
    m = meta(entry("Topic:T", ["Pub"]))
    cmd = send_v2("T")
    cmd.ext_fields.update({"AccessKey": "alice", SIGNATURE: "forged"})
    assert isinstance(check_request(cmd, IP, ON, m.user, m.acl), Denied)


def test_disabled_user_fails_authentication_alone() -> None:
    """With authentication on and authorization off, a disabled user is still refused."""
    m = meta()
    m.update_user(UserInfo("alice", userStatus="disable"), None)
    cmd = send_v2("T")
    sign(cmd, ALICE)
    authn_only = GateSettings(True, False, node="broker b1")
    d = check_request(cmd, IP, authn_only, m.user, m.acl)
    assert isinstance(d, Denied) and "User:alice is disabled" in d.remark


def test_a_changed_acl_changes_the_next_decision_at_once() -> None:
    """The gate caches decisions per ACL value: every change must reach the next request."""
    m = meta(entry("Topic:T", ["Pub"]))
    assert isinstance(decide(m, send_v2("T")), Allowed)
    assert m.put_acl(acl(entry("Topic:T", ["Pub"], "Deny")), None) is None
    assert isinstance(decide(m, send_v2("T")), Denied)
    assert m.put_acl(acl(entry("Topic:T", ["Pub"])), None) is None
    assert isinstance(decide(m, send_v2("T")), Allowed)
    assert m.delete_acl("User:alice", None, "Topic:T") is None
    assert isinstance(decide(m, send_v2("T")), Denied)
    assert m.put_acl(acl(entry("Topic:T", ["Pub"], ips=["10.0.0.0/8"])), None) is None
    assert isinstance(decide(m, send_v2("T")), Allowed)
    assert isinstance(decide(m, send_v2("T"), ip="192.168.1.1"), Denied)


def test_pop_probes_need_upstreams_rights() -> None:
    """PEEK_MESSAGE and NOTIFICATION: Sub; POLLING_INFO: Get; on the group and the topic (the
    annotations of upstream's headers, in their field order)."""
    ext = {"topic": "T", "consumerGroup": "g", "queueId": "0"}
    topic, group = Resource.topic("T"), Resource.group("g")
    sub, get = (Action.SUB,), (Action.GET,)
    assert rights_of(RemotingCommand(RC.PEEK_MESSAGE, ext_fields=ext), "C1") == [
        Right(topic, sub),
        Right(group, sub),
    ]
    assert rights_of(RemotingCommand(RC.NOTIFICATION, ext_fields=ext), "C1") == [
        Right(group, sub),
        Right(topic, sub),
    ]
    info = RemotingCommand(RC.POLLING_INFO, ext_fields=ext)
    assert rights_of(info, "C1") == [Right(group, get), Right(topic, get)]
    m = meta(entry("Topic:T", ["Sub"]), entry("Group:g", ["Sub"]))
    assert isinstance(decide(m, RemotingCommand(RC.PEEK_MESSAGE, ext_fields=ext)), Allowed)
    assert isinstance(decide(m, info), Denied)

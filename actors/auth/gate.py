"""The auth gate's decisions, pure: is this request signed by a known user (authentication), and
may that user do what it asks (authorization)? Upstream's AuthenticationPipeline and
AuthorizationPipeline with the default handlers, on typed values:

- authentication: the request names a user in ``AccessKey``; the user exists, is enabled, and
  the ``Signature`` is the one the user's password (secret key) gives the request's content;
- authorization: a super user may do anything; any other user needs, for each `Right` of the
  request, a matching entry in its ACL's Custom policy (else its Default policy). Of the matching
  entries the most specific resource decides (a literal name before a longer prefix before a
  shorter one before ``Type:*`` before ``*``); between equally specific entries Deny wins.

Every refusal is `Denied` with a remark a person can act on; the adapter answers it
NO_PERMISSION (16), the code upstream answers both failures with.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import attrs

from rocketrio.actors.auth.model import (
    Acl,
    AuthDataError,
    Decision,
    PolicyEntry,
    PolicyType,
    ResourcePattern,
    ResourceType,
    User,
    UserStatus,
    UserType,
    user_subject,
)
from rocketrio.actors.auth.rights import Right, rights_of
from rocketrio.protocol.acl_signature import ACCESS_KEY, SIGNATURE, verify
from rocketrio.protocol.codes import RequestCode, request_name
from rocketrio.protocol.remoting import RemotingCommand


@attrs.frozen
class Allowed:
    username: str | None  # None: nobody was asked to sign (authentication off or whitelisted)


@attrs.frozen
class Denied:
    remark: str


AuthDecision = Allowed | Denied
UserLookup = Callable[[str], User | None]
AclLookup = Callable[[str], Acl | None]


@attrs.frozen
class GateSettings:
    """The AuthConfig keys a gate needs (parsed; see actors/auth/config.py)."""

    authentication_enabled: bool = False
    authorization_enabled: bool = False
    authentication_whitelist: frozenset[int] = frozenset()
    authorization_whitelist: frozenset[int] = frozenset()
    cluster: str = ""
    node: str = ""  # who refuses, for remarks ("broker broker-a")


def authenticate(cmd: RemotingCommand, users: UserLookup, node: str = "") -> AuthDecision:
    """Upstream DefaultAuthenticationHandler for one remoting request."""
    username = cmd.ext_fields.get(ACCESS_KEY)
    user = users(username) if username else None
    if user is not None and user.status is UserStatus.ENABLE and verify(cmd, user.password):
        return Allowed(username)
    # refused: say why (built only now, off the path of a request that passes)
    refused = f"{request_name(cmd.code)} refused{f' by {node}' if node else ''}"
    if not username:
        return Denied(
            f"{refused}: the request is not signed (no AccessKey); authentication is "
            "on, so sign requests with an access key and secret key (--access-key/--secret-key)"
        )
    if user is None:
        return Denied(f"{refused}: User:{username} is not found")
    if user.status is UserStatus.DISABLE:
        return Denied(f"{refused}: User:{username} is disabled")
    if SIGNATURE not in cmd.ext_fields:
        return Denied(f"{refused}: the request of User:{username} has no Signature")
    return Denied(
        f"{refused}: check signature failed: the Signature does not match "
        f"User:{username}'s secret key and the request's content"
    )


_PATTERN_RANK = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1, ResourcePattern.ANY: 2}


def _specificity(entry: PolicyEntry) -> tuple[int, int, int, int]:
    r = entry.resource
    any_type = 1 if r.type is ResourceType.ANY else 0
    rank = _PATTERN_RANK
    longer_first = -len(r.name or "") if r.pattern is ResourcePattern.PREFIXED else 0
    deny_first = 0 if entry.decision is Decision.DENY else 1
    return any_type, rank[r.pattern], longer_first, deny_first


@functools.lru_cache(maxsize=4096)
def deciding_entry(acl: Acl, right: Right, source_ip: str) -> PolicyEntry | None:
    """The entry that decides ``right`` for ``acl`` (None: no entry matches).

    A pure function of immutable values, so its answers are cached: a changed ACL is a new
    `Acl` value, which misses the cache (a client asks the same few rights again and again)."""
    for ptype in (PolicyType.CUSTOM, PolicyType.DEFAULT):
        policy = acl.policy(ptype)
        if policy is None:
            continue
        matched = [e for e in policy.entries if e.matches(right.resource, right.actions, source_ip)]
        if matched:
            return min(matched, key=_specificity)
    return None


def authorize(
    username: str | None,
    rights: list[Right],
    source_ip: str,
    users: UserLookup,
    acls: AclLookup,
    node: str = "",
) -> AuthDecision:
    """Upstream UserAuthorizationHandler + AclAuthorizationHandler for every right."""
    if not rights:
        return Allowed(username)
    at = f" at {node}" if node else ""  # for a refusal's remark
    if not username:
        return Denied(
            f"refused{at}: {rights[0].describe()} needs a signed request (no AccessKey) "
            "because authorization is on"
        )
    user = users(username)
    subject = user_subject(username)
    if user is None:
        return Denied(f"refused{at}: {subject} is not found")
    if user.status is UserStatus.DISABLE:
        return Denied(f"refused{at}: {subject} is disabled")
    if user.is_super:
        return Allowed(username)
    acl = acls(subject)
    for right in rights:
        entry = None if acl is None else deciding_entry(acl, right, source_ip)
        if entry is not None and entry.decision is Decision.ALLOW:
            continue
        need = " or ".join(a.value for a in right.actions)
        why = (
            "no matched policies"
            if entry is None
            else f"denied by the entry for {entry.resource.key}"
        )
        return Denied(
            f"{subject} has no {need} on {right.resource.key}{at} (from {source_ip}): {why}"
        )
    return Allowed(username)


def check_request(
    cmd: RemotingCommand,
    source_ip: str,
    settings: GateSettings,
    users: UserLookup,
    acls: AclLookup,
) -> Denied | None:
    """The whole gate for one request: None to serve it, `Denied` to refuse it."""
    username: str | None = None
    code = cmd.code
    if settings.authentication_enabled and code not in settings.authentication_whitelist:
        authn = authenticate(cmd, users, settings.node)
        if isinstance(authn, Denied):
            return authn
        username = authn.username
    if not settings.authorization_enabled or code in settings.authorization_whitelist:
        return None
    if username is None:
        username = cmd.ext_fields.get(ACCESS_KEY) or None
    try:
        rights = rights_of(cmd, settings.cluster)
    except AuthDataError as e:
        return Denied(f"{request_name(code)} refused: {e}")
    decision = authorize(username, rights, source_ip, users, acls, settings.node)
    return decision if isinstance(decision, Denied) else None


# NameServer and controller requests that change them: with authentication on they need a
# super user's signature (every other request, e.g. routes, registrations, heartbeats, reads and
# Raft traffic between controller replicas, stays open, as upstream's NameServer and controller
# have no ACL at all)
SERVER_ADMIN_WRITES: frozenset[int] = frozenset(
    {
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.REGISTER_TOPIC_IN_NAMESRV,
        RequestCode.UPDATE_NAMESRV_CONFIG,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.CONTROLLER_ELECT_MASTER,
        RequestCode.CLEAN_BROKER_DATA,
        RequestCode.UPDATE_CONTROLLER_CONFIG,
    }
)


def server_users(init_user: tuple[str, str] | None, *extra: tuple[str, str]) -> UserLookup:
    """A NameServer's or controller's users: its configured super users, nobody else."""
    table = {
        name: User(name, password, UserType.SUPER)
        for name, password in ([init_user] if init_user else []) + list(extra)
    }
    return table.get


def check_admin_write(cmd: RemotingCommand, users: UserLookup) -> Denied | None:
    """The NameServer / controller gate: None to serve ``cmd``, `Denied` to refuse it."""
    if cmd.code not in SERVER_ADMIN_WRITES:
        return None
    decision = is_super_request(cmd, users)
    return decision if isinstance(decision, Denied) else None


def is_super_request(cmd: RemotingCommand, users: UserLookup) -> AuthDecision:
    """NameServer / controller admin writes: a request signed by an enabled super user."""
    authn = authenticate(cmd, users)
    if isinstance(authn, Denied):
        return authn
    user = users(authn.username or "")
    if user is None or not user.is_super:
        return Denied(
            f"{request_name(cmd.code)} refused: User:{authn.username} is not a super user; "
            "only a super user (initAuthenticationUser) may change this server"
        )
    return authn

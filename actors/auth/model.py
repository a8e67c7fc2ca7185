"""The ACL 2.0 model as typed values (upstream auth module: User, Acl, Policy, PolicyEntry,
Resource, Action, Decision, Environment), with upstream's names and matching rules, and the
conversions to and from the wire bodies (UserInfo, AclInfo).

- A `Resource` is ``*`` (anything), ``Topic:*`` / ``Group:*`` / ``Cluster:*`` (any of a type),
  ``Topic:Orders`` (one) or ``Topic:Ord*`` (a prefix). A group named by a retry topic
  (``%RETRY%g``) is the group ``g``.
- A `PolicyEntry` matches a requested resource when its resource matches, when one of the
  requested actions is among its actions (or it has ``All``), and when the request's source ip
  is in one of its ``sourceIps`` (an ip or a CIDR; none listed = any ip).
- An `Acl` holds one policy per type (Custom, Default); upstream's update semantics: entries
  replace the entry of the same resource, others are added.

Everything here is pure; a bad value raises `AuthDataError` with a remark naming it.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable

import attrs

from rocketrio.protocol.auth_bodies import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


class AuthDataError(ValueError):
    """A user, ACL, resource or action that is not valid (message says which and why)."""


class _Named(enum.Enum):
    """Enums parsed case-insensitively by their upstream display name."""

    @classmethod
    def parse(cls, name: str | None, what: str) -> _Named:
        if name is not None:
            for m in cls:
                if m.value.lower() == name.strip().lower():
                    return m
        names = ", ".join(m.value for m in cls)
        raise AuthDataError(f"{what} {name!r} is not one of {names}")


class Action(_Named):
    ALL = "All"
    ANY = "Any"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


# `rocketrio admin` accepts "admin" as shorthand for these
ADMIN_ACTIONS: tuple[Action, ...] = (
    Action.CREATE,
    Action.UPDATE,
    Action.DELETE,
    Action.GET,
    Action.LIST,
)


class ResourceType(_Named):
    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class ResourcePattern(enum.Enum):
    ANY = "ANY"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Decision(_Named):
    ALLOW = "Allow"
    DENY = "Deny"


class PolicyType(_Named):
    CUSTOM = "Custom"
    DEFAULT = "Default"


class UserType(_Named):
    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(_Named):
    ENABLE = "enable"
    DISABLE = "disable"


def parse_actions(names: Iterable[str], *, allow_admin: bool = False) -> tuple[Action, ...]:
    """Action names (case-insensitive); ``admin`` expands to the admin actions when allowed."""
    out: list[Action] = []
    for name in names:
        if allow_admin and name.strip().lower() == "admin":
            out.extend(a for a in ADMIN_ACTIONS if a not in out)
            continue
        a = Action.parse(name, "action")
        assert isinstance(a, Action)
        if a not in out:
            out.append(a)
    return tuple(out)


def group_name(name: str) -> str:
    """A group as a resource: ``%RETRY%g`` and ``%DLQ%g`` name the group ``g``."""
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def is_retry_topic(topic: str | None) -> bool:
    return topic is not None and topic.startswith(RETRY_PREFIX)


@attrs.frozen
class Resource:
    type: ResourceType
    name: str | None = None
    pattern: ResourcePattern = ResourcePattern.LITERAL

    @classmethod
    def topic(cls, name: str) -> Resource:
        return cls(ResourceType.TOPIC, name)

    @classmethod
    def group(cls, name: str) -> Resource:
        return cls(ResourceType.GROUP, group_name(name))

    @classmethod
    def cluster(cls, name: str) -> Resource:
        return cls(ResourceType.CLUSTER, name)

    @classmethod
    def parse(cls, key: str | None) -> Resource:
        """``*``, ``Type:*``, ``Type:name`` or ``Type:prefix*`` (upstream Resource.of)."""
        if key is None or not key.strip():
            raise AuthDataError("resource is blank (expected e.g. Topic:Orders, Group:g, *)")
        key = key.strip()
        if key == "*":
            return cls(ResourceType.ANY, None, ResourcePattern.ANY)
        kind, sep, name = key.partition(":")
        if not sep or not name:
            raise AuthDataError(
                f"resource {key!r} must be Type:name (Topic, Group, Cluster, Namespace) or *"
            )
        rtype = ResourceType.parse(kind, f"resource type of {key!r}")
        assert isinstance(rtype, ResourceType)
        if rtype is ResourceType.ANY:
            raise AuthDataError(f"resource {key!r}: use * for any resource")
        if name == "*":
            return cls(rtype, None, ResourcePattern.ANY)
        if name.endswith("*"):
            return cls(rtype, name[:-1], ResourcePattern.PREFIXED)
        return cls(rtype, name, ResourcePattern.LITERAL)

    @property
    def key(self) -> str:
        if self.type is ResourceType.ANY:
            return "*"
        match self.pattern:
            case ResourcePattern.ANY:
                return f"{self.type.value}:*"
            case ResourcePattern.LITERAL:
                return f"{self.type.value}:{self.name}"
            case ResourcePattern.PREFIXED:
                return f"{self.type.value}:{self.name}*"

    def matches(self, requested: Resource) -> bool:
        """Whether this (policy) resource covers the ``requested`` literal resource."""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not requested.type:
            return False
        match self.pattern:
            case ResourcePattern.ANY:
                return True
            case ResourcePattern.LITERAL:
                return requested.name == self.name
            case ResourcePattern.PREFIXED:
                return (requested.name or "").startswith(self.name or "")


def _network(source: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(source.strip(), strict=False)
    except ValueError:
        raise AuthDataError(f"source ip {source!r} is not an ip address or CIDR") from None


def ip_in(ip: str | None, sources: tuple[str, ...]) -> bool:
    """Whether ``ip`` is one of ``sources`` (ips or CIDRs); no sources = any ip."""
    if not sources:
        return True
    if not ip:
        return False
    try:
        addr = ipaddress.ip_address(ip.strip("[]"))
    except ValueError:
        return False
    return any(addr in _network(s) for s in sources)


@attrs.frozen
class PolicyEntry:
    resource: Resource
    actions: tuple[Action, ...]
    source_ips: tuple[str, ...] = ()
    decision: Decision = Decision.ALLOW

    def __attrs_post_init__(self) -> None:
        where = f"policy entry for {self.resource.key}"
        if not self.actions:
            raise AuthDataError(f"{where}: actions are empty")
        if Action.ANY in self.actions:
            raise AuthDataError(f"{where}: actions can not be Any")
        for s in self.source_ips:
            _network(s)

    def matches(self, resource: Resource, actions: tuple[Action, ...], source_ip: str) -> bool:
        if not self.resource.matches(resource):
            return False
        if Action.ANY not in actions and not (
            Action.ALL in self.actions or any(a in self.actions for a in actions)
        ):
            return False
        return ip_in(source_ip, self.source_ips)


@attrs.frozen
class Policy:
    policy_type: PolicyType
    entries: tuple[PolicyEntry, ...]

    def updated(self, new: Iterable[PolicyEntry]) -> Policy:
        """Upstream Policy.updateEntry: an entry replaces the one of its resource."""
        entries = list(self.entries)
        for e in new:
            i = next((i for i, old in enumerate(entries) if old.resource == e.resource), None)
            if i is None:
                entries.append(e)
            else:
                entries[i] = e
        return Policy(self.policy_type, tuple(entries))


@attrs.frozen(cache_hash=True)  # a key of the gate's decision cache, hashed once
class Acl:
    subject: str  # "User:alice"
    policies: tuple[Policy, ...]

    def policy(self, policy_type: PolicyType) -> Policy | None:
        return next((p for p in self.policies if p.policy_type is policy_type), None)

    def updated(self, new: Iterable[Policy]) -> Acl:
        """Upstream Acl.updatePolicy: merge each policy into the one of its type."""
        policies = list(self.policies)
        for p in new:
            i = next((i for i, o in enumerate(policies) if o.policy_type is p.policy_type), None)
            if i is None:
                policies.append(p)
            else:
                policies[i] = policies[i].updated(p.entries)
        return Acl(self.subject, tuple(policies))

    def without(self, policy_type: PolicyType, resource: Resource) -> Acl:
        """Upstream Acl.deletePolicy: drop the resource's entry, and the policy if emptied."""
        policies = []
        for p in self.policies:
            if p.policy_type is policy_type:
                p = Policy(p.policy_type, tuple(e for e in p.entries if e.resource != resource))
                if not p.entries:
                    continue
            policies.append(p)
        return Acl(self.subject, tuple(policies))


@attrs.frozen
class User:
    username: str
    password: str = attrs.field(repr=False)
    user_type: UserType = UserType.NORMAL
    status: UserStatus = UserStatus.ENABLE

    @property
    def subject(self) -> str:
        return user_subject(self.username)

    @property
    def is_super(self) -> bool:
        return self.user_type is UserType.SUPER


def user_subject(username: str) -> str:
    return f"User:{username}"


def parse_subject(subject: str | None) -> str:
    """A subject key, ``User:<name>`` (the only subject type upstream has)."""
    if subject is None or not subject.strip():
        raise AuthDataError("subject is blank (expected User:<username>)")
    kind, sep, name = subject.strip().partition(":")
    if not sep or kind.lower() != "user" or not name:
        raise AuthDataError(f"subject {subject!r} must be User:<username>")
    return user_subject(name)


def subject_username(subject: str) -> str:
    return subject.partition(":")[2]


# ---------------------------------------------------------------------------- conversions


def _opt(cls: type[_Named], name: str | None, what: str) -> _Named | None:
    return None if name is None or not name.strip() else cls.parse(name, what)


def user_to_info(user: User) -> UserInfo:
    return UserInfo(user.username, user.password, user.user_type.value, user.status.value)


def user_fields(info: UserInfo) -> tuple[UserType | None, UserStatus | None]:
    """The optional type and status of a UserInfo (None where not given)."""
    t = _opt(UserType, info.userType, "userType")
    s = _opt(UserStatus, info.userStatus, "userStatus")
    assert t is None or isinstance(t, UserType)
    assert s is None or isinstance(s, UserStatus)
    return t, s


def user_from_info(info: UserInfo) -> User:
    """A stored user (file or sync): every field must be present and valid."""
    if not info.username or not info.password:
        raise AuthDataError(f"user {info.username!r} needs a username and a password")
    t, s = user_fields(info)
    return User(info.username, info.password, t or UserType.NORMAL, s or UserStatus.ENABLE)


def entry_from_info(info: PolicyEntryInfo, *, allow_admin: bool = False) -> PolicyEntry:
    resource = Resource.parse(info.resource)
    actions = parse_actions(info.actions or (), allow_admin=allow_admin)
    decision = Decision.parse(info.decision, f"decision of {resource.key}")
    assert isinstance(decision, Decision)
    return PolicyEntry(resource, actions, tuple(info.sourceIps or ()), decision)


def policy_from_info(info: PolicyInfo) -> Policy:
    ptype = _opt(PolicyType, info.policyType, "policyType") or PolicyType.CUSTOM
    assert isinstance(ptype, PolicyType)
    if not info.entries:
        raise AuthDataError(f"the {ptype.value} policy has no entries")
    return Policy(ptype, tuple(entry_from_info(e) for e in info.entries))


def acl_from_info(info: AclInfo, subject: str | None = None) -> Acl:
    """An ACL from its wire/file shape; ``subject`` (the header's) is used when the body has
    none, as upstream does."""
    subj = parse_subject(info.subject or subject)
    if not info.policies:
        raise AuthDataError(f"the acl of {subj} has no policies")
    return Acl(subj, tuple(policy_from_info(p) for p in info.policies))


def acl_to_info(acl: Acl) -> AclInfo:
    return AclInfo(
        acl.subject,
        [
            PolicyInfo(
                p.policy_type.value,
                [
                    PolicyEntryInfo(
                        e.resource.key,
                        [a.value for a in e.actions],
                        list(e.source_ips) or None,
                        e.decision.value,
                    )
                    for e in p.entries
                ],
            )
            for p in acl.policies
        ],
    )

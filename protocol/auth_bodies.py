"""Wire shapes of the ACL 2.0 admin calls (request codes 3001-3010) and the files that keep users
and ACLs, with upstream's names: the request headers (CreateUserRequestHeader ...
ListAclsRequestHeader) and the JSON bodies UserInfo and AclInfo (with its nested PolicyInfo and
PolicyEntryInfo). Every field of a body is optional, as in upstream's JSON, so a partial update
(updateUser with only a password) decodes; the broker validates what it needs.

The file wrappers (`AuthUsersFile`, `AuthAclsFile`) are rocketrio's: upstream keeps users and
ACLs in RocksDB, we keep them as JSON config files next to topics.json.
"""

from __future__ import annotations

import attrs

from rocketrio.protocol.bodies import DataVersion

# ---------------------------------------------------------------------------- headers


@attrs.define(slots=True)
class CreateUserRequestHeader:
    username: str | None = None


@attrs.define(slots=True)
class UpdateUserRequestHeader:
    username: str | None = None


@attrs.define(slots=True)
class DeleteUserRequestHeader:
    username: str | None = None


@attrs.define(slots=True)
class GetUserRequestHeader:
    username: str | None = None


@attrs.define(slots=True)
class ListUsersRequestHeader:
    filter: str | None = None


@attrs.define(slots=True)
class CreateAclRequestHeader:
    subject: str | None = None


@attrs.define(slots=True)
class UpdateAclRequestHeader:
    subject: str | None = None


@attrs.define(slots=True)
class DeleteAclRequestHeader:
    subject: str | None = None
    policyType: str | None = None
    resource: str | None = None


@attrs.define(slots=True)
class GetAclRequestHeader:
    subject: str | None = None


@attrs.define(slots=True)
class ListAclsRequestHeader:
    subjectFilter: str | None = None
    resourceFilter: str | None = None


# ---------------------------------------------------------------------------- bodies


@attrs.define(slots=True)
class UserInfo:
    """A user on the wire: userType Super/Normal, userStatus enable/disable (upstream names)."""

    username: str | None = None
    password: str | None = None
    userType: str | None = None
    userStatus: str | None = None


@attrs.define(slots=True)
class PolicyEntryInfo:
    """One resource with its actions (Pub, Sub, ...), sourceIps (ip or CIDR) and decision."""

    resource: str | None = None
    actions: list[str] | None = None
    sourceIps: list[str] | None = None
    decision: str | None = None


@attrs.define(slots=True)
class PolicyInfo:
    policyType: str | None = None
    entries: list[PolicyEntryInfo] | None = None


@attrs.define(slots=True)
class AclInfo:
    """The ACL of one subject (``User:alice``)."""

    subject: str | None = None
    policies: list[PolicyInfo] | None = None


# ---------------------------------------------------------------------------- files


@attrs.define(slots=True)
class AuthUsersFile:
    """users.json in the broker's config directory."""

    users: list[UserInfo] = attrs.field(factory=list)
    dataVersion: DataVersion = attrs.field(factory=DataVersion)


@attrs.define(slots=True)
class AuthAclsFile:
    """acls.json in the broker's config directory."""

    acls: list[AclInfo] = attrs.field(factory=list)
    dataVersion: DataVersion = attrs.field(factory=DataVersion)

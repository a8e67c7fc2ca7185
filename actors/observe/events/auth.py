"""Events of authentication and authorization: users and ACLs changed (broker auth processor),
requests refused (broker, controller, NameServer), a slave adopting its master's tables.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import Json, LogEvent, event


@event("auth_acl_deleted")
@attrs.frozen(kw_only=True)
class AuthAclDeleted(LogEvent):
    """Auth acl deleted: deleteAcl removed a subject's policy for a resource."""

    subject: str | None = None
    resource: str | None = None
    by: str | None = None


@event("auth_acl_updated")
@attrs.frozen(kw_only=True)
class AuthAclUpdated(LogEvent):
    """Auth acl updated: createAcl / updateAcl."""

    subject: str | None = None
    by: str | None = None


@event("auth_no_users", "warning")
@attrs.frozen(kw_only=True)
class AuthNoUsers(LogEvent):
    """Auth no users."""

    hint: Json


@event("auth_refused")
@attrs.frozen(kw_only=True)
class AuthRefused(LogEvent):
    """Auth refused: NO_PERMISSION answered."""

    code: str
    remark: str
    user: str | None = None
    source_ip: str | None = None


@event("auth_synced")
@attrs.frozen(kw_only=True)
class AuthSynced(LogEvent):
    """Auth synced: a slave adopted its master's tables."""

    master: str
    users: int
    acls: int


@event("auth_user_created")
@attrs.frozen(kw_only=True)
class AuthUserCreated(LogEvent):
    """Auth user created."""

    user: str | None = None
    by: str | None = None


@event("auth_user_deleted")
@attrs.frozen(kw_only=True)
class AuthUserDeleted(LogEvent):
    """Auth user deleted."""

    user: str | None = None
    by: str | None = None


@event("auth_user_initialized")
@attrs.frozen(kw_only=True)
class AuthUserInitialized(LogEvent):
    """Auth user initialized: initAuthenticationUser / inner creds."""

    user: str


@event("auth_user_updated")
@attrs.frozen(kw_only=True)
class AuthUserUpdated(LogEvent):
    """Auth user updated: updateUser changed a user."""

    user: str | None = None
    by: str | None = None

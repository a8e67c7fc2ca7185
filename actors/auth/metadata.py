"""Users and ACLs as a broker keeps them, pure (upstream AuthenticationMetadataManagerImpl and
AuthorizationMetadataManagerImpl over a local provider): the create / update / delete / get /
list rules of request codes 3001-3010, on typed values, with no files.

Rules kept from upstream:
- createUser: username and password required; an existing user is an error; type defaults to
  Normal, status to enable. Only a super user may create, update or delete a super user (a
  caller that is not signed passes: authentication is off).
- updateUser: the user must exist; a blank password, type or status keeps the old one.
- deleteUser: deletes the user and its ACL; an unknown user is not an error.
- createAcl / updateAcl: the subject's user must exist; an existing ACL is merged (entries
  replace the entry of their resource); policies default to Custom.
- deleteAcl: with a resource, drops that entry of the policy type (Custom by default) and the
  ACL when it is left empty; without, drops the whole ACL.
- listUser / listAcl filters are substrings (of the username; of the subject and resource).

`init_user` makes sure a configured user exists as a super user (initAuthenticationUser and
innerClientAuthenticationCredentials); an existing user of that name is left as it is.
Failures are `AuthFailed` with upstream's response code: NO_PERMISSION for auth rule
violations, INVALID_PARAMETER for a blank name or an unreadable body.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.auth.model import (
    Acl,
    AuthDataError,
    PolicyType,
    Resource,
    User,
    UserStatus,
    UserType,
    acl_from_info,
    parse_subject,
    subject_username,
    user_fields,
)
from rocketrio.protocol.auth_bodies import AclInfo, UserInfo
from rocketrio.protocol.codes import ResponseCode


@attrs.frozen
class AuthFailed:
    code: int
    remark: str


def _no_permission(remark: str) -> AuthFailed:
    return AuthFailed(ResponseCode.NO_PERMISSION, remark)


class AuthMetadata:
    """The user table and the ACL table (subject key -> ACL)."""

    def __init__(self) -> None:
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}

    # lookups (the gate's UserLookup / AclLookup)
    def user(self, username: str) -> User | None:
        return self.users.get(username)

    def acl(self, subject: str) -> Acl | None:
        return self.acls.get(subject)

    def _caller_may_touch_super(self, caller: str | None) -> bool:
        if caller is None:  # not signed: authentication is off
            return True
        user = self.users.get(caller)
        return user is not None and user.is_super

    # ------------------------------------------------------------------ users

    def init_user(self, username: str, password: str) -> bool:
        """Create ``username`` as a super user unless a user of that name exists."""
        if username in self.users:
            return False
        self.users[username] = User(username, password, UserType.SUPER, UserStatus.ENABLE)
        return True

    def _checked_fields(
        self, info: UserInfo, caller: str | None, verb: str
    ) -> tuple[UserType | None, UserStatus | None] | AuthFailed:
        """The type and status a create/update asks for, or why it is refused (bad values, a
        blank name, a Super user asked for by a caller who is not one)."""
        try:
            utype, status = user_fields(info)
        except AuthDataError as e:
            return AuthFailed(ResponseCode.INVALID_PARAMETER, str(e))
        if not info.username or not info.username.strip():
            return AuthFailed(ResponseCode.INVALID_PARAMETER, "The username is blank")
        if utype is UserType.SUPER and not self._caller_may_touch_super(caller):
            return AuthFailed(
                ResponseCode.SYSTEM_ERROR, f"The super user can only be {verb} by super user"
            )
        return utype, status

    def create_user(self, info: UserInfo, caller: str | None) -> AuthFailed | None:
        checked = self._checked_fields(info, caller, "create")
        if isinstance(checked, AuthFailed):
            return checked
        utype, status = checked
        if not info.password or not info.password.strip():
            return _no_permission("password can not be blank")
        if info.username in self.users:
            return _no_permission(f"The user {info.username} is existed")
        self.users[info.username] = User(
            info.username, info.password, utype or UserType.NORMAL, status or UserStatus.ENABLE
        )
        return None

    def update_user(self, info: UserInfo, caller: str | None) -> AuthFailed | None:
        checked = self._checked_fields(info, caller, "update")
        if isinstance(checked, AuthFailed):
            return checked
        utype, status = checked
        old = self.users.get(info.username)
        if old is None:
            return _no_permission(f"The user {info.username} is not exist")
        if old.is_super and not self._caller_may_touch_super(caller):
            return _no_permission("The super user can only be update by super user")
        self.users[info.username] = User(
            old.username,
            info.password if info.password and info.password.strip() else old.password,
            utype or old.user_type,
            status or old.status,
        )
        return None

    def delete_user(self, username: str | None, caller: str | None) -> AuthFailed | None:
        if not username or not username.strip():
            return AuthFailed(ResponseCode.INVALID_PARAMETER, "username can not be blank")
        old = self.users.get(username)
        if old is None:
            return None
        if old.is_super and not self._caller_may_touch_super(caller):
            return _no_permission("The super user can only be update by super user")
        del self.users[username]
        self.acls.pop(old.subject, None)
        return None

    def list_users(self, filter_: str | None) -> list[User]:
        return [u for n, u in sorted(self.users.items()) if not filter_ or filter_ in n]

    # ------------------------------------------------------------------ ACLs

    def _parse_acl(self, info: AclInfo, subject: str | None) -> Acl | AuthFailed:
        try:
            acl = acl_from_info(info, subject)
        except AuthDataError as e:
            return _no_permission(str(e))
        if subject_username(acl.subject) not in self.users:
            return _no_permission(f"The subject of {acl.subject} is not exist.")
        return acl

    def put_acl(self, info: AclInfo, subject: str | None) -> AuthFailed | None:
        """createAcl and updateAcl (upstream treats both alike): create or merge."""
        acl = self._parse_acl(info, subject)
        if isinstance(acl, AuthFailed):
            return acl
        old = self.acls.get(acl.subject)
        self.acls[acl.subject] = acl if old is None else old.updated(acl.policies)
        return None

    def delete_acl(
        self, subject: str | None, policy_type: str | None, resource: str | None
    ) -> AuthFailed | None:
        try:
            key = parse_subject(subject)
            ptype = PolicyType.parse(policy_type, "policyType") if policy_type else None
            res = Resource.parse(resource) if resource and resource.strip() else None
        except AuthDataError as e:
            return _no_permission(str(e))
        if subject_username(key) not in self.users:
            return _no_permission(f"The subject {key} is not exist.")
        old = self.acls.get(key)
        if old is None:
            return _no_permission("The acl is not exist.")
        if res is None:
            del self.acls[key]
            return None
        assert ptype is None or isinstance(ptype, PolicyType)
        left = old.without(ptype or PolicyType.CUSTOM, res)
        if left.policies:
            self.acls[key] = left
        else:
            del self.acls[key]
        return None

    def get_acl(self, subject: str | None) -> Acl | AuthFailed | None:
        try:
            key = parse_subject(subject)
        except AuthDataError as e:
            return _no_permission(str(e))
        if subject_username(key) not in self.users:
            return _no_permission(f"The subject {key} is not exist.")
        return self.acls.get(key)

    def list_acls(self, subject_filter: str | None, resource_filter: str | None) -> list[Acl]:
        out = []
        for key, acl in sorted(self.acls.items()):
            if subject_filter and subject_filter not in key:
                continue
            if resource_filter:
                policies = []
                for p in acl.policies:
                    entries = tuple(e for e in p.entries if resource_filter in e.resource.key)
                    if entries:
                        policies.append(attrs.evolve(p, entries=entries))
                if not policies:
                    continue
                acl = attrs.evolve(acl, policies=tuple(policies))
            out.append(acl)
        return out

    # ------------------------------------------------------------------ whole tables

    def replace(self, users: list[User], acls: list[Acl]) -> None:
        """Adopt another broker's tables (slave sync)."""
        self.users = {u.username: u for u in users}
        self.acls = {a.subject: a for a in acls}

"""Authentication of gRPC calls (RocketMQ 5's ``authorization`` metadata, MQv2-HMAC-SHA1):

    authorization: MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time,
                   Signature=<hex HMAC-SHA1(secretKey, value of x-mq-date-time)>

When ``authenticationEnabled`` is set on the proxy, every call must carry it, signed by an
enabled user of the brokers' ACL 2.0 users (the accessKey is the username, the secretKey its
password; upstream's proxy authenticates against the same users); a missing, malformed or wrong
signature, or an unknown or disabled user, is UNAUTHORIZED. When it is not set the header is
ignored. The parsing and the check are pure; `ProxyAuth` fetches users (AUTH_GET_USER) and keeps
them for USER_CACHE_S.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable

import attrs
import trio

from rocketrio.actors.proxy.mapping import BadRequest, Code
from rocketrio.protocol.auth_bodies import UserInfo

ALGORITHM = "MQv2-HMAC-SHA1"
DATE_TIME = "x-mq-date-time"
USER_CACHE_S = 10.0


def unauthorized(why: str) -> BadRequest:
    return BadRequest(Code.UNAUTHORIZED, why)


@attrs.frozen
class Authorization:
    access_key: str
    signed_headers: tuple[str, ...]
    signature: str


def parse_authorization(value: str) -> Authorization:
    """The fields of an ``authorization`` value; UNAUTHORIZED when it is not MQv2-HMAC-SHA1."""
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise unauthorized(f"authorization algorithm must be {ALGORITHM}")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        key, sep, val = part.strip().partition("=")
        if not sep:
            raise unauthorized(f"malformed authorization part {part.strip()!r}")
        fields[key] = val
    missing = {"Credential", "SignedHeaders", "Signature"} - fields.keys()
    if missing:
        raise unauthorized(f"authorization lacks {', '.join(sorted(missing))}")
    access_key = fields["Credential"].split("/")[0]  # upstream: the key before any scope
    headers = tuple(h.strip().lower() for h in fields["SignedHeaders"].split(";") if h.strip())
    return Authorization(access_key, headers, fields["Signature"])


def signature(secret_key: str, date_time: str) -> str:
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def check(metadata: dict[str, str], user: UserInfo | None) -> None:
    """Raise UNAUTHORIZED unless ``metadata`` is signed by ``user`` (enabled)."""
    auth = parse_authorization(metadata.get("authorization", ""))
    if user is None or user.password is None:
        raise unauthorized(f"user {auth.access_key} is not found")
    if (user.userStatus or "enable").lower() != "enable":
        raise unauthorized(f"user {auth.access_key} is disabled")
    date_time = metadata.get(DATE_TIME)
    if date_time is None or DATE_TIME not in auth.signed_headers:
        raise unauthorized(f"the signature must cover {DATE_TIME}")
    expected = signature(user.password, date_time)
    if not hmac.compare_digest(expected.lower(), auth.signature.lower()):
        raise unauthorized("check signature failed")


UserFetch = Callable[[str], Awaitable[UserInfo | None]]


class ProxyAuth:
    """``enabled`` False: every call passes. Users are fetched by ``fetch`` and cached."""

    def __init__(self, enabled: bool, fetch: UserFetch) -> None:
        self.enabled = enabled
        self._fetch = fetch
        self._users: dict[str, tuple[float, UserInfo | None]] = {}

    async def authenticate(self, metadata: dict[str, str]) -> None:
        if not self.enabled:
            return
        if "authorization" not in metadata:
            raise unauthorized("authorization is required")
        access_key = parse_authorization(metadata["authorization"]).access_key
        check(metadata, await self._user(access_key))

    async def _user(self, username: str) -> UserInfo | None:
        now = trio.current_time()
        cached = self._users.get(username)
        if cached is not None and now - cached[0] < USER_CACHE_S:
            return cached[1]
        user = await self._fetch(username)
        self._users[username] = (now, user)
        return user

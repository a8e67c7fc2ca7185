"""Request signatures of RocketMQ's ACL, sans-io: what a signed remoting request carries and how
it is checked (upstream AclClientRPCHook, AclUtils.combineRequestContent, AclSigner and the
remoting half of DefaultAuthenticationContextBuilder / DefaultAuthenticationHandler).

A signing client adds ``AccessKey`` (and ``SecurityToken`` when it has one) to the request's
extFields, then signs: the content is every extField except ``Signature``, sorted by key
(Java's TreeMap order), the values concatenated with no separator, UTF-8, followed by the body
bytes; the signature is HMAC-SHA1 of that content under the secret key, base64 encoded, and goes
in the ``Signature`` extField. A server recomputes it with the secret key of the user named by
``AccessKey`` and compares in constant time.

One upstream quirk is kept: for requests of version <= V4_9_3 the server leaves the
``_UNIQUE_KEY_QUERY`` field out of the content (old clients added it after signing).

Nothing here knows users: `verify` takes the secret key; finding it is the caller's job.
"""

from __future__ import annotations

import base64
import hmac

import attrs

from rocketrio.protocol.remoting import RemotingCommand

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
V4_9_3 = 399  # MQVersion.Version.V4_9_3.ordinal()


@attrs.frozen
class SessionCredentials:
    """An access key / secret key pair (upstream SessionCredentials), with an optional token."""

    access_key: str
    secret_key: str = attrs.field(repr=False)
    security_token: str | None = None


def _java_key(key: str) -> bytes:
    # Java's String.compareTo orders by UTF-16 code units; for keys outside the BMP this differs
    # from Python's code-point order, so such keys sort by their UTF-16 encoding.
    return key.encode("utf-16-be")


def _sorted_keys(fields: dict[str, str]) -> list[str]:
    keys = sorted(fields)  # ASCII keys (all upstream's): code-point order is Java's order
    if "".join(keys).isascii():
        return keys
    return sorted(fields, key=_java_key)


def content_to_sign(cmd: RemotingCommand, *, server_side: bool = False) -> bytes:
    """The bytes a signature covers: sorted extField values (no Signature), then the body.

    ``server_side`` applies the server's old-client rule (see module docstring)."""
    fields = cmd.ext_fields
    skip_unique = server_side and cmd.version <= V4_9_3
    parts = [
        fields[key]
        for key in _sorted_keys(fields)
        if key != SIGNATURE and not (skip_unique and key == UNIQUE_MSG_QUERY_FLAG)
    ]
    return "".join(parts).encode() + cmd.body


def signature_of(content: bytes, secret_key: str) -> str:
    """HMAC-SHA1 of ``content`` under ``secret_key`` (UTF-8), base64 (upstream AclSigner)."""
    return base64.b64encode(hmac.digest(secret_key.encode(), content, "sha1")).decode()


def sign(cmd: RemotingCommand, credentials: SessionCredentials) -> None:
    """Sign ``cmd`` in place, as AclClientRPCHook.doBeforeRequest does."""
    cmd.ext_fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        cmd.ext_fields[SECURITY_TOKEN] = credentials.security_token
    cmd.ext_fields.pop(SIGNATURE, None)
    cmd.ext_fields[SIGNATURE] = signature_of(content_to_sign(cmd), credentials.secret_key)


def verify(cmd: RemotingCommand, secret_key: str) -> bool:
    """Whether ``cmd`` carries the signature ``secret_key`` gives its content."""
    given = cmd.ext_fields.get(SIGNATURE)
    if given is None:
        return False
    expected = signature_of(content_to_sign(cmd, server_side=True), secret_key)
    return hmac.compare_digest(expected.encode(), given.encode())


class RequestSigner:
    """A request hook for `RemotingClient`: signs every outgoing request with one credential."""

    __slots__ = ("credentials",)

    def __init__(self, credentials: SessionCredentials) -> None:
        self.credentials = credentials

    def __call__(self, addr: str, cmd: RemotingCommand) -> None:
        sign(cmd, self.credentials)

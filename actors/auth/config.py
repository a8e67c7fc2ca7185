"""The AuthConfig keys rocketrio reads (upstream names and defaults, off by default), their
parsing, and the checks that make a bad value a clear start-up error naming the key:

- ``authenticationEnabled`` / ``authorizationEnabled`` (false);
- ``initAuthenticationUser``: JSON ``{"username": .., "password": ..}``, a super user created at
  start when no user of that name exists;
- ``innerClientAuthenticationCredentials``: JSON ``{"accessKey": .., "secretKey": ..}``, signs
  the server's own outgoing remoting calls (also created as a super user, as upstream);
- ``authenticationWhitelist`` / ``authorizationWhitelist``: comma-separated request codes that
  skip the check.

BrokerConfig, NamesrvConfig and ControllerConfig each list the keys they use (flat, as upstream)
with the validators below.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from rocketrio.protocol.acl_signature import SessionCredentials


def _json_object(raw: str, key: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{key} is not valid JSON ({e.msg}): {raw!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{key} must be a JSON object, got {raw!r}")
    return value


def _two_strings(raw: str, key: str, a: str, b: str) -> tuple[str, str]:
    value = _json_object(raw, key)
    x, y = value.get(a), value.get(b)
    if not isinstance(x, str) or not x.strip() or not isinstance(y, str) or not y:
        raise ValueError(f'{key} must be {{"{a}": "...", "{b}": "..."}} with both non-empty')
    return x, y


def parse_init_user(raw: str, key: str = "initAuthenticationUser") -> tuple[str, str] | None:
    """(username, password) of ``{"username":..,"password":..}``; None when blank."""
    if not raw.strip():
        return None
    return _two_strings(raw, key, "username", "password")


def parse_credentials(
    raw: str, key: str = "innerClientAuthenticationCredentials"
) -> SessionCredentials | None:
    """The credentials of ``{"accessKey":..,"secretKey":..}``; None when blank."""
    if not raw.strip():
        return None
    ak, sk = _two_strings(raw, key, "accessKey", "secretKey")
    return SessionCredentials(ak, sk)


def parse_whitelist(raw: str, key: str) -> frozenset[int]:
    codes = set()
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            codes.add(int(part))
        except ValueError:
            raise ValueError(f"{key}: {part!r} is not a request code (a number)") from None
    return frozenset(codes)


def init_user_key(_inst: Any, a: attrs.Attribute[Any], value: str) -> None:
    """attrs validator for initAuthenticationUser."""
    parse_init_user(value, a.name)


def credentials_key(_inst: Any, a: attrs.Attribute[Any], value: str) -> None:
    """attrs validator for innerClientAuthenticationCredentials."""
    parse_credentials(value, a.name)


def whitelist_key(_inst: Any, a: attrs.Attribute[Any], value: str) -> None:
    """attrs validator for authenticationWhitelist / authorizationWhitelist."""
    parse_whitelist(value, a.name)


def require_init_user(config: Any, who: str) -> None:
    """A NameServer or controller with authentication on knows only its initAuthenticationUser:
    without one nobody could ever change it."""
    if config.authenticationEnabled and not config.initAuthenticationUser.strip():
        raise ValueError(
            f"authenticationEnabled=true on the {who} needs initAuthenticationUser "
            '({"username":..,"password":..}): the super user its admin writes must be signed by'
        )


SECRET_KEYS = ("initAuthenticationUser", "innerClientAuthenticationCredentials")


def mask_secrets(dumped: str) -> str:
    """``key=value`` lines with the values of the secret-bearing keys replaced by ``***``."""
    lines = []
    for line in dumped.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in SECRET_KEYS and value:
            line = f"{key}=***"
        lines.append(line)
    return "\n".join(lines) + ("\n" if dumped.endswith("\n") else "")

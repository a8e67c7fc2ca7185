"""Live config updates (UPDATE_BROKER_CONFIG 25, UPDATE_NAMESRV_CONFIG 318,
UPDATE_CONTROLLER_CONFIG 1009): the pure decision, shared by the three roles.

The request body is properties text (``key=value`` lines, as upstream's
MixAll.properties2String writes them). `plan_update` decides, with no I/O, whether the whole
request is taken or refused; nothing is ever partly applied:

1. a key on the black list (the role's `UpdatePolicy.always_black` plus its ``configBlackList``
   key) -> NO_PERMISSION "Can not update config in black list." (upstream's code and remark;
   rocketrio appends the keys);
2. otherwise every problem is listed in one INVALID_PARAMETER remark: an unknown key (upstream
   ignores those silently), a key the running process reads only at start (its
   `UpdatePolicy.live_keys` do not name it: "needs a restart"), a value that does not parse or
   that the config class's validators refuse;
3. otherwise `ConfigApplied`: the new config (built by ``attrs.evolve``, so every validator and
   the class's cross-key checks ran) and the keys whose value really changes.

Which keys are live is each role's claim about its own shell (actors/broker/boot/live_config.py,
the NameServer, the controller): a key is listed only where the running process reads the new
value (or is told it) at once.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import attrs

from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.config import (
    ConfigError,
    convert_value,
    format_value,
    parse_properties,
    unknown_key_error,
)

C = TypeVar("C")

BLACK_LIST_REMARK = "Can not update config in black list."


@attrs.frozen
class UpdatePolicy:
    """What one role lets UPDATE_*_CONFIG change."""

    role: str  # "broker", "name server", "controller": for remarks
    live_keys: frozenset[str]
    # refused whatever configBlackList says (upstream's hard-coded additions)
    always_black: frozenset[str]
    # how a refused restart key is applied instead (named in the remark)
    restart_hint: str = "change it in the config file and restart"

    def black_list(self, config: Any) -> frozenset[str]:
        configured = getattr(config, "configBlackList", "")
        return self.always_black | {k.strip() for k in configured.split(";") if k.strip()}


@attrs.frozen
class ConfigChange:
    key: str
    old: str  # file text of the value before
    new: str  # file text of the value after
    value: Any  # the typed new value


@attrs.frozen
class ConfigApplied(Generic[C]):
    config: C  # the whole config with the changes
    changes: tuple[ConfigChange, ...]  # only keys whose value differs

    @property
    def updates(self) -> dict[str, str]:
        """The changed keys as file text (what goes into the config file)."""
        return {c.key: c.new for c in self.changes}


@attrs.frozen
class ConfigRefused:
    code: ResponseCode
    remark: str


def parse_update_body(body: bytes) -> dict[str, str] | ConfigRefused:
    """The request body's keys and values (an empty body is an empty update)."""
    try:
        return parse_properties(body.decode("utf-8"), "request body")
    except UnicodeDecodeError as e:
        return ConfigRefused(ResponseCode.INVALID_PARAMETER, f"request body is not UTF-8: {e}")
    except ConfigError as e:
        return ConfigRefused(ResponseCode.INVALID_PARAMETER, f"{e}; nothing was changed")


def plan_update(
    policy: UpdatePolicy, config: C, values: dict[str, str]
) -> ConfigApplied[C] | ConfigRefused:
    """Take all of ``values`` or none (module docstring)."""
    cls = type(config)
    black = sorted(k for k in values if k in policy.black_list(config))
    if black:
        return ConfigRefused(
            ResponseCode.NO_PERMISSION, f"{BLACK_LIST_REMARK} Refused: {', '.join(black)}"
        )
    problems: list[str] = []
    typed: dict[str, Any] = {}
    for key, raw in values.items():
        unknown = unknown_key_error(cls, key)
        if unknown is not None:
            problems.append(f"{unknown} for the {policy.role}")
            continue
        if key not in policy.live_keys:
            problems.append(
                f"{key} needs a {policy.role} restart to take effect ({policy.restart_hint})"
            )
            continue
        try:
            typed[key] = convert_value(cls, key, raw, "request body")
        except ConfigError as e:
            problems.append(str(e).removeprefix("request body: "))
    if not problems:
        try:
            new = attrs.evolve(config, **typed)  # type: ignore[misc]
        except (TypeError, ValueError) as e:
            problems.append(str(e))
    if problems:
        return ConfigRefused(
            ResponseCode.INVALID_PARAMETER, "nothing was changed: " + "; ".join(problems)
        )
    changes = tuple(
        ConfigChange(k, format_value(getattr(config, k)), format_value(v), v)
        for k, v in typed.items()
        if getattr(config, k) != v
    )
    return ConfigApplied(new, changes)


def apply_in_place(config: Any, changes: tuple[ConfigChange, ...]) -> None:
    """Set the changed keys on the running config object (every collaborator holding it reads
    the new values from now on). The values were validated by `plan_update`."""
    for c in changes:
        setattr(config, c.key, c.value)

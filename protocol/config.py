"""Upstream-style ``key=value`` config files mapped onto attrs config classes.

A config class is an attrs class whose attribute names are upstream's keys (camelCase, e.g.
``brokerNotActiveTimeoutMillis``) and whose defaults are upstream's. `load_config` reads a
properties file (``#`` / ``!`` comments, ``key=value`` or ``key: value``), applies overrides
(command line), and builds the class. An unknown key or a value that does not parse is a
`ConfigError` naming the key and the file, raised at start-up, never a silent default.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

T = TypeVar("T")


class ConfigError(ValueError):
    pass


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    out: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep <= 0:
            raise ConfigError(f"{source}:{lineno}: expected key=value, got {raw!r}")
        key, value = line[:sep].strip(), line[sep + 1 :].strip()
        out[key] = value
    return out


def _convert(value: str, typ: Any, key: str, source: str) -> Any:
    origin = typing.get_origin(typ)
    args = typing.get_args(typ)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        non_none = [a for a in args if a is not type(None)]
        if value == "" or value.lower() == "null":
            return None
        return _convert(value, non_none[0], key, source)
    try:
        if typ is bool:
            v = value.strip().lower()
            if v in ("true", "false"):
                return v == "true"
            raise ValueError("expected true or false")
        if typ is int:
            return int(value.replace("_", ""))
        if typ is float:
            return float(value)
        if typ is str:
            return value
        if isinstance(typ, type) and issubclass(typ, __import__("enum").Enum):
            try:
                return typ[value.strip().upper()]
            except KeyError:
                raise ValueError(f"expected one of {[m.name for m in typ]}") from None
    except ValueError as e:
        raise ConfigError(f"{source}: bad value for {key}={value!r}: {e}") from None
    raise ConfigError(f"{source}: key {key} has an unsupported type {typ!r}")


def unknown_key_error(cls: type, key: str) -> str | None:
    """None when ``key`` is a key of config class ``cls``, else "unknown key k (did you mean
    K?)"."""
    fields = [a.name for a in attrs.fields(cls)]
    if key in fields:
        return None
    close = [f for f in fields if f.lower() == key.lower()]
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown key {key}{hint}"


def convert_value(cls: type, key: str, raw: str, source: str = "<config>") -> Any:
    """The typed value of one known key of ``cls``; ConfigError naming the key if it does not
    parse (attribute validators run later, when the class is built)."""
    return _convert(raw, typing.get_type_hints(cls)[key], key, source)


def build_config(
    cls: type[T],
    values: Mapping[str, str],
    source: str = "<config>",
    *,
    ignore_unknown: frozenset[str] = frozenset(),
) -> T:
    """Build ``cls`` from string values; unknown keys and bad values raise ConfigError."""
    kwargs: dict[str, Any] = {}
    for key, raw in values.items():
        if key in ignore_unknown:
            continue
        unknown = unknown_key_error(cls, key)
        if unknown is not None:
            raise ConfigError(f"{source}: {unknown}")
        kwargs[key] = convert_value(cls, key, raw, source)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{source}: {e}") from None


def load_config(
    cls: type[T],
    path: str | None,
    overrides: Mapping[str, str] | None = None,
    *,
    ignore_unknown: frozenset[str] = frozenset(),
) -> T:
    values: dict[str, str] = {}
    source = path or "<command line>"
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                values = parse_properties(f.read(), path)
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    if overrides:
        values.update(overrides)
    return build_config(cls, values, source, ignore_unknown=ignore_unknown)


def positive(_inst: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    """attrs validator: the value must be > 0 (message names the key)."""
    if value is not None and value <= 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value}")


def non_negative(_inst: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


def dump_config(obj: Any) -> str:
    """The config as key=value lines (for GET_BROKER_CONFIG and `--print-config`)."""
    lines = [f"{a.name}={format_value(getattr(obj, a.name))}" for a in attrs.fields(type(obj))]
    return "\n".join(lines) + "\n"


def format_value(v: Any) -> str:
    """A config value as its file text (booleans lower case, enums by name, None empty)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return ""
    if hasattr(v, "name"):
        return str(v.name)
    return str(v)

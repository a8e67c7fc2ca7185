"""The one cattrs converter: typed attrs values <-> extFields (all strings) and JSON bodies.

Header classes name their attributes exactly like upstream's extField keys (camelCase), so
conversion needs no rename tables. Required fields (no default) missing from a request give a
`HeaderError` naming the field; an unparsable number names the field and the value.

JSON bodies (routes, topic configs, heartbeat data...) are attrs classes too; `to_json` drops
None fields, like fastjson, as standard JSON (routes, files); bodies for upstream's tools are
written by `fastjson.encode`. `from_json` reads both: it ignores unknown keys (newer clients add
fields) and takes fastjson's unquoted number and MessageQueue map keys
(``{0:"127.0.0.1:10911"}``, ``{{"brokerName":..}:..}``) through `fastjson.loads`.
"""

from __future__ import annotations

import re
import typing
from typing import Any, TypeVar

import attrs
import cattrs
import orjson
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError

from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import MessageQueue

T = TypeVar("T")


class HeaderError(ValueError):
    """A request header (extFields) or JSON body that does not fit its declared type."""


def _int_hook(v: Any, _t: type) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        return int(v.strip())
    if isinstance(v, float) and v.is_integer():
        return int(v)
    raise ValueError(f"not an integer: {v!r}")


def _bool_hook(v: Any, _t: type) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("true", "1"):
            return True
        if s in ("false", "0", ""):
            return False
    if isinstance(v, int):
        return bool(v)
    raise ValueError(f"not a boolean: {v!r}")


def _str_hook(v: Any, _t: type) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    raise ValueError(f"not a string: {v!r}")


def _make_converter() -> cattrs.Converter:
    c = cattrs.Converter(omit_if_default=False, forbid_extra_keys=False)
    c.register_structure_hook(int, _int_hook)
    c.register_structure_hook(bool, _bool_hook)
    c.register_structure_hook(str, _str_hook)
    return c


converter = _make_converter()


def _explain(exc: BaseException, cls: type) -> str:
    """Turn cattrs' nested exception groups into one line a person can act on."""
    if isinstance(exc, ClassValidationError):
        msgs = []
        for sub in exc.exceptions:
            note = next(iter(getattr(sub, "__notes__", []) or []), "")
            field = ""
            m = re.search(r"attribute (\w+)", note)
            if m:
                field = m.group(1)
            if isinstance(sub, KeyError):
                msgs.append(f"missing required field '{field or sub.args[0]}'")
            elif isinstance(sub, ClassValidationError):
                msgs.append(f"{field}: {_explain(sub, cls)}")
            else:
                msgs.append(f"field '{field}': {sub}" if field else str(sub))
        return "; ".join(msgs) or str(exc)
    if isinstance(exc, ForbiddenExtraKeysError):
        return f"unknown fields {sorted(exc.extra_fields)}"
    return str(exc)


def from_ext(cls: type[T], ext: dict[str, str]) -> T:
    """Build a typed header from a request's extFields.

    A header of str / int / bool fields (optional or not) goes through a straight-line function
    compiled once per class (`_compile_from_ext`: it sits on every request's path); anything it
    does not take as is (a missing required field, a value that is not a plain string, a number
    or boolean it cannot read) goes through the cattrs converter, whose result or error it is."""
    fast = _FROM_EXT_CACHE.get(cls)
    if fast is None:
        fast = _FROM_EXT_CACHE[cls] = _compile_from_ext(cls) or _NOT_COMPILED
    if fast is not _NOT_COMPILED:
        try:
            return fast(ext)  # type: ignore[no-any-return]
        except (_Slow, KeyError, ValueError, TypeError):
            pass
    return _from_ext_cattrs(cls, ext)


def _from_ext_cattrs(cls: type[T], ext: dict[str, str]) -> T:
    try:
        return converter.structure(ext, cls)
    except (ClassValidationError, ValueError, TypeError, KeyError) as e:
        raise HeaderError(f"{cls.__name__}: {_explain(e, cls)}") from None


class _Slow(Exception):
    """Raised by a compiled from_ext for a value the cattrs hooks must judge."""


_FROM_EXT_CACHE: dict[type, Any] = {}
_NOT_COMPILED: Any = object()
_BOOLS = {"true": True, "1": True, "false": False, "0": False, "": False}


def _compile_from_ext(cls: type) -> Any:
    """The fast `from_ext` of one class, or None when a field is not str / int / bool (or
    Optional of one), has a factory default, or is not an __init__ argument by its name.

    Agrees with the converter on every input it accepts: a str field takes a str, an int field
    ``int(s)`` of a str (int() strips like `_int_hook`), a bool field "true"/"1"/"false"/"0"/""
    exactly; a missing field takes its default; None only for an Optional field. Everything else
    raises `_Slow` (or KeyError / ValueError) and the caller asks the converter."""
    if not attrs.has(cls):
        return None
    hints = typing.get_type_hints(cls)
    ns: dict[str, Any] = {"cls": cls, "_Slow": _Slow, "_B": _BOOLS, "_M": _NOT_COMPILED}
    lines = ["def from_ext(ext):", "    g = ext.get"]
    args = []
    for i, a in enumerate(attrs.fields(cls)):
        t = hints[a.name]
        targs = typing.get_args(t)
        optional = type(None) in targs
        base = next((x for x in targs if x is not type(None)), t) if targs else t
        if base not in (str, int, bool) or not a.init or a.alias != a.name:
            return None
        if isinstance(a.default, attrs.Factory):  # type: ignore[arg-type]
            return None
        v = f"v{i}"
        args.append(f"{a.name}={v}")
        lines.append(f"    x = g({a.name!r}, _M)")
        if a.default is attrs.NOTHING:
            lines.append("    if x is _M: raise _Slow")
        else:
            ns[f"d{i}"] = a.default
            lines.append(f"    if x is _M: {v} = d{i}")
        lines.append(
            f"    elif x is None: {v} = None" if optional else "    elif x is None: raise _Slow"
        )
        lines.append("    elif x.__class__ is not str: raise _Slow")
        if base is str:
            lines.append(f"    else: {v} = x")
        elif base is int:
            lines.append(f"    else: {v} = int(x)")
        else:
            lines.append(f"    else: {v} = _B[x]")
    lines.append(f"    return cls({', '.join(args)})")
    exec("\n".join(lines), ns)  # generated from the class's own field names only
    return ns["from_ext"]


_TO_EXT_CACHE: dict[type, Any] = {}


def _compile_to_ext(cls: type) -> Any:
    """A straight-line function for one header class (to_ext sits on every send's path)."""
    hints = typing.get_type_hints(cls)
    lines = ["def to_ext(h):", "    out = {}"]
    for a in attrs.fields(cls):
        t = hints[a.name]
        args = typing.get_args(t)
        base = next((x for x in args if x is not type(None)), t) if args else t
        v = f"h.{a.name}"
        if base is str:
            conv = "x"
        elif base is bool:
            conv = "'true' if x else 'false'"
        else:
            conv = (
                "x if x.__class__ is str else "
                "('true' if x is True else 'false' if x is False else str(x))"
            )
        lines.append(f"    x = {v}")
        lines.append(f"    if x is not None: out[{a.name!r}] = {conv}")
    lines.append("    return out")
    ns: dict[str, Any] = {}
    exec("\n".join(lines), ns)  # generated from the class's own field names only
    return ns["to_ext"]


def to_ext(header: Any) -> dict[str, str]:
    """extFields of a typed header: None omitted, booleans as true/false, all values strings."""
    cls = type(header)
    fn = _TO_EXT_CACHE.get(cls)
    if fn is None:
        fn = _TO_EXT_CACHE[cls] = _compile_to_ext(cls)
    return fn(header)


def _drop_none(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _drop_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_none(x) for x in v]
    return v


def to_plain(obj: Any) -> Any:
    """Unstructure to JSON-ready dicts/lists, None fields dropped."""
    return _drop_none(converter.unstructure(obj))


def to_json(obj: Any) -> bytes:
    return orjson.dumps(to_plain(obj), option=orjson.OPT_NON_STR_KEYS)


def loads_lenient(data: bytes | str) -> Any:
    """JSON, or fastjson's output with unquoted number and object map keys (fastjson.loads)."""
    return fastjson.loads(data)


def _structure_message_queue(v: Any, _t: type) -> MessageQueue:
    """A MessageQueue from a dict, a bare-object map key, or a quoted key holding its JSON
    (the forms upstream's fastjson reads and writes; admin-bodies README §4)."""
    if isinstance(v, MessageQueue):
        return v
    if isinstance(v, str):
        try:
            v = orjson.loads(v)
        except orjson.JSONDecodeError:
            raise ValueError(f"not a MessageQueue: {v[:80]!r}") from None
    if isinstance(v, fastjson.ObjectKey):
        v = dict(v)
    if not isinstance(v, dict):
        raise ValueError(f"not a MessageQueue: {v!r}")
    try:
        return MessageQueue(_str_hook(v["topic"], str), _str_hook(v["brokerName"], str),
                            _int_hook(v["queueId"], int))  # fmt: skip
    except KeyError as e:
        raise ValueError(f"MessageQueue without {e.args[0]}") from None


converter.register_structure_hook(MessageQueue, _structure_message_queue)


def from_json(cls: type[T], data: bytes | str) -> T:
    try:
        plain = loads_lenient(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise HeaderError(f"{cls.__name__}: body is not valid JSON: {e}") from None
    return from_plain(cls, plain)


def from_plain(cls: type[T], plain: Any) -> T:
    try:
        return converter.structure(plain, cls)
    except (ClassValidationError, ValueError, TypeError, KeyError) as e:
        raise HeaderError(f"{cls.__name__}: {_explain(e, cls)}") from None

"""SQL92 selector trees and their evaluation against message properties (upstream's filter
module: ComparisonExpression, LogicExpression, UnaryExpression, UnaryInExpression).

Pure: no I/O. A message's properties are all strings, as upstream's MessageEvaluationContext
hands them over; constants keep their Java type (`JInt`, `JLong`, `JDouble`, ``str``, ``bool``,
``None``) because upstream's conversions depend on it. The semantics, upstream's exactly:

- Three-valued: a missing property is NULL; a comparison with NULL is NULL (``a = 'x'`` and
  ``a > 1`` with ``a`` missing), except that a non-null constant on the left of ``=`` against a
  missing property is FALSE (``'x' = a``); ``a IS NULL`` is TRUE. AND/OR follow SQL's
  three-valued tables, NOT NULL is NULL, and a selector matches only when it is TRUE.
- ``< <= > >=``: two strings compare as doubles (Java Double.valueOf), else the evaluation
  fails; a string against a number is converted to the number's type (Integer.valueOf for an
  int literal, so ``a > 5`` with ``a = '5.5'`` fails, while ``a > 5.0`` compares doubles); a
  failed conversion fails the evaluation.
- ``=``: equal Java values, else compared after the same conversion (``a = 10`` matches
  ``'10'``; ``a = 10`` against ``'x'`` fails), a boolean compares with a string by
  Boolean.valueOf (``a = TRUE`` matches ``'true'`` in any case).
- Kinds with no conversion (a boolean against a number) compare as "less" (-1), as upstream.
- IN / NOT IN: NULL when the property is missing; CONTAINS / STARTSWITH / ENDSWITH and their
  NOT forms: FALSE when the property is missing or the search string is empty.
- A bare property used as a boolean is FALSE (properties are strings), NULL when missing.

A failed evaluation raises `Sql92EvalError`; the broker treats it as "no match" and logs it,
as upstream's ExpressionMessageFilter does (`matches`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal

import attrs


class JInt(int):
    """A Java Integer constant."""


class JLong(int):
    """A Java Long constant."""


class JDouble(float):
    """A Java Double constant."""


JValue = JInt | JLong | JDouble | str | bool | None


class Sql92EvalError(ValueError):
    """An evaluation upstream aborts with an exception (a failed conversion); ``java_class``
    and ``message`` are what upstream's exception says."""

    def __init__(self, java_class: str, message: str) -> None:
        super().__init__(f"{java_class}: {message}")
        self.java_class = java_class
        self.message = message


def _number_format(s: str) -> Sql92EvalError:
    # upstream __compare wraps NumberFormatException in a RuntimeException
    return Sql92EvalError(
        "java.lang.RuntimeException", f'java.lang.NumberFormatException: For input string: "{s}"'
    )


def java_str(v: JValue) -> str:
    """Java's String.valueOf of a value (Boolean "true", Double "0.5" or "1.0E10")."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return {True: "NaN"}.get(v != v, "Infinity" if v > 0 else "-Infinity")
        if v == 0 or 1e-3 <= abs(v) < 1e7:
            return repr(float(v))
        sign, digits, exp = Decimal(repr(float(v))).normalize().as_tuple()
        text = "".join(map(str, digits))
        power = len(text) - 1 + int(exp)
        return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"
    return str(v)


@attrs.frozen
class Const:
    value: JValue
    boolean: bool = False  # TRUE/FALSE/NULL literals are boolean expressions upstream

    def __str__(self) -> str:
        v = self.value
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        return str(v)


TRUE = Const(True, True)
FALSE = Const(False, True)
NULL = Const(None, True)


@attrs.frozen
class Property:
    name: str

    def __str__(self) -> str:
        return self.name


@attrs.frozen
class Negate:
    operand: Expr

    def __str__(self) -> str:
        return f"(- {self.operand})"


@attrs.frozen
class BoolCast:
    operand: Property

    def __str__(self) -> str:
        return str(self.operand)


@attrs.frozen
class Not:
    operand: Expr

    def __str__(self) -> str:
        return f"(NOT {self.operand})"


@attrs.frozen
class Logic:
    op: str  # "AND" | "OR"
    left: Expr
    right: Expr

    def __str__(self) -> str:
        sym = "&&" if self.op == "AND" else "||"
        return f"({self.left} {sym} {self.right})"


@attrs.frozen
class Relation:
    op: str  # "=" | ">" | ">=" | "<" | "<="
    left: Expr
    right: Expr

    def __str__(self) -> str:
        sym = "==" if self.op == "=" else self.op
        return f"({self.left} {sym} {self.right})"


@attrs.frozen
class InList:
    operand: Property
    items: frozenset[str]
    negated: bool

    def __str__(self) -> str:
        word = "NOT IN" if self.negated else "IN"
        return f"{self.operand} {word} ( {', '.join(sorted(self.items))} )"


@attrs.frozen
class StringTest:
    op: str  # "CONTAINS" | "STARTSWITH" | "ENDSWITH"
    operand: Expr
    search: str
    negated: bool

    def __str__(self) -> str:
        word = f"NOT {self.op}" if self.negated else self.op
        return f"({word} {self.operand})"


Expr = Const | Property | Negate | BoolCast | Not | Logic | Relation | InList | StringTest


def is_boolean(e: Expr) -> bool:
    """Is ``e`` a BooleanExpression upstream (what AND/OR/NOT and the selector accept)?"""
    if isinstance(e, Const):
        return e.boolean
    return isinstance(e, BoolCast | Not | Logic | Relation | InList | StringTest)


# ---------------------------------------------------------------- Java conversions

_JAVA_INT = re.compile(r"[+-]?\d+")
_DEC = r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_HEX = r"0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+"
_JAVA_DOUBLE = re.compile(rf"([+-]?)(NaN|Infinity|{_DEC}|{_HEX})[fFdD]?")


def java_int(s: str, bits: int) -> int:
    """Integer.valueOf / Long.valueOf: a sign and digits, in range, or `Sql92EvalError`."""
    if _JAVA_INT.fullmatch(s):
        v = int(s)
        if -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
            return v
    raise _number_format(s)


def java_double(s: str) -> float:
    """Double.valueOf: trims characters <= ' ', then Java's floating-point literal grammar."""
    t = s.strip("".join(map(chr, range(33))))
    m = _JAVA_DOUBLE.fullmatch(t)
    if not m:
        raise _number_format(s)
    sign, body = m.group(1), m.group(2)
    if body[:2] in ("0x", "0X"):
        v = float.fromhex(body)
    elif body == "NaN":
        return float("nan")
    elif body == "Infinity":
        v = float("inf")
    else:
        v = float(body)
    return -v if sign == "-" else v


def _kind(v: JValue) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, JInt):
        return "int"
    if isinstance(v, JLong):
        return "long"
    if isinstance(v, float):
        return "double"
    return "str"


def _convert(lv: JValue, rv: JValue) -> tuple[object, object] | None:
    """Upstream __compare's conversions (convertStringExpressions on); None means -1."""
    lk, rk = _kind(lv), _kind(rv)
    if lk == rk:
        return lv, rv
    num = {"int", "long", "double"}
    if lk in num and rk in num:
        if "double" in (lk, rk):
            return float(lv), float(rv)  # type: ignore[arg-type]
        return lv, rv  # int and long compare exactly either way
    if lk == "bool":
        if rk == "str":  # upstream casts the Boolean to String here: ClassCastException
            raise Sql92EvalError(
                "java.lang.ClassCastException",
                "class java.lang.Boolean cannot be cast to class java.lang.String "
                "(java.lang.Boolean and java.lang.String are in module java.base of loader "
                "'bootstrap')",
            )
        return None
    if lk in num and rk == "str":
        return lv, _parse_as(lk, rv)  # type: ignore[arg-type]
    if lk == "str" and rk in num:
        return _parse_as(rk, lv), rv  # type: ignore[arg-type]
    if lk == "str" and rk == "bool":
        return str(lv).lower() == "true", rv
    return None


def _parse_as(kind: str, s: str) -> int | float:
    if kind == "int":
        return java_int(s, 32)
    if kind == "long":
        return java_int(s, 64)
    return java_double(s)


def _cmp_double(a: float, b: float) -> int:
    """Double.compareTo: NaN is above everything and equal to itself; -0.0 < 0.0."""
    if a != a or b != b:
        return (a != a) - (b != b)
    if a == b == 0.0:
        return (str(a)[0] != "-") - (str(b)[0] != "-")
    return (a > b) - (a < b)


def java_compare(lv: JValue, rv: JValue) -> int:
    """Upstream ComparisonExpression.__compare with string conversion on."""
    pair = _convert(lv, rv)
    if pair is None:
        return -1
    a, b = pair
    if isinstance(a, float) or isinstance(b, float):
        return _cmp_double(float(a), float(b))  # type: ignore[arg-type]
    return (a > b) - (a < b)  # type: ignore[operator]


# ---------------------------------------------------------------- evaluation

_ORDER = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


def evaluate(e: Expr, props: Mapping[str, str]) -> JValue:
    """The Java value of ``e`` for a message with ``props`` (module docstring)."""
    match e:
        case Const(value=v):
            return v
        case Property(name=name):
            return props.get(name)
        case Relation(op="=", left=left, right=right):
            return _equal(evaluate(left, props), evaluate(right, props))
        case Relation(op=op, left=left, right=right):
            return _order(op, evaluate(left, props), evaluate(right, props))
        case Logic(op="AND", left=left, right=right):
            lv = evaluate(left, props)
            if lv is False:
                return False
            rv = evaluate(right, props)
            if rv is False:
                return False
            return None if lv is None or rv is None else True
        case Logic(left=left, right=right):  # OR
            lv = evaluate(left, props)
            if lv is True:
                return True
            rv = evaluate(right, props)
            if rv is True:
                return True
            return None if lv is None or rv is None else False
        case Not(operand=operand):
            v = evaluate(operand, props)
            return None if v is None else not v
        case BoolCast(operand=operand):
            v = evaluate(operand, props)
            return None if v is None else (v if isinstance(v, bool) else False)
        case InList(operand=operand, items=items, negated=negated):
            v = evaluate(operand, props)
            if not isinstance(v, str) or isinstance(v, bool):
                return None
            return (v in items) != negated
        case StringTest(op=op, operand=operand, search=search, negated=negated):
            v = evaluate(operand, props)
            if not search or not isinstance(v, str):
                return False
            return _string_test(op, v, search) != negated
        case Negate(operand=operand):
            return _negate(evaluate(operand, props))
    raise AssertionError(f"unknown node {e!r}")


def _equal(lv: JValue, rv: JValue) -> bool | None:
    if (lv is None) != (rv is None):
        return None if lv is None else False
    if lv is None:
        return True
    if _kind(lv) == _kind(rv) and (lv == rv or (lv != lv and rv != rv)):
        return True
    return java_compare(lv, rv) == 0


def _order(op: str, lv: JValue, rv: JValue) -> bool | None:
    if lv is None or rv is None:
        return None
    if isinstance(lv, str) and isinstance(rv, str):
        try:
            return _ORDER[op](_cmp_double(java_double(lv), java_double(rv)))
        except Sql92EvalError as e:
            raise Sql92EvalError(
                "java.lang.RuntimeException",
                f"It's illegal to compare string by '>=', '>', '<', '<='. lv={lv}, rv={rv}",
            ) from e
    return _ORDER[op](java_compare(lv, rv))


def _string_test(op: str, v: str, search: str) -> bool:
    if op == "CONTAINS":
        return search in v
    if op == "STARTSWITH":
        return v.startswith(search)
    return v.endswith(search)


def _negate(v: JValue) -> JValue:
    if isinstance(v, JInt):
        return JInt((-v + 2**31) % 2**32 - 2**31)
    if isinstance(v, JLong):
        return JLong((-v + 2**63) % 2**64 - 2**63)
    if isinstance(v, float):
        return JDouble(-v)
    return None


def matches(e: Expr, props: Mapping[str, str]) -> bool:
    """Does a message with ``props`` pass the selector? A failed evaluation does not."""
    try:
        return evaluate(e, props) is True
    except Sql92EvalError:
        return False

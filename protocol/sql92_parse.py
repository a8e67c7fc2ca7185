"""SQL92 message selectors (upstream's filter module, SelectorParser.jj): text -> expression tree.

Pure: no I/O. The grammar is upstream's, token for token:

- whitespace `` \\t\\n\\r\\f``; ``-- line`` and ``/* block */`` comments are skipped;
- keywords (any case): NOT AND OR BETWEEN IN TRUE FALSE NULL IS CONTAINS STARTSWITH ENDSWITH;
- literals: ``'string'`` (``''`` is a quote), decimal ``0 | [1-9][0-9]*`` with an optional
  ``L`` (an Integer when it fits 32 bits, else a Long; beyond 64 bits is an error), floating
  ``1.5``, ``1.``, ``.5``, ``1e3`` (a Double; upstream refuses a value below Double.MIN_VALUE, so
  ``0.0`` is an error, a quirk kept on purpose);
- identifiers ``[A-Za-z_$][A-Za-z0-9_$]*`` (no dots), the longest match wins, a keyword wins a tie;
- the selector ends where the OR expression ends: trailing text is ignored, as upstream's
  JmsSelector production never asks for EOF (``a = 1 )`` parses as ``a = 1``);
- precedence, loosest first: OR, AND, ``= <> IS [NOT] NULL``, ``> >= < <= [NOT] BETWEEN x AND y
  [NOT] IN ('a', ...) [NOT] CONTAINS|STARTSWITH|ENDSWITH 'a'``, unary ``+ - NOT``, primary.

The construction-time checks are upstream's too (ComparisonExpression.create*): a constant in
``< <= > >=`` or BETWEEN must be a number; ``= NULL`` is refused (use IS NULL); TRUE/FALSE/NULL
cannot be compared with a non-boolean constant; BETWEEN bounds must not be NULL and the low one
must not exceed the high one; IN needs a property on its left; AND/OR/NOT and the whole selector
need something boolean (a property is cast, a string or number is refused).

A failure is `Sql92ParseError`, whose ``java_message`` is what upstream's broker puts in the
remark of CHECK_CLIENT_CONFIG (MQFilterException wraps the cause, so the text is the cause's
class and message).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator

import attrs

from rocketrio.protocol.sql92_tree import (
    FALSE,
    NULL,
    TRUE,
    BoolCast,
    Const,
    Expr,
    InList,
    JDouble,
    JInt,
    JLong,
    Logic,
    Negate,
    Not,
    Property,
    Relation,
    Sql92EvalError,
    StringTest,
    is_boolean,
    java_compare,
    java_str,
)

EXPRESSION_SQL92 = "SQL92"
PARSE_CACHE_SIZE = 100  # upstream SelectorParser keeps the last 100 parses (and failures)

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MAX = 2**63 - 1
_DOUBLE_MIN = 5e-324  # Double.MIN_VALUE

PARSE_EXCEPTION = "org.apache.rocketmq.filter.parser.ParseException"
RUNTIME_EXCEPTION = "java.lang.RuntimeException"
NUMBER_FORMAT_EXCEPTION = "java.lang.NumberFormatException"
TOKEN_ERROR = "org.apache.rocketmq.filter.parser.TokenMgrError"


class Sql92ParseError(ValueError):
    """A selector upstream refuses; ``java_class`` and ``message`` mirror its exception."""

    def __init__(self, java_class: str, message: str) -> None:
        super().__init__(message)
        self.java_class = java_class
        self.message = message

    @property
    def java_message(self) -> str:
        """What upstream's MQFilterException.getMessage() says: ``<cause class>: <message>``."""
        return f"{self.java_class}: {self.message}"


KEYWORDS = frozenset(
    "NOT AND OR BETWEEN IN TRUE FALSE NULL IS CONTAINS STARTSWITH ENDSWITH".split()
)

_SKIP = re.compile(r"(?:[ \t\n\r\f]+|--[^\n\r]*(?:\n|\r\n?)|/\*[^*]*\*+(?:[^*/][^*]*\*+)*/)+")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)[lL]?")
_FLOAT = re.compile(
    r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+"
)
_STRING = re.compile(r"'(?:''|[^'])*'")
_ID = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_OPS = ("<>", ">=", "<=", "=", ">", "<", "(", ")", ",", "+", "-")


@attrs.frozen
class Token:
    kind: str  # a keyword, "DEC", "FLOAT", "STR", "ID", an operator, or "EOF"
    text: str
    column: int


def tokenize(text: str) -> Iterator[Token]:
    """The tokens of ``text``, lazily (longest match among upstream's token kinds; a lexical
    error surfaces only when the parser asks for that token, as in JavaCC)."""
    i, n = 0, len(text)
    while True:
        m = _SKIP.match(text, i)
        if m:
            i = m.end()
        if i >= n:
            yield Token("EOF", "<EOF>", i + 1)
            return
        best: tuple[int, str] | None = None
        for kind, rx in (("DEC", _DECIMAL), ("FLOAT", _FLOAT), ("STR", _STRING), ("ID", _ID)):
            m = rx.match(text, i)
            if m and (best is None or m.end() > best[0]):
                best = (m.end(), kind)
        if best is not None:
            end, kind = best
            word = text[i:end]
            if kind == "ID" and word.upper() in KEYWORDS:
                kind = word.upper()
            yield Token(kind, word, i + 1)
            i = end
            continue
        op = next((o for o in _OPS if text.startswith(o, i)), None)
        if op is None:
            raise Sql92ParseError(
                TOKEN_ERROR,
                f'Lexical error at line 1, column {i + 1}.  Encountered: "{text[i]}"',
            )
        yield Token(op, op, i + 1)
        i += len(op)


class _Parser:
    """Recursive descent over upstream's productions (module docstring)."""

    def __init__(self, text: str) -> None:
        self._source = tokenize(text)
        self.toks: list[Token] = []
        self.pos = 0

    def peek(self, ahead: int = 0) -> Token:
        want = self.pos + ahead
        while len(self.toks) <= want and (not self.toks or self.toks[-1].kind != "EOF"):
            self.toks.append(next(self._source))
        return self.toks[min(want, len(self.toks) - 1)]

    def take(self, kind: str) -> Token:
        t = self.peek()
        if t.kind != kind:
            self.fail(t)
        self.pos += 1
        return t

    def fail(self, t: Token) -> None:
        raise Sql92ParseError(
            PARSE_EXCEPTION, f'Encountered "{t.text}" at line 1, column {t.column}.'
        )

    def selector(self) -> Expr:
        # upstream's JmsSelector ends after orExpression: trailing input is never read
        return as_boolean(self.or_expr())

    def or_expr(self) -> Expr:
        left = self.and_expr()
        while self.peek().kind == "OR":
            self.pos += 1
            left = Logic("OR", as_boolean(left), as_boolean(self.and_expr()))
        return left

    def and_expr(self) -> Expr:
        left = self.equality()
        while self.peek().kind == "AND":
            self.pos += 1
            left = Logic("AND", as_boolean(left), as_boolean(self.equality()))
        return left

    def equality(self) -> Expr:
        left = self.comparison()
        while True:
            k = self.peek().kind
            if k in ("=", "<>"):
                self.pos += 1
                right = self.comparison()
                _check_equal_operand(left)
                _check_equal_operand(right)
                _check_equal_compat(left, right)
                eq = Relation("=", left, right)
                left = eq if k == "=" else Not(eq)
            elif k == "IS" and self.peek(1).kind == "NULL":
                self.pos += 2
                left = Relation("=", left, NULL)
            elif k == "IS":
                self.pos += 1
                self.take("NOT")
                self.take("NULL")
                left = Not(Relation("=", left, NULL))
            else:
                return left

    def comparison(self) -> Expr:
        left = self.unary()
        while True:
            k = self.peek().kind
            negated = k == "NOT" and self.peek(1).kind in _NEGATABLE
            if negated:
                self.pos += 1
                k = self.peek().kind
            if k in (">", ">=", "<", "<="):
                self.pos += 1
                right = self.unary()
                _check_less_than_operand(left)
                _check_less_than_operand(right)
                left = Relation(k, left, right)
            elif k in ("CONTAINS", "STARTSWITH", "ENDSWITH"):
                self.pos += 1
                left = StringTest(k, left, self.string(), negated)
            elif k == "BETWEEN":
                self.pos += 1
                low = self.unary()
                self.take("AND")
                left = _between(left, low, self.unary(), negated)
            elif k == "IN":
                self.pos += 1
                left = self.in_list(left, negated)
            else:
                return left

    def in_list(self, left: Expr, negated: bool) -> Expr:
        self.take("(")
        items = [self.string()]
        while self.peek().kind == ",":
            self.pos += 1
            items.append(self.string())
        self.take(")")
        if not isinstance(left, Property):
            raise Sql92ParseError(
                RUNTIME_EXCEPTION, f"Expected a property for In expression, got: {left}"
            )
        return InList(left, frozenset(items), negated)

    def string(self) -> str:
        return _unquote(self.take("STR").text)

    def unary(self) -> Expr:
        k = self.peek().kind
        if k == "+":
            self.pos += 1
            return self.unary()
        if k == "-":
            self.pos += 1
            return Negate(self.unary())
        if k == "NOT":
            self.pos += 1
            return Not(as_boolean(self.unary()))
        return self.primary()

    def primary(self) -> Expr:
        t = self.peek()
        self.pos += 1
        match t.kind:
            case "STR":
                return Const(_unquote(t.text))
            case "DEC":
                return Const(_decimal(t.text))
            case "FLOAT":
                return Const(_floating(t.text))
            case "TRUE":
                return TRUE
            case "FALSE":
                return FALSE
            case "NULL":
                return NULL
            case "ID":
                return Property(t.text)
            case "(":
                e = self.or_expr()
                self.take(")")
                return e
        self.pos -= 1
        self.fail(t)
        raise AssertionError("unreachable")


_NEGATABLE = frozenset({"CONTAINS", "STARTSWITH", "ENDSWITH", "BETWEEN", "IN"})


def _unquote(image: str) -> str:
    return image[1:-1].replace("''", "'")


def _decimal(text: str) -> JInt | JLong:
    digits = text[:-1] if text[-1] in "lL" else text
    value = int(digits)
    if value > _LONG_MAX:
        raise Sql92ParseError(NUMBER_FORMAT_EXCEPTION, f'For input string: "{digits}"')
    return JInt(value) if _INT_MIN <= value <= _INT_MAX else JLong(value)


def _floating(text: str) -> JDouble:
    value = float(text)
    if value == float("inf"):
        raise Sql92ParseError(RUNTIME_EXCEPTION, f"{text} is greater than 1.7976931348623157E308")
    if value < _DOUBLE_MIN:
        raise Sql92ParseError(RUNTIME_EXCEPTION, f"{text} is less than 4.9E-324")
    return JDouble(value)


def as_boolean(e: Expr) -> Expr:
    """Upstream asBooleanExpression: booleans pass, a property is cast, anything else fails."""
    if is_boolean(e):
        return e
    if isinstance(e, Property):
        return BoolCast(e)
    raise Sql92ParseError(PARSE_EXCEPTION, f"Expression will not result in a boolean value: {e}")


def _check_less_than_operand(e: Expr) -> None:
    if isinstance(e, Const):
        if isinstance(e.value, JInt | JLong | JDouble):
            return
        raise Sql92ParseError(RUNTIME_EXCEPTION, f"Value '{e}' cannot be compared.")
    if is_boolean(e):
        raise Sql92ParseError(RUNTIME_EXCEPTION, f"Value '{e}' cannot be compared.")


def _check_equal_operand(e: Expr) -> None:
    if isinstance(e, Const) and e.value is None:
        raise Sql92ParseError(RUNTIME_EXCEPTION, f"'{e}' cannot be compared.")


def _check_equal_compat(left: Expr, right: Expr) -> None:
    if isinstance(left, Const) and isinstance(right, Const):
        if is_boolean(left) and not is_boolean(right):
            raise Sql92ParseError(RUNTIME_EXCEPTION, f"'{left}' cannot be compared with '{right}'")


def _between(value: Expr, low: Expr, high: Expr, negated: bool) -> Expr:
    if not negated and isinstance(low, Const) and isinstance(high, Const):
        if low.value is None or high.value is None:
            raise Sql92ParseError(
                RUNTIME_EXCEPTION, "Illegal values of between, values can not be null!"
            )
        try:
            reversed_bounds = java_compare(high.value, low.value) < 0
        except Sql92EvalError as e:
            raise Sql92ParseError(e.java_class, e.message) from e
        if reversed_bounds:
            raise Sql92ParseError(
                RUNTIME_EXCEPTION,
                f"Illegal values of between, left value({java_str(low.value)}) must less than "
                f"or equal to right value({java_str(high.value)})",
            )
    for e in (value, low, high):
        _check_less_than_operand(e)
    if negated:
        return Logic("OR", Relation("<", value, low), Relation(">", value, high))
    return Logic("AND", Relation(">=", value, low), Relation("<=", value, high))


_CACHE: OrderedDict[str, Expr | Sql92ParseError] = OrderedDict()


def parse_sql92(text: str) -> Expr:
    """The compiled selector, or `Sql92ParseError`; the last 100 answers are cached."""
    hit = _CACHE.get(text)
    if hit is None:
        try:
            hit = _Parser(text).selector()
        except Sql92ParseError as e:
            hit = e
        except (RecursionError, ValueError) as e:  # absurd nesting or a number Python refuses
            hit = Sql92ParseError(RUNTIME_EXCEPTION, f"{type(e).__name__}: {e}")
        _CACHE[text] = hit
        if len(_CACHE) > PARSE_CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(text)
    if isinstance(hit, Sql92ParseError):
        raise hit
    return hit

"""SQL92 selectors compiled to Python closures: the broker's fast path for judging messages.

Pure. `compile_selector` turns a parsed tree (sql92_tree.py) into one function of the message's
properties that returns exactly what `evaluate` returns (or raises the same `Sql92EvalError`):
the tree is walked once per subscription instead of once per message, and the usual leaves (a
property against a string or a number) get specialised closures. `evaluate` stays the reference:
tests/unit/protocol/test_sql92.py checks the two agree on generated selectors, and `evaluate`
against upstream's parser.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rocketrio.protocol.sql92_tree import (
    _ORDER,
    BoolCast,
    Const,
    Expr,
    InList,
    JDouble,
    JInt,
    JLong,
    JValue,
    Logic,
    Not,
    Property,
    Relation,
    Sql92EvalError,
    _cmp_double,
    _equal,
    _order,
    evaluate,
    java_double,
    java_int,
)

Props = Mapping[str, str]
Fn = Callable[[Props], JValue]


def compile_selector(e: Expr) -> Fn:
    """A function of the properties equal to ``lambda props: evaluate(e, props)``."""
    match e:
        case Const(value=v):
            return lambda _p: v
        case Property(name=name):
            return lambda p: p.get(name)
        case Relation(op=op, left=Property(name=name), right=Const(value=c)):
            fast = _property_vs_constant(op, name, c)
            if fast is not None:
                return fast
        case Logic(op="AND", left=left, right=right):
            return _and(compile_selector(left), compile_selector(right))
        case Logic(left=left, right=right):
            return _or(compile_selector(left), compile_selector(right))
        case Not(operand=operand):
            inner = compile_selector(operand)

            def negated(p: Props) -> JValue:
                v = inner(p)
                return None if v is None else not v

            return negated
        case BoolCast(operand=Property(name=name)):
            return lambda p: None if p.get(name) is None else False
        case InList(operand=Property(name=name), items=items, negated=neg):
            return lambda p: None if (v := p.get(name)) is None else (v in items) != neg
    if isinstance(e, Relation):
        left, right, op = compile_selector(e.left), compile_selector(e.right), e.op
        if op == "=":
            return lambda p: _equal(left(p), right(p))
        return lambda p: _order(op, left(p), right(p))
    return lambda p: evaluate(e, p)


def _and(left: Fn, right: Fn) -> Fn:
    def both(p: Props) -> JValue:
        lv = left(p)
        if lv is False:
            return False
        rv = right(p)
        if rv is False:
            return False
        return None if lv is None or rv is None else True

    return both


def _or(left: Fn, right: Fn) -> Fn:
    def either(p: Props) -> JValue:
        lv = left(p)
        if lv is True:
            return True
        rv = right(p)
        if rv is True:
            return True
        return None if lv is None or rv is None else False

    return either


def _property_vs_constant(op: str, name: str, c: JValue) -> Fn | None:
    """``property <op> constant`` for a string or number constant (None: no fast path)."""
    if isinstance(c, str):
        if op == "=":  # two strings: equal, or compareTo != 0
            return lambda p: None if (v := p.get(name)) is None else v == c
        return None  # ordering a string constant is refused at parse time
    if isinstance(c, bool) or c is None:
        return None
    test = _ORDER.get(op)
    if isinstance(c, JDouble):
        cf = float(c)

        def as_double(p: Props) -> JValue:
            v = p.get(name)
            if v is None:
                return None
            d = _cmp_double(java_double(v), cf)
            return d == 0 if test is None else test(d)

        return as_double
    if isinstance(c, JInt | JLong):
        bits, ci = (32 if isinstance(c, JInt) else 64), int(c)

        def as_int(p: Props) -> JValue:
            v = p.get(name)
            if v is None:
                return None
            n = java_int(v, bits)
            return n == ci if test is None else test((n > ci) - (n < ci))

        return as_int
    return None


__all__ = ["Sql92EvalError", "compile_selector"]

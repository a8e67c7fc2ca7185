"""Size limits of the product code (STYLE.md: modules of one job, 100-600 lines; functions that
fit on a screen): no module of protocol/, storage/, actors/, cli/ or analysis/ over
`MODULE_LINES_MAX` lines (generated gRPC ``*_pb2*.py`` excluded), no function or method over
`FUNCTION_LINES_MAX` lines (from its ``def`` line to its last line; nested functions count on
their own and inside their parent).

The lists of known offenders are empty and must stay so: a new offender fails. (Were one ever
listed, with its reason, a listed entry that is now within the limit or gone would fail too, so
the lists cannot rot.)
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator

from tests.harness.paths import REPO

PRODUCT = ("protocol", "storage", "actors", "cli", "analysis")
MODULE_LINES_MAX = 600
FUNCTION_LINES_MAX = 70

# module -> why it is still long (empty: every module is within the limit)
LONG_MODULES: dict[str, str] = {}

# "path::Class.function" -> why it is still long (empty: every function is within the limit)
LONG_FUNCTIONS: dict[str, str] = {}


def product_modules() -> Iterator[str]:
    for top in PRODUCT:
        for path in sorted((REPO / top).rglob("*.py")):
            if "_pb2" not in path.name and "__pycache__" not in path.parts:
                yield path.relative_to(REPO).as_posix()


def module_lines() -> dict[str, int]:
    return {m: len((REPO / m).read_text().splitlines()) for m in product_modules()}


@functools.cache
def function_lines() -> dict[str, int]:
    """Every function and method of the product, by "path::Qualified.name", with its length
    (parsed once per test process: two tests read it)."""
    out: dict[str, int] = {}

    def walk(path: str, node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                assert child.end_lineno is not None
                out[f"{path}::{name}"] = child.end_lineno - child.lineno + 1
                walk(path, child, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(path, child, prefix + child.name + ".")
            else:
                walk(path, child, prefix)

    for m in product_modules():
        walk(m, ast.parse((REPO / m).read_text()), "")
    return out


def check(sizes: dict[str, int], limit: int, allowed: dict[str, str], what: str) -> list[str]:
    """Problems: a new offender, or an allowlisted entry that is within the limit or gone."""
    problems = [
        f"{key}: {n} lines, over the {limit}-line limit for a {what}: split it"
        for key, n in sorted(sizes.items())
        if n > limit and key not in allowed
    ]
    for key in sorted(allowed):
        if key not in sizes:
            problems.append(f"{key}: listed as a long {what} but gone: remove it from the list")
        elif sizes[key] <= limit:
            problems.append(
                f"{key}: {sizes[key]} lines, within the limit now: remove it from the list"
            )
    return problems


def test_no_new_module_over_the_limit_and_no_stale_entry() -> None:
    assert check(module_lines(), MODULE_LINES_MAX, LONG_MODULES, "module") == []


def test_no_new_function_over_the_limit_and_no_stale_entry() -> None:
    assert check(function_lines(), FUNCTION_LINES_MAX, LONG_FUNCTIONS, "function") == []


def test_the_check_flags_new_offenders_and_stale_entries() -> None:
    sizes = {"a.py": 601, "b.py": 600, "c.py": 900}
    allowed = {"b.py": "was long", "c.py": "is long", "d.py": "was split"}
    assert check(sizes, 600, allowed, "module") == [
        "a.py: 601 lines, over the 600-line limit for a module: split it",
        "b.py: 600 lines, within the limit now: remove it from the list",
        "d.py: listed as a long module but gone: remove it from the list",
    ]


def test_function_lengths_count_methods_and_nested_functions() -> None:
    lengths = function_lines()
    assert lengths["actors/kernel/transport.py::split_addr"] == 5
    assert "actors/kernel/transport.py::TcpTransport.serve" in lengths
    assert "actors/kernel/transport.py::TcpTransport.serve.on_conn" in lengths

"""Import directions (ARCHITECTURE.md: the layering, rule 12 "folders are the map"), read with
`ast` from every product module: top-level imports, imports inside functions and inside
``if TYPE_CHECKING:`` blocks alike. Product modules are named without the ``rocketrio.`` prefix
(``actors.kernel.remoting``); only our own modules (``rocketrio.*``, ``tests.*``) are checked.

`RULES` is the table. A rule applies to the modules under its `sources` (a source ending in
``.*`` means each direct subpackage on its own, minus `exempt`); it either lists what they may
import (`allow`, where ``{self}`` is the importing package) or what they must not (`forbid`).
Today's violations of a rule are listed in `KNOWN_EDGES` with a reason, rather than weakening
the rule; a new violation fails, and so does a listed edge that no longer occurs, so the list
cannot rot.

The tests' own rule: no module under tests/ imports a ``test_*`` module (shared helpers live in
tests/harness, fixtures in conftest.py files).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.harness.paths import REPO, TESTS

PRODUCT = ("protocol", "storage", "actors", "cli", "analysis")
COMPONENTS = tuple(
    f"actors.{c}" for c in ("broker", "namesrv", "controller", "client", "proxy", "console", "raft")
)
BROKER_SHARED = (
    "actors.broker.tables",
    "actors.broker.store",
    "actors.broker.dispatch",
    "actors.broker.boot",
)


@dataclass(frozen=True)
class Rule:
    name: str
    sources: tuple[str, ...]
    allow: tuple[str, ...] | None = None
    forbid: tuple[str, ...] = ()
    exempt: tuple[str, ...] = ()


RULES: tuple[Rule, ...] = (
    Rule(
        "protocol/ and storage/ are below the running system",
        sources=("protocol", "storage"),
        forbid=("actors", "cli", "analysis"),
    ),
    Rule(
        "the kernel uses only protocol/, storage/, itself and observability",
        sources=("actors.kernel",),
        allow=("protocol", "storage", "actors.kernel", "actors.observe"),
    ),
    Rule(
        "observability knows no component",
        sources=("actors.observe",),
        forbid=COMPONENTS,
    ),
    Rule(
        "the actors never import the command line or the tests",
        sources=("actors",),
        forbid=("cli", "tests"),
    ),
    Rule(
        "product code never imports the tests",
        sources=PRODUCT,
        forbid=("tests",),
    ),
    Rule(
        "a broker feature package uses the shared broker packages, not other features",
        sources=("actors.broker.*",),
        exempt=BROKER_SHARED,
        allow=(
            "actors.kernel",
            "actors.observe",
            "protocol",
            "storage",
            "actors.broker.tables",
            "actors.broker.store",
            "actors.broker.dispatch",
            "actors.broker.boot.config",
            "actors.broker.boot.broker_io",
            "{self}",
        ),
    ),
)

FEATURE_RULE = RULES[-1].name

# (rule, importing package, imported module) -> why the edge is there today
KNOWN_EDGES: dict[tuple[str, str, str], str] = {
    (FEATURE_RULE, "actors.broker.admin", "actors.auth.config"): (
        "getBrokerConfig masks the ACL secrets with the auth config's rule"
    ),
    (FEATURE_RULE, "actors.broker.admin", "actors.broker.clients.client_manager"): (
        "admin answers consumer/producer connection queries from the client tables"
    ),
    (FEATURE_RULE, "actors.broker.admin", "actors.broker.stats.broker_stats"): (
        "admin serves the broker's statistics"
    ),
    (FEATURE_RULE, "actors.broker.auth", "actors.auth.config"): (
        "the broker's ACL processor runs the shared ACL 2.0 core (actors/auth)"
    ),
    (FEATURE_RULE, "actors.broker.auth", "actors.auth.gate"): (
        "the broker's ACL gate is the shared ACL 2.0 gate"
    ),
    (FEATURE_RULE, "actors.broker.auth", "actors.auth.metadata"): (
        "users and ACLs are edited with the shared metadata rules"
    ),
    (FEATURE_RULE, "actors.broker.auth", "actors.auth.model"): (
        "users and ACLs are the shared ACL 2.0 model"
    ),
    (FEATURE_RULE, "actors.broker.container", "actors.broker.broker"): (
        "the broker container sits above brokers: it builds and runs whole Brokers"
    ),
    (FEATURE_RULE, "actors.broker.pull", "actors.broker.clients.client_manager"): (
        "a pull registers the consumer's subscription"
    ),
    (FEATURE_RULE, "actors.broker.pull", "actors.broker.stats.broker_stats"): (
        "pulls are counted in the broker's statistics"
    ),
    (FEATURE_RULE, "actors.broker.query", "actors.broker.clients.client_manager"): (
        "the admin queries read a group's subscriptions and members from the consumer table"
    ),
    (FEATURE_RULE, "actors.broker.query", "actors.broker.clients.consumer_calls"): (
        "getConsumerStatus asks each member through the broker's bounded calls to clients"
    ),
    (FEATURE_RULE, "actors.broker.roles", "actors.auth.model"): (
        "a slave syncs the master's users and ACLs"
    ),
    (FEATURE_RULE, "actors.broker.roles", "actors.broker.boot.fault_sites"): (
        "the controller link has fault sites for the simulation"
    ),
    (FEATURE_RULE, "actors.broker.roles", "actors.broker.ha.group_transfer"): (
        "the role service drives the HA services on a role change"
    ),
    (FEATURE_RULE, "actors.broker.roles", "actors.broker.ha.master_service"): (
        "the role service starts the HA master service as master"
    ),
    (FEATURE_RULE, "actors.broker.roles", "actors.broker.ha.service"): (
        "the role service starts the HA service of its role"
    ),
    (FEATURE_RULE, "actors.broker.roles", "actors.broker.ha.sync_state"): (
        "a classic master's role picks its HA ack policy (SYNC_MASTER or ASYNC_MASTER)"
    ),
    (FEATURE_RULE, "actors.broker.container", "actors.broker.failover.escape"): (
        "the container hands its masters' escape entries to its acting slaves (RIP-32)"
    ),
    (FEATURE_RULE, "actors.broker.roles", "actors.broker.failover.acting_core"): (
        "the classic role service asks the RIP-32 core whether this slave acts as master"
    ),
    (FEATURE_RULE, "actors.broker.roles", "actors.broker.failover.member_group"): (
        "the classic role service polls its group's members and answers EXCHANGE_BROKER_HA_INFO"
    ),
    (FEATURE_RULE, "actors.broker.roles", "actors.broker.failover.pre_online"): (
        "a returning classic master or slave runs pre-online before it registers"
    ),
    (FEATURE_RULE, "actors.broker.roles", "actors.broker.failover.slave_pre_online"): (
        "a returning classic slave asks the pre-online core what to do next"
    ),
    (FEATURE_RULE, "actors.broker.roles", "actors.client.api"): (
        "the role service calls the controller and the NameServer with the client's request()"
    ),
    (FEATURE_RULE, "actors.broker.roles", "actors.client.controller_admin"): (
        "the controller link is the client's ControllerLink"
    ),
    (FEATURE_RULE, "actors.broker.send", "actors.broker.clients.lock_manager"): (
        "send-back of an orderly message checks the queue lock"
    ),
    (FEATURE_RULE, "actors.broker.send", "actors.broker.schedule.policy"): (
        "a send with a delay level or timer goes to the schedule topic"
    ),
    (FEATURE_RULE, "actors.broker.send", "actors.broker.stats.broker_stats"): (
        "sends are counted in the broker's statistics"
    ),
    (FEATURE_RULE, "actors.broker.send", "actors.broker.transaction.policy"): (
        "a prepared message is stored as a half message"
    ),
    (FEATURE_RULE, "actors.broker.static_topic", "actors.broker.admin.processor"): (
        "static-topic admin and offset calls wrap the admin processor"
    ),
    (FEATURE_RULE, "actors.broker.static_topic", "actors.broker.admin.offset_reset"): (
        "the offset tools on logic queues use the reset policy of ordinary queues"
    ),
    (FEATURE_RULE, "actors.broker.static_topic", "actors.broker.pull.processor"): (
        "a logic-queue pull is a physical pull rewritten"
    ),
    (FEATURE_RULE, "actors.broker.static_topic", "actors.broker.pull.handlers"): (
        "a logic-queue pull's answer is the plain pull answer rewritten to logic offsets"
    ),
    (FEATURE_RULE, "actors.broker.static_topic", "actors.broker.send.completions"): (
        "a logic-queue send answers in logic offsets by wrapping the send's completion"
    ),
    (FEATURE_RULE, "actors.broker.static_topic", "actors.broker.send.direct"): (
        "a plain topic's single send skips the static wrapper: the wrapper hands it the test"
    ),
    (FEATURE_RULE, "actors.broker.static_topic", "actors.broker.send.handlers"): (
        "a logic-queue send decodes and answers like a plain send (one header parser)"
    ),
    (FEATURE_RULE, "actors.broker.static_topic", "actors.broker.send.processor"): (
        "a logic-queue send is a physical send rewritten"
    ),
    (FEATURE_RULE, "actors.broker.stats", "actors.broker.clients.client_manager"): (
        "consume statistics list the group's consumers"
    ),
    (FEATURE_RULE, "actors.broker.stats", "actors.broker.ha.status_body"): (
        "replication metrics read the HA status"
    ),
    (FEATURE_RULE, "actors.broker.stats", "actors.broker.ha.master_service"): (
        "the replication-lag metrics read the master's view of its slaves"
    ),
    (FEATURE_RULE, "actors.broker.transaction", "actors.broker.clients.client_manager"): (
        "transaction checks go to a producer of the group"
    ),
    (FEATURE_RULE, "actors.broker.transaction", "actors.broker.schedule.policy"): (
        "a checked-again half message waits like a delayed one"
    ),
}


def under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, module: str) -> Iterator[str]:
    """Every module `path` imports, anywhere in it; ``from a import b`` gives ``a.b`` when b
    is a module of ours, else ``a``; relative imports are resolved against `module`."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".")
                keep = len(pkg) - node.level + (1 if is_package else 0)
                base = ".".join(pkg[:keep] + ([base] if base else []))
            for alias in node.names:
                yield f"{base}.{alias.name}"


def ours(name: str, root: Path) -> str | None:
    """`name` as one of our modules (product without ``rocketrio.``, or tests.*), else None."""
    name = name.removeprefix("rocketrio.")
    if name.split(".")[0] not in (*PRODUCT, "tests"):
        return None
    parts = name.split(".")
    while parts:  # `from a.b import C`: the module is a.b, unless C is a module itself
        candidate = root.joinpath(*parts)
        if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    return name


def product_edges(root: Path = REPO) -> set[tuple[str, str]]:
    edges = set()
    for top in PRODUCT:
        for path in sorted((root / top).rglob("*.py")):
            if "_pb2" in path.name or "__pycache__" in path.parts:
                continue
            module = module_name(path, root)
            for name in imported_modules(path, module):
                target = ours(name, root)
                if target is not None and target != module:
                    edges.add((module, target))
    return edges


def source_package(rule: Rule, module: str) -> str | None:
    """The package of `module` the rule judges (None: the rule does not apply to it)."""
    for source in rule.sources:
        if source.endswith(".*"):
            parent = source[:-2]
            rest = module[len(parent) + 1 :].split(".") if under(module, parent) else []
            if len(rest) >= 2:  # a module inside a direct subpackage of `parent`
                package = f"{parent}.{rest[0]}"
                if not any(under(package, e) for e in rule.exempt):
                    return package
        elif under(module, source):
            return ".".join(module.split(".")[:-1]) or module
    return None


def violations(edges: Iterable[tuple[str, str]]) -> set[tuple[str, str, str]]:
    out = set()
    for rule in RULES:
        for module, target in edges:
            package = source_package(rule, module)
            if package is None:
                continue
            if rule.allow is not None:
                allowed = [package if a == "{self}" else a for a in rule.allow]
                if not any(under(target, a) for a in allowed):
                    out.add((rule.name, package, target))
            if any(under(target, f) for f in rule.forbid):
                out.add((rule.name, package, target))
    return out


def test_no_forbidden_import_direction_and_no_stale_known_edge() -> None:
    found = violations(product_edges())
    new = sorted(found - KNOWN_EDGES.keys())
    stale = sorted(KNOWN_EDGES.keys() - found)
    assert not new, "imports against the layering (fix them, or list them with a reason):\n" + (
        "\n".join(f"{pkg} -> {target}  [{rule}]" for rule, pkg, target in new)
    )
    assert not stale, "listed edges that no longer occur: remove them from KNOWN_EDGES:\n" + (
        "\n".join(f"{pkg} -> {target}  [{rule}]" for rule, pkg, target in stale)
    )


@pytest.mark.parametrize(
    ("module", "target", "rule"),
    [
        ("protocol.remoting", "actors.kernel.runtime", 0),
        ("storage.commitlog", "cli.main", 0),
        ("storage.fs", "analysis.incidents", 0),
        ("actors.kernel.remoting", "actors.broker.broker", 1),
        ("actors.kernel.runtime", "actors.client.api", 1),
        ("actors.observe.logs", "actors.raft.node", 2),
        ("actors.broker.broker", "cli.main", 3),
        ("actors.proxy.service", "tests.harness.sim_network", 3),
        ("storage.fs", "tests.harness.sim_disk", 4),
        ("actors.broker.pop.processor", "actors.broker.pull.hold", 5),
        ("actors.broker.pop.processor", "actors.client.api", 5),
        ("actors.broker.pop.processor", "actors.broker.boot.live_config", 5),
    ],
)
def test_each_rule_flags_its_forbidden_direction(module: str, target: str, rule: int) -> None:
    assert RULES[rule].name in {name for name, _, _ in violations([(module, target)])}


@pytest.mark.parametrize(
    ("module", "target"),
    [
        ("actors.kernel.remoting", "actors.observe.events"),
        ("actors.kernel.remoting", "protocol.remoting"),
        ("actors.broker.pop.processor", "actors.broker.pop.order"),
        ("actors.broker.pop.processor", "actors.broker.store.view"),
        ("actors.broker.pop.processor", "actors.broker.boot.config"),
        ("actors.broker.broker", "actors.broker.pop.processor"),
        ("actors.broker.store.actor", "actors.broker.stats.broker_stats"),
        ("cli.main", "actors.broker.broker"),
    ],
)
def test_allowed_directions_pass(module: str, target: str) -> None:
    assert violations([(module, target)]) == set()


def test_imports_inside_functions_and_type_checking_blocks_count(tmp_path: Path) -> None:
    pkg = tmp_path / "storage"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from rocketrio.actors.kernel import runtime\n"
        "def f():\n    import rocketrio.cli.main\n"
    )
    assert {t for _, t in product_edges(tmp_path)} >= {"actors.kernel.runtime", "cli.main"}


# ----------------------------------------------------------------------------- the tests' rule


def test_imports_of_test_modules(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("from tests.actor.test_b import x\nimport test_c\n")
    (tmp_path / "helper.py").write_text("def f():\n    from test_d import y\n")
    assert imports_of_test_modules(tmp_path) == [
        "helper.py imports test_d",
        "test_a.py imports test_c",
        "test_a.py imports tests.actor.test_b",
    ]


def imports_of_test_modules(root: Path) -> list[str]:
    """Every import, anywhere in a module under `root`, that names a ``test_*`` module."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
                names += [
                    f"{node.module}.{a.name}" for a in node.names if a.name.startswith("test_")
                ]
            else:
                continue
            for name in names:
                if any(part.startswith("test_") for part in name.split(".")):
                    found.add(f"{path.relative_to(root).as_posix()} imports {name}")
    return sorted(found)


def test_no_module_under_tests_imports_a_test_module() -> None:
    assert imports_of_test_modules(TESTS) == []

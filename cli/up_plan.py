"""What `rocketrio up` runs: the processes of a mode and their configs, from the deploy/ templates.

The templates in ``deploy/<mode>/`` are the one source of truth: they are written for the default
ports (NameServer block from 9876, broker block from 10911) on 127.0.0.1 with paths relative to the
working directory, and work as they are with ``rocketrio <role> -c``. `plan` copies each template
line for line and substitutes only the keys in `SUBSTITUTED_KEYS`:

- hosts (``listenHost``, ``brokerIP1``, the host of every address) -> ``--host``;
- ports keep their distance from the template's block start: a NameServer-block port
  (NameServer ``listenPort``, ``namesrvAddr``, ``controllerAddr``, ``controllerDLegerPeers``) moves
  with ``--namesrv-port``, a broker-block port (a broker's ``listenPort``, ``haListenPort``) with
  ``--broker-port``;
- relative directories (``storePathRootDir``, ``controllerStorePath``, ``logDir``) go under
  ``--dir``;
- ``flushDiskType`` -> ``--flush`` when given (else the template's value stays).

A ``container-*`` template is a broker container process (`rocketrio container`); the broker
templates its ``brokerConfigPaths`` names run inside it (`ProcSpec.container`), not as processes
of their own; their configs are written beside the container's, where its relative paths find
them.

The plan is then checked without touching the system: every port in 1..65535 and no port used by
two listeners. Pure apart from reading the templates (package data); `PlanError` is a one-line
message for the user.
"""

from __future__ import annotations

import importlib.resources
import os
from collections.abc import Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Literal

import attrs

from rocketrio.protocol.config import parse_properties

MODES = ("controller", "single", "2m-noslave", "2m-2s-async", "2m-2s-sync", "container-2m-2s")
TEMPLATE_NAMESRV_PORT = 9876
TEMPLATE_BROKER_PORT = 10911
PORT_MAX = 65535

Role = Literal["namesrv", "controller", "broker", "container", "proxy"]
# start order; stop reverses
ROLE_ORDER: tuple[Role, ...] = ("namesrv", "controller", "broker", "container")
BROKER_BLOCK_ROLES = frozenset({"broker", "container"})  # their listenPort is in the broker block

HOST_KEYS = frozenset({"listenHost", "brokerIP1", "brokerContainerIP"})
NAMESRV_BLOCK_ADDR_KEYS = frozenset({"namesrvAddr", "controllerAddr"})
PEERS_KEY = "controllerDLegerPeers"
DIR_KEYS = frozenset({"storePathRootDir", "controllerStorePath", "logDir"})
SUBSTITUTED_KEYS = (
    HOST_KEYS
    | NAMESRV_BLOCK_ADDR_KEYS
    | DIR_KEYS
    | {PEERS_KEY, "listenPort", "haListenPort", "flushDiskType"}
)


class PlanError(Exception):
    """A flag combination that cannot work; the message is one line naming the flag."""


@attrs.frozen
class Layout:
    """The flags of `up` that the templates are adapted to."""

    base_dir: str
    host: str = "127.0.0.1"
    namesrv_port: int = TEMPLATE_NAMESRV_PORT
    broker_port: int = TEMPLATE_BROKER_PORT
    flush: str | None = None


@attrs.frozen
class Template:
    mode: str
    name: str  # the file's stem: the process name under `up`
    role: Role
    text: str
    source: str = ""  # the file it was made from, when not deploy/<mode>/<name>.conf (--sets)


@attrs.frozen
class PortUse:
    port: int
    owner: str  # process name
    what: str  # the key (or "controller peer") the port comes from


@attrs.frozen
class ProcSpec:
    name: str
    role: Role
    config: dict[str, str]  # the generated key=value pairs, in file order
    text: str  # the generated file
    addr: str  # host:listenPort (a standalone controller: its peer address)
    listens: tuple[PortUse, ...]
    template: str  # "deploy/<mode>/<file>"
    # a broker run inside this container process (its brokerConfigPaths), not a process itself
    container: str = ""


def role_of(filename: str) -> Role:
    for role in ROLE_ORDER:
        if filename.startswith(role):
            return role
    raise PlanError(f"template {filename}: no role (names start with namesrv, controller, broker)")


def templates_root() -> Traversable:
    """The deploy/ folder: package data of an installed rocketrio, or the source tree."""
    try:
        return importlib.resources.files("rocketrio.deploy")
    except ModuleNotFoundError:
        # an editable install made before deploy/ became a package: read the source tree
        src = Path(__file__).resolve().parent.parent / "deploy"
        if src.is_dir():
            return src
        raise


def load_templates(mode: str, root: Traversable | None = None) -> list[Template]:
    """The templates of a mode, in start order (NameServers, controllers, brokers; by name)."""
    if mode not in MODES:
        raise PlanError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    folder = (root or templates_root()) / mode
    files = [f for f in folder.iterdir() if f.name.endswith(".conf")]
    if not files:
        raise PlanError(f"no templates for mode {mode} in {folder} (broken install?)")
    out = [
        Template(mode, f.name.removesuffix(".conf"), role_of(f.name), f.read_text("utf-8"))
        for f in files
    ]
    return sorted(out, key=lambda t: (ROLE_ORDER.index(t.role), t.name))


def render(text: str, values: Mapping[str, str]) -> str:
    """``text`` with the value of every ``key=value`` line whose key is in ``values`` replaced."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and line[0] not in "#!":
            key = line.split("=", 1)[0].split(":", 1)[0].strip()
            if key in values:
                raw = f"{key}={values[key]}"
        lines.append(raw)
    return "\n".join(lines) + "\n"


def _port(value: int, base: int, flag: str, layout_base: int, owner: str, key: str) -> int:
    port = value - base + layout_base
    if not 1 <= port <= PORT_MAX:
        raise PlanError(
            f"{flag} {layout_base} puts {owner}'s {key} at {port}, outside 1..{PORT_MAX}"
        )
    return port


def _substitute(t: Template, values: Mapping[str, str], layout: Layout) -> dict[str, str]:
    def ns_port(p: str, key: str) -> int:
        flag = "--namesrv-port"
        return _port(int(p), TEMPLATE_NAMESRV_PORT, flag, layout.namesrv_port, t.name, key)

    def broker_port(p: str, key: str) -> int:
        flag = "--broker-port"
        return _port(int(p), TEMPLATE_BROKER_PORT, flag, layout.broker_port, t.name, key)

    def addr(a: str, key: str) -> str:
        _host, _, port = a.strip().rpartition(":")
        return f"{layout.host}:{ns_port(port, key)}"

    out: dict[str, str] = {}
    for key, value in values.items():
        if key in HOST_KEYS:
            out[key] = layout.host
        elif key == "listenPort":
            port = broker_port(value, key) if t.role in BROKER_BLOCK_ROLES else ns_port(value, key)
            out[key] = str(port)
        elif key == "haListenPort":
            out[key] = str(broker_port(value, key))
        elif key in NAMESRV_BLOCK_ADDR_KEYS:
            out[key] = ";".join(addr(a, key) for a in value.split(";") if a.strip())
        elif key == PEERS_KEY:
            peers = (p.strip().split("-", 1) for p in value.split(";") if p.strip())
            out[key] = ";".join(f"{pid}-{addr(a, key)}" for pid, a in peers)
        elif key in DIR_KEYS:
            out[key] = value if os.path.isabs(value) else os.path.join(layout.base_dir, value)
        elif key == "flushDiskType":
            out[key] = layout.flush or value
    return out


def _listens(t: Template, config: Mapping[str, str], host: str) -> tuple[str, list[PortUse]]:
    """The address a process is reached at and every port it listens on."""
    uses: list[PortUse] = []
    addr = ""
    if "listenPort" in config and t.role != "controller":
        port = int(config["listenPort"])
        uses.append(PortUse(port, t.name, "listenPort"))
        addr = f"{host}:{port}"
    if t.role == "broker":
        ha = int(config.get("haListenPort") or 0) or int(config["listenPort"]) + 1
        if ha > PORT_MAX:  # the default haListenPort is listenPort + 1
            raise PlanError(
                f"--broker-port puts {t.name}'s haListenPort (listenPort + 1) at {ha}, outside "
                f"1..{PORT_MAX}"
            )
        uses.append(PortUse(ha, t.name, "haListenPort"))
    embedded = config.get("enableControllerInNamesrv", "false").lower() == "true"
    if t.role == "controller" or embedded:
        self_id = config.get("controllerDLegerSelfId", "")
        for peer in config.get(PEERS_KEY, "").split(";"):
            pid, _, paddr = peer.strip().partition("-")
            if pid == self_id and paddr:
                uses.append(PortUse(int(paddr.rpartition(":")[2]), t.name, "controller peer"))
                addr = addr or paddr
    return addr, uses


def plan_from(templates: list[Template], layout: Layout) -> list[ProcSpec]:
    """Generated configs for ``templates`` under ``layout``; PlanError on a bad port layout."""
    specs = []
    for t in templates:
        values = parse_properties(t.text, f"deploy/{t.mode}/{t.name}.conf")
        subs = _substitute(t, values, layout)
        config = {k: subs.get(k, v) for k, v in values.items()}
        source = t.source or f"deploy/{t.mode}/{t.name}.conf"
        header = (
            f"# generated by rocketrio up from {source} (host, ports and"
            " directories substituted);\n# rewritten at every start: change the template or the"
            " flags, not this file\n"
        )
        addr, uses = _listens(t, config, layout.host)
        specs.append(
            ProcSpec(
                t.name,
                t.role,
                config,
                header + render(t.text, subs),
                addr,
                tuple(uses),
                source,
            )
        )
    _check_collisions(specs)
    return _place_members(specs)


def _place_members(specs: list[ProcSpec]) -> list[ProcSpec]:
    """Mark the brokers a container runs (its brokerConfigPaths name their files, relative to
    the container's file); PlanError for a file that is no broker of the mode, or a broker
    named by two containers."""
    brokers = {s.name for s in specs if s.role == "broker"}
    owner: dict[str, str] = {}
    for c in (s for s in specs if s.role == "container"):
        for entry in (e.strip() for e in c.config.get("brokerConfigPaths", "").split(":")):
            name = entry.removesuffix(".conf")
            if not entry:
                continue
            if name not in brokers:
                raise PlanError(f"{c.template}: brokerConfigPaths names {entry!r}, no broker here")
            if name in owner:
                raise PlanError(f"{c.template}: {name} is already in {owner[name]}")
            owner[name] = c.name
    return [attrs.evolve(s, container=owner[s.name]) if s.name in owner else s for s in specs]


def processes(specs: list[ProcSpec]) -> list[ProcSpec]:
    """The specs that are OS processes (a container's brokers run inside it)."""
    return [s for s in specs if not s.container]


def plan(mode: str, layout: Layout, sets: int = 1) -> list[ProcSpec]:
    templates = load_templates(mode)
    if sets != 1:
        templates = broker_sets(templates, sets)
    return plan_from(templates, layout)


SETS_MAX = 26  # broker-a .. broker-z
SET_PORT_STRIDE = 20  # each set's block: its replicas at +0 / +10 (listenPort, haListenPort +1)
SET_KEYS = ("brokerName", "listenPort", "haListenPort", "storePathRootDir")


def broker_sets(templates: list[Template], sets: int) -> list[Template]:
    """`up --sets K`: the mode's one broker set (``broker-a``, its replicas ``broker-a-<i>``)
    repeated as K sets on one host, as an operator copies the files: set k is named
    ``broker-<letter k>``, its ports are the template's + k * SET_PORT_STRIDE and its store
    directory is the template's with the set's name. Every other line (cluster, NameServer,
    controller, timings) is the template's. PlanError when K is out of range or the mode has no
    single broker set to repeat."""
    if not 1 <= sets <= SETS_MAX:
        raise PlanError(f"--sets {sets}: choose 1..{SETS_MAX} broker sets")
    brokers = [t for t in templates if t.role == "broker"]
    names = {parse_properties(t.text, t.name).get("brokerName") for t in brokers}
    if names != {"broker-a"} or any(t.role == "container" for t in templates):
        raise PlanError(
            f"--sets: mode {templates[0].mode} does not have one broker set broker-a to repeat "
            "(use --mode controller, single or 2m-2s-... with one set)"
        )
    out = [t for t in templates if t.role != "broker"]
    for k in range(sets):
        name = f"broker-{chr(ord('a') + k)}"
        for t in brokers:
            values = parse_properties(t.text, t.name)
            subs = {"brokerName": name}
            for key in ("listenPort", "haListenPort"):
                if key in values:
                    subs[key] = str(int(values[key]) + k * SET_PORT_STRIDE)
            if "storePathRootDir" in values:
                subs["storePathRootDir"] = values["storePathRootDir"].replace("broker-a", name)
            source = f"deploy/{t.mode}/{t.name}.conf (set {name} of --sets {sets})"
            stem = t.name.replace("broker-a", name, 1)
            out.append(attrs.evolve(t, name=stem, text=render(t.text, subs), source=source))
    return out


def _check_collisions(specs: list[ProcSpec]) -> None:
    seen: dict[int, PortUse] = {}
    for use in (u for s in specs for u in s.listens):
        if (other := seen.get(use.port)) is not None:
            raise PlanError(
                f"port {use.port} would be both {other.owner}'s {other.what} and {use.owner}'s "
                f"{use.what}; move --namesrv-port and --broker-port further apart"
            )
        seen[use.port] = use


def expected_replicas(specs: list[ProcSpec]) -> dict[str, int]:
    """brokerName -> how many processes serve it."""
    out: dict[str, int] = {}
    for s in specs:
        if s.role == "broker":
            name = s.config["brokerName"]
            out[name] = out.get(name, 0) + 1
    return out


def proxy_spec(specs: list[ProcSpec], host: str, grpc_port: int, log_dir: str) -> ProcSpec:
    """The `up --proxy` process: a cluster-mode gRPC proxy of the plan's NameServer (upstream's
    proxy keys: namesrvAddr, grpcServerPort)."""
    config = {
        "namesrvAddr": namesrv_addr(specs),
        "grpcServerPort": str(grpc_port),
        "proxyHost": host,
        "logDir": log_dir,
    }
    text = "".join(f"{k}={v}\n" for k, v in config.items())
    addr = f"{host}:{grpc_port}"
    use = PortUse(grpc_port, "proxy", "grpcServerPort")
    return ProcSpec("proxy", "proxy", config, text, addr, (use,), "up --proxy")


def with_local_proxies(specs: list[ProcSpec], grpc_port: int) -> list[ProcSpec]:
    """`up --proxy-mode local`: every broker runs the gRPC proxy in its own process
    (enableProxy=true), the i-th broker on ``grpc_port + i`` (grpcServerPort), so several
    brokers of one host each have theirs; PlanError if a port would collide."""
    if any(s.container for s in specs):
        raise PlanError(
            "--proxy-mode local: this mode runs its brokers inside broker containers, which "
            "do not run the local proxy; use --proxy (cluster mode)"
        )
    out: list[ProcSpec] = []
    brokers = 0
    for s in specs:
        if s.role != "broker":
            out.append(s)
            continue
        port = grpc_port + brokers
        brokers += 1
        extra = {"enableProxy": "true", "grpcServerPort": str(port)}
        text = s.text + "# up --proxy-mode local: the gRPC proxy runs in this broker\n"
        text += "".join(f"{k}={v}\n" for k, v in extra.items())
        listens = (*s.listens, PortUse(port, s.name, "grpcServerPort"))
        out.append(attrs.evolve(s, config={**s.config, **extra}, text=text, listens=listens))
    _check_collisions(out)
    return out


def namesrv_addr(specs: list[ProcSpec]) -> str:
    return next(s.addr for s in specs if s.role == "namesrv")


def embedded_controller_addr(specs: list[ProcSpec]) -> str | None:
    """The peer address of a controller embedded in the NameServer, if the mode has one."""
    for s in specs:
        if s.role == "namesrv":
            for use in s.listens:
                if use.what == "controller peer":
                    return f"{s.config.get('listenHost', '127.0.0.1')}:{use.port}"
    return None

"""`rocketrio admin` ACL 2.0 commands, mqadmin's names and options:

    createUser / updateUser   -u user -p password [-t Super|Normal] [-s enable|disable]
    deleteUser / getUser      -u user
    listUser                  [-f filter]
    createAcl / updateAcl     -s User:alice -r Topic:Orders,Group:g -a Pub,Sub [-i 10.0.0.0/8]
                              [-d Allow|Deny]       (-a admin = Create,Update,Delete,Get,List)
    deleteAcl                 -s User:alice [-r Topic:Orders]
    getAcl                    -s User:alice
    listAcl                   [-s subject filter] [-r resource filter]

each with ``-b host:port`` (one broker) or ``-c cluster`` (every broker of the cluster, masters
and slaves). With authentication on, sign with ``--access-key``/``--secret-key`` (a super user,
or a user allowed Update/Get on ``Cluster:<name>``). Registered from cli/admin.py.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rocketrio.cli.admin import command, table
from rocketrio.protocol.auth_bodies import UserInfo
from rocketrio.protocol.serde import to_plain


def _target(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker", help="one broker, host:port")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every broker of the cluster")


def _auth(admin: Any) -> Any:
    from rocketrio.actors.client.auth_admin import AuthAdmin

    return AuthAdmin(admin)


async def _addrs(admin: Any, a: argparse.Namespace) -> tuple[Any, list[str]]:
    auth = _auth(admin)
    return auth, await auth.brokers(a.broker, a.cluster)


def _print_written(addrs: list[str], a: argparse.Namespace) -> None:
    print(f"{a.admin_command} done on {', '.join(addrs)}")


def _print_per_broker(result: dict[str, Any], a: argparse.Namespace) -> None:
    for addr, value in result.items():
        print(f"# {addr}")
        print(json.dumps(to_plain(value), indent=2) if value not in (None, []) else "(none)")


def _print_users(result: dict[str, list[UserInfo]], a: argparse.Namespace) -> None:
    for addr, users in result.items():
        print(f"# {addr}")
        rows = [(u.username, u.userType, u.userStatus) for u in users]
        print(table(["username", "userType", "userStatus"], rows))


# --- users -----------------------------------------------------------------------------------


def _user_args(create: bool) -> Any:
    def add(p: argparse.ArgumentParser) -> None:
        _target(p)
        p.add_argument("-u", "--username", required=True)
        p.add_argument("-p", "--password", required=create, help="the user's secret key")
        p.add_argument("-t", "--userType", dest="user_type", help="Super or Normal")
        p.add_argument("-s", "--userStatus", dest="user_status", help="enable or disable")

    return add


def _user_info(a: argparse.Namespace) -> UserInfo:
    return UserInfo(a.username, a.password, a.user_type, a.user_status)


@command("createUser", "create an ACL user on brokers", _print_written)(_user_args(True))
async def create_user(admin: Any, a: argparse.Namespace) -> list[str]:
    auth, addrs = await _addrs(admin, a)
    return await auth.create_user(addrs, _user_info(a))


@command("updateUser", "change a user's password, type or status", _print_written)(
    _user_args(False)
)
async def update_user(admin: Any, a: argparse.Namespace) -> list[str]:
    auth, addrs = await _addrs(admin, a)
    return await auth.update_user(addrs, _user_info(a))


def _username(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-u", "--username", required=True)


@command("deleteUser", "delete a user (and its ACL)", _print_written)(_username)
async def delete_user(admin: Any, a: argparse.Namespace) -> list[str]:
    auth, addrs = await _addrs(admin, a)
    return await auth.delete_user(addrs, a.username)


@command("getUser", "show a user", _print_per_broker)(_username)
async def get_user(admin: Any, a: argparse.Namespace) -> Any:
    auth, addrs = await _addrs(admin, a)
    return await auth.get_user(addrs, a.username)


def _filter(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-f", "--filter", help="usernames containing this")


@command("listUser", "list users", _print_users)(_filter)
async def list_user(admin: Any, a: argparse.Namespace) -> Any:
    auth, addrs = await _addrs(admin, a)
    return await auth.list_users(addrs, a.filter)


# --- ACLs ------------------------------------------------------------------------------------


def _split(v: str | None) -> list[str]:
    return [x.strip() for x in (v or "").split(",") if x.strip()]


def _acl_args(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-s", "--subject", required=True, help="User:<username>")
    p.add_argument("-r", "--resources", required=True, help="Topic:a,Group:g,Topic:pre*,*")
    p.add_argument(
        "-a", "--actions", required=True, help="Pub,Sub,Create,Update,Delete,Get,List,All,admin"
    )
    p.add_argument("-i", "--sourceIp", dest="source_ips", help="ips or CIDRs, comma-separated")
    p.add_argument("-d", "--decision", default="Allow", help="Allow or Deny")


def _acl(a: argparse.Namespace) -> Any:
    from rocketrio.actors.client.auth_admin import acl_body

    return acl_body(
        a.subject, _split(a.resources), _split(a.actions), _split(a.source_ips), a.decision
    )


@command("createAcl", "grant (or deny) a user actions on resources", _print_written)(_acl_args)
async def create_acl(admin: Any, a: argparse.Namespace) -> list[str]:
    body = _acl(a)
    auth, addrs = await _addrs(admin, a)
    return await auth.create_acl(addrs, body)


@command("updateAcl", "change a user's entries for these resources", _print_written)(_acl_args)
async def update_acl(admin: Any, a: argparse.Namespace) -> list[str]:
    body = _acl(a)
    auth, addrs = await _addrs(admin, a)
    return await auth.update_acl(addrs, body)


def _delete_acl_args(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-s", "--subject", required=True, help="User:<username>")
    p.add_argument("-r", "--resource", help="only this resource's entry (default: the whole ACL)")


@command("deleteAcl", "delete a user's ACL or one of its entries", _print_written)(_delete_acl_args)
async def delete_acl(admin: Any, a: argparse.Namespace) -> list[str]:
    auth, addrs = await _addrs(admin, a)
    return await auth.delete_acl(addrs, a.subject, a.resource)


def _subject(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-s", "--subject", required=True, help="User:<username>")


@command("getAcl", "show a user's ACL", _print_per_broker)(_subject)
async def get_acl(admin: Any, a: argparse.Namespace) -> Any:
    auth, addrs = await _addrs(admin, a)
    return await auth.get_acl(addrs, a.subject)


def _list_acl_args(p: argparse.ArgumentParser) -> None:
    _target(p)
    p.add_argument("-s", "--subject", help="subjects containing this")
    p.add_argument("-r", "--resource", help="entries whose resource contains this")


@command("listAcl", "list ACLs", _print_per_broker)(_list_acl_args)
async def list_acl(admin: Any, a: argparse.Namespace) -> Any:
    auth, addrs = await _addrs(admin, a)
    return await auth.list_acls(addrs, a.subject, a.resource)

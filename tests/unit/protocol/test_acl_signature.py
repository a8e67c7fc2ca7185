"""The ACL request signature (protocol/acl_signature.py) against upstream's documented scheme,
including a signature computed by a Java program with the JDK only
(tests/unit/protocol/java/Sig.java)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.protocol.acl_signature import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    V4_9_3,
    SessionCredentials,
    content_to_sign,
    sign,
    verify,
)
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.remoting import (
    FrameDecoder,
    RemotingCommand,
    encode_command,
)

JAVA_SIG = Path(__file__).parent / "java" / "Sig.java"
ALICE = SessionCredentials("alice", "alice-secret", "token-7")


def java_request() -> RemotingCommand:
    """The request Sig.java signs, before signing (AccessKey/SecurityToken already added)."""
    ext = {
        "a": "pg-orders",
        "b": "Orders",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "KEYS\x01k-1\x02UNIQ_KEY\x01AC1\x02",
        ACCESS_KEY: "alice",
        SECURITY_TOKEN: "token-7",
    }
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body="héllo, 世界".encode())


@pytest.fixture(scope="module")
def java_signature() -> str:
    java = shutil.which("java")
    if java is None:
        pytest.skip("no `java` on PATH: the Java-signed test vector cannot be computed")
    out = subprocess.run(
        [java, str(JAVA_SIG)], capture_output=True, text=True, timeout=120, check=True
    )
    return out.stdout.strip()


def test_java_signed_request_is_verified(java_signature: str) -> None:
    cmd = java_request()
    cmd.ext_fields[SIGNATURE] = java_signature
    # through the wire and back, as a broker receives it
    dec = FrameDecoder()
    dec.feed(encode_command(cmd))
    received = dec.next_command()
    assert received is not None
    assert verify(received, "alice-secret")
    assert not verify(received, "other-secret")


def test_our_signature_matches_java(java_signature: str) -> None:
    cmd = java_request()
    del cmd.ext_fields[ACCESS_KEY], cmd.ext_fields[SECURITY_TOKEN]
    sign(cmd, ALICE)
    assert cmd.ext_fields[SIGNATURE] == java_signature


def test_content_is_sorted_values_then_body() -> None:
    cmd = RemotingCommand(10, ext_fields={"b": "2", "a": "1", SIGNATURE: "x"}, body=b"BODY")
    assert content_to_sign(cmd) == b"12BODY"
    expected = base64.b64encode(hmac.new(b"k", b"12BODY", hashlib.sha1).digest()).decode()
    sign(cmd, SessionCredentials("ak", "k"))
    assert cmd.ext_fields[ACCESS_KEY] == "ak"
    # AccessKey ("ak") sorts first and is part of the content
    assert cmd.ext_fields[SIGNATURE] != expected
    assert content_to_sign(cmd) == b"ak12BODY"


def test_any_change_breaks_the_signature() -> None:
    cmd = java_request()
    sign(cmd, ALICE)
    assert verify(cmd, "alice-secret")
    for mutate in (
        lambda c: c.ext_fields.__setitem__("b", "Other"),
        lambda c: setattr(c, "body", c.body + b"!"),
        lambda c: c.ext_fields.__setitem__(ACCESS_KEY, "bob"),
        lambda c: c.ext_fields.__setitem__("extra", "1"),
        lambda c: c.ext_fields.pop(SIGNATURE),
    ):
        c = java_request()
        sign(c, ALICE)
        mutate(c)
        assert not verify(c, "alice-secret")


def test_resigning_is_idempotent() -> None:
    a, b = java_request(), java_request()
    sign(a, ALICE)
    sign(b, ALICE)
    sign(b, ALICE)  # a retried request is signed again
    assert a.ext_fields == b.ext_fields


def test_old_clients_unique_key_flag_left_out_by_the_server() -> None:
    cmd = RemotingCommand(RequestCode.QUERY_MESSAGE, ext_fields={"topic": "T"}, version=V4_9_3)
    sign(cmd, ALICE)
    cmd.ext_fields[UNIQUE_MSG_QUERY_FLAG] = "true"  # added after signing by a 4.9.3 client
    assert verify(cmd, "alice-secret")
    cmd.version = V4_9_3 + 1
    assert not verify(cmd, "alice-secret")


@given(
    st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=12), max_size=6),
    st.binary(max_size=64),
    st.text(min_size=1, max_size=10),
)
def test_sign_then_verify_roundtrips(ext: dict[str, str], body: bytes, secret: str) -> None:
    ext.pop(SIGNATURE, None)
    cmd = RemotingCommand(10, ext_fields=dict(ext), body=body)
    sign(cmd, SessionCredentials("ak", secret))
    assert verify(cmd, secret)
    assert not verify(cmd, secret + "x")


def test_keys_outside_the_bmp_sort_as_java_does() -> None:
    # Java compares UTF-16 code units: U+1F600 (D83D DE00) sorts before U+FF5E
    cmd = RemotingCommand(10, ext_fields={"\uff5e": "bmp", "\U0001f600": "astral"})
    assert content_to_sign(cmd) == b"astralbmp"

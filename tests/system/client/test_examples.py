"""Every quickstart in examples/ runs against the shared local cluster, as a user runs it
(``python examples/X.py`` with ROCKETRIO_NAMESRV set), and the FastAPI-style service is driven
over HTTP inside an asyncio test: a web handler sends, the background consumer task consumes."""

from __future__ import annotations

import asyncio
import json
import runpy
import sys
import time

import pytest

from tests.harness.system import UpProcess, free_port_block
from tests.system.client.conftest import EXAMPLES

pytestmark = pytest.mark.system

# script -> a line its output must contain
SCRIPTS = {
    "asyncio_quickstart.py": "consumed 10 messages",
    "trio_quickstart.py": "consumed 10 messages",
    "plain_quickstart.py": "consumed 10 messages",
    "ordered.py": "order-2 steps [0, 1, 2, 3, 4]",
    "delayed.py": "delivered",
    "transactional.py": "consumed [b'order-1']",
    "pop.py": "processed [b'job-0', b'job-1', b'job-2', b'job-3', b'job-4']",
}


def test_every_example_is_run_here() -> None:
    on_disk = {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_")}
    assert on_disk == set(SCRIPTS) | {"fastapi_style.py"}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_example_runs(
    local_cluster: UpProcess,
    unique: str,
    script: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Run as ``python examples/<script>`` would (``__name__ == "__main__"``), in this process
    to save an interpreter start per example."""
    monkeypatch.setenv("ROCKETRIO_NAMESRV", local_cluster.namesrv)
    monkeypatch.setenv("ROCKETRIO_EXAMPLE_SUFFIX", unique)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.delitem(sys.modules, "_common", raising=False)  # it reads the env at import
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    out = capsys.readouterr().out
    assert SCRIPTS[script] in out, out


async def _http(port: int, method: str, path: str, body: bytes = b"") -> dict:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.0\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200"), head
    return json.loads(payload)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_fastapi_style_service(
    local_cluster: UpProcess, unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    fastapi_style = runpy.run_path(str(EXAMPLES / "fastapi_style.py"))  # not as __main__
    app = fastapi_style["OrdersApp"](local_cluster.namesrv)
    app.topic = f"WebOrders{unique}"
    port = free_port_block(1, extra=())
    started = asyncio.Event()
    server = asyncio.create_task(fastapi_style["serve"](app, port, started))
    try:
        await asyncio.wait_for(started.wait(), 30)
        sent = [await _http(port, "POST", "/orders", f"order {i}".encode()) for i in range(3)]
        assert all(s["status"] == "SEND_OK" for s in sent)
        deadline = time.monotonic() + 30
        while len((await _http(port, "GET", "/processed"))["processed"]) < 3:
            assert time.monotonic() < deadline, "the background consumer did not consume"
            await asyncio.sleep(0.1)
        assert sorted(app.processed) == ["order 0", "order 1", "order 2"]
    finally:
        server.cancel()
        with pytest.raises(asyncio.CancelledError):
            await server

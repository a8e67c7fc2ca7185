"""A FastAPI-style asyncio service: the producer and a background consumer task start with the
app (its lifespan), a web handler awaits ``producer.send`` inside the request, on the app's own
event loop. Written on asyncio's streams so it needs no web framework; with FastAPI the same
code goes into ``lifespan`` and an ``async def`` route.

    ROCKETRIO_NAMESRV=127.0.0.1:9876 python examples/fastapi_style.py   # serves :8000
    curl -XPOST localhost:8000/orders -d 'two coffees'; curl localhost:8000/processed
"""

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator

from _common import NAMESRV, name

from rocketrio.client import ConsumeStatus, Message, Producer, PushConsumer


class OrdersApp:
    def __init__(self, namesrv: str = NAMESRV) -> None:
        self.namesrv = namesrv
        self.topic = name("WebOrders")
        self.producer = Producer(name("web_producer"), namesrv)
        self.processed: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Startup: the producer and the background consumer task; shutdown: both stop."""
        stop = asyncio.Event()
        async with self.producer:
            consumer_task = asyncio.create_task(self._consume(stop))
            try:
                yield
            finally:
                stop.set()
                await consumer_task

    async def _consume(self, stop: asyncio.Event) -> None:
        def listener(msgs: list) -> ConsumeStatus:
            self.processed.extend(m.body.decode() for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            name("web_group"), self.namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        )
        consumer.subscribe(self.topic)
        consumer.register_listener(listener)
        async with consumer:
            await stop.wait()

    # -- the routes
    async def post_order(self, body: bytes) -> dict[str, str]:
        result = await self.producer.send(Message(self.topic, body, tags="order"))
        return {"msg_id": result.msg_id, "status": result.send_status.name}

    async def get_processed(self) -> dict[str, list[str]]:
        return {"processed": self.processed}

    # -- a tiny HTTP/1.0 server (what uvicorn does for FastAPI)
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        method, path, _ = head.split(" ", 2)
        length = next(
            (
                int(h.split(":")[1])
                for h in head.split("\r\n")
                if h.lower().startswith("content-length")
            ),
            0,
        )
        body = await reader.readexactly(length)
        if method == "POST" and path == "/orders":
            status, reply = "200 OK", await self.post_order(body)
        elif method == "GET" and path == "/processed":
            status, reply = "200 OK", await self.get_processed()
        else:
            status, reply = "404 Not Found", {"error": path}
        data = json.dumps(reply).encode()
        writer.write(f"HTTP/1.0 {status}\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
        await writer.drain()
        writer.close()


async def serve(app: OrdersApp, port: int, started: asyncio.Event | None = None) -> None:
    async with app.lifespan():
        server = await asyncio.start_server(app.handle, "127.0.0.1", port)
        async with server:
            if started is not None:
                started.set()
            await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(OrdersApp(), int(os.environ.get("PORT", "8000"))))

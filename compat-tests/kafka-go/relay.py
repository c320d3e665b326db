#!/usr/bin/env python3
"""A TCP relay from a fixed address to the node under test.

kafka-go's tests name their broker as the literal "localhost:9092" (no setting to change it), while
the report card's node listens on a free port. Only the first hop goes through the relay: the
node's metadata advertises its own address, and the clients connect there for everything after
bootstrap (the tests that talk to a raw `Conn` keep the relayed connection throughout).

usage: relay.py <listen host:port> <target host:port> <ready file>
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def main(listen: str, target: str, ready: Path) -> None:
    lhost, lport = listen.rsplit(":", 1)
    thost, tport = target.rsplit(":", 1)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(thost, int(tport))
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(serve, lhost, int(lport), reuse_address=True)
    ready.write_text(listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
    except OSError as e:  # the port is taken: say so, the suite cannot run
        sys.exit(f"relay: cannot listen on {sys.argv[1]}: {e}")

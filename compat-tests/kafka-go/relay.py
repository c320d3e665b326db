#!/usr/bin/env python3
"""A TCP relay from a fixed address to the node under test.

kafka-go's tests name their broker as the literal "localhost:9092" (and their SASL_PLAINTEXT one as
"localhost:9093"; no setting changes either), while the report card's node listens on free ports.
run.sh starts one relay per address; the node advertises those addresses, so every connection of
the tests goes through a relay, as they would reach kafka-go's own dockerised broker.

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

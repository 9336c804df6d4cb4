#!/usr/bin/env python3
"""tls_echo_check.py PORT: judges a TLS echo server on 127.0.0.1:PORT for test_peers.sh.

1. Two connections at once, sending 6 MB and 1 MB in odd-sized writes and reading, with a 4 KiB
   receive buffer, only from 0.3 s on: on the first more than a socket's send buffer (tcp_wmem's
   4 MB at most) is owed, so the server's writes go partial and it must hold the rest (OpenSSL:
   and write it again with the same bytes) and pause reading while it serves the other (1 MB
   alone does not get there: strace shows no EPOLLOUT). Every byte must come back in order.
2. The client's close_notify is answered with the server's (a clean TLS close both ways).
3. A bare EOF (the client's FIN, no close_notify) is answered with a close_notify too.
4. A second connection offering the first one's session ticket resumes (TLS 1.3), as
   tests/bench/tls_server.sh's resumed handshakes need.

Prints one line per failure (nothing when all hold); exit 1 on a failure."""
import asyncio
import random
import socket
import ssl
import sys

PORT = int(sys.argv[1])
CTX = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
CTX.check_hostname = False
CTX.verify_mode = ssl.CERT_NONE  # a certificate made for the test
CTX.minimum_version = ssl.TLSVersion.TLSv1_3
failures = []


async def bulk(i):
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.setblocking(False)
    await asyncio.get_running_loop().sock_connect(raw, ("127.0.0.1", PORT))
    reader, writer = await asyncio.open_connection(sock=raw, ssl=CTX, server_hostname="localhost")
    rnd = random.Random(i)
    data = rnd.randbytes((1_000_000 if i else 6_000_000) + i)

    async def send():
        off = 0
        while off < len(data):
            n = rnd.randint(1, 20000)
            writer.write(data[off:off + n])
            off += n
            await writer.drain()

    sender = asyncio.create_task(send())
    await asyncio.sleep(0.3)  # let the buffers fill and the server's writes go partial
    got = await reader.readexactly(len(data))
    await sender
    writer.close()
    if got != data:
        at = next(k for k in range(len(data)) if got[k] != data[k])
        failures.append(f"connection {i}: the echo differs from what was sent at byte {at}")


async def bulk_all():
    await asyncio.wait_for(asyncio.gather(*(bulk(i) for i in range(2))), 30)


class Mem:
    """A TLS client over memory BIOs on a blocking socket: the TCP FIN is in its own hands."""

    def __init__(self, session=None):
        self.raw = socket.create_connection(("127.0.0.1", PORT), timeout=10)
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = CTX.wrap_bio(self.inc, self.out, server_hostname="localhost", session=session)
        self.pump(self.obj.do_handshake)

    def pump(self, fn):
        while True:
            try:
                r = fn()
                self.flush()
                return r
            except ssl.SSLWantReadError:
                self.flush()
                d = self.raw.recv(65536)
                if d:
                    self.inc.write(d)
                else:
                    self.inc.write_eof()

    def flush(self):
        d = self.out.read()
        if d:
            self.raw.sendall(d)

    def echo(self, msg):
        self.pump(lambda: self.obj.write(msg))
        got = b""
        while len(got) < len(msg):
            got += self.pump(lambda: self.obj.read(len(msg) - len(got)))
        return got


def closes():
    c = Mem()
    if c.echo(b"ping") != b"ping":
        failures.append("a 4-byte echo came back different")
    try:
        c.pump(c.obj.unwrap)  # our close_notify out, theirs in
    except ssl.SSLError as e:
        failures.append(f"the client's close_notify: no close_notify back ({e})")
    c.raw.close()
    c = Mem()
    c.echo(b"pong")
    c.raw.shutdown(socket.SHUT_WR)  # a bare EOF
    try:
        # b"": the close_notify (CPython's read returns nothing once it has come; a bare
        # EOF from the server is SSLEOFError instead)
        if c.pump(lambda: c.obj.read(1)) != b"":
            failures.append("after a bare EOF: data, not a close_notify")
    except ssl.SSLError as e:
        failures.append(f"after a bare EOF: no close_notify ({e})")
    c.raw.close()


def resumes():
    c = Mem()
    c.echo(b"t")  # the tickets come after the handshake: read something to take them
    first = c.obj.session
    c.raw.close()
    c = Mem(session=first)
    c.echo(b"t")
    if not c.obj.session_reused:
        failures.append("a second connection offering the first one's ticket did not resume")
    if c.obj.version() != "TLSv1.3":
        failures.append(f"negotiated {c.obj.version()}, not TLSv1.3")
    c.raw.close()


for step in (lambda: asyncio.run(bulk_all()), closes, resumes):
    try:
        step()
    except (OSError, ssl.SSLError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
        failures.append(f"{type(e).__name__}: {e}")
for f in failures:
    print(f)
sys.exit(1 if failures else 0)

#!/usr/bin/env python3
"""Writes fuzz_tls's seeds into tests/fuzz/corpus/tls/ (run from anywhere; committed output).

The ClientHellos are real ones: Python's ssl module (OpenSSL) as a client on memory BIOs, its
first flight read before any server answers. The layout of an input is fuzz_tls.c's: a mode
byte (even: raw client bytes; odd: a live client), then big-endian u32 choices, then bytes."""
import os
import ssl
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "tls")


def client_hello(version, alpn=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = version
    if alpn:
        ctx.set_alpn_protocols(alpn)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="fuzz.test")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


# Each choice is fz_range's: lo + u32 % (hi - lo + 1), so the u32 written is the value - lo.
def raw(pair, rd, data):
    return b"\x00" + struct.pack(">II", pair - 64, rd - 1) + data


def live(v13, pair, rd, piece, flip, xor, payload):
    choices = struct.pack(">IIII", pair - 64, rd - 1, piece - 1, flip)
    return b"\x01" + bytes([v13]) + choices + bytes([xor]) + payload


SEEDS = {
    "raw-clienthello-tls13": raw(20000, 4096, client_hello(ssl.TLSVersion.TLSv1_3, ["h2", "http/1.1"])),
    "raw-clienthello-tls12": raw(300, 100, client_hello(ssl.TLSVersion.TLSv1_2)),
    "raw-http-request": raw(20000, 4096, b"GET / HTTP/1.1\r\nHost: fuzz.test\r\n\r\n"),
    "raw-garbage": raw(64, 1, bytes(range(256)) * 2),
    "raw-oversized-record": raw(20000, 4096, b"\x16\x03\x01\x48\x01" + b"\x01" * 64),
    "live-tls13-echo": live(1, 20000, 16384, 16384, 0, 0, b"hello over tls\n" * 20),
    "live-tls12-small-pair": live(0, 64, 7, 100, 0, 0, b"x" * 3000),
    "live-tls13-flip-finished": live(1, 4096, 4096, 4096, 400, 0x40, b"abc" * 100),
    "live-tls13-flip-appdata": live(1, 4096, 4096, 4096, 650, 0x01, b"abc" * 100),
}

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)

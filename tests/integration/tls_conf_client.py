#!/usr/bin/env python3
"""tls_conf_client.py PORT [options]: one TLS client of test_tls_conf, Python's ssl module (a TLS
stack the daemon's tests did not write). It connects to 127.0.0.1:PORT, checks the server's
certificate against --ca, sends a line and reads its echo, and prints what it saw, one fact a
line: "handshake ok", "version TLSv1.3", "cipher NAME", "alpn NAME" (or "alpn none"),
"subject O=...,CN=...", "echo ok" (or "echo lost: WHY"), and with --resume, after a second
connection offering the first one's session, "reused True" or "reused False". A failure prints
"error: WHY" and ends it; the exit status is 0 unless the arguments are wrong."""
import argparse
import socket
import ssl
import sys

VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def context(a):
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.check_hostname = False
    c.load_verify_locations(a.ca)
    if a.cert:
        c.load_cert_chain(a.cert, a.key)
    if a.alpn:
        c.set_alpn_protocols(a.alpn.split(","))
    if a.min:
        c.minimum_version = VERSIONS[a.min]
    if a.max:
        c.maximum_version = VERSIONS[a.max]
    if a.ciphers:
        c.set_ciphers(a.ciphers)
    return c


SHORT = {"commonName": "CN", "organizationName": "O"}


def subject(cert):
    return ",".join("%s=%s" % (SHORT.get(k, k), v) for rdn in cert.get("subject", ()) for k, v in rdn)


def echo(s, line):
    s.sendall(line)
    got = b""
    while len(got) < len(line):
        b = s.recv(len(line) - len(got))
        if not b:
            return "echo lost: the server closed after %d bytes" % len(got)
        got += b
    return "echo ok" if got == line else "echo lost: other bytes came back"


def one(a, c, session=None):
    raw = socket.create_connection(("127.0.0.1", a.port), timeout=a.timeout)
    s = c.wrap_socket(raw, server_hostname=a.sni, session=session)
    print("handshake ok")
    print("version", s.version())
    print("cipher", s.cipher()[0])
    print("alpn", s.selected_alpn_protocol() or "none")
    print("subject", subject(s.getpeercert()))
    # TLS 1.3: the client's certificate is judged after the client's Finished, and the
    # session tickets come after the handshake: the echo is where either shows
    try:
        print(echo(s, b"hello over tls\n"))
    except (ssl.SSLError, OSError) as e:
        print("echo lost:", e)
    if session:
        print("reused", s.session_reused)
    sess = s.session
    s.close()
    return sess


def main():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("--ca", required=True)
    p.add_argument("--sni")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--alpn")
    p.add_argument("--min", choices=VERSIONS)
    p.add_argument("--max", choices=VERSIONS)
    p.add_argument("--ciphers")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--timeout", type=float, default=10)
    a = p.parse_args()
    try:
        c = context(a)
        sess = one(a, c)
        if a.resume:
            one(a, c, sess)
    except (ssl.SSLError, OSError) as e:
        print("error:", e)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

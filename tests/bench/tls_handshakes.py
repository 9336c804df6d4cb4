#!/usr/bin/env python3
"""TLS handshakes one after another (a closed loop, one connection at a time) against
127.0.0.1:PORT for SECONDS: connect, handshake, send one byte, read what comes back (an echo
server's echo, nginx's `return` text; at least a byte), close. Reading makes the client take the
server's TLS 1.3 session tickets (they come after the handshake); with --resume every connection after the first offers the ticket the one before it
received, as a browser does. For tests/bench/tls_server.sh where lfbench has no --tls; openssl
s_time cannot stand in for the resumed case: s_time -reuse reads nothing after the handshake,
so under TLS 1.3 it never holds a ticket and every handshake is a full one.

    tls_handshakes.py PORT SECONDS [--resume]

Prints one line: handshakes=N resumed=N errors=N seconds=S. Exits 1 when nothing succeeded or
when --resume resumed none (the server gives no tickets), 2 on bad usage."""
import socket
import ssl
import sys
import time


def main():
    args = sys.argv[1:]
    resume = "--resume" in args
    args = [a for a in args if a != "--resume"]
    try:
        port, seconds = int(args[0]), float(args[1])
        if len(args) != 2 or not 0 < port < 65536 or seconds <= 0:
            raise ValueError
    except (ValueError, IndexError):
        sys.exit("usage: tls_handshakes.py PORT SECONDS [--resume]")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # certificates made for the run
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    done = reused = errors = 0
    sess, last_err = None, ""
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                with ctx.wrap_socket(raw, session=sess if resume else None) as s:
                    s.sendall(b"x")
                    if not s.recv(1):
                        raise OSError("the server closed without answering")
                    done += 1
                    reused += s.session_reused
                    if resume:
                        sess = s.session
        except (OSError, ssl.SSLError) as e:
            errors += 1
            last_err = str(e)
            sess = None
            if errors > 100 and errors > done:
                break
    took = time.monotonic() - start
    print(f"handshakes={done} resumed={reused} errors={errors} seconds={took:.3f}")
    if errors:
        print(f"tls_handshakes.py: last error: {last_err}", file=sys.stderr)
    sys.exit(0 if done and (reused or not resume) else 1)


if __name__ == "__main__":
    main()

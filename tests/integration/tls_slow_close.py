#!/usr/bin/env python3
"""A TLS echo server (Python's ssl) that answers a client's close_notify late: it reads and
echoes until the client's close_notify, waits DELAY seconds, then sends its own close_notify
and closes. Serves one connection on 127.0.0.1:PORT, prints "ready" once listening.

    tls_slow_close.py CERT KEY PORT DELAY
"""
import socket
import ssl
import sys
import time

cert, key, port, delay = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(8)
print("ready", flush=True)
raw, _ = ls.accept()
conn = ctx.wrap_socket(raw, server_side=True)
while True:
    data = conn.recv(65536)
    if not data:  # the client's close_notify
        break
    conn.sendall(data)
time.sleep(delay)
try:
    conn.unwrap()  # our close_notify
except (OSError, ssl.SSLError):
    pass
raw.close()

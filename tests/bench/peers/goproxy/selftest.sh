#!/usr/bin/env bash
# Self-test of goproxy: builds it, starts throwaway python3 backends on
# 127.0.0.1 (line echo, len32 echo, one that closes after each reply, one that
# never answers, one that dies mid-frame, and a port nobody listens on), sends
# a few requests through both framings and checks the answers, the ERR frames,
# that nothing hangs, and that SIGTERM exits 0 within a second. A few seconds.
set -euo pipefail
cd "$(dirname "$0")"
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
"$GO" build -o goproxy .
exec python3 - "$PWD/goproxy" <<'PY'
import socket, socketserver, struct, subprocess, sys, threading, time, signal

BIN = sys.argv[1]
T0 = time.time()

def serve(handler):
    class S(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True
    srv = S(("127.0.0.1", 0), handler)
    srv.hits = 0
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, "127.0.0.1:%d" % srv.server_address[1]

def recv_exact(f, n):
    b = f.read(n)
    return b if b is not None and len(b) == n else None

class LineEcho(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            self.server.hits += 1
            self.wfile.write(line)

class LineCloser(socketserver.StreamRequestHandler):  # one reply, then close
    def handle(self):
        line = self.rfile.readline()
        if line:
            self.server.hits += 1
            self.wfile.write(line)

class Sink(socketserver.StreamRequestHandler):  # reads, never answers
    def handle(self):
        while self.rfile.read1(65536):
            pass

class Len32Echo(socketserver.StreamRequestHandler):
    def handle(self):
        while True:
            h = recv_exact(self.rfile, 4)
            if h is None: return
            body = recv_exact(self.rfile, struct.unpack(">I", h)[0])
            if body is None: return
            self.server.hits += 1
            self.wfile.write(h + body)

class Len32Half(socketserver.StreamRequestHandler):  # header says 100, sends 3, closes
    def handle(self):
        if recv_exact(self.rfile, 4) is not None:
            self.wfile.write(struct.pack(">I", 100) + b"abc")

def down_addr():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); a = "127.0.0.1:%d" % s.getsockname()[1]; s.close()
    return a

fails = 0
def check(name, ok, detail=""):
    global fails
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else "  " + repr(detail)[:300]))
    if not ok: fails += 1

class Proxy:
    def __init__(self, backends, framing, *extra):
        self.p = subprocess.Popen([BIN, "-listen", "127.0.0.1:0", "-backends", ",".join(backends),
                                   "-framing", framing] + list(extra), stderr=subprocess.PIPE)
        line = self.p.stderr.readline().decode()
        assert line.startswith("listening on 127.0.0.1:"), line
        self.port = int(line.rsplit(":", 1)[1])
    def conn(self):
        c = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        return c, c.makefile("rb")
    def stop(self):
        t = time.time(); self.p.send_signal(signal.SIGTERM)
        try: rc = self.p.wait(2)
        except subprocess.TimeoutExpired: self.p.kill(); rc = "hung"
        return rc, time.time() - t

def l32(b): return struct.pack(">I", len(b)) + b
def read_l32(f):
    h = recv_exact(f, 4)
    return None if h is None else recv_exact(f, struct.unpack(">I", h)[0])

# ---- line framing ----
e1, a1 = serve(LineEcho); e2, a2 = serve(LineEcho); down = down_addr()
p = Proxy([a1, a2], "line")
c, f = p.conn()
got = []
for i in range(6):
    c.sendall(b"hello %d\n" % i); got.append(f.readline())
check("line: 6 requests echoed", got == [b"hello %d\n" % i for i in range(6)], got)
check("line: round-robin over both backends", e1.hits == 3 and e2.hits == 3, (e1.hits, e2.hits))
c.sendall(b"".join(b"pipe %d\n" % i for i in range(200)))
got = [f.readline() for _ in range(200)]
check("line: 200 pipelined requests, in order", got == [b"pipe %d\n" % i for i in range(200)])
big = b"x" * 300000 + b"\n"
c.sendall(big)
check("line: 300 kB line", f.readline() == big)
c.close()
rc, dt = p.stop()
check("SIGTERM: exit 0 within 1 s (%.2f s)" % dt, rc == 0 and dt < 1, rc)

p = Proxy([a1, down], "line")
c, f = p.conn()
got = []
for i in range(4):
    c.sendall(b"req %d\n" % i); got.append(f.readline())
check("line: down backend answers ERR, client goes on",
      got[0] == b"req 0\n" and got[2] == b"req 2\n" and
      got[1].startswith(b"ERR backend %s: dial" % down.encode()) and got[3].startswith(b"ERR backend"), got)
print("     " + got[1].decode().rstrip())
c.close(); p.stop()

cl, acl = serve(LineCloser)
p = Proxy([acl], "line")
c, f = p.conn()
got = []
for i in range(5):
    c.sendall(b"again %d\n" % i); got.append(f.readline()); time.sleep(0.05)
check("line: backend closing idle pooled conns -> no error (retry)",
      got == [b"again %d\n" % i for i in range(5)], got)
c.close(); p.stop()

sk, ask = serve(Sink)
p = Proxy([a1, ask], "line", "-timeout", "300ms")
c, f = p.conn()
t = time.time(); c.sendall(b"a\nb\nc\n"); got = [f.readline() for _ in range(3)]; dt = time.time() - t
check("line: silent backend -> ERR after -timeout (%.2f s)" % dt,
      got[0] == b"a\n" and got[1] == b"ERR backend %s: read timeout\n" % ask.encode() and got[2] == b"c\n"
      and dt < 1.5, got)
c.close(); p.stop()

# ---- len32 framing ----
l1, b1 = serve(Len32Echo); l2, b2 = serve(Len32Echo); half, bh = serve(Len32Half)
p = Proxy([b1, b2], "len32")
c, f = p.conn()
got = []
for i in range(4):
    c.sendall(l32(b"msg %d" % i)); got.append(read_l32(f))
check("len32: 4 requests echoed", got == [b"msg %d" % i for i in range(4)], got)
c.sendall(b"".join(l32(b"p%d" % i) for i in range(100)) + l32(b""))
got = [read_l32(f) for _ in range(101)]
check("len32: 100 pipelined + empty frame, in order", got == [b"p%d" % i for i in range(100)] + [b""])
big = bytes(range(256)) * 4096
c.sendall(l32(big))
check("len32: 1 MiB frame", read_l32(f) == big)
c.sendall(struct.pack(">I", (16 << 20) + 1))
try: r = c.recv(1)
except OSError as e: r = b""
check("len32: length over 16 MiB -> client closed", r == b"", r)
c.close(); p.stop()

p = Proxy([b1, down, bh], "len32")
c, f = p.conn()
got = []
for i in range(4):
    c.sendall(l32(b"q%d" % i)); got.append(read_l32(f))
check("len32: down backend and EOF mid-frame -> ERR frames, client goes on",
      got[0] == b"q0" and got[1].startswith(b"ERR backend %s: dial" % down.encode()) and
      got[2] == b"ERR backend %s: read: EOF mid-frame" % bh.encode() and got[3] == b"q3", got)
c.close()
rc, dt = p.stop()
check("SIGTERM (len32): exit 0 within 1 s (%.2f s)" % dt, rc == 0 and dt < 1, rc)

print("selftest: %s (%.1f s)" % ("FAILED %d" % fails if fails else "all passed", time.time() - T0))
sys.exit(1 if fails else 0)
PY

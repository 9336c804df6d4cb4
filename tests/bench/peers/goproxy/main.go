// goproxy: a TCP request/response proxy with one goroutine per client
// connection, using only the standard library's net package (so the Go
// runtime's netpoller does the multiplexing). It is the asynchronous-runtime
// peer of lfepolld running lua/proxy.lua in the benchmarks.
//
// Each request frame read from a client is sent, unchanged, to one backend
// (round-robin), exactly one response frame is read back and written to the
// client. Requests of one client are handled in order. Backend connections
// are kept in a small idle pool per backend. See README.md.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// maxFrame bounds a frame's payload (len32) or a whole line (line framing).
const maxFrame = 16 << 20

const bufSize = 16 << 10

var errTooLarge = errors.New("frame too large")

type framing int

const (
	framingLine framing = iota
	framingLen32
)

// readFrame reads one whole frame from r into buf[:0] (growing it as needed)
// and returns it as it appeared on the wire: the line with its "\n", or the
// 4-byte length followed by the payload. io.EOF means r ended before the
// first byte of a frame; io.ErrUnexpectedEOF means it ended inside one.
func readFrame(r *bufio.Reader, f framing, buf []byte) ([]byte, error) {
	buf = buf[:0]
	if f == framingLine {
		for {
			chunk, err := r.ReadSlice('\n')
			if len(buf)+len(chunk) > maxFrame {
				return buf, errTooLarge
			}
			buf = append(buf, chunk...)
			switch {
			case err == nil:
				return buf, nil
			case err == bufio.ErrBufferFull:
				continue
			case err == io.EOF && len(buf) > 0:
				return buf, io.ErrUnexpectedEOF
			default:
				return buf, err
			}
		}
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return buf, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return buf, errTooLarge
	}
	total := 4 + int(n)
	if cap(buf) < total {
		buf = make([]byte, 0, total)
	}
	buf = append(buf, hdr[:]...)
	buf = buf[:total]
	if _, err := io.ReadFull(r, buf[4:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return buf[:4], err
	}
	return buf, nil
}

// errorFrame builds the frame answered to a client when a backend fails:
// "ERR backend ADDR: REASON\n" for line framing, the same text without the
// newline as the payload of a len32 frame.
func errorFrame(f framing, addr, reason string) []byte {
	reason = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, reason)
	text := "ERR backend " + addr + ": " + reason
	if f == framingLine {
		return []byte(text + "\n")
	}
	out := make([]byte, 4, 4+len(text))
	binary.BigEndian.PutUint32(out, uint32(len(text)))
	return append(out, text...)
}

type backendConn struct {
	c net.Conn
	r *bufio.Reader
}

type backend struct {
	addr string
	idle chan *backendConn // at most -pool idle connections
}

type proxy struct {
	framing  framing
	backends []*backend
	next     atomic.Uint64
	timeout  time.Duration
	dialer   net.Dialer
}

func (p *proxy) dial(b *backend) (*backendConn, error) {
	c, err := p.dialer.Dial("tcp", b.addr)
	if err != nil {
		return nil, err
	}
	return &backendConn{c: c, r: bufio.NewReaderSize(c, bufSize)}, nil
}

// put returns a healthy connection to its backend's pool, or closes it when
// the pool is full.
func (b *backend) put(bc *backendConn) {
	select {
	case b.idle <- bc:
	default:
		bc.c.Close()
	}
}

// exchangeError says what failed and whether a retry on a fresh connection
// is allowed (the write or the first read failed, not because of a timeout).
type exchangeError struct {
	reason    string
	retryable bool
}

// reason turns a network error into a short, address-free text.
func reason(op string, err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return op + " timeout"
	}
	if err == io.EOF {
		return op + ": connection closed"
	}
	if err == io.ErrUnexpectedEOF {
		return op + ": EOF mid-frame"
	}
	if err == errTooLarge {
		return op + ": response frame too large"
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return op + ": " + oe.Err.Error()
	}
	return op + ": " + err.Error()
}

// exchange sends req on bc and reads one response frame into resp. On error
// the caller must close bc.
func (p *proxy) exchange(bc *backendConn, req, resp []byte) ([]byte, *exchangeError) {
	if err := bc.c.SetDeadline(time.Now().Add(p.timeout)); err != nil {
		return resp, &exchangeError{reason("deadline", err), true}
	}
	if _, err := bc.c.Write(req); err != nil {
		var ne net.Error
		timeout := errors.As(err, &ne) && ne.Timeout()
		return resp, &exchangeError{reason("write", err), !timeout}
	}
	// The first byte separates "the pooled connection was already dead"
	// (retry) from a failure in the middle of a response (no retry).
	if _, err := bc.r.Peek(1); err != nil {
		var ne net.Error
		timeout := errors.As(err, &ne) && ne.Timeout()
		return resp, &exchangeError{reason("read", err), !timeout}
	}
	resp, err := readFrame(bc.r, p.framing, resp)
	if err != nil {
		return resp, &exchangeError{reason("read", err), false}
	}
	return resp, nil
}

// roundTrip answers one request: it returns the backend's response frame,
// or an error frame. resp is a reusable buffer.
func (p *proxy) roundTrip(req, resp []byte) []byte {
	b := p.backends[(p.next.Add(1)-1)%uint64(len(p.backends))]
	var bc *backendConn
	pooled := false
	select {
	case bc = <-b.idle:
		pooled = true
	default:
	}
	for {
		if bc == nil {
			var err error
			if bc, err = p.dial(b); err != nil {
				return errorFrame(p.framing, b.addr, reason("dial", err))
			}
		}
		out, xerr := p.exchange(bc, req, resp)
		if xerr == nil {
			if bc.r.Buffered() > 0 {
				bc.c.Close() // more than one response: out of step, drop it
			} else {
				b.put(bc)
			}
			return out
		}
		bc.c.Close()
		bc = nil
		if pooled && xerr.retryable {
			pooled = false // one retry, on a freshly dialed connection
			continue
		}
		return errorFrame(p.framing, b.addr, xerr.reason)
	}
}

func (p *proxy) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, bufSize)
	w := bufio.NewWriterSize(c, bufSize)
	var req, resp []byte
	for {
		var err error
		req, err = readFrame(r, p.framing, req)
		if err != nil {
			// EOF, a truncated or oversized request: flush what is
			// answered and close the client.
			w.Flush()
			return
		}
		out := p.roundTrip(req, resp)
		if cap(req) > 4*bufSize+4 {
			req = nil // do not keep a big request's buffer for the connection's life
		}
		if cap(out) > cap(resp) && cap(out) <= 4*bufSize+4 {
			resp = out[:0] // keep a grown buffer unless it is big
		}
		if _, err := w.Write(out); err != nil {
			return
		}
		// Pipelined requests already read are answered in one write.
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	backendsFlag := flag.String("backends", "", "comma-separated backend addresses, e.g. 127.0.0.1:7001,127.0.0.1:7002")
	framingFlag := flag.String("framing", "line", "request/response framing: line or len32")
	pool := flag.Int("pool", 64, "idle connections kept per backend")
	timeout := flag.Duration("timeout", 2*time.Second, "dial timeout and deadline for each backend exchange")
	flag.Parse()

	fail := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "goproxy: "+format+"\n", a...)
		os.Exit(2)
	}
	if flag.NArg() != 0 {
		fail("unexpected argument %q", flag.Arg(0))
	}
	p := &proxy{timeout: *timeout, dialer: net.Dialer{Timeout: *timeout}}
	switch *framingFlag {
	case "line":
		p.framing = framingLine
	case "len32":
		p.framing = framingLen32
	default:
		fail("-framing must be line or len32, not %q", *framingFlag)
	}
	if *pool < 0 {
		fail("-pool must be >= 0")
	}
	if *timeout <= 0 {
		fail("-timeout must be > 0")
	}
	for _, a := range strings.Split(*backendsFlag, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			fail("bad backend %q: %v", a, err)
		}
		p.backends = append(p.backends, &backend{addr: a, idle: make(chan *backendConn, *pool)})
	}
	if len(p.backends) == 0 {
		fail("-backends is required")
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "goproxy: %v\n", err)
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		ln.Close() // stop accepting; Accept then returns net.ErrClosed
	}()
	fmt.Fprintf(os.Stderr, "listening on %s\n", ln.Addr())

	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				os.Exit(0) // SIGTERM/SIGINT; open connections end with the process
			}
			// e.g. EMFILE: back off a little and keep serving
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go p.serve(c)
	}
}

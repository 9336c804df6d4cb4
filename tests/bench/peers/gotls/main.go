// go_tls_echo: the Go TLS echo peer, written as a Go user would: crypto/tls's listener over the
// net package, one goroutine per connection, the standard library's defaults (TLS 1.2 and 1.3,
// X25519 first, session tickets with keys it makes and rotates itself).
//
//	go_tls_echo --cert CHAIN.pem --key KEY.pem --port PORT [--procs N]
//
// --procs sets GOMAXPROCS; without it Go takes the CPUs of the affinity mask (1 under
// taskset -c 0). Close sends the client a close_notify once it has closed or sent its own.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"time"
)

func serve(c net.Conn) {
	defer c.Close() // tls.Conn.Close sends close_notify, then closes the socket
	buf := make([]byte, 16<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			// Write returns only when all n bytes are written, or on an error.
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF on the client's close_notify or its bare EOF
			return
		}
	}
}

func fail(code int, format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "go_tls_echo: "+format+"\n", a...)
	os.Exit(code)
}

func main() {
	const usage = "usage: go_tls_echo --cert CHAIN.pem --key KEY.pem --port PORT [--procs N]"
	fs := flag.NewFlagSet("go_tls_echo", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // one line of our own, not the flag package's table
	cert := fs.String("cert", "", "certificate chain, PEM")
	key := fs.String("key", "", "private key, PEM")
	port := fs.Int("port", 0, "port on 127.0.0.1")
	procs := fs.Int("procs", 0, "GOMAXPROCS (default: the CPUs of the affinity mask)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		fail(2, "%v (%s)", err, usage)
	}
	if *cert == "" || *key == "" || *port < 1 || *port > 65535 || *procs < 0 || fs.NArg() > 0 {
		fail(2, "--cert, --key and --port (1 to 65535) are needed (%s)", usage)
	}
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil { // a missing file, bad PEM, or a key that does not match
		fail(1, "%s, %s: %v", *cert, *key, err)
	}
	ln, err := tls.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port),
		&tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		fail(1, "%v", err)
	}
	for {
		c, err := ln.Accept() // the handshake runs on the connection's first Read
		if err != nil {       // e.g. EMFILE: keep serving the connections there are, without spinning
			fmt.Fprintf(os.Stderr, "go_tls_echo: accept: %v\n", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go serve(c)
	}
}

// go_echo: the Go echo peer, written as a Go user would: the standard library's net package,
// one goroutine per connection, the runtime's netpoller doing the multiplexing.
//
//	go_echo PORT [PROCS]
//
// PROCS sets GOMAXPROCS; without it Go takes the CPUs of the affinity mask (1 under
// taskset -c 0). Go sets TCP_NODELAY on every TCP connection by default.
package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"time"
)

func serve(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			// Write returns only when all n bytes are written, or on an error.
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF once the client closes
			return
		}
	}
}

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "go_echo: "+format+"\n", a...)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fail("usage: go_echo PORT [PROCS]")
	}
	if port, err := strconv.Atoi(os.Args[1]); err != nil || port < 1 || port > 65535 {
		fail("port %q: want 1 to 65535", os.Args[1])
	}
	if len(os.Args) == 3 {
		procs, err := strconv.Atoi(os.Args[2])
		if err != nil || procs < 1 {
			fail("PROCS %q: want a number of threads, 1 or more", os.Args[2])
		}
		runtime.GOMAXPROCS(procs)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "go_echo: %v\n", err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil { // e.g. EMFILE: keep serving the connections there are, without spinning
			fmt.Fprintf(os.Stderr, "go_echo: accept: %v\n", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go serve(c)
	}
}

// Command forward relays TCP connections from one address to another, port
// by port: the local stack's servers listen on 127.0.0.1, and pods of the
// local cluster reach them at the node's bridge address through it. It
// stays on this machine (both sides are local addresses).
//
//	go run ./hack/forward -listen 10.244.0.1 -to 127.0.0.1 -ports 25432,26379,28081
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

func main() {
	listen := flag.String("listen", "", "address to listen on (e.g. the node's bridge IP)")
	to := flag.String("to", "127.0.0.1", "address to relay to")
	ports := flag.String("ports", "", "comma-separated TCP ports")
	flag.Parse()
	if err := run(*listen, *to, *ports); err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		os.Exit(1)
	}
}

func run(listen, to, ports string) error {
	if net.ParseIP(listen) == nil || net.ParseIP(to) == nil || ports == "" {
		return errors.New("-listen and -to must be IP addresses and -ports is required")
	}
	var ls []net.Listener
	for _, p := range strings.Split(ports, ",") {
		if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("-ports: %q is not a port", p)
		}
		l, err := net.Listen("tcp", net.JoinHostPort(listen, p))
		if err != nil {
			return err
		}
		ls = append(ls, l)
		go serve(l, net.JoinHostPort(to, p))
	}
	log.Printf("relaying %s:{%s} to %s", listen, ports, to)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	for _, l := range ls {
		_ = l.Close()
	}
	return nil
}

func serve(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go relay(c, target)
	}
}

func relay(c net.Conn, target string) {
	defer c.Close()
	d, err := net.Dial("tcp", target)
	if err != nil {
		log.Printf("dialing %s: %v", target, err)
		return
	}
	defer d.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	go pipe(d, c)
	go pipe(c, d)
	wg.Wait()
}

// Package pgproxy is a fault-injecting TCP proxy in front of PostgreSQL that
// reads the wire protocol: it loses a COMMIT's reply the way a network does
// (design.md#commit-unknown, failpoint during_commit_response), cuts a connection before the
// COMMIT reaches the server, or refuses every connection (PostgreSQL
// unreachable). Clients speak plain TCP to it; it speaks TLS to the server
// when the server's DSN asks for it, so it can see the messages.
//
// It is test tooling (the chaos suite and the order store's tests), never
// part of a workload.
package pgproxy

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Fault is what the proxy does to the next COMMITs.
type Fault int

const (
	// None forwards everything.
	None Fault = iota
	// LoseReply forwards the COMMIT, waits until the server has answered
	// it (the transaction is committed) and cuts the connection instead of
	// passing the answer on: the client cannot know the outcome.
	LoseReply
	// CutBefore cuts the connection when the client sends COMMIT, before
	// the server sees it: the transaction rolls back.
	CutBefore
)

func (f Fault) String() string {
	return [...]string{"none", "lose-reply", "cut-before"}[f]
}

// Proxy listens on 127.0.0.1 and forwards to one PostgreSQL server.
type Proxy struct {
	ln     net.Listener
	target string
	tls    *tls.Config
	dsn    string

	mu      sync.Mutex
	fault   Fault
	times   int // COMMITs the fault still applies to (<0: every one)
	every   int // with times < 0: one COMMIT in every this many
	seen    int
	refuse  bool
	conns   map[net.Conn]struct{}
	onFault func(Fault)

	// Faults counts the COMMITs the proxy lost or cut.
	Faults atomic.Int64
	// Commits counts the COMMITs it saw.
	Commits atomic.Int64
}

// Start listens on a free port of 127.0.0.1 in front of the server of dsn.
func Start(dsn string) (*Proxy, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing the PostgreSQL DSN: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	p := &Proxy{ln: ln, target: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), tls: cfg.TLSConfig,
		dsn: dsn, conns: map[net.Conn]struct{}{}}
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Config is a pool configuration of dsn that connects through the proxy
// (plain TCP to it; the proxy keeps the server's TLS).
func (p *Proxy) Config() (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(p.dsn)
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(p.Addr())
	n, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.TLSConfig, cfg.ConnConfig.Fallbacks = host, uint16(n), nil, nil
	return cfg, nil
}

// Pool opens a pool through the proxy.
func (p *Proxy) Pool(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := p.Config()
	if err != nil {
		return nil, err
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// DSN is a key=value DSN of dsn's user, password and database through the
// proxy, without TLS (for a workload process started with -pg-dsn).
func (p *Proxy) DSN() string {
	cfg, _ := pgconn.ParseConfig(p.dsn)
	host, port, _ := net.SplitHostPort(p.Addr())
	q := func(s string) string { return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'" }
	return fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=disable",
		host, port, q(cfg.User), q(cfg.Password), q(cfg.Database))
}

// Inject applies f to the next times COMMITs (<0: to one in every `every`
// COMMITs until changed; every < 1 is 1). onFault, when set, runs when a
// fault is applied, after the server answered a LoseReply COMMIT and before
// the cut (a test inspects or changes the committed state there).
func (p *Proxy) Inject(f Fault, times, every int, onFault func(Fault)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.times, p.every, p.seen, p.onFault = f, times, max(every, 1), 0, onFault
}

// Refuse makes PostgreSQL unreachable through the proxy (true: every open
// connection is cut and new ones are closed at once) or reachable again.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	var open []net.Conn
	if on {
		for c := range p.conns {
			open = append(open, c)
		}
	}
	p.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
}

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Refuse(true)
	return err
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse
		if !refuse {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if refuse {
			_ = c.Close()
			continue
		}
		go p.serve(c)
	}
}

// next decides the fault for one COMMIT.
func (p *Proxy) next() (Fault, func(Fault)) {
	p.Commits.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fault == None {
		return None, nil
	}
	p.seen++
	switch {
	case p.times > 0:
		p.times--
	case p.times < 0 && p.seen%p.every == 0:
	default:
		return None, nil
	}
	f := p.fault
	if p.times == 0 {
		p.fault = None
	}
	p.Faults.Add(1)
	return f, p.onFault
}

func (p *Proxy) forget(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		delete(p.conns, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
}

// serve relays one client connection, message by message.
func (p *Proxy) serve(client net.Conn) {
	server, err := p.dial()
	if err != nil {
		p.forget(client)
		return
	}
	p.mu.Lock()
	p.conns[server] = struct{}{}
	p.mu.Unlock()
	defer p.forget(client, server)

	// The startup message has no type byte: length, then the body.
	startup, err := readStartup(client)
	if err != nil {
		return
	}
	if _, err := server.Write(startup); err != nil {
		return
	}
	// lose is set when a COMMIT's answer must not reach the client.
	var lose atomic.Pointer[lostReply]
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer p.forget(client, server) // the server gone or the reply lost: the client is cut
		for {
			typ, msg, err := readMessage(server)
			if err != nil {
				return
			}
			if l := lose.Load(); l != nil {
				if typ == 'Z' { // ReadyForQuery: the COMMIT is answered, committed
					if l.onFault != nil {
						l.onFault(LoseReply)
					}
					return
				}
				continue
			}
			if _, err := client.Write(msg); err != nil {
				return
			}
		}
	}()
	for {
		typ, msg, err := readMessage(client)
		if err != nil {
			break
		}
		if typ == 'Q' && isCommit(msg[5:]) {
			switch f, onFault := p.next(); f {
			case CutBefore:
				if onFault != nil {
					onFault(CutBefore)
				}
				p.forget(client, server)
				<-done
				return
			case LoseReply:
				lose.Store(&lostReply{onFault: onFault})
			}
		}
		if _, err := server.Write(msg); err != nil {
			break
		}
	}
	p.forget(client, server)
	<-done
}

type lostReply struct{ onFault func(Fault) }

// dial connects to the server, negotiating TLS when the DSN asks for it.
func (p *Proxy) dial() (net.Conn, error) {
	c, err := net.Dial("tcp", p.target)
	if err != nil {
		return nil, err
	}
	if p.tls == nil {
		return c, nil
	}
	req := make([]byte, 8)
	binary.BigEndian.PutUint32(req[0:4], 8)
	binary.BigEndian.PutUint32(req[4:8], 80877103) // SSLRequest
	if _, err := c.Write(req); err != nil {
		_ = c.Close()
		return nil, err
	}
	answer := make([]byte, 1)
	if _, err := io.ReadFull(c, answer); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("reading the server's answer to SSLRequest: %w", err)
	}
	if answer[0] != 'S' {
		_ = c.Close()
		return nil, fmt.Errorf("the server refused TLS (%q)", answer)
	}
	tc := tls.Client(c, p.tls.Clone())
	if err := tc.Handshake(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return tc, nil
}

// readStartup reads the client's first message (length-prefixed, no type).
func readStartup(r io.Reader) ([]byte, error) {
	head := make([]byte, 4)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head)
	if n < 8 || n > 1<<20 {
		return nil, errors.New("bad startup message length")
	}
	msg := make([]byte, n)
	copy(msg, head)
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

// readMessage reads one typed message: its type and the whole message as
// read (type, length and body).
func readMessage(r io.Reader) (byte, []byte, error) {
	head := make([]byte, 5)
	if _, err := io.ReadFull(r, head); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:5])
	if n < 4 || n > 1<<30 {
		return 0, nil, errors.New("bad message length")
	}
	msg := make([]byte, 1+n)
	copy(msg, head)
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return 0, nil, err
	}
	return head[0], msg, nil
}

// isCommit tells whether a simple query's text is COMMIT (how pgx ends a
// transaction).
func isCommit(body []byte) bool {
	q := strings.TrimSpace(strings.TrimSuffix(string(body), "\x00"))
	q = strings.TrimSuffix(q, ";")
	return strings.EqualFold(q, "commit") || strings.EqualFold(q, "commit transaction") || strings.EqualFold(q, "end")
}

package tokens

import (
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The fast path verifies the tokens an issuer actually makes without
// golang-jwt's generic decoding (a map for the header, encoding/json and
// reflection for the claims: 18 % of the gateway's CPU at saturation). It
// answers only for a token it understood completely:
//
//   - its header segment, byte for byte, is one that golang-jwt has already
//     accepted on a verified token (so the algorithm and key id are known);
//   - its claims are a flat JSON object in a plain form: keys in ASCII
//     without escapes, the registered claims spelled in lower case and given
//     once, strings of printable ASCII without escapes, integer dates, aud a
//     string or an array of strings, other claims plain scalars.
//
// Anything else (another spelling encoding/json would still match, an
// escape, a fraction, a nested value, a header not seen yet) goes to the
// library, which stays the reference: FuzzFastPathAgreesWithLibrary holds the
// two to the same verdict. The fast path checks the signature, the dates
// with the leeway, the issuer and the audience exactly as the library's
// validator does, then the same lifetime and subject rules as Verify.

// errUnsure: the fast path does not decide this token; the library does.
var errUnsure = errors.New("not in the fast path's form")

// maxHeaders bounds the header segments remembered. Only headers of tokens
// that verified are remembered, so only an issuer's own headers fill it.
const maxHeaders = 64

var b64 = base64.RawURLEncoding.Strict()

// header is a header segment golang-jwt accepted on a verified token.
type header struct{ alg, kid string }

// headerCache maps header segments to what they say.
type headerCache struct {
	mu sync.RWMutex
	m  map[string]header
}

func (c *headerCache) get(seg string) (header, bool) {
	c.mu.RLock()
	h, ok := c.m[seg]
	c.mu.RUnlock()
	return h, ok
}

func (c *headerCache) put(seg string, h header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]header{}
	}
	if _, ok := c.m[seg]; !ok && len(c.m) < maxHeaders {
		c.m[strings.Clone(seg)] = h
	}
}

// scratch holds one verification's buffers.
type scratch struct {
	claims []byte
	sig    [64]byte
	in     []byte
	sum    [sha256.Size]byte
}

var scratches = sync.Pool{New: func() any { return &scratch{claims: make([]byte, 0, 512), in: make([]byte, 0, 512)} }}

// hmacPool keeps keyed HMAC-SHA256 states of one key (hmac.New hashes the
// key pads each time).
type hmacPool struct{ p sync.Pool }

func newHMACPool(key []byte) *hmacPool {
	k := append([]byte(nil), key...)
	return &hmacPool{p: sync.Pool{New: func() any { return hmac.New(sha256.New, k) }}}
}

// fast verifies token, or answers errUnsure.
func (v *Verifier) fast(token string, now time.Time) (int64, error) {
	dot1 := strings.IndexByte(token, '.')
	if dot1 < 0 {
		return 0, errUnsure
	}
	dot2 := strings.IndexByte(token[dot1+1:], '.')
	if dot2 < 0 {
		return 0, errUnsure
	}
	dot2 += dot1 + 1
	if strings.IndexByte(token[dot2+1:], '.') >= 0 {
		return 0, errUnsure
	}
	h, ok := v.headers.get(token[:dot1])
	if !ok {
		return 0, errUnsure
	}
	s := scratches.Get().(*scratch)
	defer scratches.Put(s)

	s.in = append(s.in[:0], token[dot1+1:dot2]...)
	s.claims = append(s.claims[:0], make([]byte, b64.DecodedLen(len(s.in)))...)
	n, err := b64.Decode(s.claims, s.in)
	if err != nil {
		return 0, fmt.Errorf("%w: claims: %w", ErrUnauthenticated, err)
	}
	c, err := parseClaims(s.claims[:n])
	if err != nil {
		return 0, err // errUnsure
	}
	if err := v.signature(s, h, token[:dot2], token[dot2+1:]); err != nil {
		return 0, err
	}
	if err := v.validate(&c, now); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	return subject(string(c.sub))
}

// signature checks sig over input with the header's key, as the library's
// HS256 and ES256 methods do.
func (v *Verifier) signature(s *scratch, h header, input, sig string) error {
	if b64.DecodedLen(len(sig)) > len(s.sig) {
		return fmt.Errorf("%w: signature too long", ErrUnauthenticated)
	}
	s.in = append(s.in[:0], sig...)
	n, err := b64.Decode(s.sig[:], s.in)
	if err != nil {
		return fmt.Errorf("%w: signature: %w", ErrUnauthenticated, err)
	}
	s.in = append(s.in[:0], input...)
	switch h.alg {
	case algHS256:
		pool, ok := v.hmacPools[h.kid]
		if !ok {
			return fmt.Errorf("%w: no HS256 key %q", ErrUnauthenticated, h.kid)
		}
		mac := pool.p.Get().(hash.Hash)
		defer pool.p.Put(mac)
		mac.Reset()
		mac.Write(s.in)
		if !hmac.Equal(s.sig[:n], mac.Sum(s.sum[:0])) {
			return fmt.Errorf("%w: signature", ErrUnauthenticated)
		}
		return nil
	case algES256:
		key, ok := v.ec[h.kid]
		if !ok {
			return fmt.Errorf("%w: no ES256 key %q", ErrUnauthenticated, h.kid)
		}
		if n != 64 {
			return fmt.Errorf("%w: signature", ErrUnauthenticated)
		}
		sum := sha256.Sum256(s.in)
		r, ss := new(big.Int).SetBytes(s.sig[:32]), new(big.Int).SetBytes(s.sig[32:64])
		if !ecdsa.Verify(key, sum[:], r, ss) {
			return fmt.Errorf("%w: signature", ErrUnauthenticated)
		}
		return nil
	}
	return errUnsure
}

// validate is the library validator's checks with Verify's options
// (expiry required, issued-at checked, not-before when given, issuer and
// audience), then Verify's own: iat required and a bounded lifetime.
func (v *Verifier) validate(c *flatClaims, now time.Time) error {
	if !c.has(claimExp) {
		return errors.New("exp claim is required")
	}
	exp := time.Unix(c.exp, 0)
	if !now.Before(exp.Add(v.Leeway)) {
		return errors.New("token is expired")
	}
	if c.has(claimNbf) && now.Before(time.Unix(c.nbf, 0).Add(-v.Leeway)) {
		return errors.New("token is not valid yet")
	}
	if c.has(claimIat) && now.Before(time.Unix(c.iat, 0).Add(-v.Leeway)) {
		return errors.New("token used before issued")
	}
	// The audience, with one expected value (WithAudience(v.Audience)).
	if c.auds == 0 || c.auds == 1 && c.firstAudEmpty {
		return errors.New("aud claim is required")
	}
	if !c.audMatches(v.Audience) {
		return errors.New("token has invalid audience")
	}
	if v.Issuer != "" {
		if len(c.iss) == 0 {
			return errors.New("iss claim is required")
		}
		if string(c.iss) != v.Issuer {
			return errors.New("token has invalid issuer")
		}
	}
	if !c.has(claimIat) || exp.Sub(time.Unix(c.iat, 0)) > v.MaxLifetime {
		return fmt.Errorf("no iat, or a lifetime over %s", v.MaxLifetime)
	}
	return nil
}

// subject is the user a token's sub names: a positive integer written
// canonically (both paths).
func subject(sub string) (int64, error) {
	var buf [20]byte
	user, err := strconv.ParseInt(sub, 10, 64)
	if err != nil || user <= 0 || string(strconv.AppendInt(buf[:0], user, 10)) != sub {
		return 0, fmt.Errorf("%w: sub must be a positive integer", ErrUnauthenticated)
	}
	return user, nil
}

// The registered claims, as bits of flatClaims.seen.
const (
	claimIss = 1 << iota
	claimSub
	claimAud
	claimExp
	claimNbf
	claimIat
	claimJti
)

var claimNames = [...]struct {
	name string
	bit  int
}{{"iss", claimIss}, {"sub", claimSub}, {"aud", claimAud}, {"exp", claimExp}, {"nbf", claimNbf}, {"iat", claimIat}, {"jti", claimJti}}

// maxAuds bounds the audience values kept for matching.
const maxAuds = 8

// flatClaims are the registered claims of a plain claims object; the
// strings point into the decoded segment.
type flatClaims struct {
	seen          int
	iss, sub      []byte
	aud           [maxAuds][]byte
	auds          int
	firstAudEmpty bool
	exp, nbf, iat int64
}

func (c *flatClaims) has(bit int) bool { return c.seen&bit != 0 }

func (c *flatClaims) audMatches(want string) bool {
	for _, a := range c.aud[:c.auds] {
		if string(a) == want {
			return true
		}
	}
	return false
}

// parseClaims reads a claims object in the plain form, or answers
// errUnsure.
func parseClaims(b []byte) (flatClaims, error) {
	var c flatClaims
	p := jsonScan{b: b}
	p.ws()
	if !p.eat('{') {
		return c, errUnsure
	}
	p.ws()
	if p.eat('}') {
		return c, p.end()
	}
	for {
		key, ok := p.str()
		if !ok {
			return c, errUnsure
		}
		p.ws()
		if !p.eat(':') {
			return c, errUnsure
		}
		p.ws()
		bit := registered(key)
		switch {
		case bit < 0: // another spelling encoding/json would match
			return c, errUnsure
		case bit == 0:
			if !p.scalar() {
				return c, errUnsure
			}
		case c.has(bit):
			return c, errUnsure
		default:
			c.seen |= bit
			if !c.value(&p, bit) {
				return c, errUnsure
			}
		}
		p.ws()
		if p.eat('}') {
			return c, p.end()
		}
		if !p.eat(',') {
			return c, errUnsure
		}
		p.ws()
	}
}

// registered is key's claim bit, 0 for another claim, -1 for a key that
// differs from a registered claim only in case (encoding/json would match
// it to the field; the library decides those).
func registered(key []byte) int {
	for _, n := range claimNames {
		if string(key) == n.name {
			return n.bit
		}
	}
	for _, n := range claimNames {
		if strings.EqualFold(string(key), n.name) {
			return -1
		}
	}
	return 0
}

// value reads the registered claim bit's value.
func (c *flatClaims) value(p *jsonScan, bit int) bool {
	var ok bool
	switch bit {
	case claimIss:
		c.iss, ok = p.str()
	case claimSub:
		c.sub, ok = p.str()
	case claimJti:
		_, ok = p.str()
	case claimExp:
		c.exp, ok = p.date()
	case claimNbf:
		c.nbf, ok = p.date()
	case claimIat:
		c.iat, ok = p.date()
	case claimAud:
		ok = c.audience(p)
	}
	return ok
}

// audience reads aud: a string, or an array of strings.
func (c *flatClaims) audience(p *jsonScan) bool {
	if !p.eat('[') {
		a, ok := p.str()
		c.aud[0], c.auds, c.firstAudEmpty = a, 1, len(a) == 0
		return ok
	}
	p.ws()
	if p.eat(']') {
		return true
	}
	for {
		a, ok := p.str()
		if !ok || c.auds == maxAuds {
			return false
		}
		if c.auds == 0 {
			c.firstAudEmpty = len(a) == 0
		}
		c.aud[c.auds] = a
		c.auds++
		p.ws()
		if p.eat(']') {
			return true
		}
		if !p.eat(',') {
			return false
		}
		p.ws()
	}
}

// jsonScan reads the plain subset of JSON the fast path accepts.
type jsonScan struct {
	b []byte
	i int
}

func (p *jsonScan) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *jsonScan) eat(ch byte) bool {
	if p.i < len(p.b) && p.b[p.i] == ch {
		p.i++
		return true
	}
	return false
}

// end: nothing but whitespace may follow the object.
func (p *jsonScan) end() error {
	p.ws()
	if p.i != len(p.b) {
		return errUnsure
	}
	return nil
}

// str reads a string of printable ASCII without escapes.
func (p *jsonScan) str() ([]byte, bool) {
	if !p.eat('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		ch := p.b[p.i]
		switch {
		case ch == '"':
			p.i++
			return p.b[start : p.i-1], true
		case ch < 0x20 || ch > 0x7e || ch == '\\':
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// date reads a date: a non-negative integer of at most 12 digits, written
// without a leading zero.
func (p *jsonScan) date() (int64, bool) {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	digits := p.b[start:p.i]
	if len(digits) == 0 || len(digits) > 12 || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	var n int64
	for _, d := range digits {
		n = n*10 + int64(d-'0')
	}
	return n, true
}

// scalar skips another claim's value: a plain string, a number, true,
// false or null.
func (p *jsonScan) scalar() bool {
	if p.i >= len(p.b) {
		return false
	}
	switch ch := p.b[p.i]; {
	case ch == '"':
		_, ok := p.str()
		return ok
	case ch == '-' || ch >= '0' && ch <= '9':
		return p.number()
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(p.b)-p.i >= len(lit) && string(p.b[p.i:p.i+len(lit)]) == lit {
			p.i += len(lit)
			return true
		}
	}
	return false
}

// number reads a JSON number (RFC 8259 §6).
func (p *jsonScan) number() bool {
	p.eat('-')
	switch {
	case p.eat('0'):
	case p.i < len(p.b) && p.b[p.i] >= '1' && p.b[p.i] <= '9':
		p.digits()
	default:
		return false
	}
	if p.eat('.') && !p.digits() {
		return false
	}
	if p.eat('e') || p.eat('E') {
		if !p.eat('+') {
			p.eat('-')
		}
		if !p.digits() {
			return false
		}
	}
	return true
}

func (p *jsonScan) digits() bool {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

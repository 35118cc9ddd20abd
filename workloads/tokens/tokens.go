// Package tokens verifies the buyers' bearer tokens (JWT, RFC 7519) with
// golang-jwt: HS256 or ES256 only, every token naming its key by kid, the
// issuer and audience required, exp and iat required with a bounded
// lifetime, a small leeway for clocks. Several keys may be active at once so
// that a key is rotated without logging anyone out; a key is used only with
// its own algorithm, so an ES256 public key can never verify an HS256 token
// (algorithm confusion) and "none" is never accepted.
//
// golang-jwt is the only parser and verifier. A token that verified is
// remembered by its SHA-256 (a bounded LRU of verdicts, each valid only
// inside the token's own time window), so a buyer's retries and status
// polls with the same token cost a hash, not a parse; a token never seen,
// or outside the window it was accepted in, goes to golang-jwt again.
// Refusals are never remembered.
package tokens

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	lru "github.com/hashicorp/golang-lru/v2"
)

// ErrUnauthenticated is any token problem; the reason stays in logs only.
var ErrUnauthenticated = errors.New("unauthenticated")

// Defaults of a Verifier's settings.
const (
	DefaultIssuer      = "seckill"
	DefaultAudience    = "seckill-gateway"
	DefaultLeeway      = 30 * time.Second
	DefaultMaxLifetime = 2 * time.Hour
	// DefaultKID names the key given as one HMAC secret (-token-key).
	DefaultKID = "default"
	// MaxTokenBytes bounds what is parsed at all.
	MaxTokenBytes = 4096
	// MinHMACKeyBytes is the shortest HS256 key accepted (RFC 7518 §3.2).
	MinHMACKeyBytes = 32
	// VerifiedCacheSize bounds the verdicts remembered (about 100 bytes
	// each).
	VerifiedCacheSize = 1 << 16
)

var kidPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Verifier checks tokens. Build it with NewVerifier and add keys.
type Verifier struct {
	Issuer      string
	Audience    string
	Leeway      time.Duration
	MaxLifetime time.Duration
	hmac        map[string][]byte
	ec          map[string]*ecdsa.PublicKey
	verified    *lru.Cache[[sha256.Size]byte, verdict]
	// parser decodes and checks the signature (reused: its options do
	// not change); the claims are validated per call at the caller's now.
	parser *jwt.Parser
}

// verdict is a verified token's subject and the window in which golang-jwt
// accepts it regardless of the time it is asked at: after its iat and nbf
// less the leeway, before its exp (the leeway past exp is left to the
// library).
type verdict struct {
	user          int64
	after, before time.Time
}

const (
	algHS256 = "HS256"
	algES256 = "ES256"
)

// NewVerifier is a verifier with the defaults and no keys.
func NewVerifier() *Verifier {
	cache, err := lru.New[[sha256.Size]byte, verdict](VerifiedCacheSize)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &Verifier{Issuer: DefaultIssuer, Audience: DefaultAudience, Leeway: DefaultLeeway, MaxLifetime: DefaultMaxLifetime,
		hmac: map[string][]byte{}, ec: map[string]*ecdsa.PublicKey{}, verified: cache,
		parser: jwt.NewParser(jwt.WithValidMethods([]string{algHS256, algES256}), jwt.WithStrictDecoding(), jwt.WithoutClaimsValidation())}
}

// AddHMAC adds an HS256 key under kid.
func (v *Verifier) AddHMAC(kid string, key []byte) error {
	if err := v.newKID(kid); err != nil {
		return err
	}
	if len(key) < MinHMACKeyBytes {
		return fmt.Errorf("token key %q: an HS256 key needs at least %d bytes, has %d", kid, MinHMACKeyBytes, len(key))
	}
	v.hmac[kid] = append([]byte(nil), key...)
	return nil
}

// AddECDSA adds an ES256 public key (P-256) under kid.
func (v *Verifier) AddECDSA(kid string, key *ecdsa.PublicKey) error {
	if err := v.newKID(kid); err != nil {
		return err
	}
	if key == nil || key.Curve != elliptic.P256() {
		return fmt.Errorf("token key %q: an ES256 key must be on P-256", kid)
	}
	v.ec[kid] = key
	return nil
}

func (v *Verifier) newKID(kid string) error {
	if !kidPattern.MatchString(kid) {
		return fmt.Errorf("token key id %q: want 1-64 of A-Z a-z 0-9 _ -", kid)
	}
	if _, dup := v.hmac[kid]; dup {
		return fmt.Errorf("token key id %q given twice", kid)
	}
	if _, dup := v.ec[kid]; dup {
		return fmt.Errorf("token key id %q given twice", kid)
	}
	return nil
}

// Keys is how many keys the verifier holds.
func (v *Verifier) Keys() int { return len(v.hmac) + len(v.ec) }

// LoadDir adds every key file of dir (a Secret or ConfigMap mounted as a
// volume): <kid>.hs256 holds an HMAC key (its raw bytes), <kid>.es256.pem an
// EC P-256 public key ("PUBLIC KEY" PEM). Other files are an error, so a
// misnamed key is not silently ignored; Kubernetes' ..data links are skipped.
func (v *Verifier) LoadDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("token keys: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name)) //nolint:gosec // the mounted key directory
		if err != nil {
			return fmt.Errorf("token keys: %w", err)
		}
		if err := v.AddFile(name, b); err != nil {
			return err
		}
	}
	return nil
}

// AddFile adds one key file's key by its name (see LoadDir); the operator
// checks a Secret's keys with it before the gateway mounts them.
func (v *Verifier) AddFile(name string, b []byte) error {
	switch {
	case strings.HasSuffix(name, ".hs256"):
		return v.AddHMAC(strings.TrimSuffix(name, ".hs256"), b)
	case strings.HasSuffix(name, ".es256.pem"):
		key, err := ParseECPublicKey(b)
		if err != nil {
			return fmt.Errorf("token key file %s: %w", name, err)
		}
		return v.AddECDSA(strings.TrimSuffix(name, ".es256.pem"), key)
	default:
		return fmt.Errorf("token key file %s: want <kid>.hs256 or <kid>.es256.pem", name)
	}
}

// ParseECPublicKey reads a "PUBLIC KEY" PEM block holding an EC key.
func ParseECPublicKey(b []byte) (*ecdsa.PublicKey, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New(`want a "PUBLIC KEY" PEM block`)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	key, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return nil, errors.New("not an EC public key")
	}
	return key, nil
}

// Verify checks token at now and returns its subject as the user id: a
// verdict remembered for this very token inside its window, else
// golang-jwt's.
func (v *Verifier) Verify(token string, now time.Time) (int64, error) {
	if len(token) > MaxTokenBytes || v.Keys() == 0 {
		return 0, ErrUnauthenticated
	}
	h := sha256.Sum256([]byte(token))
	if d, ok := v.verified.Get(h); ok && now.After(d.after) && now.Before(d.before) {
		return d.user, nil
	}
	d, err := v.library(token, now)
	if err != nil {
		return 0, err
	}
	v.verified.Add(h, d)
	return d.user, nil
}

// library verifies token with golang-jwt.
func (v *Verifier) library(token string, now time.Time) (verdict, error) {
	var claims jwt.RegisteredClaims
	if _, err := v.parser.ParseWithClaims(token, &claims, v.key); err != nil {
		return verdict{}, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	if err := jwt.NewValidator(jwt.WithIssuer(v.Issuer), jwt.WithAudience(v.Audience), jwt.WithLeeway(v.Leeway),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithTimeFunc(func() time.Time { return now })).Validate(claims); err != nil {
		return verdict{}, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	if claims.IssuedAt == nil || claims.ExpiresAt.Sub(claims.IssuedAt.Time) > v.MaxLifetime {
		return verdict{}, fmt.Errorf("%w: no iat, or a lifetime over %s", ErrUnauthenticated, v.MaxLifetime)
	}
	user, err := subject(claims.Subject)
	if err != nil {
		return verdict{}, err
	}
	after := claims.IssuedAt.Time
	if claims.NotBefore != nil && claims.NotBefore.After(after) {
		after = claims.NotBefore.Time
	}
	return verdict{user: user, after: after.Add(-v.Leeway), before: claims.ExpiresAt.Time}, nil
}

// subject reads sub as a user id: a positive integer in its plain decimal
// form only (no sign, no leading zero), so one user has one spelling.
func subject(sub string) (int64, error) {
	var buf [20]byte
	user, err := strconv.ParseInt(sub, 10, 64)
	if err != nil || user <= 0 || string(strconv.AppendInt(buf[:0], user, 10)) != sub {
		return 0, fmt.Errorf("%w: sub must be a positive integer", ErrUnauthenticated)
	}
	return user, nil
}

// key finds the token's key by kid, only among the keys of its algorithm.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	switch t.Method.Alg() {
	case algHS256:
		if k, ok := v.hmac[kid]; ok {
			return k, nil
		}
	case algES256:
		if k, ok := v.ec[kid]; ok {
			return k, nil
		}
	}
	return nil, fmt.Errorf("no %s key %q", t.Method.Alg(), kid)
}

// Claims are what a token says, for Sign.
type Claims struct {
	User     int64
	Issuer   string // default DefaultIssuer
	Audience string // default DefaultAudience
	IssuedAt time.Time
	Expires  time.Time
}

func (c Claims) registered() jwt.RegisteredClaims {
	iss, aud := c.Issuer, c.Audience
	if iss == "" {
		iss = DefaultIssuer
	}
	if aud == "" {
		aud = DefaultAudience
	}
	return jwt.RegisteredClaims{Subject: strconv.FormatInt(c.User, 10), Issuer: iss, Audience: jwt.ClaimStrings{aud},
		IssuedAt: jwt.NewNumericDate(c.IssuedAt), ExpiresAt: jwt.NewNumericDate(c.Expires)}
}

// SignHS256 makes an HS256 token under kid (for clients: tests, the demo,
// the load generator; a real issuer is the shop's login service).
func SignHS256(kid string, key []byte, c Claims) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, c.registered())
	t.Header["kid"] = kid
	return t.SignedString(key)
}

// SignES256 makes an ES256 token under kid.
func SignES256(kid string, key *ecdsa.PrivateKey, c Claims) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodES256, c.registered())
	t.Header["kid"] = kid
	return t.SignedString(key)
}

package tokens_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/tokens"
)

var (
	now    = time.Unix(1_800_000_000, 0)
	oldKey = []byte("the-old-hs256-key-0123456789abcdef")
	newKey = []byte("the-new-hs256-key-0123456789abcdef")
)

func claims(user int64) tokens.Claims {
	return tokens.Claims{User: user, IssuedAt: now.Add(-time.Minute), Expires: now.Add(30 * time.Minute)}
}

func pemOf(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// unsigned builds a token by hand: any header, any claims, any signature.
func unsigned(header, claims, sig string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims)) + "." + sig
}

func TestVerify(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	v := tokens.NewVerifier()
	require.NoError(t, v.AddHMAC("old", oldKey))
	require.NoError(t, v.AddHMAC("new", newKey))
	require.NoError(t, v.AddECDSA("ec1", &ec.PublicKey))

	hs := func(kid string, key []byte, c tokens.Claims) string {
		s, err := tokens.SignHS256(kid, key, c)
		require.NoError(t, err)
		return s
	}
	es := func(kid string, c tokens.Claims) string {
		s, err := tokens.SignES256(kid, ec, c)
		require.NoError(t, err)
		return s
	}
	with := func(f func(*tokens.Claims)) tokens.Claims {
		c := claims(42)
		f(&c)
		return c
	}
	signed := func(m jwt.SigningMethod, kid string, key any, c jwt.MapClaims) string {
		tk := jwt.NewWithClaims(m, c)
		if kid != "" {
			tk.Header["kid"] = kid
		}
		s, err := tk.SignedString(key)
		require.NoError(t, err)
		return s
	}
	good := jwt.MapClaims{"sub": "42", "iss": tokens.DefaultIssuer, "aud": tokens.DefaultAudience,
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Minute).Unix()}
	without := func(k string) jwt.MapClaims {
		c := jwt.MapClaims{}
		for kk, vv := range good {
			if kk != k {
				c[kk] = vv
			}
		}
		return c
	}
	ecPEM := pemOf(t, &ec.PublicKey)
	noneClaims := `{"sub":"42","iss":"seckill","aud":"seckill-gateway","iat":1799999940,"exp":1800000060}`

	for _, c := range []struct {
		name  string
		token string
		user  int64 // 0: refused
	}{
		{"HS256, the new key", hs("new", newKey, claims(42)), 42},
		{"HS256, the old key during rotation", hs("old", oldKey, claims(7)), 7},
		{"ES256", es("ec1", claims(9)), 9},
		{"expired within the leeway", hs("new", newKey, with(func(c *tokens.Claims) { c.Expires = now.Add(-10 * time.Second) })), 42},
		{"expired beyond the leeway", hs("new", newKey, with(func(c *tokens.Claims) { c.Expires = now.Add(-time.Minute) })), 0},
		{"issued in the future", hs("new", newKey, with(func(c *tokens.Claims) { c.IssuedAt = now.Add(5 * time.Minute) })), 0},
		{"lives longer than the maximum", hs("new", newKey, with(func(c *tokens.Claims) { c.Expires = c.IssuedAt.Add(3 * time.Hour) })), 0},
		{"another issuer", hs("new", newKey, with(func(c *tokens.Claims) { c.Issuer = "someone-else" })), 0},
		{"another audience", hs("new", newKey, with(func(c *tokens.Claims) { c.Audience = "payments" })), 0},
		{"no audience", signed(jwt.SigningMethodHS256, "new", newKey, without("aud")), 0},
		{"no issuer", signed(jwt.SigningMethodHS256, "new", newKey, without("iss")), 0},
		{"no exp", signed(jwt.SigningMethodHS256, "new", newKey, without("exp")), 0},
		{"no iat", signed(jwt.SigningMethodHS256, "new", newKey, without("iat")), 0},
		{"not yet valid", signed(jwt.SigningMethodHS256, "new", newKey, func() jwt.MapClaims {
			c := without("")
			c["nbf"] = now.Add(10 * time.Minute).Unix()
			return c
		}()), 0},
		{"sub 0", hs("new", newKey, claims(0)), 0},
		{"sub not a number", signed(jwt.SigningMethodHS256, "new", newKey, func() jwt.MapClaims { c := without(""); c["sub"] = "alice"; return c }()), 0},
		{"sub with a leading zero", signed(jwt.SigningMethodHS256, "new", newKey, func() jwt.MapClaims { c := without(""); c["sub"] = "042"; return c }()), 0},
		{"a removed key", hs("retired", []byte("the-retired-key-0123456789abcdefgh"), claims(42)), 0},
		{"no kid", signed(jwt.SigningMethodHS256, "", newKey, good), 0},
		{"another key under a known kid", hs("new", []byte("not-the-key-0123456789abcdefghijk"), claims(42)), 0},
		{"HS256 under the EC key's kid, keyed with its public PEM (alg confusion)", signed(jwt.SigningMethodHS256, "ec1", ecPEM, good), 0},
		{"ES256 under an HMAC kid", es("new", claims(42)), 0},
		{"HS384", signed(jwt.SigningMethodHS384, "new", newKey, good), 0},
		{"RS256", signed(jwt.SigningMethodRS256, "new", rsaKey, good), 0},
		{"alg none", unsigned(`{"alg":"none","kid":"new"}`, noneClaims, ""), 0},
		{"alg None", unsigned(`{"alg":"None","kid":"new","typ":"JWT"}`, noneClaims, ""), 0},
		{"empty", "", 0},
		{"two parts", "a.b", 0},
		{"oversized", strings.Repeat("a", tokens.MaxTokenBytes+1), 0},
	} {
		user, err := v.Verify(c.token, now)
		if c.user == 0 {
			require.ErrorIs(t, err, tokens.ErrUnauthenticated, c.name)
			continue
		}
		require.NoError(t, err, c.name)
		require.Equal(t, c.user, user, c.name)
	}
}

func TestLoadDir(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	write := func(dir, name string, b []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}
	dir := t.TempDir()
	write(dir, "k2026.hs256", newKey)
	write(dir, "mobile.es256.pem", pemOf(t, &ec.PublicKey))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "..2026_12_04"), 0o700)) // what a mounted Secret holds besides its keys
	v := tokens.NewVerifier()
	require.NoError(t, v.LoadDir(dir))
	require.Equal(t, 2, v.Keys())
	tok, err := tokens.SignES256("mobile", ec, claims(5))
	require.NoError(t, err)
	user, err := v.Verify(tok, now)
	require.NoError(t, err)
	require.Equal(t, int64(5), user)

	for name, c := range map[string]struct {
		file string
		body []byte
		want string
	}{
		"short HMAC key": {"k.hs256", []byte("short"), "at least 32 bytes"},
		"RSA key":        {"k.es256.pem", pemOf(t, &rsaKey.PublicKey), "not an EC public key"},
		"not PEM":        {"k.es256.pem", []byte("hello"), "PUBLIC KEY"},
		"unknown file":   {"k.txt", newKey, "want <kid>.hs256 or <kid>.es256.pem"},
		"bad kid":        {"a b.hs256", newKey, "token key id"},
	} {
		d := t.TempDir()
		write(d, c.file, c.body)
		err := tokens.NewVerifier().LoadDir(d)
		require.ErrorContains(t, err, c.want, name)
	}
}

func FuzzVerify(f *testing.F) {
	v := tokens.NewVerifier()
	if err := v.AddHMAC("new", newKey); err != nil {
		f.Fatal(err)
	}
	tok, _ := tokens.SignHS256("new", newKey, claims(1))
	f.Add(tok)
	f.Add(unsigned(`{"alg":"none","kid":"new"}`, `{"sub":"1"}`, ""))
	f.Fuzz(func(t *testing.T, tok string) {
		u, err := v.Verify(tok, now)
		if err == nil {
			require.Positive(t, u)
		}
	})
}

package tokens

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

var (
	fastNow = time.Unix(1_800_000_000, 0)
	fastKey = []byte("the-fast-hs256-key-0123456789abcdef")
	// The headers the issuer helpers write.
	hsHeader = `{"alg":"HS256","kid":"k1","typ":"JWT"}`
	esHeader = `{"alg":"ES256","kid":"e1","typ":"JWT"}`
)

// fastVerifier has one HS256 and one ES256 key, and has verified one token
// of each so that their headers take the fast path.
func fastVerifier(t testing.TB) (*Verifier, *ecdsa.PrivateKey) {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	v := NewVerifier()
	require.NoError(t, v.AddHMAC("k1", fastKey))
	require.NoError(t, v.AddECDSA("e1", &ec.PublicKey))
	c := Claims{User: 1, IssuedAt: fastNow.Add(-time.Minute), Expires: fastNow.Add(time.Hour)}
	for _, sign := range []func() (string, error){
		func() (string, error) { return SignHS256("k1", fastKey, c) },
		func() (string, error) { return SignES256("e1", ec, c) },
	} {
		tok, err := sign()
		require.NoError(t, err)
		_, err = v.Verify(tok, fastNow)
		require.NoError(t, err)
	}
	return v, ec
}

// signRaw signs any header and claims text with the method's key.
func signRaw(t testing.TB, m jwt.SigningMethod, key any, hdr, claims string) string {
	t.Helper()
	enc := base64.RawURLEncoding
	input := enc.EncodeToString([]byte(hdr)) + "." + enc.EncodeToString([]byte(claims))
	sig, err := m.Sign(input, key)
	require.NoError(t, err)
	return input + "." + enc.EncodeToString(sig)
}

func claimsText(extra string) string {
	return fmt.Sprintf(`{"iss":"seckill","sub":"42","aud":["seckill-gateway"],"exp":%d,"iat":%d%s}`,
		fastNow.Add(30*time.Minute).Unix(), fastNow.Add(-time.Minute).Unix(), extra)
}

// The issuer's own tokens take the fast path; forms it does not read go to
// the library, and both paths give the same verdict.
func TestFastPathTakesTheIssuersTokens(t *testing.T) {
	v, ec := fastVerifier(t)
	c := Claims{User: 77, IssuedAt: fastNow.Add(-time.Minute), Expires: fastNow.Add(time.Minute)}
	hs, err := SignHS256("k1", fastKey, c)
	require.NoError(t, err)
	es, err := SignES256("e1", ec, c)
	require.NoError(t, err)
	exp, iat := fastNow.Add(30*time.Minute).Unix(), fastNow.Add(-time.Minute).Unix()

	for _, tc := range []struct {
		name   string
		token  string
		fast   bool  // the fast path answers
		user   int64 // 0: refused
		reason string
	}{
		{"SignHS256", hs, true, 77, ""},
		{"SignES256", es, true, 77, ""},
		{"other plain claims", signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, claimsText(`,"jti":"x","scope":"buy","n":-1.5e3,"ok":true,"z":null`)), true, 42, ""},
		{"aud a string, whitespace", signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, fmt.Sprintf(" {\"sub\" : \"5\",\n\"aud\":\"seckill-gateway\",\t\"iss\":\"seckill\",\"exp\":%d,\"iat\":%d } ", exp, iat)), true, 5, ""},
		{"expired", signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, fmt.Sprintf(`{"iss":"seckill","sub":"5","aud":"seckill-gateway","exp":%d,"iat":%d}`, fastNow.Add(-time.Minute).Unix(), iat)), true, 0, "token is expired"},
		{"another audience", signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, fmt.Sprintf(`{"iss":"seckill","sub":"5","aud":["x",""],"exp":%d,"iat":%d}`, exp, iat)), true, 0, "invalid audience"},
		{"sub with a plus", signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, fmt.Sprintf(`{"iss":"seckill","sub":"+5","aud":"seckill-gateway","exp":%d,"iat":%d}`, exp, iat)), true, 0, "sub must be"},
		{"a wrong signature", hs[:len(hs)-2] + "AA", true, 0, "signature"},
		{"Sub spelled otherwise", signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, claimsText(`,"SUB":"43"`)), false, 43, ""},
		{"an escaped key", signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, fmt.Sprintf(`{"iss":"seckill","\u0073ub":"6","aud":"seckill-gateway","exp":%d,"iat":%d}`, exp, iat)), false, 6, ""},
		{"a fractional exp", signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, fmt.Sprintf(`{"iss":"seckill","sub":"6","aud":"seckill-gateway","exp":%d.5,"iat":%d}`, exp, iat)), false, 6, ""},
		{"exp as a string", signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, fmt.Sprintf(`{"iss":"seckill","sub":"6","aud":"seckill-gateway","exp":"%d","iat":%d}`, exp, iat)), false, 6, ""},
		{"a nested claim", signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, claimsText(`,"roles":["a"]`)), false, 42, ""},
		{"sub twice", signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, claimsText(`,"sub":"8"`)), false, 8, ""},
		{"a header not seen yet", signRaw(t, jwt.SigningMethodHS256, fastKey, `{"kid":"k1","alg":"HS256"}`, claimsText("")), false, 42, ""},
		{"trailing text", signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, claimsText("")+"x"), false, 0, ""},
	} {
		user, err := v.fast(tc.token, fastNow)
		require.Equal(t, tc.fast, !errors.Is(err, errUnsure), "%s: %v", tc.name, err)
		if tc.fast {
			if tc.user == 0 {
				require.ErrorIs(t, err, ErrUnauthenticated, tc.name)
				require.ErrorContains(t, err, tc.reason, tc.name)
			} else {
				require.NoError(t, err, tc.name)
				require.Equal(t, tc.user, user, tc.name)
			}
		}
		ref, refErr := v.library(tc.token, fastNow)
		require.Equal(t, tc.user != 0, refErr == nil, "%s: the library says %v", tc.name, refErr)
		require.Equal(t, tc.user, ref, tc.name)
		got, err := v.Verify(tc.token, fastNow)
		require.Equal(t, refErr == nil, err == nil, tc.name)
		require.Equal(t, ref, got, tc.name)
	}
}

// Whatever the claims and the signature, the fast path either leaves the
// token to the library or gives the library's verdict.
func FuzzFastPathAgreesWithLibrary(f *testing.F) {
	v, ec := fastVerifier(f)
	exp, iat := fastNow.Add(30*time.Minute).Unix(), fastNow.Add(-time.Minute).Unix()
	for _, c := range []string{
		claimsText(""),
		claimsText(`,"jti":"a","x":1e5,"y":false`),
		fmt.Sprintf(`{"sub":"1","aud":"seckill-gateway","iss":"seckill","exp":%d,"iat":%d,"nbf":%d}`, exp, iat, exp),
		fmt.Sprintf(`{"sub":"1","aud":"seckill-gateway","iss":"seckill","exp":%d,"iat":%d}`, exp, exp+100),
		fmt.Sprintf(`{"sub":"1","aud":[],"iss":"seckill","exp":%d,"iat":%d}`, exp, iat),
		fmt.Sprintf(`{"sub":"1","aud":[""],"iss":"","exp":%d,"iat":%d}`, exp, iat),
		fmt.Sprintf(`{"sub":"01","aud":"seckill-gateway","iss":"seckill","exp":%d,"iat":%d}`, exp, iat),
		fmt.Sprintf(`{"sub":"1","aud":"seckill-gateway","iss":"seckill","exp":%d}`, exp),
		fmt.Sprintf(`{"sub":"1","aud":"seckill-gateway","iss":"seckill","exp":%d,"iat":0}`, exp),
		fmt.Sprintf(`{"Iss":"seckill","sub":"1","aud":"seckill-gateway","iss":"seckill","exp":%d,"iat":%d}`, exp, iat),
		`{}`, `null`, `[]`, `{"sub":1}`, `{"exp":-1}`, `{"exp":01}`, `{"x":-}`, `{"x":"\u00e9"}`, `{"x":1.}`,
	} {
		for sig := byte(0); sig < 3; sig++ {
			f.Add(c, sig, int64(0))
		}
	}
	f.Fuzz(func(t *testing.T, claims string, sig byte, offset int64) {
		var tok string
		switch sig % 3 {
		case 0:
			tok = signRaw(t, jwt.SigningMethodHS256, fastKey, hsHeader, claims)
		case 1:
			tok = signRaw(t, jwt.SigningMethodES256, ec, esHeader, claims)
		default: // signed with another key
			tok = signRaw(t, jwt.SigningMethodHS256, []byte("another-key-0123456789abcdefghijkl"), hsHeader, claims)
		}
		at := fastNow.Add(time.Duration(offset%int64(3*time.Hour)) - 90*time.Minute)
		user, err := v.fast(tok, at)
		if errors.Is(err, errUnsure) {
			return
		}
		ref, refErr := v.library(tok, at)
		require.Equal(t, refErr == nil, err == nil, "fast: %v, library: %v, claims %q", err, refErr, claims)
		require.Equal(t, ref, user)
		if err != nil {
			require.ErrorIs(t, err, ErrUnauthenticated)
		}
	})
}

// BenchmarkVerify compares the two paths on the issuer's HS256 token.
func BenchmarkVerify(b *testing.B) {
	v, _ := fastVerifier(b)
	tok, err := SignHS256("k1", fastKey, Claims{User: 123456, IssuedAt: fastNow.Add(-time.Minute), Expires: fastNow.Add(time.Hour)})
	require.NoError(b, err)
	for _, p := range []struct {
		name string
		f    func(string, time.Time) (int64, error)
	}{{"fast", v.fast}, {"library", v.library}} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.f(tok, fastNow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package tokens

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	cacheNow = time.Unix(1_800_000_000, 0)
	cacheKey = []byte("the-cache-hs256-key-0123456789abcdef")
)

func cacheVerifier(t testing.TB) *Verifier {
	t.Helper()
	v := NewVerifier()
	require.NoError(t, v.AddHMAC("k1", cacheKey))
	return v
}

func cacheToken(t testing.TB, user int64, iat, exp time.Time) string {
	t.Helper()
	tok, err := SignHS256("k1", cacheKey, Claims{User: user, IssuedAt: iat, Expires: exp})
	require.NoError(t, err)
	return tok
}

// A verified token is answered from its remembered verdict only inside the
// window golang-jwt accepted it in; outside, golang-jwt decides again.
func TestVerifiedTokensAreRememberedInsideTheirWindow(t *testing.T) {
	v := cacheVerifier(t)
	iat, exp := cacheNow.Add(-time.Minute), cacheNow.Add(10*time.Minute)
	tok := cacheToken(t, 42, iat, exp)

	user, err := v.Verify(tok, cacheNow)
	require.NoError(t, err)
	require.Equal(t, int64(42), user)
	require.Equal(t, 1, v.verified.Len())
	user, err = v.Verify(tok, cacheNow.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, int64(42), user, "the same verdict from the cache")

	cases := []struct {
		name string
		at   time.Time
		ok   bool
	}{
		{"inside the exp leeway: the library accepts", exp.Add(DefaultLeeway / 2), true},
		{"past exp and its leeway", exp.Add(DefaultLeeway + time.Second), false},
		{"before iat and its leeway (a clock gone back)", iat.Add(-DefaultLeeway - time.Second), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := v.Verify(tok, c.at)
			require.Equal(t, c.ok, err == nil, "%v", err)
			if err != nil {
				require.ErrorIs(t, err, ErrUnauthenticated)
			}
		})
	}
}

// Refusals are never remembered, and a token changed by one byte is
// another token.
func TestRefusalsAreNotRemembered(t *testing.T) {
	v := cacheVerifier(t)
	tok := cacheToken(t, 7, cacheNow.Add(-time.Minute), cacheNow.Add(time.Hour))
	forged := tok[:len(tok)-2] + "AA"
	if forged == tok {
		forged = tok[:len(tok)-2] + "BB"
	}
	_, err := v.Verify(forged, cacheNow)
	require.ErrorIs(t, err, ErrUnauthenticated)
	require.Zero(t, v.verified.Len())
	_, err = v.Verify(tok, cacheNow)
	require.NoError(t, err)
	_, err = v.Verify(forged, cacheNow)
	require.ErrorIs(t, err, ErrUnauthenticated, "the forged token still fails after the real one verified")
}

// The cache is bounded: the oldest verdicts go first.
func TestVerifiedCacheIsBounded(t *testing.T) {
	v := cacheVerifier(t)
	for u := int64(1); u <= VerifiedCacheSize+10; u++ {
		_, err := v.Verify(cacheToken(t, u, cacheNow.Add(-time.Minute), cacheNow.Add(time.Hour)), cacheNow)
		require.NoError(t, err)
	}
	require.Equal(t, VerifiedCacheSize, v.verified.Len())
}

// BenchmarkVerify is a token's cost per request: the first time
// (golang-jwt) and again (the remembered verdict).
func BenchmarkVerify(b *testing.B) {
	v := cacheVerifier(b)
	tok := cacheToken(b, 123456, cacheNow.Add(-time.Minute), cacheNow.Add(time.Hour))
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.library(tok, cacheNow); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remembered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Verify(tok, cacheNow); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Whatever the token's dates and the two times it is asked at, the second
// answer (from the cache when the first verified) is golang-jwt's.
func FuzzRememberedVerdictAgreesWithLibrary(f *testing.F) {
	f.Add(int64(-60), int64(600), int64(0), int64(300))
	f.Add(int64(-60), int64(600), int64(0), int64(625))
	f.Add(int64(-60), int64(600), int64(0), int64(-100))
	f.Add(int64(10), int64(20), int64(40), int64(45))
	v := cacheVerifier(f)
	f.Fuzz(func(t *testing.T, iat, exp, first, second int64) {
		const bound = 1 << 20
		if iat < -bound || iat > bound || exp < -bound || exp > bound || first < -bound || first > bound || second < -bound || second > bound {
			t.Skip()
		}
		at := func(s int64) time.Time { return cacheNow.Add(time.Duration(s) * time.Second) }
		tok := cacheToken(t, 9, at(iat), at(exp))
		_, _ = v.Verify(tok, at(first)) // remembered when it verified
		user, err := v.Verify(tok, at(second))
		ref, refErr := v.library(tok, at(second))
		require.Equal(t, refErr == nil, err == nil, "cache: %v, library: %v", err, refErr)
		if err == nil {
			require.Equal(t, ref.user, user)
		}
	})
}

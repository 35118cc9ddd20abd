package gateway

import (
	"time"

	"github.com/seckill/seckill-operator/workloads/tokens"
)

// ErrUnauthenticated is any token problem; the reason stays in logs only.
var ErrUnauthenticated = tokens.ErrUnauthenticated

// SignToken makes an HS256 token for a user under tokens.DefaultKID, with
// the default issuer and audience, issued now (for clients in tests, the
// demo and the load generator).
func SignToken(user int64, key []byte, exp time.Time) string {
	s, err := tokens.SignHS256(tokens.DefaultKID, key, tokens.Claims{User: user, IssuedAt: time.Now(), Expires: exp})
	if err != nil {
		panic(err) // HS256 signing fails only without a key
	}
	return s
}

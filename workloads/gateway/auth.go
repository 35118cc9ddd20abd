package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrUnauthenticated is any token problem; the reason stays in logs only.
var ErrUnauthenticated = errors.New("unauthenticated")

// VerifyToken checks an HS256 JWT and returns its subject as the user id.
// Only HS256 is accepted ("none" and every other alg are refused), exp is
// required, and sub must be a positive integer.
func VerifyToken(token string, key []byte, now time.Time) (int64, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(token) > 4096 {
		return 0, ErrUnauthenticated
	}
	var head struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
	}
	if err := decodeSegment(parts[0], &head); err != nil || head.Alg != "HS256" {
		return 0, ErrUnauthenticated
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return 0, ErrUnauthenticated
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return 0, ErrUnauthenticated
	}
	var claims struct {
		Sub string `json:"sub"`
		Exp int64  `json:"exp"`
		Nbf int64  `json:"nbf"`
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return 0, ErrUnauthenticated
	}
	if claims.Exp == 0 || now.Unix() >= claims.Exp || (claims.Nbf != 0 && now.Unix() < claims.Nbf) {
		return 0, ErrUnauthenticated
	}
	user, err := strconv.ParseInt(claims.Sub, 10, 64)
	if err != nil || user <= 0 {
		return 0, ErrUnauthenticated
	}
	return user, nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// SignToken makes an HS256 token for a user (for clients in tests, the demo
// and the load generator).
func SignToken(user int64, key []byte, exp time.Time) string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	body, _ := json.Marshal(map[string]any{"sub": strconv.FormatInt(user, 10), "exp": exp.Unix()})
	payload := enc.EncodeToString(body)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(head + "." + payload))
	return head + "." + payload + "." + enc.EncodeToString(mac.Sum(nil))
}

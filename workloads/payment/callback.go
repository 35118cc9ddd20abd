package payment

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"golang.org/x/time/rate"

	"github.com/seckill/seckill-operator/workloads/inbox"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/states"
)

// SignatureHeader carries "sha256=<hex HMAC-SHA256 of timestamp.body>".
const SignatureHeader = "X-Seckill-Signature"

// TimestampHeader carries when the provider signed the callback (Unix
// milliseconds); it is part of what is signed.
const TimestampHeader = "X-Seckill-Timestamp"

// DefaultWindow is how far a callback's signed timestamp may be from now.
const DefaultWindow = 5 * time.Minute

// MaxKeysPerProvider: the current key and the next, during a rotation.
const MaxKeysPerProvider = 2

// MaxCallbackBytes bounds a callback body.
const MaxCallbackBytes = 8 << 10

// quarantineGroup names the callbacks kept in message_quarantine.
const quarantineGroup = "payment-callback"

var (
	qQuarantinedOpen = mustSQL("quarantined_open")
	qQuarantinedDone = mustSQL("quarantined_done")
	providerName     = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	currencyCode     = regexp.MustCompile(`^[A-Z]{3}$`)
)

// CallbackBody is what the provider posts.
type CallbackBody struct {
	TransactionID string               `json:"transaction_id"`
	OrderID       string               `json:"order_id"`
	AmountCents   int64                `json:"amount_cents"`
	Currency      string               `json:"currency"`
	Status        states.PaymentStatus `json:"status"`
	PaidAtMs      int64                `json:"paid_at_ms"`
}

// Sign is the provider's signature of body sent at tsMs (Unix ms) with key:
// the timestamp is signed with the body, so a captured callback cannot be
// replayed later under a new timestamp.
func Sign(key []byte, tsMs int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strconv.FormatInt(tsMs, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// SignedHeaders sets the timestamp and signature headers of a callback.
func SignedHeaders(h http.Header, key []byte, ts time.Time, body []byte) {
	ms := ts.UnixMilli()
	h.Set(TimestampHeader, strconv.FormatInt(ms, 10))
	h.Set(SignatureHeader, Sign(key, ms, body))
}

// ParseKeys reads the providers' callback keys, "provider:hexkey,...": a
// provider named twice has two keys (the current and the next, while
// rotating); either verifies.
func ParseKeys(s string) (map[string][][]byte, error) {
	keys := map[string][][]byte{}
	for _, part := range strings.Split(s, ",") {
		name, hexKey, ok := strings.Cut(strings.TrimSpace(part), ":")
		key, err := hex.DecodeString(hexKey)
		if !ok || !providerName.MatchString(name) || err != nil || len(key) < 16 {
			return nil, errors.New("-payment-keys entries must be provider:hexkey with a provider name of a-z, 0-9, - and a key of at least 16 bytes")
		}
		if len(keys[name]) == MaxKeysPerProvider {
			return nil, fmt.Errorf("-payment-keys: provider %q has more than %d keys (the current one and the next, while rotating)", name, MaxKeysPerProvider)
		}
		keys[name] = append(keys[name], key)
	}
	return keys, nil
}

// verify checks the signature against each of the provider's keys and the
// signed timestamp against now ± window. The answer codes are the reply's.
func verify(keys [][]byte, h http.Header, body []byte, now time.Time, window time.Duration) (string, string) {
	ts, err := strconv.ParseInt(h.Get(TimestampHeader), 10, 64)
	if err != nil || ts <= 0 {
		return "BAD_SIGNATURE", "the " + TimestampHeader + " header must be Unix milliseconds"
	}
	got := []byte(h.Get(SignatureHeader))
	ok := false
	for _, k := range keys {
		ok = hmac.Equal(got, []byte(Sign(k, ts, body))) || ok // every key tried: no timing hint of which
	}
	if !ok {
		return "BAD_SIGNATURE", "the signature does not match the timestamp and body"
	}
	if d := now.Sub(time.UnixMilli(ts)); d > window || d < -window {
		return "STALE_CALLBACK", fmt.Sprintf("signed %s from now; accepted within %s", d.Round(time.Second), window)
	}
	return "", ""
}

// parse checks a callback body strictly.
func parse(provider string, body []byte) (Callback, states.PaymentStatus, error) {
	var b CallbackBody
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return Callback{}, "", fmt.Errorf("callback body: %w", err)
	}
	if dec.More() {
		return Callback{}, "", errors.New("callback body: trailing data")
	}
	oid, err := uuid.Parse(b.OrderID)
	switch {
	case err != nil:
		return Callback{}, "", errors.New("order_id must be a UUID")
	case b.TransactionID == "" || len(b.TransactionID) > 128:
		return Callback{}, "", errors.New("transaction_id must have 1 to 128 characters")
	case b.AmountCents <= 0:
		return Callback{}, "", errors.New("amount_cents must be positive")
	case !currencyCode.MatchString(b.Currency):
		return Callback{}, "", errors.New("currency must be three capital letters (ISO 4217)")
	case b.Status != states.PaymentSuccess && b.Status != states.PaymentFailed:
		return Callback{}, "", errors.New(`status must be "SUCCESS" or "FAILED"`)
	case b.PaidAtMs <= 0:
		return Callback{}, "", errors.New("paid_at_ms must be a positive Unix time in milliseconds")
	}
	return Callback{Provider: provider, TransactionID: b.TransactionID, OrderID: oid, AmountCents: b.AmountCents,
		Currency: b.Currency, PaidAt: time.UnixMilli(b.PaidAtMs)}, b.Status, nil
}

// Handler serves POST /v1/payments/{provider}/callbacks.
type Handler struct {
	Store *Store
	// Keys are the providers' HMAC keys, by provider name: one, or two
	// while a key is rotated (either verifies).
	Keys map[string][][]byte
	// Window is how far the signed timestamp may be from now (default
	// DefaultWindow): a callback captured and replayed later is refused.
	Window time.Duration
	// Limiter, when set, bounds the callbacks this process reads per second;
	// beyond it a callback is answered 429 RETRY before its body is read.
	Limiter *rate.Limiter
	Log     *slog.Logger
	now     func() time.Time
}

type reply struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// Routes registers the callback endpoint on mux.
func (h *Handler) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/payments/{provider}/callbacks", h.callback)
}

func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	answer := func(status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(reply{Code: code, Message: msg})
	}
	if h.Limiter != nil && !h.Limiter.Allow() {
		answer(http.StatusTooManyRequests, "RETRY", "too many callbacks; send again later")
		return
	}
	provider := r.PathValue("provider")
	keys, ok := h.Keys[provider]
	if !providerName.MatchString(provider) || !ok || len(keys) == 0 {
		answer(http.StatusNotFound, "UNKNOWN_PROVIDER", "no such payment provider")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxCallbackBytes+1))
	if err != nil || len(body) > MaxCallbackBytes {
		answer(http.StatusBadRequest, "INVALID_CALLBACK", "unreadable or oversized body")
		return
	}
	now, window := time.Now(), h.Window
	if h.now != nil {
		now = h.now()
	}
	if window <= 0 {
		window = DefaultWindow
	}
	if code, msg := verify(keys, r.Header, body, now, window); code != "" {
		if code == "STALE_CALLBACK" {
			h.Log.Warn("payment callback outside its window refused", "provider", provider, "detail", msg)
		}
		answer(http.StatusUnauthorized, code, msg)
		return
	}
	cb, status, err := parse(provider, body)
	if err != nil {
		answer(http.StatusBadRequest, "INVALID_CALLBACK", err.Error())
		return
	}
	if status == states.PaymentFailed {
		// Nothing to record: the order stays payable until it expires.
		answer(http.StatusOK, "ACKNOWLEDGED", "failed payment noted")
		return
	}
	result, err := h.Store.Apply(r.Context(), cb)
	switch {
	case errors.Is(err, ErrUnknownOrder):
		if qerr := h.quarantine(r.Context(), cb, body, "UNKNOWN_ORDER", err); qerr != nil {
			answer(http.StatusServiceUnavailable, "RETRY", "not recorded; send again")
			return
		}
		answer(http.StatusAccepted, "QUARANTINED", "unknown order: kept and looked up again")
	case errors.Is(err, ErrConflict):
		if qerr := h.quarantine(r.Context(), cb, body, "CONFLICT", err); qerr != nil {
			answer(http.StatusServiceUnavailable, "RETRY", "not recorded; send again")
			return
		}
		answer(http.StatusConflict, "CONFLICT", err.Error())
	case err != nil:
		h.Log.Warn("payment callback not applied", append([]any{"provider", provider, "transaction_id", cb.TransactionID, logs.OrderID, cb.OrderID}, logs.Err(err)...)...)
		answer(http.StatusServiceUnavailable, "RETRY", "not applied; send again")
	default:
		fields := []any{"provider", provider, "transaction_id", cb.TransactionID, logs.OrderID, cb.OrderID, logs.PaymentID, cb.PaymentID(), "result", result}
		if result == ResultPaidAfterCancel {
			// The payment and the cancel met: the order was cancelled first.
			h.Log.Warn("payment for a cancelled order: refund flow", append(fields, logs.Event, logs.EventPaymentCancelRace)...)
		} else {
			h.Log.Info("payment callback", fields...)
		}
		answer(http.StatusOK, result, "")
	}
}

func (h *Handler) quarantine(ctx context.Context, cb Callback, body []byte, reason string, cause error) error {
	pid := cb.PaymentID()
	return inbox.Quarantine(ctx, h.Store.Pool, inbox.Quarantined{Group: quarantineGroup, Topic: cb.Provider,
		BrokerMessageID: cb.TransactionID, MessageID: &pid, Reason: reason, Detail: cause.Error(), Payload: body})
}

// RetryQuarantined looks up the orders of quarantined callbacks again and
// applies those whose order now exists; it returns how many it applied.
func (s *Store) RetryQuarantined(ctx context.Context, limit int) (int, error) {
	rows, err := s.Pool.Query(ctx, qQuarantinedOpen, limit)
	if err != nil {
		return 0, fmt.Errorf("reading quarantined callbacks: %w", err)
	}
	type kept struct {
		id       uuid.UUID
		provider string
		body     []byte
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (kept, error) {
		var k kept
		return k, r.Scan(&k.id, &k.provider, &k.body)
	})
	if err != nil {
		return 0, fmt.Errorf("reading quarantined callbacks: %w", err)
	}
	n := 0
	for _, k := range list {
		cb, _, err := parse(k.provider, k.body)
		if err != nil {
			continue // stays for a person
		}
		if _, err := s.Apply(ctx, cb); err != nil {
			continue // still unknown, or a conflict: stays quarantined
		}
		if _, err := s.Pool.Exec(ctx, qQuarantinedDone, k.id); err != nil {
			return n, fmt.Errorf("closing quarantined callback %s: %w", k.id, err)
		}
		n++
	}
	return n, nil
}

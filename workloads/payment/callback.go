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
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill-operator/workloads/orderstore"
)

// SignatureHeader carries "sha256=<hex HMAC-SHA256 of the body>".
const SignatureHeader = "X-Seckill-Signature"

// MaxCallbackBytes bounds a callback body.
const MaxCallbackBytes = 8 << 10

// quarantineGroup names the callbacks kept in message_quarantine.
const quarantineGroup = "payment-callback"

var (
	qQuarantinedOpen = mustSQL("quarantined_open")
	qQuarantinedDone = mustSQL("quarantined_done")
	providerName     = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
)

// CallbackBody is what the provider posts.
type CallbackBody struct {
	TransactionID string `json:"transaction_id"`
	OrderID       string `json:"order_id"`
	AmountCents   int64  `json:"amount_cents"`
	Status        string `json:"status"`
	PaidAtMs      int64  `json:"paid_at_ms"`
}

// Sign is the provider's signature of body with key.
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// parse checks a callback body strictly.
func parse(provider string, body []byte) (Callback, string, error) {
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
	case b.AmountCents < 0:
		return Callback{}, "", errors.New("amount_cents must not be negative")
	case b.Status != "SUCCESS" && b.Status != "FAILED":
		return Callback{}, "", errors.New(`status must be "SUCCESS" or "FAILED"`)
	case b.PaidAtMs <= 0:
		return Callback{}, "", errors.New("paid_at_ms must be a positive Unix time in milliseconds")
	}
	return Callback{Provider: provider, TransactionID: b.TransactionID, OrderID: oid, AmountCents: b.AmountCents,
		PaidAt: time.UnixMilli(b.PaidAtMs)}, b.Status, nil
}

// Handler serves POST /v1/payments/{provider}/callbacks.
type Handler struct {
	Store *Store
	// Keys are the providers' HMAC keys, by provider name.
	Keys map[string][]byte
	Log  *slog.Logger
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
	provider := r.PathValue("provider")
	key, ok := h.Keys[provider]
	if !providerName.MatchString(provider) || !ok {
		answer(http.StatusNotFound, "UNKNOWN_PROVIDER", "no such payment provider")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxCallbackBytes+1))
	if err != nil || len(body) > MaxCallbackBytes {
		answer(http.StatusBadRequest, "INVALID_CALLBACK", "unreadable or oversized body")
		return
	}
	if !hmac.Equal([]byte(r.Header.Get(SignatureHeader)), []byte(Sign(key, body))) {
		answer(http.StatusUnauthorized, "BAD_SIGNATURE", "the signature does not match the body")
		return
	}
	cb, status, err := parse(provider, body)
	if err != nil {
		answer(http.StatusBadRequest, "INVALID_CALLBACK", err.Error())
		return
	}
	if status == "FAILED" {
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
		h.Log.Warn("payment callback not applied", "provider", provider, "transaction_id", cb.TransactionID, "error", err)
		answer(http.StatusServiceUnavailable, "RETRY", "not applied; send again")
	default:
		h.Log.Info("payment callback", "provider", provider, "transaction_id", cb.TransactionID, "order_id", cb.OrderID, "result", result)
		answer(http.StatusOK, result, "")
	}
}

func (h *Handler) quarantine(ctx context.Context, cb Callback, body []byte, reason string, cause error) error {
	pid := cb.PaymentID()
	return orderstore.Quarantine(ctx, h.Store.Pool, orderstore.Quarantined{Group: quarantineGroup, Topic: cb.Provider,
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

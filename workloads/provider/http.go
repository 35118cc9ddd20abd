package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// paidJSON is a success on the wire.
type paidJSON struct {
	Paid          bool   `json:"paid"`
	TransactionID string `json:"transaction_id,omitempty"`
	AmountCents   int64  `json:"amount_cents,omitempty"`
	Currency      string `json:"currency,omitempty"`
	AtMs          int64  `json:"at_ms,omitempty"`
}

func toJSON(p *Paid) paidJSON {
	if p == nil {
		return paidJSON{}
	}
	return paidJSON{Paid: true, TransactionID: p.TransactionID, AmountCents: p.AmountCents, Currency: p.Currency, AtMs: p.At.UnixMilli()}
}

// Handler serves a Sim over HTTP, the way a real channel's merchant API
// would be called: POST /orders/{id}/pay, /orders/{id}/close,
// GET /orders/{id}, POST /refunds/{transaction}.
func Handler(s *Sim) http.Handler {
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, p *Paid, err error) {
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			// A closed payment is the channel's answer; anything else (a
			// callback that could not be delivered) is its failure.
			status, code := http.StatusBadGateway, "CHANNEL_ERROR"
			if errors.Is(err, ErrClosed) {
				status, code = http.StatusConflict, "PAYMENT_CLOSED"
			}
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(toJSON(p))
	}
	order := func(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
		id, err := uuid.Parse(r.PathValue("id"))
		if err != nil {
			http.Error(w, "order id must be a UUID", http.StatusBadRequest)
			return uuid.Nil, false
		}
		return id, true
	}
	mux.HandleFunc("POST /orders/{id}/pay", func(w http.ResponseWriter, r *http.Request) {
		if id, ok := order(w, r); ok {
			amount, err := strconv.ParseInt(r.URL.Query().Get("amount_cents"), 10, 64)
			currency := r.URL.Query().Get("currency")
			if err != nil || amount <= 0 || !currencyCode.MatchString(currency) {
				http.Error(w, "amount_cents must be a positive integer and currency three capital letters", http.StatusBadRequest)
				return
			}
			p, err := s.Pay(r.Context(), id, amount, currency)
			reply(w, &p, err)
		}
	})
	mux.HandleFunc("POST /orders/{id}/close", func(w http.ResponseWriter, r *http.Request) {
		if id, ok := order(w, r); ok {
			p, err := s.Close(r.Context(), id)
			reply(w, p, err)
		}
	})
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		if id, ok := order(w, r); ok {
			p, err := s.Query(r.Context(), id)
			reply(w, p, err)
		}
	})
	mux.HandleFunc("POST /refunds/{tx}", func(w http.ResponseWriter, r *http.Request) {
		reply(w, nil, s.Refund(r.Context(), r.PathValue("tx")))
	})
	return mux
}

// Client is a Channel reached over HTTP (the Handler's API).
type Client struct {
	ProviderName string
	BaseURL      string
	HTTP         *http.Client
}

// Name implements Channel.
func (c *Client) Name() string { return c.ProviderName }

func (c *Client) call(ctx context.Context, method, path string) (*Paid, error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("payment channel %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusConflict && strings.HasPrefix(path, "/orders/") && strings.Contains(path, "/pay") {
		return nil, ErrClosed
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("payment channel %s %s: HTTP %d", method, path, resp.StatusCode)
	}
	var p paidJSON
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		return nil, fmt.Errorf("payment channel %s %s: %w", method, path, err)
	}
	if !p.Paid {
		return nil, nil
	}
	return &Paid{TransactionID: p.TransactionID, AmountCents: p.AmountCents, Currency: p.Currency, At: time.UnixMilli(p.AtMs)}, nil
}

// Pay asks the channel to charge the order its amount (what a buyer's
// wallet does, for the amount the merchant asked);
// ErrClosed when the channel closed the order's payment.
func (c *Client) Pay(ctx context.Context, order uuid.UUID, amountCents int64, currency string) (*Paid, error) {
	q := url.Values{"amount_cents": {strconv.FormatInt(amountCents, 10)}, "currency": {currency}}
	return c.call(ctx, http.MethodPost, "/orders/"+order.String()+"/pay?"+q.Encode())
}

// Close implements Channel.
func (c *Client) Close(ctx context.Context, order uuid.UUID) (*Paid, error) {
	return c.call(ctx, http.MethodPost, "/orders/"+order.String()+"/close")
}

// Query implements Channel.
func (c *Client) Query(ctx context.Context, order uuid.UUID) (*Paid, error) {
	return c.call(ctx, http.MethodGet, "/orders/"+order.String())
}

// Refund implements Channel.
func (c *Client) Refund(ctx context.Context, transactionID string) error {
	_, err := c.call(ctx, http.MethodPost, "/refunds/"+transactionID)
	return err
}

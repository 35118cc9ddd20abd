package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

// soldOut answers every reservation SOLD_OUT: the handler's own cost, without Redis.
type soldOut struct{}

func (soldOut) Reserve(context.Context, redisstore.ReserveRequest) (redisstore.ReserveResult, error) {
	return redisstore.ReserveResult{Result: redisstore.Result{Code: redisstore.ReserveSoldOut}}, nil
}

// BenchmarkReserveHandlerSoldOut is the CPU one sold-out answer costs the
// gateway apart from Redis and the connection: token, body, ids, answer.
// Traces are off, as by default.
func BenchmarkReserveHandlerSoldOut(b *testing.B) { benchSoldOut(b) }

// BenchmarkReserveHandlerSoldOutTraced is the same with every request's
// reserve span recorded (and dropped by the exporter): what turning
// traces on costs the gateway per request.
func BenchmarkReserveHandlerSoldOutTraced(b *testing.B) {
	shutdown, err := tracing.Setup(context.Background(), tracing.Options{Exporter: tracetest.NewNoopExporter(), Service: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	benchSoldOut(b)
}

func benchSoldOut(b *testing.B) {
	key := []byte("0123456789abcdef0123456789abcdef")
	ring, err := ids.NewKeyring(1, map[byte][]byte{1: key})
	if err != nil {
		b.Fatal(err)
	}
	s := New(Config{ActivityID: 7, SKUs: map[int64]int{3: 1}, TokenKey: key, BusinessDeadline: time.Minute,
		SendGrace: time.Second, RequestTTL: time.Hour}, nil, nil, nil, ring, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.reserver = soldOut{}
	h := s.Handler()
	const users = 1024
	auth := make([]string, users)
	for i := range auth {
		auth[i] = "Bearer " + SignToken(int64(i+1), key, time.Now().Add(10*time.Minute))
	}
	body := `{"request_id":"` + uuid.NewString() + `"}`
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r := httptest.NewRequest(http.MethodPost, "/v1/activities/7/skus/3/reservations", strings.NewReader(body))
		r.Header.Set("Authorization", auth[i%users])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), CodeSoldOut) {
			b.Fatalf("answer %d %s", w.Code, w.Body)
		}
	}
}

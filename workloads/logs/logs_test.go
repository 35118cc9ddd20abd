package logs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill-operator/workloads/logs"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestErrorClass(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("committing the order: %w", err) }
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"none":               {nil, ""},
		"deadline":           {wrap(context.DeadlineExceeded), logs.ClassTimeout},
		"net timeout":        {wrap(&net.OpError{Op: "read", Err: timeoutErr{}}), logs.ClassTimeout},
		"canceled":           {wrap(context.Canceled), logs.ClassCanceled},
		"no rows":            {wrap(pgx.ErrNoRows), logs.ClassNotFound},
		"redis nil":          {wrap(redis.Nil), logs.ClassNotFound},
		"unique":             {wrap(&pgconn.PgError{Code: "23505"}), logs.ClassConflict},
		"serialization":      {wrap(&pgconn.PgError{Code: "40001"}), logs.ClassConflict},
		"check":              {wrap(&pgconn.PgError{Code: "23514"}), logs.ClassConstraint},
		"permission":         {wrap(&pgconn.PgError{Code: "42501"}), logs.ClassPermission},
		"admin shutdown":     {wrap(&pgconn.PgError{Code: "57P01"}), logs.ClassConnection},
		"eof":                {wrap(io.ErrUnexpectedEOF), logs.ClassConnection},
		"refused":            {wrap(&net.OpError{Op: "dial", Err: errors.New("connection refused")}), logs.ClassConnection},
		"broker":             {wrap(errors.New("CODE: TOPIC_NOT_FOUND, MESSAGE: no route")), logs.ClassBroker},
		"a number":           {wrap(&strconv.NumError{Func: "ParseInt", Num: "x", Err: strconv.ErrSyntax}), logs.ClassInvalid},
		"anything else":      {errors.New("surprise"), logs.ClassOther},
		"bad SQL is invalid": {wrap(&pgconn.PgError{Code: "42P01"}), logs.ClassInvalid},
	} {
		t.Run(name, func(t *testing.T) { require.Equal(t, tc.want, logs.ErrorClass(tc.err)) })
	}
}

func TestOneJSONLineWithTheFields(t *testing.T) {
	var buf bytes.Buffer
	l := logs.New(&buf, "consumer", logs.Options{ActivityID: 42})
	l.Debug("not written at the default level")
	l.Warn("order commit outcome unknown", logs.Event, logs.EventOrderCommitUnknown, logs.MessageID, "m-1",
		slog.Group("", logs.Err(wrapped())...))
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	require.Equal(t, "consumer", line[logs.Workload])
	require.InDelta(t, 42, line[logs.ActivityID], 0)
	require.Equal(t, logs.EventOrderCommitUnknown, line[logs.Event])
	require.Equal(t, logs.ClassConnection, line[logs.ErrorClassKey])
	require.Contains(t, line["error"], "unexpected EOF")
	require.Equal(t, 1, bytes.Count(buf.Bytes(), []byte("\n")), "the debug line is not written")

	level, err := logs.ParseLevel("debug")
	require.NoError(t, err)
	buf.Reset()
	logs.New(&buf, "gateway", logs.Options{Level: level}).Debug("reserved", logs.Event, logs.EventReservationCreated)
	require.Contains(t, buf.String(), `"event":"reservation.created"`)
	require.NotContains(t, buf.String(), logs.ActivityID, "no activity: no field")
	_, err = logs.ParseLevel("loud")
	require.Error(t, err)
}

func wrapped() error { return fmt.Errorf("commit: %w", io.ErrUnexpectedEOF) }

func TestEveryEventIsNamedOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range logs.Events {
		require.False(t, seen[e], e)
		seen[e] = true
	}
	require.Len(t, logs.Events, 16, "the events of the specification's §12.1")
}

// A line logged with a context inside a span carries the span's trace and
// span ids (design.md#traces); a line that names its trace id keeps it; an
// empty trace_id gives way to the span's; without a span nothing is added.
func TestLinesCarryTheSpansTraceID(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: mustTraceID(t, tid), SpanID: mustSpanID(t, sid), TraceFlags: trace.FlagsSampled})
	inSpan := trace.ContextWithSpanContext(context.Background(), sc)
	for _, c := range []struct {
		name     string
		ctx      context.Context
		args     []any
		trace    any
		span     any
		traceIDs int
	}{
		{"in a span", inSpan, nil, tid, sid, 1},
		{"named", inSpan, []any{logs.TraceID, "caller"}, "caller", nil, 1},
		{"named empty", inSpan, []any{logs.TraceID, "", logs.MessageID, "m"}, tid, sid, 1},
		{"no span", context.Background(), nil, nil, nil, 0},
		{"no span, named empty", context.Background(), []any{logs.TraceID, ""}, "", nil, 1},
	} {
		var buf bytes.Buffer
		logs.New(&buf, "consumer", logs.Options{}).With("k", "v").InfoContext(c.ctx, "line", c.args...)
		var line map[string]any
		require.NoError(t, json.Unmarshal(buf.Bytes(), &line), c.name)
		require.Equal(t, c.trace, line[logs.TraceID], c.name)
		require.Equal(t, c.span, line[logs.SpanID], c.name)
		require.Equal(t, "v", line["k"], c.name)
		require.Equal(t, c.traceIDs, bytes.Count(buf.Bytes(), []byte(`"trace_id"`)), "%s: one trace_id field at most", c.name)
		if _, named := line[logs.MessageID]; c.name == "named empty" {
			require.True(t, named, "the other fields are kept")
		}
	}
}

func mustTraceID(t *testing.T, s string) trace.TraceID {
	id, err := trace.TraceIDFromHex(s)
	require.NoError(t, err)
	return id
}

func mustSpanID(t *testing.T, s string) trace.SpanID {
	id, err := trace.SpanIDFromHex(s)
	require.NoError(t, err)
	return id
}

package tracing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill-operator/workloads/tracing"
)

const (
	tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	sid = "00f067aa0ba902b7"
	tp  = "00-" + tid + "-" + sid + "-01"
)

func TestCompose(t *testing.T) {
	for _, c := range []struct{ trace, span, want string }{
		{tid, sid, tp},
		{"", "", ""},
		{tid, "", ""},
		{"t", sid, ""}, // not an id
		{"00000000000000000000000000000000", sid, ""}, // all zero: invalid
		{tid, "0000000000000000", ""},
		{"4BF92F3577B34DA6A3CE929D0E0E4736", sid, ""}, // W3C ids are lowercase
	} {
		require.Equal(t, c.want, tracing.Compose(c.trace, c.span), "%q %q", c.trace, c.span)
	}
}

// Off (no exporter): no span is recorded, but a caller's context passes
// through every step unchanged — the trace id reaches the messages and the
// log lines all the same; a step without one has none.
func TestOffCarriesTheCallersContext(t *testing.T) {
	ctx, span := tracing.Start(tracing.FromTraceparent(context.Background(), tp), tracing.SpanSend, trace.SpanKindProducer)
	require.False(t, span.IsRecording())
	require.Equal(t, tp, tracing.Traceparent(ctx))
	require.Equal(t, map[string]string{tracing.Header: tp}, tracing.Properties(ctx))
	got, _ := tracing.IDs(tracing.FromProperties(context.Background(), tracing.Properties(ctx), ""))
	require.Equal(t, tid, got)

	ctx, _ = tracing.Start(context.Background(), tracing.SpanSend, trace.SpanKindProducer)
	require.Empty(t, tracing.Traceparent(ctx))
	require.Nil(t, tracing.Properties(ctx))
	require.Equal(t, context.Background(), tracing.FromTraceparent(context.Background(), "garbage"))
}

// On: spans are children of the remote parent they were started under;
// the message property wins over the body's fallback; shutting down
// restores the no-op.
func TestOnRecordsChildrenOfTheRemoteParent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	shutdown, err := tracing.Setup(context.Background(), tracing.Options{Exporter: exp, Service: "test", ActivityID: 7})
	require.NoError(t, err)

	fallback := "00-" + tid + "-" + "1111111111111111" + "-01"
	ctx, span := tracing.Start(tracing.FromProperties(context.Background(), map[string]string{tracing.Header: tp}, fallback),
		tracing.SpanConsume, trace.SpanKindConsumer, tracing.AttrBatch.Int(3))
	require.True(t, span.IsRecording())
	_, child := tracing.Start(ctx, tracing.SpanCommit, trace.SpanKindInternal)
	tracing.End(child, nil)
	tracing.End(span, context.Canceled)

	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	commit, consume := spans[0], spans[1]
	require.Equal(t, tid, consume.SpanContext.TraceID().String())
	require.Equal(t, sid, consume.Parent.SpanID().String(), "the property, not the fallback")
	require.Equal(t, consume.SpanContext.SpanID(), commit.Parent.SpanID())
	require.Equal(t, "Error", consume.Status.Code.String())
	require.Contains(t, consume.Resource.String(), "seckill.activity_id=7")

	require.NoError(t, shutdown(context.Background()))
	_, after := tracing.Start(context.Background(), tracing.SpanSend, trace.SpanKindProducer)
	require.False(t, after.IsRecording(), "the no-op again after shutdown")
}

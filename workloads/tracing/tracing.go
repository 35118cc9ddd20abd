// Package tracing gives every workload OpenTelemetry traces
// (design.md#traces): one trace per reservation, from the gateway's reserve
// through the order-create message, the order transaction, the outbox and
// its relay, to the projection, the compensation, the cancel and the
// payment. The W3C trace context travels in each message's `traceparent`
// property, in the order-create message's trace fields, in the Redis
// reservation (for the scanner's resend) and in the outbox, order and
// compensation rows (for what is sent or done later, by another process).
//
// Exporting is off by default: the tracer is OpenTelemetry's no-op, which
// still carries a caller's context along (a traceparent received at the
// gateway reaches every message and log line). With an OTLP endpoint
// (`-otlp-endpoint`, $SECKILL_OTLP_ENDPOINT, the operator's
// spec.observability.otlpEndpoint) spans are batched to it over gRPC.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Span names (design.md#traces).
const (
	SpanReserve    = "reserve"
	SpanSend       = "send"
	SpanConsume    = "consume"
	SpanCommit     = "commit"
	SpanRelay      = "relay"
	SpanProject    = "project"
	SpanCompensate = "compensate"
	SpanCancel     = "cancel"
	SpanPayment    = "payment"
)

// Header is the W3C Trace Context header and message property.
const Header = "traceparent"

// Attribute keys on our spans (bounded business ids, never a token).
const (
	AttrActivity    = attribute.Key("seckill.activity_id")
	AttrSKU         = attribute.Key("seckill.sku_id")
	AttrReservation = attribute.Key("seckill.reservation_id")
	AttrMessage     = attribute.Key("seckill.message_id")
	AttrOrder       = attribute.Key("seckill.order_id")
	AttrEvent       = attribute.Key("seckill.event_type")
	AttrResult      = attribute.Key("seckill.result")
	AttrBatch       = attribute.Key("seckill.batch_size")
	AttrAttempt     = attribute.Key("seckill.attempt")
)

const instrumentation = "github.com/seckill/seckill-operator/workloads"

// tracer is the installed provider's tracer: the global no-op until Setup
// installs one, and again after its shutdown.
var tracer atomic.Pointer[trace.Tracer]

// exporting is whether Setup installed an exporter: without one, Start
// starts nothing and hands back ctx's span (a caller's remote one, or the
// no-op) — no allocation on the hot path, the caller's context carried all
// the same.
var exporting atomic.Bool

func init() {
	t := otel.Tracer(instrumentation)
	tracer.Store(&t)
}

var propagator = propagation.TraceContext{}

// Options configure Setup.
type Options struct {
	// Endpoint is the OTLP/gRPC collector (host:port); "" exports nothing.
	Endpoint string
	// Insecure sends without TLS (a collector on the node or in the pod).
	Insecure bool
	// Service names the process (service.name): the workload.
	Service string
	// ActivityID, when positive, is a resource attribute of every span.
	ActivityID int64
	// Exporter, when set, receives the spans instead of an OTLP endpoint
	// (tests: an in-memory exporter), synchronously.
	Exporter sdktrace.SpanExporter
}

// Setup installs the process's tracer provider and returns what flushes
// and stops it. Without an endpoint or exporter it installs nothing: the
// no-op tracer carries contexts and records nothing.
func Setup(ctx context.Context, o Options) (func(context.Context) error, error) {
	var opt sdktrace.TracerProviderOption
	switch {
	case o.Exporter != nil:
		opt = sdktrace.WithSyncer(o.Exporter)
	case o.Endpoint != "":
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(o.Endpoint)}
		if o.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("starting the OTLP exporter to %s: %w", o.Endpoint, err)
		}
		opt = sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(2*time.Second))
	default:
		return func(context.Context) error { return nil }, nil
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", o.Service)}
	if o.ActivityID > 0 {
		attrs = append(attrs, AttrActivity.Int64(o.ActivityID))
	}
	tp := sdktrace.NewTracerProvider(opt, sdktrace.WithResource(resource.NewSchemaless(attrs...)))
	t := tp.Tracer(instrumentation)
	before := tracer.Swap(&t)
	wasExporting := exporting.Swap(true)
	return func(ctx context.Context) error {
		tracer.Store(before)
		exporting.Store(wasExporting)
		return tp.Shutdown(ctx)
	}, nil
}

// Start starts a span named name under ctx's span (or a remote parent put
// there by FromTraceparent).
func Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !exporting.Load() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return (*tracer.Load()).Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// End records err (if any) on span and ends it.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Traceparent is the W3C header of ctx's span ("" without a valid one).
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[Header]
}

// Properties are the message properties that carry ctx's span to the
// consumer (nil without a valid one).
func Properties(ctx context.Context) map[string]string {
	if tp := Traceparent(ctx); tp != "" {
		return map[string]string{Header: tp}
	}
	return nil
}

// FromProperties is the context of a received message: its traceparent
// property's span as the remote parent (fallback: the header the body
// carried, e.g. the order-create message's trace fields).
func FromProperties(ctx context.Context, props map[string]string, fallback string) context.Context {
	if tp := props[Header]; tp != "" {
		return FromTraceparent(ctx, tp)
	}
	return FromTraceparent(ctx, fallback)
}

// FromTraceparent puts the remote span of a W3C header into ctx; a missing
// or invalid header leaves ctx as it is (a span started there is a root).
func FromTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{Header: traceparent})
}

// Compose is the W3C header of a sampled span given by its ids (32 and 16
// lowercase hex), "" unless both are valid: what the order-create message
// and the Redis reservation record as two fields.
func Compose(traceID, spanID string) string {
	t, err1 := trace.TraceIDFromHex(traceID)
	s, err2 := trace.SpanIDFromHex(spanID)
	if err := errors.Join(err1, err2); err != nil || !t.IsValid() || !s.IsValid() {
		return ""
	}
	return "00-" + traceID + "-" + spanID + "-01"
}

// IDs are the trace and span ids of ctx's span ("" without a valid one).
func IDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}

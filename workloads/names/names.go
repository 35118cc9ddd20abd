// Package names holds the names the operator, the workloads and the stack
// scripts share (topics, consumer groups, env vars, ports, labels), so they
// cannot drift apart. hack/stack.sh creates the same topics and groups.
package names

// Topics. Their message types are fixed when the topic is created.
const (
	// TopicOrderCreate carries ORDER_CREATE_REQUESTED (NORMAL).
	TopicOrderCreate = "seckill-order-create"
	// TopicOrderEvents carries the outbox's order events (NORMAL).
	TopicOrderEvents = "seckill-order-events"
	// TopicOrderCancel carries the delayed timeout-cancel timers (DELAY).
	TopicOrderCancel = "seckill-order-cancel"
)

// Consumer groups, each with a bounded retry count before its DLQ.
const (
	GroupOrderConsumer = "seckill-order-consumer"
	GroupProjector     = "seckill-projector"
	GroupCanceller     = "seckill-canceller"
	// GroupDLQReplayer reads the DLQs. Its retry limit (hack/stack.sh: 32)
	// must exceed every other group's: a dead-lettered message keeps its
	// attempt count, and a group whose limit it already passed would
	// dead-letter it again instead of delivering it.
	GroupDLQReplayer = "seckill-dlq-replayer"
)

// RetryLimit is the retry count of the production groups (hack/stack.sh,
// the operator's broker setup): a message gets RetryLimit+1 deliveries.
const RetryLimit = 8

// TopicOf is the topic a group consumes, where its DLQ is replayed to.
func TopicOf(group string) (string, bool) {
	t, ok := map[string]string{
		GroupOrderConsumer: TopicOrderCreate,
		GroupProjector:     TopicOrderEvents,
		GroupCanceller:     TopicOrderCancel,
	}[group]
	return t, ok
}

// DLQTopic is the broker's dead-letter topic of a consumer group.
func DLQTopic(group string) string { return "%DLQ%" + group }

// Environment variables the operator sets on the workloads.
const (
	EnvPGDSN       = "SECKILL_PG_DSN"
	EnvRedisAddrs  = "SECKILL_REDIS_ADDRS"
	EnvRedisMode   = "SECKILL_REDIS_MODE"
	EnvRedisMaster = "SECKILL_REDIS_MASTER"
	// EnvRedisUsername and EnvRedisPassword: the Redis ACL login (the
	// password from the environment or a file, never a flag value).
	EnvRedisUsername = "SECKILL_REDIS_USERNAME"
	// EnvRMQCAFile names the PEM authority the proxy's certificate is
	// verified against.
	EnvRMQCAFile = "SECKILL_RMQ_CA_FILE"
	// EnvRedisCAFile names the PEM authority Redis's certificate is
	// verified against: set, every Redis connection is TLS.
	EnvRedisCAFile   = "SECKILL_REDIS_CA_FILE"
	EnvRedisPassword = "SECKILL_REDIS_PASSWORD" //nolint:gosec // a variable name, not a credential
	EnvRMQEndpoint   = "SECKILL_RMQ_ENDPOINT"
	// EnvRMQAccessKey and EnvRMQSecretKey: the RocketMQ ACL user the
	// clients sign their requests as.
	EnvRMQAccessKey = "SECKILL_RMQ_ACCESS_KEY"
	EnvRMQSecretKey = "SECKILL_RMQ_SECRET_KEY" //nolint:gosec // a variable name, not a credential
	EnvIDKeys       = "SECKILL_ID_KEYS"
	EnvIDKeyCurrent = "SECKILL_ID_KEY_CURRENT"
	EnvTokenKey     = "SECKILL_TOKEN_KEY" //nolint:gosec // the name of a variable, not a credential
	// EnvTokenKeysDir, EnvTokenIssuer and EnvTokenAudience configure the
	// gateway's token verifier (a mounted Secret of keys; iss and aud).
	EnvTokenKeysDir  = "SECKILL_TOKEN_KEYS_DIR" //nolint:gosec // the name of a variable, not a credential
	EnvTokenIssuer   = "SECKILL_TOKEN_ISSUER"   //nolint:gosec // the name of a variable, not a credential
	EnvTokenAudience = "SECKILL_TOKEN_AUDIENCE" //nolint:gosec // the name of a variable, not a credential
	EnvActivityID    = "SECKILL_ACTIVITY_ID"
	EnvHTTPAddr      = "SECKILL_HTTP_ADDR"
	EnvMetricsAddr   = "SECKILL_METRICS_ADDR"
	EnvPaymentKeys   = "SECKILL_PAYMENT_KEYS"
	// EnvOTLPEndpoint and EnvOTLPInsecure name the trace collector
	// (spec.observability.otlpEndpoint, design.md#traces).
	EnvOTLPEndpoint = "SECKILL_OTLP_ENDPOINT"
	EnvOTLPInsecure = "SECKILL_OTLP_INSECURE"
)

// GatewayPort is the gateway's HTTP port in the pod; MetricsPort serves the
// other workers' /metrics, /healthz and /readyz. The operator sets them in
// every pod ($SECKILL_HTTP_ADDR, $SECKILL_METRICS_ADDR).
const (
	GatewayPort = 8080
	MetricsPort = 9090
)

// DefaultPorts are the ports a workload listens on when nothing sets its
// address: distinct, so that every workload runs side by side on one host
// (running without Kubernetes). The public HTTP workloads serve their
// metrics on a port of their own ("<name>-metrics"), never on the API's.
var DefaultPorts = map[string]int{
	"gateway":          8080,
	"payments":         8081,
	"gateway-metrics":  9096,
	"payments-metrics": 9097,
	"provider-sim":     8082,
	"consumer":         9090,
	"relay":            9091,
	"projector":        9092,
	"compensator":      9093,
	"scanner":          9094,
	"canceller":        9095,
}

// Labels put on every object the operator creates.
const (
	LabelActivity  = "seckill.io/activity"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagerName    = "seckill-operator"
)

// Messaging is the set of topics and consumer groups one activity's
// workloads use. Shared() is the stack's fixed set (one activity per broker,
// or activities that trust each other); ForActivity gives an activity its
// own, which the operator creates on the broker, so that two activities on
// one broker never receive each other's messages.
type Messaging struct {
	CreateTopic, EventsTopic, CancelTopic                        string
	ConsumerGroup, ProjectorGroup, CancellerGroup, ReplayerGroup string
}

// Shared is the fixed set (hack/rocketmq/resources.txt).
func Shared() Messaging {
	return Messaging{CreateTopic: TopicOrderCreate, EventsTopic: TopicOrderEvents, CancelTopic: TopicOrderCancel,
		ConsumerGroup: GroupOrderConsumer, ProjectorGroup: GroupProjector, CancellerGroup: GroupCanceller, ReplayerGroup: GroupDLQReplayer}
}

// ForActivity is an activity's own set: the shared names with "seckill-"
// followed by id (a short digest naming the activity) instead of
// "seckill-", e.g. seckill-1a2b3c4d5e-order-create.
func ForActivity(id string) Messaging {
	s := Shared()
	own := func(n string) string { return "seckill-" + id + "-" + n[len("seckill-"):] }
	return Messaging{CreateTopic: own(s.CreateTopic), EventsTopic: own(s.EventsTopic), CancelTopic: own(s.CancelTopic),
		ConsumerGroup: own(s.ConsumerGroup), ProjectorGroup: own(s.ProjectorGroup), CancellerGroup: own(s.CancellerGroup), ReplayerGroup: own(s.ReplayerGroup)}
}

// ReplayerRetryLimit is the DLQ replayer group's retry limit (see
// GroupDLQReplayer).
const ReplayerRetryLimit = 32

// Args are the flags that point a workload at m's topics and its group.
func (m Messaging) Args(workload string) []string {
	topics := []string{"-create-topic=" + m.CreateTopic, "-events-topic=" + m.EventsTopic, "-cancel-topic=" + m.CancelTopic}
	switch workload {
	case "gateway", "scanner":
		return []string{"-create-topic=" + m.CreateTopic}
	case "payments":
		return []string{"-events-topic=" + m.EventsTopic}
	case "relay":
		return topics
	case "consumer":
		return append(topics, "-group="+m.ConsumerGroup)
	case "projector":
		return append(topics, "-group="+m.ProjectorGroup)
	case "canceller":
		return append(topics, "-group="+m.CancellerGroup)
	}
	return nil
}

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
)

// DLQTopic is the broker's dead-letter topic of a consumer group.
func DLQTopic(group string) string { return "%DLQ%" + group }

// Environment variables the operator sets on the workloads.
const (
	EnvPGDSN        = "SECKILL_PG_DSN"
	EnvRedisAddrs   = "SECKILL_REDIS_ADDRS"
	EnvRedisMode    = "SECKILL_REDIS_MODE"
	EnvRedisMaster  = "SECKILL_REDIS_MASTER"
	EnvRMQEndpoint  = "SECKILL_RMQ_ENDPOINT"
	EnvIDKeys       = "SECKILL_ID_KEYS"
	EnvIDKeyCurrent = "SECKILL_ID_KEY_CURRENT"
	EnvTokenKey     = "SECKILL_TOKEN_KEY" //nolint:gosec // the name of a variable, not a credential
	EnvActivityID   = "SECKILL_ACTIVITY_ID"
	EnvHTTPAddr     = "SECKILL_HTTP_ADDR"
)

// GatewayPort is the gateway's HTTP port in the pod.
const GatewayPort = 8080

// Labels put on every object the operator creates.
const (
	LabelActivity  = "seckill.io/activity"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagerName    = "seckill-operator"
)

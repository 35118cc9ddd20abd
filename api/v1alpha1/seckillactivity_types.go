package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SKUSpec is one product on sale and its stock.
// +kubebuilder:validation:XValidation:rule="self.stock >= oldSelf.stock",message="stock may only grow"
// +kubebuilder:validation:XValidation:rule="self.buckets == oldSelf.buckets",message="buckets is immutable"
type SKUSpec struct {
	// ID is the SKU's business id.
	// +kubebuilder:validation:Minimum=1
	ID int64 `json:"id"`
	// Stock is the total number of units for sale. It may only grow.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000000
	Stock int64 `json:"stock"`
	// Buckets splits the SKU's Redis stock over this many hash slots, for hot SKUs.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	Buckets int32 `json:"buckets,omitempty"`
	// PriceCents is what one unit costs, in the minor unit of the activity's
	// currency. Every order of the SKU carries it, and a payment callback
	// whose amount differs is quarantined and pays nothing.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000000000
	PriceCents int64 `json:"priceCents"`
}

// Schedule is when the sale is open.
// +kubebuilder:validation:XValidation:rule="self.end > self.start",message="schedule.end must be after schedule.start"
type Schedule struct {
	// Start is when reservations open.
	Start metav1.Time `json:"start"`
	// End is when reservations close.
	End metav1.Time `json:"end"`
}

// RedisConnection says how to reach Redis.
// +kubebuilder:validation:XValidation:rule="!has(self.usernameSecret) || has(self.passwordSecret)",message="usernameSecret needs passwordSecret"
type RedisConnection struct {
	// Mode is single, sentinel or cluster.
	// +kubebuilder:validation:Enum=single;sentinel;cluster
	// +kubebuilder:default=single
	// +optional
	Mode string `json:"mode,omitempty"`
	// AddressesSecret holds a comma-separated list of host:port.
	AddressesSecret corev1.SecretKeySelector `json:"addressesSecret"`
	// MasterName is the Sentinel master name (sentinel mode only).
	// +optional
	MasterName string `json:"masterName,omitempty"`
	// UsernameSecret and PasswordSecret hold the Redis login (an ACL user
	// and its password; the password alone logs in as the default user).
	// In sentinel mode the same login is used with Sentinel. The operator
	// checks it before it runs anything; a refused login is Degraded
	// RedisAuthFailed.
	// +optional
	UsernameSecret *corev1.SecretKeySelector `json:"usernameSecret,omitempty"`
	// +optional
	PasswordSecret *corev1.SecretKeySelector `json:"passwordSecret,omitempty"`
	// CASecret holds the PEM authority Redis's certificate is verified
	// against. When set, every connection to Redis (Sentinel's and the
	// cluster's nodes included) is TLS, and each server's certificate must
	// name the address it is dialled at. The operator checks it with a
	// handshake (Degraded RedisTLSFailed when it does not verify) and mounts
	// it in the workloads' pods. Without it Redis is reached in plain text.
	// +optional
	CASecret *corev1.SecretKeySelector `json:"caSecret,omitempty"`
}

// RocketMQCredentials are an ACL user's access key and secret key.
type RocketMQCredentials struct {
	AccessKeySecret corev1.SecretKeySelector `json:"accessKeySecret"`
	SecretKeySecret corev1.SecretKeySelector `json:"secretKeySecret"`
}

// Connections references the Secrets that hold the stores' endpoints and keys.
// +kubebuilder:validation:XValidation:rule="has(self.tokenKeySecret) || has(self.tokenKeysSecret)",message="tokenKeySecret or tokenKeysSecret is required"
type Connections struct {
	// PostgresDSNSecret holds the PostgreSQL DSN.
	PostgresDSNSecret corev1.SecretKeySelector `json:"postgresDSNSecret"`
	// PostgresCASecret holds the PEM certificate authority PostgreSQL's
	// server certificate is verified against (the DSN says
	// sslmode=verify-full). The operator verifies with it, and mounts it in
	// the workloads' pods as a file their DSNs name (sslrootcert). Without
	// it, the DSN's own TLS settings apply (the system's authorities).
	// +optional
	PostgresCASecret *corev1.SecretKeySelector `json:"postgresCASecret,omitempty"`
	// Redis says how to reach Redis.
	Redis RedisConnection `json:"redis"`
	// RocketMQEndpointSecret holds the RocketMQ 5 proxy gRPC endpoint (host:port).
	RocketMQEndpointSecret corev1.SecretKeySelector `json:"rocketMQEndpointSecret"`
	// RocketMQCASecret holds the PEM authority the proxy's TLS certificate
	// is verified against (for the address of rocketMQEndpointSecret). The
	// operator checks it with a handshake (Degraded RocketMQTLSFailed when it
	// does not verify) and mounts it in the workloads' pods. Without it the
	// client library's default applies: TLS that accepts any certificate.
	// +optional
	RocketMQCASecret *corev1.SecretKeySelector `json:"rocketMQCASecret,omitempty"`
	// RocketMQCredentials: the broker's ACL user every workload signs its
	// requests as, and the operator creates the activity's topics and
	// groups as (rocketMQNameServerSecret). A login the broker refuses is
	// Degraded RocketMQAuthFailed. Without it requests go unsigned.
	// +optional
	RocketMQCredentials *RocketMQCredentials `json:"rocketMQCredentials,omitempty"`
	// RocketMQNameServerSecret holds a RocketMQ name server's host:port.
	// When set, the activity gets topics and consumer groups of its own
	// (seckill-<id>-order-create, …), which the operator creates on the
	// brokers the name server reports before any workload runs (Degraded
	// RocketMQAdminFailed when it cannot) and deletes with the activity, so
	// that activities sharing a broker never receive each other's messages.
	// Unset: the shared names, for a broker that serves one activity.
	// +optional
	RocketMQNameServerSecret *corev1.SecretKeySelector `json:"rocketMQNameServerSecret,omitempty"`
	// IDKeysSecret holds the HMAC keys of the stable business ids
	// ("<version>:<hex key>,..."); old versions must stay for rotation.
	IDKeysSecret corev1.SecretKeySelector `json:"idKeysSecret"`
	// TokenKeySecret holds an HS256 key that verifies the users' bearer
	// tokens (their kid "default"). At least 32 bytes.
	// +optional
	TokenKeySecret *corev1.SecretKeySelector `json:"tokenKeySecret,omitempty"`
	// TokenKeysSecret names a Secret of token keys mounted into the gateway,
	// one per data key: <kid>.hs256 (a raw HMAC key of at least 32 bytes) or
	// <kid>.es256.pem (an EC P-256 public key, PEM). Every key verifies the
	// tokens naming its kid, so keys are rotated by adding the next one
	// before issuers switch and removing the old one after.
	// +optional
	TokenKeysSecret *corev1.LocalObjectReference `json:"tokenKeysSecret,omitempty"`
	// PaymentKeysSecret holds the payment providers' callback HMAC keys
	// ("<provider>:<hex key>,..."); when set, the payments workload runs.
	// +optional
	PaymentKeysSecret *corev1.SecretKeySelector `json:"paymentKeysSecret,omitempty"`
}

// LimitsSpec bounds abuse. The per-user limit is counted in Redis next to
// the reservation keys, so every gateway replica shares it; the others are
// per replica.
type LimitsSpec struct {
	// PerUserRequests is how many reservation requests (retries included) one
	// user may send per PerUserWindow and SKU; 0 turns the limit off.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	// +optional
	PerUserRequests *int32 `json:"perUserRequests,omitempty"`
	// PerUserWindow is the window of PerUserRequests.
	// +kubebuilder:default="10s"
	// +optional
	PerUserWindow *metav1.Duration `json:"perUserWindow,omitempty"`
	// GatewayRequestsPerSecond is what one gateway replica admits; 0: unlimited.
	// +kubebuilder:validation:Minimum=0
	// +optional
	GatewayRequestsPerSecond int32 `json:"gatewayRequestsPerSecond,omitempty"`
	// StatusRequestsPerSecond is what one gateway replica admits on the
	// status endpoint.
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=0
	// +optional
	StatusRequestsPerSecond *int32 `json:"statusRequestsPerSecond,omitempty"`
	// CallbacksPerSecond is what one payments replica admits; beyond, the
	// provider is told to send again (429).
	// +kubebuilder:default=200
	// +kubebuilder:validation:Minimum=0
	// +optional
	CallbacksPerSecond *int32 `json:"callbacksPerSecond,omitempty"`
}

// TokensSpec is what the gateway requires of a bearer token (JWT, HS256 or
// ES256, with a kid naming one of the keys).
type TokensSpec struct {
	// Issuer is the required iss claim.
	// +kubebuilder:default="seckill"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Issuer string `json:"issuer,omitempty"`
	// Audience is the required aud claim (one of the token's audiences).
	// +kubebuilder:default="seckill-gateway"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Audience string `json:"audience,omitempty"`
	// MaxLifetime is the longest exp − iat accepted.
	// +kubebuilder:default="2h"
	// +optional
	MaxLifetime *metav1.Duration `json:"maxLifetime,omitempty"`
}

// PaymentChannelSpec is the payment provider's merchant API the timeout
// canceller asks before it cancels (close the payment, or learn of a success).
type PaymentChannelSpec struct {
	// URL of the channel's merchant API.
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`
	// Name of the provider, as its callbacks and payment records name it.
	// +kubebuilder:default=sim
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]{0,31}$`
	// +optional
	Name string `json:"name,omitempty"`
}

// WorkloadsSpec sets the image and resources of the workloads.
type WorkloadsSpec struct {
	// Image runs every workload (one binary, one subcommand each). Empty: the
	// operator's workload image. Another image runs only if the operator
	// allows it (--allowed-workload-images); otherwise the activity is
	// Degraded with reason ImageNotAllowed and nothing runs.
	// +optional
	Image string `json:"image,omitempty"`
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +kubebuilder:default=IfNotPresent
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// GatewayReplicas is the number of gateway pods.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +optional
	GatewayReplicas int32 `json:"gatewayReplicas,omitempty"`
	// Resources of each workload container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// ScalingSpec bounds the order consumers.
// +kubebuilder:validation:XValidation:rule="self.maxConsumers >= self.minConsumers",message="scaling.maxConsumers must be at least scaling.minConsumers"
type ScalingSpec struct {
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinConsumers int32 `json:"minConsumers,omitempty"`
	// +kubebuilder:default=8
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +optional
	MaxConsumers int32 `json:"maxConsumers,omitempty"`
	// TargetDrainTime is how fast a backlog should drain.
	// +kubebuilder:default="5m"
	// +optional
	TargetDrainTime *metav1.Duration `json:"targetDrainTime,omitempty"`
	// PostgresCapacityOverride, in order transactions per second, replaces the
	// measured PostgreSQL capacity.
	// +kubebuilder:validation:Minimum=1
	// +optional
	PostgresCapacityOverride *int32 `json:"postgresCapacityOverride,omitempty"`
	// LatencyBudget is the order transaction's p99 commit latency above which
	// PostgreSQL counts as saturated: no more consumers are added, and the
	// commit rate seen then becomes the measured capacity.
	// +kubebuilder:default="100ms"
	// +optional
	LatencyBudget *metav1.Duration `json:"latencyBudget,omitempty"`
	// CompensationPauseAfter is the backlog guard: when the oldest undecided
	// reservation is older than this, time-driven compensation pauses
	// (design.md#backlog); it resumes when the backlog is younger than half of it.
	// +kubebuilder:default="2m"
	// +optional
	CompensationPauseAfter *metav1.Duration `json:"compensationPauseAfter,omitempty"`
	// ScaleDownStabilization is how long the consumer count must stay
	// unchanged before it shrinks, by one consumer at a time.
	// +kubebuilder:default="3m"
	// +optional
	ScaleDownStabilization *metav1.Duration `json:"scaleDownStabilization,omitempty"`
	// SuspendConsumers stops the order consumers (the Deployment goes to 0
	// replicas) without ending the sale, for maintenance or a drill:
	// reservations keep being accepted and wait in the broker and Redis, and
	// the backlog guard applies. Setting it back to false resumes them,
	// sized to the backlog.
	// +optional
	SuspendConsumers bool `json:"suspendConsumers,omitempty"`
}

// ScheduleSpec is a cron schedule.
type ScheduleSpec struct {
	// Schedule in cron format.
	// +kubebuilder:default="*/10 * * * *"
	// +kubebuilder:validation:MinLength=9
	// +optional
	Schedule string `json:"schedule,omitempty"`
}

// SeckillActivitySpec is the desired flash sale.
type SeckillActivitySpec struct {
	// ActivityID is the sale's business id. Immutable.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="activityID is immutable"
	ActivityID int64 `json:"activityID"`
	// Currency of the SKUs' prices (ISO 4217), which a payment must match.
	// +kubebuilder:default="CNY"
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	// +optional
	Currency string `json:"currency,omitempty"`
	// SKUs on sale.
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	SKUs []SKUSpec `json:"skus"`
	// Schedule is when reservations are open.
	Schedule Schedule `json:"schedule"`
	// BusinessDeadline is how long a reservation may wait for its order before
	// it may be rejected (design.md#late-messages); not the order-creation SLO.
	// +kubebuilder:default="5m"
	// +optional
	BusinessDeadline *metav1.Duration `json:"businessDeadline,omitempty"`
	// PaymentWindow is how long an order waits for payment before it is cancelled.
	// +kubebuilder:default="15m"
	// +optional
	PaymentWindow *metav1.Duration `json:"paymentWindow,omitempty"`
	// Connections to the stores.
	Connections Connections `json:"connections"`
	// Workloads' image and resources.
	Workloads WorkloadsSpec `json:"workloads"`
	// Limits bound what one buyer, one gateway and one payments replica take.
	// +optional
	Limits LimitsSpec `json:"limits,omitempty"`
	// Tokens are the rules every buyer's bearer token must meet.
	// +optional
	Tokens TokensSpec `json:"tokens,omitempty"`
	// Scaling of the order consumers.
	// +optional
	Scaling ScalingSpec `json:"scaling,omitempty"`
	// PaymentChannel, when set, runs the timeout canceller against it.
	// +optional
	PaymentChannel *PaymentChannelSpec `json:"paymentChannel,omitempty"`
	// Compensation is the schedule of the compensation sweep.
	// +optional
	Compensation ScheduleSpec `json:"compensation,omitempty"`
	// Reconcile is the schedule of the reconcile job.
	// +optional
	Reconcile ScheduleSpec `json:"reconcile,omitempty"`
	// Paused stops new reservations (the gateway answers ACTIVITY_PAUSED).
	// +optional
	Paused bool `json:"paused,omitempty"`
	// Retention is how long Redis keys are kept after the end.
	// +kubebuilder:default="168h"
	// +optional
	Retention *metav1.Duration `json:"retention,omitempty"`
	// Observability configures the workloads' traces.
	// +optional
	Observability ObservabilitySpec `json:"observability,omitempty"`
}

// ObservabilitySpec configures what the workloads export beyond their
// /metrics (design.md#traces).
type ObservabilitySpec struct {
	// OTLPEndpoint is an OpenTelemetry collector's OTLP/gRPC host:port;
	// every workload sends its spans there (one trace per reservation).
	// Empty (the default): no spans are exported.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^$|^[A-Za-z0-9.-]+:[0-9]{1,5}$`
	// +optional
	OTLPEndpoint string `json:"otlpEndpoint,omitempty"`
	// OTLPInsecure sends the spans without TLS (a collector on the node or
	// beside the pods).
	// +optional
	OTLPInsecure bool `json:"otlpInsecure,omitempty"`
}

// Phase is where the activity is in its lifecycle.
// +kubebuilder:validation:Enum=Pending;Provisioning;Scheduled;Active;Draining;Reconciling;Completed;Paused;Failed
type Phase string

// Phases.
const (
	PhasePending      Phase = "Pending"
	PhaseProvisioning Phase = "Provisioning"
	PhaseScheduled    Phase = "Scheduled"
	PhaseActive       Phase = "Active"
	PhaseDraining     Phase = "Draining"
	PhaseReconciling  Phase = "Reconciling"
	PhaseCompleted    Phase = "Completed"
	PhasePaused       Phase = "Paused"
	PhaseFailed       Phase = "Failed"
)

// Condition types. Ready, Reconciling and Stalled are the ones GitOps
// tools read (kstatus: Reconciling True is InProgress, Stalled True is
// Failed, neither with status.observedGeneration current is Current;
// Flux and `kubectl wait --for=condition=Ready` read Ready).
const (
	// ConditionReady is True when the current generation is provisioned and
	// its workloads are ready (Scheduled, Active, Paused), or the sale is
	// Completed.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the operator works toward Ready
	// (provisioning, waiting for pods, draining, the final reconcile).
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the last pass ended on a failure that
	// will not pass by waiting alone (a Secret, a store, the image, a stock
	// decrease), with its reason; the operator retries.
	ConditionStalled = "Stalled"
	// ConditionReconcilePaused is True while AnnotationReconcile is
	// "paused": the operator changes nothing of the activity.
	ConditionReconcilePaused    = "ReconcilePaused"
	ConditionStockProvisioned   = "StockProvisioned"
	ConditionWorkloadsReady     = "WorkloadsReady"
	ConditionBacklogHealthy     = "BacklogHealthy"
	ConditionCompensationPaused = "CompensationPaused"
	ConditionReconciled         = "Reconciled"
	ConditionDegraded           = "Degraded"
)

// AnnotationReconcile set to ReconcilePausedValue stops the operator
// touching the activity — its stores, workloads and phase — until removed
// (for a person doing a recount); status shows ConditionReconcilePaused.
// spec.paused pauses the sale, not the operator.
const (
	AnnotationReconcile  = "seckill.io/reconcile"
	ReconcilePausedValue = "paused"
)

// SKUStatus is one SKU's counters.
type SKUStatus struct {
	ID               int64 `json:"id"`
	Stock            int64 `json:"stock"`
	Sold             int64 `json:"sold"`
	Remaining        int64 `json:"remaining"`
	OpenReservations int64 `json:"openReservations"`
}

// ReconcileSummary is the last reconcile run's result.
type ReconcileSummary struct {
	RunID        string      `json:"runID,omitempty"`
	FinishedAt   metav1.Time `json:"finishedAt,omitempty"`
	Result       string      `json:"result,omitempty"`
	Anomalies    int32       `json:"anomalies,omitempty"`
	AutoRepaired int32       `json:"autoRepaired,omitempty"`
	Manual       int32       `json:"manual,omitempty"`
}

// SeckillActivityStatus is the observed state.
type SeckillActivityStatus struct {
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// ObservedGeneration is the generation the last completed pass judged
	// (Ready, Reconciling and Stalled are about it).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +listType=map
	// +listMapKey=id
	// +optional
	SKUs []SKUStatus `json:"skus,omitempty"`
	// Sold is "sold/stock" over all SKUs, for kubectl get.
	// +optional
	Sold string `json:"sold,omitempty"`
	// OldestBacklogAgeSeconds is the age of the oldest unconsumed order-create message.
	// +optional
	OldestBacklogAgeSeconds int64 `json:"oldestBacklogAgeSeconds,omitempty"`
	// +optional
	DesiredConsumers int32 `json:"desiredConsumers,omitempty"`
	// +optional
	ReadyConsumers int32 `json:"readyConsumers,omitempty"`
	// MeasuredPostgresCapacity is the order commits per second PostgreSQL
	// sustained when it last reached the latency budget (0: not reached yet).
	// +optional
	MeasuredPostgresCapacity int32 `json:"measuredPostgresCapacity,omitempty"`
	// CommitRate is the order consumers' summed commit rate now (orders/s).
	// +optional
	CommitRate int32 `json:"commitRate,omitempty"`
	// DatabaseCommitRate is PostgreSQL's commit rate (pg_stat_database, all transactions/s).
	// +optional
	DatabaseCommitRate int32 `json:"databaseCommitRate,omitempty"`
	// OpenReservations is the order-create backlog: reservations PostgreSQL has not decided.
	// +optional
	OpenReservations int64 `json:"openReservations,omitempty"`
	// ScalingReason explains the last consumer scaling decision.
	// +optional
	ScalingReason string `json:"scalingReason,omitempty"`
	// LastScaleTime is when the consumers were last resized.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`
	// +optional
	LastReconcile *ReconcileSummary `json:"lastReconcile,omitempty"`
	// Progress is what the operator carries from one pass to the next, kept
	// here so that it survives a change of leader.
	// +optional
	Progress *OperatorProgress `json:"progress,omitempty"`
}

// OperatorProgress is the operator's memory of an activity between passes.
type OperatorProgress struct {
	// DatabaseCommits is the last pg_stat_database commit count read, and
	// when: the next pass's DatabaseCommitRate is measured against it.
	// +optional
	DatabaseCommits *CounterSample `json:"databaseCommits,omitempty"`
	// ReconcileRunsCountedUntil: the reconcile job's runs that finished by
	// then are in the operator's metrics (a new leader counts from here).
	// +optional
	ReconcileRunsCountedUntil *metav1.MicroTime `json:"reconcileRunsCountedUntil,omitempty"`
}

// CounterSample is a counter's value at a time.
type CounterSample struct {
	Value int64            `json:"value"`
	At    metav1.MicroTime `json:"at"`
}

// SeckillActivity is one flash sale.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ska;seckill,categories=seckill
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Sold",type=string,JSONPath=`.status.sold`
// +kubebuilder:printcolumn:name="Backlog(s)",type=integer,JSONPath=`.status.oldestBacklogAgeSeconds`
// +kubebuilder:printcolumn:name="Consumers",type=integer,JSONPath=`.status.readyConsumers`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredConsumers`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SeckillActivity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SeckillActivitySpec   `json:"spec,omitempty"`
	Status SeckillActivityStatus `json:"status,omitempty"`
}

// SeckillActivityList is a list of SeckillActivity.
// +kubebuilder:object:root=true
type SeckillActivityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SeckillActivity `json:"items"`
}

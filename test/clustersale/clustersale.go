// Package clustersale runs a flash sale on the local single-node Kubernetes
// (hack/cluster.sh) the way a platform team runs one: the chart installed
// with helm, a connection Secret and a SeckillActivity applied, buyers at the
// gateway Service through kube-proxy, the activity changed with kubectl
// patch while it runs (stock raised, paused and resumed, consumers suspended
// to build a real backlog, the end brought forward), a consumer pod killed,
// and the phases followed to Completed. It reports what it saw — phases,
// the consumer count over time, the backlog guard, the answers — and checks
// every invariant straight in PostgreSQL and Redis.
//
// `make demo` prints it (hack/clusterdemo); the e2e test asserts it
// (test/e2e).
package clustersale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/gateway"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/invariants"
	"github.com/seckill/seckill-operator/workloads/mq/admin"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/tlsca"
)

// NodeIP is the node's bridge address, where pods reach the stack.
// clusterPriceCents is the price of the sale's one SKU (every order carries it).
const clusterPriceCents = 9900

const NodeIP = "10.244.0.1"

// LabelDemo marks the namespaces a run creates, so that a later run can
// remove what an interrupted one left.
const LabelDemo = "seckill.io/cluster-sale"

// Options are the cluster and the stack a run uses.
type Options struct {
	// Root is the repository (the chart, .stack/cluster).
	Root string
	// DSN, RedisAddr and RMQEndpoint are the stack as this host reaches it;
	// the Secret gets them on the node's address.
	DSN, RedisAddr, RMQEndpoint string
	// RMQNameServer, when set, gives the activity topics and groups of its
	// own, created by the operator through this name server.
	RMQNameServer string
	// RocketMQCA is the PEM authority of the proxy's certificate (none: the
	// client library's unverified TLS).
	RocketMQCA []byte
	// RedisUsername and RedisPassword log in to the stack's Redis (the
	// activity's Secret carries them too).
	RedisUsername, RedisPassword string
	// RedisCA is the PEM authority of Redis's certificate (none: Redis in
	// plain text).
	RedisCA []byte
	// RMQAccessKey and RMQSecretKey: the broker's ACL user (the activity's
	// Secret carries it; the operator and the pods sign as it).
	RMQAccessKey, RMQSecretKey string
	// Stock is the SKU's stock at the start; the run raises it by half.
	Stock int
	// Logf prints progress.
	Logf func(format string, args ...any)
}

// Sample is the consumer count at one moment.
type Sample struct {
	At               time.Duration
	Desired, Ready   int32
	Reason           string
	CompensationStop bool
}

// Check is one invariant.
type Check struct {
	Name, Got string
	OK        bool
}

// Result is what a run saw.
type Result struct {
	Activity  int64
	Namespace string
	Phases    []string // "Phase at +12s"
	Seen      map[seckillv1alpha1.Phase]bool
	// Health is what GitOps tools made of the activity (kstatus), as it
	// changed: "Failed at +3s (SecretMissing)"; HealthSeen what it was at
	// the moments the run judges (kstatusAt).
	Health     []string
	HealthSeen map[string]status.Status
	Consumers  []Sample
	// ScaledUp/ScaledDown: the operator itself raised the consumer count
	// from a backlog, and lowered it again after the stabilization.
	ScaledUp, ScaledDown bool
	// GuardSet/GuardCleared: CompensationPaused went True, then False.
	GuardSet, GuardCleared bool
	KilledPod              string
	Answers                map[string]int
	Queued                 int
	FinalStock             int
	FinalJobSucceeded      bool
	Archived               bool
	Checks                 []Check
	Took                   time.Duration
	// PluginStatus is `kubectl seckill status` while the sale ran.
	PluginStatus string
}

// Failed lists the checks that did not hold.
func (r *Result) Failed() []string {
	var out []string
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c.Name+": "+c.Got)
		}
	}
	return out
}

type run struct {
	o          Options
	c          client.Client
	kubectl    string
	helm       string
	kubeconfig string
	image      string
	pool       *pgxpool.Pool
	rdb        *redis.Client
	start      time.Time
	act        *seckillv1alpha1.SeckillActivity
	tokenKey   []byte
	base       string
	// prom is the run's Prometheus (prometheus.go).
	prom *prometheus
	// fixSecret adds the key apply left out of the Secret.
	fixSecret func(context.Context) error

	mu  sync.Mutex
	res *Result
	// lastPhase: the last phase recorded (under mu).
	lastPhase seckillv1alpha1.Phase
	// lastHealth: the last kstatus recorded (under mu).
	lastHealth status.Status
}

// Run runs the sale; it returns an error when a step could not be carried
// out (the cluster, helm, a phase never reached), and otherwise the result,
// whose Checks say whether the invariants held.
func Run(ctx context.Context, o Options) (*Result, error) {
	r := &run{o: o, start: time.Now(), res: &Result{Answers: map[string]int{}, Seen: map[seckillv1alpha1.Phase]bool{},
		HealthSeen: map[string]status.Status{}}}
	if r.o.Logf == nil {
		r.o.Logf = func(string, ...any) {}
	}
	if err := r.connect(); err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, o.DSN)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer pool.Close()
	r.pool = pool
	ropts := &redis.Options{Addr: o.RedisAddr, Username: o.RedisUsername, Password: o.RedisPassword}
	if len(o.RedisCA) > 0 {
		if ropts.TLSConfig, err = tlsca.Config(o.RedisCA, "the Redis CA"); err != nil {
			return nil, err
		}
	}
	r.rdb = redis.NewClient(ropts)
	defer func() { _ = r.rdb.Close() }()

	if err := r.removeLeftovers(ctx); err != nil {
		return r.res, err
	}
	if err := r.install(ctx); err != nil {
		return r.res, err
	}
	if r.prom, err = r.startPrometheus(ctx); err != nil {
		return r.res, err
	}
	defer r.prom.stop()
	if err := r.apply(ctx); err != nil {
		return r.res, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); r.watch(watchCtx) }()
	defer func() { stopWatch(); <-watched }()

	err = r.brokenSecretFirst(ctx)
	if err == nil {
		err = r.sale(ctx)
	}
	if err == nil {
		err = r.finish(ctx)
	}
	stopWatch()
	<-watched
	r.res.Took = time.Since(r.start).Round(time.Second)
	return r.res, err
}

func (r *run) logf(format string, args ...any) {
	r.o.Logf("+%3.0fs  "+format, append([]any{time.Since(r.start).Seconds()}, args...)...)
}

func (r *run) connect() error {
	dir := filepath.Join(r.o.Root, ".stack", "cluster")
	r.kubeconfig = filepath.Join(dir, "kubeconfig")
	r.kubectl, r.helm = filepath.Join(dir, "bin", "kubectl"), filepath.Join(dir, "bin", "helm")
	ref, err := os.ReadFile(filepath.Join(dir, "images", "seckill.ref")) //nolint:gosec // the repository's own file
	if err != nil {
		return fmt.Errorf("no image built for the cluster (hack/cluster.sh image): %w", err)
	}
	r.image = strings.TrimSpace(string(ref))
	cfg, err := clientcmd.BuildConfigFromFlags("", r.kubeconfig)
	if err != nil {
		return fmt.Errorf("the cluster's kubeconfig (hack/cluster.sh up): %w", err)
	}
	cfg.Timeout = 10 * time.Second
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := seckillv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if r.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	var nodes corev1.NodeList
	if err := r.c.List(context.Background(), &nodes); err != nil {
		return fmt.Errorf("the local cluster does not answer (hack/cluster.sh up): %w", err)
	}
	if len(nodes.Items) == 0 {
		return errors.New("the local cluster has no node (hack/cluster.sh up)")
	}
	return nil
}

// Connected says whether the local cluster answers, for callers that skip
// without it.
func Connected(root string) error {
	r := &run{o: Options{Root: root}}
	return r.connect()
}

func (r *run) cmd(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, append([]string{"--kubeconfig", r.kubeconfig}, args...)...).CombinedOutput() //nolint:gosec // our own tools
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// kubectlPatch is `kubectl patch seckillactivity NAME --type merge -p PATCH`.
func (r *run) kubectlPatch(ctx context.Context, patch string) error {
	r.logf("kubectl patch seckillactivity %s --type merge -p '%s'", r.act.Name, patch)
	_, err := r.cmd(ctx, r.kubectl, "-n", r.act.Namespace, "patch", "seckillactivity", r.act.Name, "--type", "merge", "-p", patch)
	return err
}

// removeLeftovers deletes what an interrupted run left (its activities keep
// consuming from the shared topics otherwise).
func (r *run) removeLeftovers(ctx context.Context) error {
	var nss corev1.NamespaceList
	if err := r.c.List(ctx, &nss, client.HasLabels{LabelDemo}); err != nil {
		return err
	}
	for _, ns := range nss.Items {
		r.logf("removing namespace %s left by an earlier run", ns.Name)
		var acts seckillv1alpha1.SeckillActivityList
		if err := r.c.List(ctx, &acts, client.InNamespace(ns.Name)); err == nil {
			for i := range acts.Items {
				_ = r.c.Delete(ctx, &acts.Items[i])
			}
		}
		_ = r.c.Delete(ctx, &ns)
	}
	return nil
}

func (r *run) install(ctx context.Context) error {
	repo, tag, _ := strings.Cut(r.image, ":")
	// helm installs a chart's CRDs only once and never upgrades them: the
	// CRD is applied first, as an upgrade of the operator needs.
	r.logf("kubectl apply --server-side -f charts/seckill-operator/crds")
	if _, err := r.cmd(ctx, r.kubectl, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(r.o.Root, "charts", "seckill-operator", "crds")); err != nil {
		return err
	}
	r.logf("helm upgrade --install seckill charts/seckill-operator (image %s, leader election on)", r.image)
	if _, err := r.cmd(ctx, r.helm, "upgrade", "--install", "seckill", filepath.Join(r.o.Root, "charts", "seckill-operator"),
		"--namespace", "seckill-system", "--create-namespace", "--set", "image.repository="+repo, "--set", "image.tag="+tag,
		"--set", "image.pullPolicy=Never", "--set", "leaderElection=true", "--wait", "--timeout", "3m"); err != nil {
		return err
	}
	// Leading: a running operator pod of this image holds the lease.
	return r.until(ctx, "an operator pod of this image leads", 2*time.Minute, func() bool {
		var leases coordinationv1.LeaseList
		var pods corev1.PodList
		if r.c.List(ctx, &leases, client.InNamespace("seckill-system")) != nil || r.c.List(ctx, &pods, client.InNamespace("seckill-system")) != nil {
			return false
		}
		for _, l := range leases.Items {
			if l.Spec.HolderIdentity == nil {
				continue
			}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && len(p.Spec.Containers) > 0 &&
					p.Spec.Containers[0].Image == r.image && strings.HasPrefix(*l.Spec.HolderIdentity, p.Name+"_") {
					r.logf("leader lease %s held by pod %s", l.Name, p.Name)
					return true
				}
			}
		}
		return false
	})
}

func (r *run) apply(ctx context.Context) error {
	activity := time.Now().UnixNano()%1_000_000_000_000 + 1
	r.res.Activity = activity
	r.res.Namespace = fmt.Sprintf("sale-%d", activity)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.res.Namespace, Labels: map[string]string{LabelDemo: "true"}}}
	if err := r.c.Create(ctx, ns); err != nil {
		return err
	}
	onNode := func(s string) string { return strings.ReplaceAll(s, "127.0.0.1", NodeIP) }
	r.tokenKey = []byte(ids.NewRandom().String())
	// The stack's DSN names its CA as a file of this host; on the cluster
	// the CA travels in the Secret (postgresCASecret), and the operator
	// mounts it for the workloads.
	dsn, ca, err := splitCA(onNode(r.o.DSN))
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "stores", Namespace: ns.Name},
		StringData: map[string]string{
			"pg-dsn": dsn, "pg-ca.crt": string(ca), "rmq-ca.crt": string(r.o.RocketMQCA), "redis-ca.crt": string(r.o.RedisCA), "rmq-access-key": r.o.RMQAccessKey, "rmq-secret-key": r.o.RMQSecretKey, "redis-username": r.o.RedisUsername, "redis-password": r.o.RedisPassword, "redis-addrs": onNode(r.o.RedisAddr), "rmq-endpoint": onNode(r.o.RMQEndpoint), "rmq-namesrv": onNode(r.o.RMQNameServer),
			"id-keys": "1:" + strings.ReplaceAll(ids.NewRandom().String()+ids.NewRandom().String(), "-", ""), "token-key": string(r.tokenKey),
		}}
	// First without its token key, as a hurried person would write it:
	// the activity must read as Failed to GitOps tools, naming the key,
	// until the Secret is fixed (brokenSecretFirst).
	tokenKey := secret.StringData["token-key"]
	delete(secret.StringData, "token-key")
	if err := r.c.Create(ctx, secret); err != nil {
		return err
	}
	r.fixSecret = func(ctx context.Context) error {
		var sec corev1.Secret
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(secret), &sec); err != nil {
			return err
		}
		sec.StringData = map[string]string{"token-key": tokenKey}
		r.logf("the Secret fixed: its token-key added")
		if err := r.c.Update(ctx, &sec); err != nil {
			return err
		}
		// The operator does not watch Secrets (it may only get them): it
		// retries a Stalled activity every 30 s, or at once when the
		// activity changes — as a person would, nudge it.
		r.logf("kubectl annotate seckillactivity %s seckill.io/secret-fixed=…", r.act.Name)
		_, err := r.cmd(ctx, r.kubectl, "-n", r.act.Namespace, "annotate", "--overwrite", "seckillactivity", r.act.Name,
			"seckill.io/secret-fixed="+time.Now().UTC().Format("20060102T150405Z"))
		return err
	}
	ref := func(key string) corev1.SecretKeySelector {
		return corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret.Name}, Key: key}
	}
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	// Far enough for the broken-Secret detour (brokenSecretFirst) and the
	// provisioning, so that the sale is seen Scheduled before it starts.
	start := time.Now().Add(40 * time.Second).UTC().Truncate(time.Second)
	r.act = &seckillv1alpha1.SeckillActivity{ObjectMeta: metav1.ObjectMeta{Name: "flash-sale", Namespace: ns.Name},
		Spec: seckillv1alpha1.SeckillActivitySpec{
			ActivityID: activity,
			SKUs:       []seckillv1alpha1.SKUSpec{{ID: 1, Stock: int64(r.o.Stock), Buckets: 2, PriceCents: clusterPriceCents}},
			// The end is far; the run brings it forward with kubectl patch.
			Schedule: seckillv1alpha1.Schedule{Start: metav1.NewTime(start), End: metav1.NewTime(start.Add(30 * time.Minute))},
			Connections: seckillv1alpha1.Connections{PostgresDSNSecret: ref("pg-dsn"), PostgresCASecret: caRef(ca, ref("pg-ca.crt")),
				Redis: seckillv1alpha1.RedisConnection{Mode: "single", AddressesSecret: ref("redis-addrs"),
					UsernameSecret: ptr.To(ref("redis-username")), PasswordSecret: ptr.To(ref("redis-password")), CASecret: caRef(r.o.RedisCA, ref("redis-ca.crt"))},
				RocketMQEndpointSecret: ref("rmq-endpoint"), RocketMQCASecret: caRef(r.o.RocketMQCA, ref("rmq-ca.crt")), RocketMQNameServerSecret: nameServerRef(r.o.RMQNameServer, ref("rmq-namesrv")),
				RocketMQCredentials: rmqCredentials(r.o.RMQAccessKey, ref("rmq-access-key"), ref("rmq-secret-key")),
				IDKeysSecret:        ref("id-keys"), TokenKeySecret: ptr.To(ref("token-key"))},
			Workloads: seckillv1alpha1.WorkloadsSpec{Image: r.image, ImagePullPolicy: corev1.PullNever},
			// The latency budget is far above any commit p99 the stack's
			// PostgreSQL reaches on two shared cores (50–150 ms under the
			// sale's load), so that the scale-up this run asserts is
			// determined by the backlog alone: with the default 100 ms a
			// noisy machine made the operator hold at one consumer
			// ("PostgreSQL saturated"), rightly, and the run failed. The hold
			// is tested with heartbeats of known latency (controllers).
			Scaling: seckillv1alpha1.ScalingSpec{MinConsumers: 1, MaxConsumers: 4, TargetDrainTime: d(3 * time.Second),
				LatencyBudget:          d(10 * time.Second),
				ScaleDownStabilization: d(15 * time.Second), CompensationPauseAfter: d(15 * time.Second)},
			Retention: d(time.Hour),
		}}
	r.logf("kubectl apply: SeckillActivity %s/%s, activity %d, %d units in 2 buckets, start %s", ns.Name, r.act.Name, activity, r.o.Stock, start.Format(time.TimeOnly))
	return r.c.Create(ctx, r.act)
}

// splitCA takes the sslrootcert file out of a PostgreSQL URL and returns
// the URL without it and the file's PEM (nil when it names none).
func splitCA(dsn string) (string, []byte, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("the stack's DSN does not parse: %w", err)
	}
	q := u.Query()
	path := q.Get("sslrootcert")
	if path == "" {
		return dsn, nil, nil
	}
	ca, err := os.ReadFile(path) //nolint:gosec // the stack's CA file
	if err != nil {
		return "", nil, fmt.Errorf("reading the stack's PostgreSQL CA: %w", err)
	}
	q.Del("sslrootcert")
	u.RawQuery = q.Encode()
	return u.String(), ca, nil
}

func rmqCredentials(accessKey string, ak, sk corev1.SecretKeySelector) *seckillv1alpha1.RocketMQCredentials {
	if accessKey == "" {
		return nil
	}
	return &seckillv1alpha1.RocketMQCredentials{AccessKeySecret: ak, SecretKeySecret: sk}
}

func caRef(ca []byte, sel corev1.SecretKeySelector) *corev1.SecretKeySelector {
	if len(ca) == 0 {
		return nil
	}
	return &sel
}

// watch follows the activity as `kubectl get seckillactivities -w` does and
// records the phases, the consumer count and the backlog guard.
func (r *run) watch(ctx context.Context) {
	var last Sample
	first := true
	for ctx.Err() == nil {
		var a seckillv1alpha1.SeckillActivity
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(r.act), &a); err == nil {
			st := a.Status
			var dep appsv1.Deployment
			ready := int32(0)
			if r.c.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: a.Name + "-order-consumer"}, &dep) == nil {
				ready = dep.Status.ReadyReplicas
			}
			s := Sample{At: time.Since(r.start).Round(time.Second), Desired: st.DesiredConsumers, Ready: ready, Reason: st.ScalingReason,
				CompensationStop: meta.IsStatusConditionTrue(st.Conditions, seckillv1alpha1.ConditionCompensationPaused)}
			health, healthErr := kstatusOf(&a)
			r.mu.Lock()
			r.notePhase(st)
			if healthErr == nil {
				r.noteHealth(health)
			}
			if first || s.Desired != last.Desired || s.Ready != last.Ready || s.CompensationStop != last.CompensationStop {
				r.res.Consumers = append(r.res.Consumers, s)
				r.logf("consumers desired %d ready %d, compensation paused %v: %s", s.Desired, s.Ready, s.CompensationStop, s.Reason)
				// Up: above the minimum, by the operator's own decision (a
				// resume from 0 counts from the minimum it starts again at).
				if !first && s.Desired > max(last.Desired, 1) {
					r.res.ScaledUp = true
				}
				// Down: by the operator's own decision (not a suspension).
				if !first && s.Desired < last.Desired && s.Desired >= 1 {
					r.res.ScaledDown = true
				}
				if s.CompensationStop && !last.CompensationStop {
					r.res.GuardSet = true
				}
				if !s.CompensationStop && last.CompensationStop {
					r.res.GuardCleared = true
				}
				last, first = s, false
			}
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (r *run) until(ctx context.Context, what string, limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}

// status reads the activity's status; a phase it shows is recorded as the
// watch records it (a phase held for less than the watch's poll, such as a
// short pause, is still seen by the step that waits for it).
func (r *run) status(ctx context.Context) seckillv1alpha1.SeckillActivityStatus {
	var a seckillv1alpha1.SeckillActivity
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(r.act), &a); err != nil {
		return seckillv1alpha1.SeckillActivityStatus{}
	}
	r.mu.Lock()
	r.notePhase(a.Status)
	r.mu.Unlock()
	return a.Status
}

// notePhase records a phase change (r.mu held).
func (r *run) notePhase(st seckillv1alpha1.SeckillActivityStatus) {
	if st.Phase == "" || st.Phase == r.lastPhase {
		return
	}
	r.res.Phases = append(r.res.Phases, fmt.Sprintf("%s at +%.0fs", st.Phase, time.Since(r.start).Seconds()))
	r.res.Seen[st.Phase] = true
	r.logf("phase %s (sold %s, open %d)", st.Phase, st.Sold, st.OpenReservations)
	r.lastPhase = st.Phase
}

// kstatusOf is what Argo CD, Flux and kstatus-based tools make of a.
func kstatusOf(a *seckillv1alpha1.SeckillActivity) (*status.Result, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
	if err != nil {
		return nil, err
	}
	return status.Compute(&unstructured.Unstructured{Object: obj})
}

// noteHealth records a kstatus change (r.mu held).
func (r *run) noteHealth(h *status.Result) {
	if h.Status == r.lastHealth {
		return
	}
	r.res.Health = append(r.res.Health, fmt.Sprintf("%s at +%.0fs (%s)", h.Status, time.Since(r.start).Seconds(), h.Message))
	r.logf("kstatus %s: %s", h.Status, h.Message)
	r.lastHealth = h.Status
}

// kstatusAt reads the activity's kstatus now and keeps it under moment.
func (r *run) kstatusAt(ctx context.Context, moment string) status.Status {
	var a seckillv1alpha1.SeckillActivity
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(r.act), &a); err != nil {
		return status.UnknownStatus
	}
	h, err := kstatusOf(&a)
	if err != nil {
		return status.UnknownStatus
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.HealthSeen[moment] = h.Status
	return h.Status
}

// brokenSecretFirst waits until the activity applied with a Secret that
// lacks a key reads Failed (kstatus: Stalled), then fixes the Secret.
func (r *run) brokenSecretFirst(ctx context.Context) error {
	if err := r.until(ctx, "Failed with the broken Secret", time.Minute, func() bool {
		return r.kstatusAt(ctx, "broken Secret") == status.FailedStatus
	}); err != nil {
		return err
	}
	return r.fixSecret(ctx)
}

func (r *run) seen(p seckillv1alpha1.Phase) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.res.Seen[p]
}

func (r *run) consumerPods(ctx context.Context) []corev1.Pod {
	var pods corev1.PodList
	_ = r.c.List(ctx, &pods, client.InNamespace(r.act.Namespace),
		client.MatchingLabels{"app.kubernetes.io/instance": r.act.Name, names.LabelComponent: "order-consumer"})
	return pods.Items
}

// sale is the part a platform team watches: the workloads up, buyers, the
// patches, a pod killed, scaling both ways, the backlog guard.
func (r *run) sale(ctx context.Context) error {
	if err := r.until(ctx, "Active", 3*time.Minute, func() bool { return r.seen(seckillv1alpha1.PhaseActive) }); err != nil {
		return err
	}
	if err := r.until(ctx, "every workload Ready", 3*time.Minute, func() bool {
		var deps appsv1.DeploymentList
		if r.c.List(ctx, &deps, client.InNamespace(r.act.Namespace), client.MatchingLabels{"app.kubernetes.io/instance": r.act.Name}) != nil || len(deps.Items) == 0 {
			return false
		}
		for _, d := range deps.Items {
			if d.Status.ReadyReplicas < 1 {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	var svc corev1.Service
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: r.act.Namespace, Name: r.act.Name + "-gateway"}, &svc); err != nil {
		return err
	}
	r.base = fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	r.logf("every workload Ready; buyers go to the gateway Service %s (kube-proxy)", r.base)
	r.logf("kubectl wait --for=condition=Ready seckillactivity/%s", r.act.Name)
	if _, err := r.cmd(ctx, r.kubectl, "-n", r.act.Namespace, "wait", "--for=condition=Ready", "seckillactivity/"+r.act.Name, "--timeout=2m"); err != nil {
		return err
	}
	r.kstatusAt(ctx, "selling")
	if r.o.RMQNameServer != "" {
		r.checkOwnMessaging(ctx)
	}

	stock := r.o.Stock
	more := stock / 2
	r.res.FinalStock = stock + more
	// 1. Half the stock, with a consumer pod killed while it is bought.
	user := int64(0)
	wave := func(n int) map[string]int {
		from := user + 1
		user += int64(n)
		return r.buyers(ctx, from, user)
	}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		time.Sleep(time.Second)
		if pods := r.consumerPods(ctx); len(pods) > 0 {
			p := pods[0]
			r.logf("kubectl delete pod %s --grace-period=0 --force (mid-sale)", p.Name)
			if _, err := r.cmd(ctx, r.kubectl, "-n", p.Namespace, "delete", "pod", p.Name, "--grace-period=0", "--force"); err == nil {
				r.mu.Lock()
				r.res.KilledPod = p.Name
				r.mu.Unlock()
			}
		}
	}()
	r.logf("wave 1: %d buyers: %v", stock/2, wave(stock/2))
	<-killed

	// 2. Stock raised mid-sale.
	if _, err := r.plugin(ctx, "add-stock", r.act.Name, "1", fmt.Sprint(more)); err != nil {
		return err
	}
	if err := r.until(ctx, "the stock increase reached PostgreSQL", time.Minute, func() bool {
		var initial int
		if err := r.pool.QueryRow(ctx, `SELECT coalesce(sum(initial_stock), 0) FROM sku_inventory WHERE activity_id = $1`, r.res.Activity).Scan(&initial); err != nil {
			r.logf("reading the stock: %v", err)
			return false
		}
		return initial == stock+more
	}); err != nil {
		return err
	}
	r.logf("stock is %d in PostgreSQL and Redis", stock+more)

	// 3. Paused and resumed.
	if _, err := r.plugin(ctx, "pause", r.act.Name); err != nil {
		return err
	}
	if err := r.until(ctx, "Paused", time.Minute, func() bool { return r.status(ctx).Phase == seckillv1alpha1.PhasePaused }); err != nil {
		return err
	}
	probe := int64(1_000_000) // buyers of their own: a probe answered before the pause reserves
	if err := r.until(ctx, "the gateway answers ACTIVITY_PAUSED", 30*time.Second, func() bool {
		probe++
		return r.buyers(ctx, probe, probe)[gateway.CodePaused] == 1
	}); err != nil {
		return err
	}
	r.logf("while paused the gateway answers %s", gateway.CodePaused)
	if _, err := r.plugin(ctx, "resume", r.act.Name); err != nil {
		return err
	}
	if err := r.until(ctx, "Active again", time.Minute, func() bool { return r.status(ctx).Phase == seckillv1alpha1.PhaseActive }); err != nil {
		return err
	}
	if err := r.conservationDelta(ctx); err != nil {
		return err
	}
	r.pluginStatus(ctx, "selling")

	// 4. Consumers suspended: a real backlog, the backlog guard.
	if err := r.suspend(ctx, true); err != nil {
		return err
	}
	r.logf("wave 2 (no consumers): %d buyers: %v", stock/2+more/2, wave(stock/2+more/2))
	if err := r.until(ctx, "the backlog guard pauses compensation", 2*time.Minute, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.res.GuardSet
	}); err != nil {
		return err
	}
	// The backlog's age is the order SLO's alert: Prometheus, scraping the
	// operator, fires it while nothing drains.
	r.awaitAlert(ctx, "SeckillOrderBacklogLagging", true, 2*time.Minute)
	// 5. Resumed: the operator scales up from the backlog, then back down.
	if err := r.suspend(ctx, false); err != nil {
		return err
	}
	if err := r.until(ctx, "scaled up, drained, guard cleared, scaled back down", 4*time.Minute, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.res.ScaledUp && r.res.GuardCleared && r.res.ScaledDown
	}); err != nil {
		return err
	}
	r.awaitAlert(ctx, "SeckillOrderBacklogLagging", false, 2*time.Minute)

	// 6. The rest sells out with the consumers suspended again, and the end
	// is brought forward: the sale drains after its end.
	if err := r.suspend(ctx, true); err != nil {
		return err
	}
	r.logf("wave 3 (no consumers): %d buyers, more than the stock left: %v", more+stock/2, wave(more+stock/2))
	end := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
	if err := r.kubectlPatch(ctx, fmt.Sprintf(`{"spec":{"schedule":{"end":%q}}}`, end)); err != nil {
		return err
	}
	if err := r.until(ctx, "Draining", time.Minute, func() bool { return r.seen(seckillv1alpha1.PhaseDraining) }); err != nil {
		return err
	}
	return r.suspend(ctx, false)
}

// suspend sets spec.scaling.suspendConsumers and waits for the consumers'
// pods to be gone (true) or for one to be Ready (false).
func (r *run) suspend(ctx context.Context, on bool) error {
	if err := r.kubectlPatch(ctx, fmt.Sprintf(`{"spec":{"scaling":{"suspendConsumers":%v}}}`, on)); err != nil {
		return err
	}
	if on {
		return r.until(ctx, "the consumer pods gone", 90*time.Second, func() bool { return len(r.consumerPods(ctx)) == 0 })
	}
	return nil
}

// buyers posts one reservation for each user in [from, to], 32 at a time,
// retrying a transport error or 503 with the same request id, and counts
// the answers.
func (r *run) buyers(ctx context.Context, from, to int64) map[string]int {
	codes := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	hc := &http.Client{Timeout: 10 * time.Second}
	url := fmt.Sprintf("%s/v1/activities/%d/skus/1/reservations", r.base, r.res.Activity)
	for u := from; u <= to; u++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(user int64) {
			defer wg.Done()
			defer func() { <-sem }()
			body := `{"request_id":"` + ids.NewRandom().String() + `"}`
			code := "TRANSPORT_ERROR"
			for attempt := 0; attempt < 8 && ctx.Err() == nil; attempt++ {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+gateway.SignToken(user, r.tokenKey, time.Now().Add(time.Hour)))
				resp, err := hc.Do(req)
				if err != nil {
					code = "TRANSPORT_ERROR"
					time.Sleep(250 * time.Millisecond)
					continue
				}
				var a struct {
					Code string `json:"code"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&a)
				_ = resp.Body.Close()
				code = a.Code
				if code != gateway.CodeServiceUnavailable {
					break
				}
				time.Sleep(250 * time.Millisecond)
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}(u)
	}
	wg.Wait()
	r.mu.Lock()
	for k, v := range codes {
		r.res.Answers[k] += v
	}
	r.res.Queued += codes[gateway.CodeQueued]
	r.mu.Unlock()
	return codes
}

// finish waits for Completed, checks the final Job and the invariants, and
// deletes the activity (which archives it).
func (r *run) finish(ctx context.Context) error {
	if err := r.until(ctx, "Completed", 6*time.Minute, func() bool {
		return r.seen(seckillv1alpha1.PhaseCompleted) || r.seen(seckillv1alpha1.PhaseFailed)
	}); err != nil {
		return err
	}
	if r.seen(seckillv1alpha1.PhaseFailed) {
		return errors.New("the activity ended Failed: the final reconcile left anomalies")
	}
	r.kstatusAt(ctx, "completed")
	var jobs batchv1.JobList
	if err := r.c.List(ctx, &jobs, client.InNamespace(r.act.Namespace), client.MatchingLabels{"app.kubernetes.io/instance": r.act.Name}); err != nil {
		return err
	}
	for _, j := range jobs.Items {
		if j.Name == r.act.Name+"-final-reconcile" && j.Status.Succeeded > 0 {
			r.res.FinalJobSucceeded = true
			r.logf("final reconcile Job %s: a pod ran and exited 0", j.Name)
		}
	}
	stoppedErr := r.until(ctx, "the workloads stop once Completed", 90*time.Second, func() bool {
		var deps appsv1.DeploymentList
		if r.c.List(ctx, &deps, client.InNamespace(r.act.Namespace), client.MatchingLabels{"app.kubernetes.io/instance": r.act.Name}) != nil || len(deps.Items) == 0 {
			return false
		}
		for _, d := range deps.Items {
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 || d.Status.Replicas != 0 {
				return false
			}
		}
		return true
	})
	if stoppedErr == nil {
		r.logf("Completed: every Deployment at 0 replicas, no workload pod left, CronJobs suspended")
	}
	if err := r.checks(ctx); err != nil {
		return err
	}
	if err := r.monitoringChecks(ctx); err != nil {
		return err
	}
	r.pluginJobs(ctx)
	r.check("the workloads stop once the sale is Completed", stoppedErr == nil, fmt.Sprint(stoppedErr == nil))
	r.logf("kubectl delete seckillactivity %s", r.act.Name)
	if _, err := r.cmd(ctx, r.kubectl, "-n", r.act.Namespace, "delete", "seckillactivity", r.act.Name, "--wait", "--timeout", "2m"); err != nil {
		return err
	}
	ttl, err := r.rdb.PTTL(ctx, redisstore.BucketSlot(r.res.Activity, 1, 0).Counter()).Result()
	if err != nil {
		return err
	}
	r.res.Archived = ttl > 0 && ttl <= time.Hour
	r.logf("archived: the Redis keys expire in %s (retention), PostgreSQL keeps every row", ttl.Round(time.Minute))
	r.check("archived on delete: Redis keys expire after the retention", r.res.Archived, ttl.Round(time.Second).String())
	_, err = r.cmd(ctx, r.kubectl, "delete", "namespace", r.act.Namespace, "--wait=false")
	return err
}

func (r *run) check(name string, ok bool, got string) {
	r.res.Checks = append(r.res.Checks, Check{Name: name, OK: ok, Got: got})
}

// checks judges the sale by every invariant (package invariants, read
// straight from PostgreSQL and Redis) and by what this sale promised: every
// unit sold, the final reconcile Job run and clean.
func (r *run) checks(ctx context.Context) error {
	a := r.res.Activity
	rep, err := invariants.Await(ctx, invariants.Sources{Pool: r.pool, Redis: redisstore.New(r.rdb)}, a,
		[]invariants.SKU{{ID: 1, Buckets: 2}}, invariants.Expect{Settled: true}, 30*time.Second)
	if err != nil {
		return fmt.Errorf("reading the invariants: %w", err)
	}
	for _, c := range rep.Checks {
		r.check(c.Name, c.OK, c.Got)
	}
	var orders, pgInitial int64
	if err := r.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders WHERE activity_id = $1),
		(SELECT coalesce(sum(initial_stock), 0) FROM sku_inventory WHERE activity_id = $1)`, a).Scan(&orders, &pgInitial); err != nil {
		return fmt.Errorf("reading the orders: %w", err)
	}
	final := int64(r.res.FinalStock)
	queued := int64(r.res.Queued)
	st := r.status(ctx)
	clean := st.LastReconcile != nil && st.LastReconcile.Manual == 0
	rec := "no run"
	if st.LastReconcile != nil {
		rec = fmt.Sprintf("%s: %d anomalies, %d repaired, %d manual", st.LastReconcile.Result, st.LastReconcile.Anomalies, st.LastReconcile.AutoRepaired, st.LastReconcile.Manual)
	}
	r.check("every unit sold (QUEUED = stock after the patch)", queued == final, fmt.Sprintf("%d = %d", queued, final))
	r.check("PostgreSQL holds the patched stock", pgInitial == final, fmt.Sprintf("%d = %d", pgInitial, final))
	r.check("one order per accepted reservation", orders == queued, fmt.Sprintf("%d orders, %d QUEUED", orders, queued))
	r.check("final reconcile Job ran as a pod and exited 0", r.res.FinalJobSucceeded, fmt.Sprintf("%v", r.res.FinalJobSucceeded))
	r.check("final reconcile clean (nothing for manual review)", clean, rec)
	r.mu.Lock()
	seen := fmt.Sprintf("broken Secret %s, selling %s, completed %s; changes %s", r.res.HealthSeen["broken Secret"],
		r.res.HealthSeen["selling"], r.res.HealthSeen["completed"], strings.Join(r.res.Health, ", "))
	ok := r.res.HealthSeen["broken Secret"] == status.FailedStatus && r.res.HealthSeen["selling"] == status.CurrentStatus &&
		r.res.HealthSeen["completed"] == status.CurrentStatus && slices.ContainsFunc(r.res.Health, func(h string) bool {
		return strings.HasPrefix(h, string(status.InProgressStatus))
	})
	r.mu.Unlock()
	r.check("GitOps health (kstatus): Failed with a broken Secret, InProgress while provisioning, Current while selling and when Completed", ok, seen)
	return nil
}

// nameServerRef is sel when a name server is given (the activity's own
// topics and groups), else nil (the shared ones).
func nameServerRef(addr string, sel corev1.SecretKeySelector) *corev1.SecretKeySelector {
	if addr == "" {
		return nil
	}
	return &sel
}

// checkOwnMessaging: the consumers read the activity's own group (not the
// shared one), which the operator's pod created on the broker.
func (r *run) checkOwnMessaging(ctx context.Context) {
	var d appsv1.Deployment
	group := ""
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: r.act.Namespace, Name: r.act.Name + "-order-consumer"}, &d); err == nil {
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if g, ok := strings.CutPrefix(a, "-group="); ok {
				group = g
			}
		}
	}
	groups, err := (&admin.Client{NameServer: r.o.RMQNameServer, AccessKey: r.o.RMQAccessKey, SecretKey: r.o.RMQSecretKey}).Groups(ctx)
	_, exists := groups[group]
	ok := err == nil && exists && group != names.GroupOrderConsumer && strings.HasPrefix(group, "seckill-")
	r.check("the activity's own consumer group, created on the broker", ok, fmt.Sprintf("group %q on the broker %v (%v)", group, exists, err))
	r.logf("the consumers read the activity's own group %s (on the broker: %v)", group, exists)
}

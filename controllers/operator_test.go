package controllers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/pgroles"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// sale is one activity with its own real PostgreSQL database and Redis keys
// behind it, and the Secret that points at them.
type sale struct {
	t        *testing.T
	key      types.NamespacedName
	activity int64
	pool     *pgxpool.Pool
	rdb      redis.UniversalClient
	rs       *redisstore.Store
	users    int64
}

func newSale(t *testing.T, name string, mutate func(*seckillv1alpha1.SeckillActivity)) *sale {
	t.Helper()
	pool := testenv.Database(t)
	rdb := testenv.RedisSingle(t)
	require.NoError(t, redisstore.LoadScripts(testCtx, rdb))
	redisCA, err := os.ReadFile(testenv.Get(t, "SECKILL_REDIS_CA_FILE"))
	require.NoError(t, err)
	activity := time.Now().UnixNano()%1_000_000_000_000 + 1
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-conn", Namespace: "default"}, StringData: map[string]string{
		"pg-dsn": pool.Config().ConnString(), "redis-addrs": testenv.Get(t, "SECKILL_REDIS_ADDR"),
		"rmq-endpoint": "127.0.0.1:1", "id-keys": "1:" + strings.Repeat("ab", 32), "token-key": strings.Repeat("k", 32),
		"payment-keys":   "sim:" + strings.Repeat("cd", 32),
		"redis-username": testenv.Get(t, "SECKILL_REDIS_USERNAME"), "redis-password": testenv.Get(t, "SECKILL_REDIS_PASSWORD"),
		"redis-ca.crt":   string(redisCA),
		"rmq-access-key": testenv.Get(t, names.EnvRMQAccessKey), "rmq-secret-key": testenv.Get(t, names.EnvRMQSecretKey),
	}}
	require.NoError(t, k8sClient.Create(testCtx, secret))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), secret) })
	act := validActivity(name)
	act.Annotations = nil
	act.Spec.ActivityID = activity
	for _, sel := range []*corev1.SecretKeySelector{&act.Spec.Connections.PostgresDSNSecret, &act.Spec.Connections.Redis.AddressesSecret,
		&act.Spec.Connections.RocketMQEndpointSecret, &act.Spec.Connections.IDKeysSecret, act.Spec.Connections.TokenKeySecret} {
		sel.Name = secret.Name
	}
	// The stack's Redis refuses anonymous clients and plain text: every
	// activity logs in over TLS.
	login := func(key string) *corev1.SecretKeySelector {
		return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret.Name}, Key: key}
	}
	act.Spec.Connections.Redis.UsernameSecret, act.Spec.Connections.Redis.PasswordSecret = login("redis-username"), login("redis-password")
	act.Spec.Connections.Redis.CASecret = login("redis-ca.crt")
	// The stack's broker runs with ACLs: the activity's ACL user.
	act.Spec.Connections.RocketMQCredentials = &seckillv1alpha1.RocketMQCredentials{AccessKeySecret: *login("rmq-access-key"), SecretKeySecret: *login("rmq-secret-key")}
	now := time.Now().Truncate(time.Second)
	act.Spec.Schedule = seckillv1alpha1.Schedule{Start: metav1.NewTime(now.Add(-time.Minute)), End: metav1.NewTime(now.Add(time.Hour))}
	if mutate != nil {
		mutate(act)
	}
	require.NoError(t, k8sClient.Create(testCtx, act))
	s := &sale{t: t, key: client.ObjectKeyFromObject(act), activity: activity, pool: pool, rdb: rdb, rs: redisstore.New(rdb)}
	t.Cleanup(func() {
		var cur seckillv1alpha1.SeckillActivity
		if k8sClient.Get(context.Background(), s.key, &cur) == nil {
			_ = k8sClient.Delete(context.Background(), &cur)
			s.gone()
		}
	})
	return s
}

func (s *sale) get() *seckillv1alpha1.SeckillActivity {
	s.t.Helper()
	var a seckillv1alpha1.SeckillActivity
	require.NoError(s.t, k8sClient.Get(testCtx, s.key, &a))
	return &a
}

func (s *sale) update(mutate func(*seckillv1alpha1.SeckillActivity)) {
	s.t.Helper()
	require.NoError(s.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		a := s.get()
		mutate(a)
		return k8sClient.Update(testCtx, a)
	}))
}

// eventually waits until cond holds for the activity as the API server has it.
func (s *sale) eventually(what string, cond func(a *seckillv1alpha1.SeckillActivity) bool) *seckillv1alpha1.SeckillActivity {
	s.t.Helper()
	var a *seckillv1alpha1.SeckillActivity
	require.Eventually(s.t, func() bool {
		var cur seckillv1alpha1.SeckillActivity
		if k8sClient.Get(testCtx, s.key, &cur) != nil {
			return false
		}
		a = &cur
		return cond(a)
	}, 30*time.Second, 100*time.Millisecond, what)
	return a
}

// scaledFor waits for a ScaledConsumers event whose reason says why.
func (s *sale) scaledFor(why string) {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		return slices.ContainsFunc(s.events("ScaledConsumers"), func(e string) bool { return strings.Contains(e, why) })
	}, 10*time.Second, 100*time.Millisecond, "a ScaledConsumers event: %s (have %v)", why, s.events("ScaledConsumers"))
}

func (s *sale) gone() {
	require.Eventually(s.t, func() bool {
		var cur seckillv1alpha1.SeckillActivity
		return apierrors.IsNotFound(k8sClient.Get(testCtx, s.key, &cur))
	}, 30*time.Second, 100*time.Millisecond, "deleted")
}

func condition(a *seckillv1alpha1.SeckillActivity, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(a.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func (s *sale) redisStock(sku int64, buckets int) (sum int64, windows []string) {
	s.t.Helper()
	for _, sl := range redisstore.Slots(s.activity, sku, buckets) {
		n, err := s.rdb.Get(testCtx, sl.Stock()).Int64()
		require.NoError(s.t, err)
		sum += n
		w, err := s.rdb.Get(testCtx, sl.Window()).Result()
		require.NoError(s.t, err)
		windows = append(windows, w)
	}
	return sum, windows
}

func (s *sale) pgInventory(sku int64) (initial, available int64) {
	s.t.Helper()
	require.NoError(s.t, s.pool.QueryRow(testCtx, `SELECT initial_stock, available_stock FROM sku_inventory WHERE activity_id = $1 AND sku_id = $2`,
		s.activity, sku).Scan(&initial, &available))
	return
}

func (s *sale) events(reason string) []string {
	s.t.Helper()
	var list eventsv1.EventList
	require.NoError(s.t, k8sClient.List(testCtx, &list, client.InNamespace("default")))
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == s.key.Name && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

func allSame(v []string, want string) bool {
	for _, x := range v {
		if x != want {
			return false
		}
	}
	return len(v) > 0
}

// Creating an active sale provisions PostgreSQL and every Redis bucket,
// opens the window, and runs the workloads (Deployments, Service, PDBs,
// CronJobs) owned by the activity and configured from its Secrets.
// roleConn connects with the DSN the operator gives role's pods.
func (s *sale) roleConn(a *seckillv1alpha1.SeckillActivity, role string) *pgx.Conn {
	s.t.Helper()
	var sec corev1.Secret
	require.NoError(s.t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: a.Namespace, Name: ObjectName(a, dbRolesSuffix)}, &sec))
	dsn := string(sec.Data[role+"-dsn"])
	require.Contains(s.t, dsn, pgroles.Name(string(a.UID), role))
	conn, err := pgx.Connect(testCtx, dsn)
	require.NoError(s.t, err)
	s.t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestCreationProvisionsAndRunsTheWorkloads(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "create-provision", withPayments("create-provision"))
	a := s.eventually("provisioned and active", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionStockProvisioned).Status == metav1.ConditionTrue && a.Status.Phase == seckillv1alpha1.PhaseActive
	})
	require.Equal(t, metav1.ConditionFalse, condition(a, seckillv1alpha1.ConditionDegraded).Status)
	for _, sku := range []struct {
		id      int64
		stock   int64
		buckets int
		price   int64
	}{{90001, 100, 4, 19900}, {90002, 20, 1, 4900}} {
		initial, available := s.pgInventory(sku.id)
		require.Equal(t, []int64{sku.stock, sku.stock}, []int64{initial, available})
		var price int64
		var currency string
		require.NoError(t, s.pool.QueryRow(testCtx, `SELECT price_cents, currency FROM sku_inventory WHERE activity_id = $1 AND sku_id = $2`,
			s.activity, sku.id).Scan(&price, &currency))
		require.Equal(t, []any{sku.price, "CNY"}, []any{price, currency}, "the manifest's price, which orders copy")
		sum, windows := s.redisStock(sku.id, sku.buckets)
		require.Equal(t, sku.stock, sum)
		require.True(t, allSame(windows, redisstore.WindowActive), "%v", windows)
	}
	require.Equal(t, "0/120", a.Status.Sold)
	require.NotEmpty(t, s.events("StockProvisioned"))
	require.NotEmpty(t, s.events(string(seckillv1alpha1.PhaseActive)))

	// The gateway's DSN, as its pods read it: its own role, which can read a
	// reservation's status and cannot write an order or run DDL.
	gw := s.roleConn(a, pgroles.Gateway)
	_, err := gw.Exec(testCtx, `SELECT status FROM inventory_reservation LIMIT 1`)
	require.NoError(t, err)
	for _, stmt := range []string{`INSERT INTO orders (order_id) VALUES (gen_random_uuid())`, `CREATE TABLE intruder (id int)`,
		`UPDATE sku_inventory SET available_stock = 0`} {
		_, err = gw.Exec(testCtx, stmt)
		require.ErrorContains(t, err, "permission denied", stmt)
	}

	for _, c := range []string{ComponentGateway, ComponentConsumer, ComponentProjector, ComponentScanner, ComponentRelay, ComponentCompensator, ComponentPayments, ComponentCanceller} {
		var d appsv1.Deployment
		require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, c)}, &d), c)
		require.Equal(t, a.UID, d.OwnerReferences[0].UID, c)
		ctr := d.Spec.Template.Spec.Containers[0]
		require.Equal(t, "seckill/workloads:dev", ctr.Image)
		require.Equal(t, []string{"/seckill"}, ctr.Command, "the image's workloads binary")
		env := map[string]corev1.EnvVar{}
		for _, e := range ctr.Env {
			env[e.Name] = e
		}
		if c == ComponentScanner {
			require.NotContains(t, env, "SECKILL_PG_DSN", "the scanner does not use PostgreSQL")
		} else {
			// Its own role's DSN, never the operator's (which migrates).
			ref := env["SECKILL_PG_DSN"].ValueFrom.SecretKeyRef
			require.Equal(t, ObjectName(a, dbRolesSuffix), ref.Name, c)
			require.Equal(t, dbRole(c)+"-dsn", ref.Key, c)
		}
		require.Equal(t, "90001:4,90002:1", env["SECKILL_SKUS"].Value)
		require.Equal(t, fmt.Sprint(s.activity), env["SECKILL_ACTIVITY_ID"].Value)
		// Scraped where a Prometheus reads annotations: the metrics port,
		// apart from the gateway's public one.
		ann := d.Spec.Template.Annotations
		require.Equal(t, "true", ann["prometheus.io/scrape"], c)
		require.Equal(t, fmt.Sprint(names.MetricsPort), ann["prometheus.io/port"], c)
		require.True(t, *ctr.SecurityContext.ReadOnlyRootFilesystem)
		require.NotNil(t, ctr.ReadinessProbe, c)
		require.Equal(t, "50m", ctr.Resources.Requests.Cpu().String(), "default requests: never BestEffort")
		require.Equal(t, "64Mi", ctr.Resources.Requests.Memory().String(), c)
		require.Empty(t, ctr.Resources.Limits, "no guessed limit")
		if c == ComponentPayments {
			require.Contains(t, ctr.Args, "-rate=200", "the callbacks' limit (spec.limits.callbacksPerSecond)")
			require.Equal(t, "payment-keys", env["SECKILL_PAYMENT_KEYS"].ValueFrom.SecretKeyRef.Key)
		}
		if c == ComponentCanceller {
			require.Equal(t, "http://payment-channel.example:8080", env["SECKILL_PROVIDER_URL"].Value)
			require.Equal(t, "sim", env["SECKILL_PROVIDER_NAME"].Value, "defaulted by the API server")
		}
		if c == ComponentGateway {
			require.Equal(t, "token-key", env["SECKILL_TOKEN_KEY"].ValueFrom.SecretKeyRef.Key)
			require.Equal(t, int32(2), *d.Spec.Replicas)
		} else {
			_, hasToken := env["SECKILL_TOKEN_KEY"]
			require.False(t, hasToken, "only the gateway gets the token key")
		}
	}
	var svc corev1.Service
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentGateway)}, &svc))
	require.Equal(t, int32(80), svc.Spec.Ports[0].Port)
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentPayments)}, &svc))
	var pdb policyv1.PodDisruptionBudget
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentConsumer)}, &pdb))
	for _, c := range []string{ComponentReconcile, ComponentCompensation} {
		var cj batchv1.CronJob
		require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, c)}, &cj), c)
		require.Equal(t, batchv1.ForbidConcurrent, cj.Spec.ConcurrencyPolicy)
	}
	// No kubelet here: the workloads are not ready, and status says so.
	require.Equal(t, metav1.ConditionFalse, condition(a, seckillv1alpha1.ConditionWorkloadsReady).Status)

	// A spec change rolls the pods (new template hash); a stock change does not.
	var d appsv1.Deployment
	dkey := types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentConsumer)}
	require.NoError(t, k8sClient.Get(testCtx, dkey, &d))
	hash := d.Spec.Template.Annotations["seckill.io/spec-hash"]
	s.update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.Workloads.Image = "seckill/workloads:v2" })
	require.Eventually(t, func() bool {
		return k8sClient.Get(testCtx, dkey, &d) == nil && d.Spec.Template.Spec.Containers[0].Image == "seckill/workloads:v2"
	}, 30*time.Second, 100*time.Millisecond)
	require.NotEqual(t, hash, d.Spec.Template.Annotations["seckill.io/spec-hash"])

	// A rotated Secret value rolls the pods too (their env is read at start).
	secrets := d.Spec.Template.Annotations[AnnotationSecretsHash]
	require.NotEmpty(t, secrets)
	var sec corev1.Secret
	skey := types.NamespacedName{Namespace: "default", Name: "create-provision-conn"}
	require.NoError(t, k8sClient.Get(testCtx, skey, &sec))
	sec.Data["token-key"] = []byte(strings.Repeat("r", 32))
	require.NoError(t, k8sClient.Update(testCtx, &sec))
	require.Eventually(t, func() bool {
		return k8sClient.Get(testCtx, dkey, &d) == nil && d.Spec.Template.Annotations[AnnotationSecretsHash] != secrets
	}, 30*time.Second, 100*time.Millisecond, "the token key was rotated")
}

// A stock increase in the manifest is applied once to PostgreSQL and Redis,
// however often the operator reconciles afterwards.
func TestStockIncreaseIsAppliedOnce(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "stock-increase", nil)
	s.eventually("provisioned", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionStockProvisioned).Status == metav1.ConditionTrue
	})
	// A unit is sold meanwhile (PostgreSQL and Redis both), then the stock grows.
	_, err := s.pool.Exec(testCtx, `UPDATE sku_inventory SET available_stock = available_stock - 1, sold_stock = 1 WHERE activity_id = $1 AND sku_id = 90002`, s.activity)
	require.NoError(t, err)
	require.NoError(t, s.rdb.Decr(testCtx, redisstore.SKUSlot(s.activity, 90002).Stock()).Err())
	s.update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.SKUs[1].Stock = 50 })
	gen := s.get().Generation
	a := s.eventually("generation provisioned", func(a *seckillv1alpha1.SeckillActivity) bool {
		c := condition(a, seckillv1alpha1.ConditionStockProvisioned)
		return c.Status == metav1.ConditionTrue && c.ObservedGeneration == gen
	})
	// More reconciles of the same generation (annotation changes do not bump it).
	for i := range 3 {
		s.update(func(a *seckillv1alpha1.SeckillActivity) {
			if a.Annotations == nil {
				a.Annotations = map[string]string{}
			}
			a.Annotations["poke"] = fmt.Sprint(i)
		})
		time.Sleep(300 * time.Millisecond)
	}
	initial, available := s.pgInventory(90002)
	require.Equal(t, []int64{50, 49}, []int64{initial, available})
	sum, _ := s.redisStock(90002, 1)
	require.Equal(t, int64(49), sum)
	var rows int
	require.NoError(t, s.pool.QueryRow(testCtx, `SELECT count(*) FROM stock_provision WHERE activity_id = $1 AND sku_id = 90002`, s.activity).Scan(&rows))
	require.Equal(t, 2, rows, "the first provisioning and the increase")
	require.Equal(t, "1/150", a.Status.Sold)
}

// The stock figures and the three conservation differences reach the
// operator's /metrics per activity and SKU; a unit committed in Redis that
// neither its buckets nor PostgreSQL hold shows as a Redis and a
// cross-system delta (PostgreSQL's schema refuses a lost unit outright).
func TestInventoryMetricsFollowTheStores(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "inventory-metrics", nil)
	a, sku := strconv.FormatInt(s.activity, 10), "90002"
	gauge := func(v *prometheus.GaugeVec, labels ...string) float64 {
		return testutil.ToFloat64(v.WithLabelValues(labels...))
	}
	require.Eventually(t, func() bool {
		return gauge(skuUnits, a, sku, "initial") == 20 && gauge(skuUnits, a, sku, "redis_available") == 20
	}, 30*time.Second, 100*time.Millisecond)
	require.Zero(t, gauge(inventoryPGDelta, a, sku))
	require.Zero(t, gauge(inventoryRedisDelta, a, sku))
	require.Zero(t, gauge(inventoryCrossDelta, a, sku))
	require.Zero(t, testutil.ToFloat64(backlogOpen.WithLabelValues(a)), "nothing open")
	require.Zero(t, testutil.ToFloat64(backlogAge.WithLabelValues(a)))
	require.Eventually(t, func() bool {
		st := s.get().Status
		return st.DesiredConsumers > 0 && float64(st.DesiredConsumers) == testutil.ToFloat64(consumerCount.WithLabelValues(a, "desired"))
	}, 30*time.Second, 100*time.Millisecond, "the consumers as the operator sized them")

	// PostgreSQL's schema refuses a unit lost from its columns outright
	// (the gauge watches for a schema without that constraint).
	_, err := s.pool.Exec(testCtx, `UPDATE sku_inventory SET available_stock = available_stock - 1 WHERE activity_id = $1 AND sku_id = 90002`, s.activity)
	require.ErrorContains(t, err, "ck_sku_inventory_conservation")
	// Redis has no such guard: two units committed that its buckets and
	// PostgreSQL do not hold.
	require.NoError(t, s.rdb.HIncrBy(testCtx, redisstore.SKUSlot(s.activity, 90002).Counter(), "committed", 2).Err())
	s.update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.Paused = true }) // a pass now
	require.Eventually(t, func() bool {
		return gauge(inventoryRedisDelta, a, sku) == -2 && gauge(inventoryCrossDelta, a, sku) == 2
	}, 30*time.Second, 100*time.Millisecond, "redis %v cross %v", gauge(inventoryRedisDelta, a, sku), gauge(inventoryCrossDelta, a, sku))
	require.Zero(t, gauge(inventoryPGDelta, a, sku))
	// Restored, so that the activity's archive finds its counters whole.
	require.NoError(t, s.rdb.HIncrBy(testCtx, redisstore.SKUSlot(s.activity, 90002).Counter(), "committed", -2).Err())
}

// The annotation seckill.io/reconcile=paused stops the operator touching
// the activity (a person doing a recount): a stock increase waits, the
// status says why; removing it applies what waited.
func TestReconcilePausedByAnnotation(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "reconcile-paused", nil)
	s.eventually("provisioned", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionStockProvisioned).Status == metav1.ConditionTrue
	})
	setPaused := func(on bool) {
		s.update(func(a *seckillv1alpha1.SeckillActivity) {
			if a.Annotations == nil {
				a.Annotations = map[string]string{}
			}
			if on {
				a.Annotations[seckillv1alpha1.AnnotationReconcile] = seckillv1alpha1.ReconcilePausedValue
			} else {
				delete(a.Annotations, seckillv1alpha1.AnnotationReconcile)
			}
		})
	}
	setPaused(true)
	s.eventually("paused shown", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionReconcilePaused).Status == metav1.ConditionTrue
	})
	s.update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.SKUs[1].Stock = 40 })
	time.Sleep(2 * time.Second) // passes that must change nothing
	initial, _ := s.pgInventory(90002)
	require.Equal(t, int64(20), initial, "nothing provisioned while paused")
	a := s.get()
	require.Less(t, a.Status.ObservedGeneration, a.Generation, "the new generation is not judged while paused")
	require.Equal(t, status.InProgressStatus, kstatusOf(t, a))
	require.NotEmpty(t, s.events("ReconcilePaused"))

	setPaused(false)
	gen := s.get().Generation
	s.eventually("resumed and provisioned", func(a *seckillv1alpha1.SeckillActivity) bool {
		c := condition(a, seckillv1alpha1.ConditionStockProvisioned)
		return condition(a, seckillv1alpha1.ConditionReconcilePaused).Status == metav1.ConditionFalse &&
			c.Status == metav1.ConditionTrue && c.ObservedGeneration == gen
	})
	initial, _ = s.pgInventory(90002)
	require.Equal(t, int64(40), initial)
	require.NotEmpty(t, s.events("ReconcileResumed"))
}

// Pausing in the manifest pauses the gateway (window flag PAUSED) and the
// phase; resuming opens it again.
func TestPauseAndResume(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "pause-resume", nil)
	s.eventually("active", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.Phase == seckillv1alpha1.PhaseActive })
	s.update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.Paused = true })
	s.eventually("paused", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.Phase == seckillv1alpha1.PhasePaused })
	_, windows := s.redisStock(90001, 4)
	require.True(t, allSame(windows, redisstore.WindowPaused), "%v", windows)
	var state string
	require.NoError(t, s.pool.QueryRow(testCtx, `SELECT window_state FROM activity_control WHERE activity_id = $1`, s.activity).Scan(&state))
	require.Equal(t, "PAUSED", state)
	s.update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.Paused = false })
	s.eventually("active again", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.Phase == seckillv1alpha1.PhaseActive })
	_, windows = s.redisStock(90001, 4)
	require.True(t, allSame(windows, redisstore.WindowActive), "%v", windows)
	require.NotEmpty(t, s.events(string(seckillv1alpha1.PhasePaused)))
}

// reserve opens n real reservations (the backlog) at reservedAt.
func (s *sale) reserve(n int, reservedAt time.Time) []redisstore.ReserveRequest {
	s.t.Helper()
	ring, err := ids.NewKeyring(1, map[byte][]byte{1: []byte(strings.Repeat("ab", 16))})
	require.NoError(s.t, err)
	var out []redisstore.ReserveRequest
	for range n {
		s.users++
		user := 1000 + s.users
		sl := redisstore.BucketSlot(s.activity, 90001, redisstore.BucketFor(user, 4))
		req := ids.NewRandom()
		rid := ring.ReservationID(ids.ReservationKey{ActivityID: s.activity, SKUID: 90001, UserID: user, RequestID: req})
		mid, _ := ring.MessageID(rid, 1)
		r := redisstore.ReserveRequest{Slot: sl, ReservationID: rid, MessageID: mid, RequestID: req, UserID: user,
			Now: reservedAt, BusinessDeadline: reservedAt.Add(time.Hour), SendDue: reservedAt.Add(time.Hour),
			RequestTTL: time.Hour, SchemaVersion: 1, KeyVersion: 1, TraceID: "t"}
		res, err := s.rs.Reserve(testCtx, r)
		require.NoError(s.t, err)
		require.Equal(s.t, int64(redisstore.ReserveOK), res.Code, res.Reason)
		out = append(out, r)
	}
	return out
}

// Scaling is fed by real heartbeat rows and a real backlog: the consumers
// grow to drain it in the target time, never past what PostgreSQL is seen
// to sustain, and the reason is in status and an event.
func TestScalingFromHeartbeatsAndBacklog(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "scaling", func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.SKUs[0].Stock = 1000
		a.Spec.Scaling.TargetDrainTime = &metav1.Duration{Duration: time.Second}
		a.Spec.Scaling.MaxConsumers = 16
	})
	s.eventually("active", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.Phase == seckillv1alpha1.PhaseActive })
	beat := func(n int, p50, p99 float64) {
		for i := range n {
			require.NoError(t, control.ReportHeartbeat(testCtx, s.pool, fmt.Sprintf("c%d", i), "order-consumer", s.activity,
				control.Heartbeat{Total: 10, RatePerSec: 1000 / p50, P50ms: p50, P99ms: p99}, 1))
		}
	}
	beat(2, 10, 20) // 100 orders/s per consumer, healthy
	s.reserve(250, time.Now())
	// 250 open, 1 s drain, 100/s each: 3 consumers (from 1: at most 2×1+1).
	a := s.eventually("scaled up", func(a *seckillv1alpha1.SeckillActivity) bool {
		return a.Status.DesiredConsumers == 3 && a.Status.OpenReservations == 250
	})
	s.scaledFor("needs 3")
	require.Equal(t, int64(250), a.Status.OpenReservations)
	var d appsv1.Deployment
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentConsumer)}, &d))
	require.Equal(t, int32(3), *d.Spec.Replicas)
	require.NotEmpty(t, s.events("ScaledConsumers"))

	// PostgreSQL reaches the latency budget (p99 150 ms > 100 ms, not yet
	// the 2× that sheds consumers): no more growth, and what the three
	// consumers delivered then, settled and busy, becomes the measured
	// capacity (not while only two of them report).
	beat(2, 10, 150)
	s.reserve(300, time.Now()) // now 550 open: would need 6
	time.Sleep(time.Second)
	require.Zero(t, s.get().Status.MeasuredPostgresCapacity, "two of three consumers reporting is no measurement")
	beat(3, 10, 150)
	a = s.eventually("saturation seen", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.MeasuredPostgresCapacity == 300 })
	require.LessOrEqual(t, a.Status.DesiredConsumers, int32(3), a.Status.ScalingReason)
	// Healthy again but capped by the measured capacity: 300/s at 100/s each.
	beat(3, 10, 20)
	a = s.eventually("capped by capacity", func(a *seckillv1alpha1.SeckillActivity) bool {
		return strings.Contains(a.Status.ScalingReason, "PostgreSQL sustains 300")
	})
	require.Equal(t, int32(3), a.Status.DesiredConsumers)
	// More delivered than the measured capacity, unsaturated: the
	// measurement was stale and is dropped.
	beat(3, 5, 20)
	s.eventually("stale capacity dropped", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.MeasuredPostgresCapacity == 0 })
}

// spec.scaling.suspendConsumers takes the consumer Deployment to 0 replicas
// while the sale goes on (the backlog is measured, the other workloads keep
// running); set back, the consumers come back sized to the backlog.
func TestSuspendAndResumeConsumers(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "suspend", func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.SKUs[0].Stock = 1000
		a.Spec.Scaling.TargetDrainTime = &metav1.Duration{Duration: time.Second}
		a.Spec.Scaling.MaxConsumers = 4
	})
	s.eventually("active", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.Phase == seckillv1alpha1.PhaseActive })
	consumers := func(a *seckillv1alpha1.SeckillActivity) int32 {
		var d appsv1.Deployment
		require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentConsumer)}, &d))
		return *d.Spec.Replicas
	}
	s.update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.Scaling.SuspendConsumers = true })
	s.reserve(120, time.Now())
	a := s.eventually("suspended", func(a *seckillv1alpha1.SeckillActivity) bool {
		return a.Status.DesiredConsumers == 0 && a.Status.OpenReservations == 120
	})
	require.Equal(t, int32(0), consumers(a))
	require.Equal(t, "suspended by spec.scaling.suspendConsumers", a.Status.ScalingReason)
	require.Equal(t, seckillv1alpha1.PhaseActive, a.Status.Phase, "the sale goes on")

	s.update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.Scaling.SuspendConsumers = false })
	// No heartbeat (the consumers are gone): 50/s assumed, 1 s drain, 120 open → 3.
	a = s.eventually("resumed", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.DesiredConsumers == 3 })
	require.Equal(t, int32(3), consumers(a))
	s.scaledFor("needs 3")
}

// The backlog guard: an undecided reservation older than the threshold
// pauses time-driven compensation (condition and the PostgreSQL flag the
// workloads obey); once it is decided the pause is lifted.
func TestBacklogGuardPausesAndClears(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "backlog-guard", func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.Scaling.CompensationPauseAfter = &metav1.Duration{Duration: time.Minute}
	})
	s.eventually("healthy", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionBacklogHealthy).Status == metav1.ConditionTrue
	})
	reservedAt := time.Now().Add(-3 * time.Minute)
	old := s.reserve(1, reservedAt)[0]
	a := s.eventually("paused", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionCompensationPaused).Status == metav1.ConditionTrue
	})
	// A reconcile reads its clock once, at its start: one that began just
	// before the reservation was written reports it a little younger than
	// 180 s (and the reported age is whole seconds, rounded down).
	require.InDelta(t, 180, a.Status.OldestBacklogAgeSeconds, 10)
	require.LessOrEqual(t, a.Status.OldestBacklogAgeSeconds, int64(time.Since(reservedAt)/time.Second))
	paused := func() bool {
		var p bool
		require.NoError(t, s.pool.QueryRow(testCtx, `SELECT compensation_paused FROM activity_control WHERE activity_id = $1`, s.activity).Scan(&p))
		return p
	}
	require.True(t, paused())
	require.NotEmpty(t, s.events("CompensationPaused"))

	// PostgreSQL decides it (the projector applies the order): the backlog drains.
	res, err := s.rs.ProjectOrderCreated(testCtx, old.Slot, old.ReservationID, ids.NewRandom(), time.Now())
	require.NoError(t, err)
	require.True(t, res.OK())
	s.eventually("cleared", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionCompensationPaused).Status == metav1.ConditionFalse
	})
	require.False(t, paused())
	require.NotEmpty(t, s.events("CompensationResumed"))
}

// The lifecycle: Active, then at the end the final reconcile Job, and
// Completed once it succeeds; each transition is an event.
func TestLifecycleThroughCompleted(t *testing.T) {
	needsAPIServer(t)
	end := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
	s := newSale(t, "lifecycle", func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.Schedule.End = metav1.NewTime(end)
	})
	a := s.eventually("active", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.Phase == seckillv1alpha1.PhaseActive })
	// No kubelet here: the workloads' pods never get ready (the real
	// cluster's e2e sees Current while the sale sells).
	require.Equal(t, status.InProgressStatus, kstatusOf(t, a))
	require.Equal(t, "WaitingForWorkloads", condition(a, seckillv1alpha1.ConditionReconciling).Reason)
	a = s.eventually("reconciling after the end", func(a *seckillv1alpha1.SeckillActivity) bool {
		return a.Status.Phase == seckillv1alpha1.PhaseReconciling
	})
	require.Equal(t, status.InProgressStatus, kstatusOf(t, a))
	_, windows := s.redisStock(90001, 4)
	require.True(t, allSame(windows, redisstore.WindowEnded), "%v", windows)
	var job batchv1.Job
	jkey := types.NamespacedName{Namespace: "default", Name: ObjectName(a, "final-reconcile")}
	require.NoError(t, k8sClient.Get(testCtx, jkey, &job))
	require.Equal(t, []string{"reconcile", "-final"}, job.Spec.Template.Spec.Containers[0].Args)

	// No job controller here: report the Job's success as it would.
	now := metav1.Now()
	job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	require.NoError(t, k8sClient.Status().Update(testCtx, &job))
	a = s.eventually("completed", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.Phase == seckillv1alpha1.PhaseCompleted })
	require.Equal(t, metav1.ConditionTrue, condition(a, seckillv1alpha1.ConditionReconciled).Status)
	require.Equal(t, status.CurrentStatus, kstatusOf(t, a))
	require.Equal(t, metav1.ConditionTrue, condition(a, seckillv1alpha1.ConditionReady).Status)
	// Completed: the Redis keys now expire after the retention (default 168h).
	require.Eventually(t, func() bool {
		ttl, err := s.rdb.PTTL(testCtx, redisstore.SKUSlot(s.activity, 90002).Stock()).Result()
		return err == nil && ttl > 160*time.Hour
	}, 10*time.Second, 100*time.Millisecond)
	require.NotEmpty(t, s.events("Archived"))
	// Completed: the workloads stop (0 replicas, CronJobs suspended); the
	// objects stay until the activity is deleted.
	require.Eventually(t, func() bool {
		for _, c := range []string{ComponentGateway, ComponentConsumer, ComponentRelay, ComponentProjector} {
			var d appsv1.Deployment
			if k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, c)}, &d) != nil || *d.Spec.Replicas != 0 {
				return false
			}
		}
		var cj batchv1.CronJob
		if k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, "reconcile")}, &cj) != nil {
			return false
		}
		return cj.Spec.Suspend != nil && *cj.Spec.Suspend
	}, 10*time.Second, 100*time.Millisecond, "the workloads stop once the sale is completed")
	s.eventually("no consumer desired", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.DesiredConsumers == 0 })
	for _, p := range []seckillv1alpha1.Phase{seckillv1alpha1.PhaseActive, seckillv1alpha1.PhaseReconciling, seckillv1alpha1.PhaseCompleted} {
		require.NotEmpty(t, s.events(string(p)), p)
	}
}

// Deleting an activity archives it: traffic stops, its Redis keys expire
// after the retention, PostgreSQL keeps the business data.
func TestDeletionArchivesAndKeepsOrders(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "deletion", func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.Retention = &metav1.Duration{Duration: 2 * time.Hour}
	})
	s.eventually("provisioned", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionStockProvisioned).Status == metav1.ConditionTrue
	})
	require.Contains(t, s.get().Finalizers, Finalizer)
	uid := s.get().UID
	s.roleConn(s.get(), pgroles.Consumer) // the roles exist while the activity does
	require.True(t, testReconciler.done.known(uid), "the roles ensured are remembered")
	s.reserve(2, time.Now())
	require.NoError(t, k8sClient.Delete(testCtx, s.get()))
	s.gone()
	require.False(t, testReconciler.done.known(uid), "the operator forgets a deleted activity")
	for _, sl := range redisstore.Slots(s.activity, 90001, 4) {
		w, err := s.rdb.Get(testCtx, sl.Window()).Result()
		require.NoError(t, err)
		require.Equal(t, redisstore.WindowEnded, w)
		ttl, err := s.rdb.PTTL(testCtx, sl.Stock()).Result()
		require.NoError(t, err)
		require.InDelta(t, (2 * time.Hour).Seconds(), ttl.Seconds(), 30)
	}
	initial, _ := s.pgInventory(90001)
	require.Equal(t, int64(100), initial, "PostgreSQL keeps the business data")
	var roles int
	require.NoError(t, s.pool.QueryRow(testCtx, `SELECT count(*) FROM pg_roles WHERE rolname LIKE $1`,
		strings.TrimSuffix(pgroles.Name(string(uid), pgroles.Gateway), pgroles.Gateway)+"%").Scan(&roles))
	require.Zero(t, roles, "the workloads' roles go with the activity")
}

// A PostgreSQL that does not answer shows as Degraded with the reason, and
// the operator recovers by itself once the Secret points somewhere that does.
func TestConnectionFailureIsAConditionAndRecovers(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "conn-failure", nil)
	s.eventually("provisioned", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionStockProvisioned).Status == metav1.ConditionTrue
	})
	var sec corev1.Secret
	skey := types.NamespacedName{Namespace: "default", Name: "conn-failure-conn"}
	require.NoError(t, k8sClient.Get(testCtx, skey, &sec))
	good := string(sec.Data["pg-dsn"])
	sec.Data["pg-dsn"] = []byte("postgres://seckill:seckill@127.0.0.1:1/seckill?sslmode=disable&connect_timeout=2")
	require.NoError(t, k8sClient.Update(testCtx, &sec))
	s.update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.SKUs[1].Stock = 21 }) // something to provision
	a := s.eventually("degraded", func(a *seckillv1alpha1.SeckillActivity) bool {
		c := condition(a, seckillv1alpha1.ConditionDegraded)
		return c.Status == metav1.ConditionTrue && c.Reason == ReasonPostgresUnreachable
	})
	require.Contains(t, condition(a, seckillv1alpha1.ConditionDegraded).Message, "PostgreSQL")
	require.Equal(t, status.FailedStatus, kstatusOf(t, a), "GitOps tools see the broken Secret as Failed")
	require.Equal(t, ReasonPostgresUnreachable, condition(a, seckillv1alpha1.ConditionStalled).Reason)
	require.NoError(t, k8sClient.Get(testCtx, skey, &sec))
	sec.Data["pg-dsn"] = []byte(good)
	require.NoError(t, k8sClient.Update(testCtx, &sec))
	a = s.eventually("recovered", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionDegraded).Status == metav1.ConditionFalse &&
			condition(a, seckillv1alpha1.ConditionStockProvisioned).ObservedGeneration == a.Generation
	})
	// No kubelet here: the workloads never get ready, so the operator is
	// still working (InProgress), no longer Failed.
	require.Equal(t, status.InProgressStatus, kstatusOf(t, a))
	initial, _ := s.pgInventory(90002)
	require.Equal(t, int64(21), initial)
}

var _ = control.Applied

// The reconcile job's runs and anomalies, recorded in PostgreSQL by the
// CronJob's pods, reach the operator's /metrics as design.md#metrics's
// seckill_reconcile_anomaly_total, seckill_reconcile_auto_repair_total,
// seckill_reconcile_manual_total{activity,type} and
// seckill_reconcile_run_duration_seconds{activity}.
func TestReconcileRunsReachTheOperatorsMetrics(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "reconcile-metrics", nil)
	s.eventually("active", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.Phase == seckillv1alpha1.PhaseActive })
	typ := fmt.Sprintf("TEST_ANOMALY_%d", s.activity)
	a := strconv.FormatInt(s.activity, 10)
	samples := func() uint64 {
		var m dto.Metric
		require.NoError(t, reconcileDuration.WithLabelValues(a).(prometheus.Metric).Write(&m))
		return m.GetHistogram().GetSampleCount()
	}
	before := samples()
	// As the job records a run: started, its findings, then finished.
	_, err := s.pool.Exec(testCtx, `INSERT INTO reconcile_run (run_id, activity_id, watermark, started_at)
		VALUES ('00000000-0000-7000-8000-0000000000a1', $1, now(), now() - interval '3 seconds')`, s.activity)
	require.NoError(t, err)
	for i, task := range []struct {
		automatic bool
		status    string
	}{{true, "APPLIED"}, {false, "MANUAL"}} {
		id := bytes.Repeat([]byte{byte(i + 1)}, 32)
		_, err := s.pool.Exec(testCtx, `INSERT INTO repair_task (repair_id, object_type, object_id, rule_name, expected_version, target_state, status, automatic, operator, reason, activity_id, applied_at)
			VALUES ($1, 'RESERVATION', $2, $3, 0, 'X', $4::text, $5, 'reconcile', 'test', $6, CASE WHEN $4::text = 'APPLIED' THEN now() - interval '1 second' END)`,
			id, fmt.Sprint(i), typ, task.status, task.automatic, s.activity)
		require.NoError(t, err)
		_, err = s.pool.Exec(testCtx, `INSERT INTO reconcile_anomaly (run_id, anomaly_type, severity, activity_id, repair_id) VALUES ('00000000-0000-7000-8000-0000000000a1', $1, 'CRITICAL', $2, $3)`,
			typ, s.activity, id)
		require.NoError(t, err)
	}
	_, err = s.pool.Exec(testCtx, `INSERT INTO reconcile_anomaly (run_id, anomaly_type, severity, activity_id) VALUES ('00000000-0000-7000-8000-0000000000a1', $1, 'INFO', $2)`, typ, s.activity)
	require.NoError(t, err)
	_, err = s.pool.Exec(testCtx, `UPDATE reconcile_run SET status = 'ANOMALIES', finished_at = clock_timestamp(), anomalies_found = 3, auto_repaired = 1, manual_required = 1
		WHERE run_id = '00000000-0000-7000-8000-0000000000a1'`)
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		return testutil.ToFloat64(reconcileAnomalies.WithLabelValues(a, typ)) == 3
	}, 30*time.Second, 100*time.Millisecond, "counted on the next reconcile of the activity")
	require.Equal(t, 1.0, testutil.ToFloat64(reconcileAutoRepairs.WithLabelValues(a, typ)))
	require.Equal(t, 1.0, testutil.ToFloat64(reconcileManual.WithLabelValues(a, typ)))
	require.Greater(t, samples(), before, "the run's duration observed")
	time.Sleep(2 * time.Second) // more reconciles of the activity: the run is counted once
	require.Equal(t, 3.0, testutil.ToFloat64(reconcileAnomalies.WithLabelValues(a, typ)))
}

// PostgreSQL's certificate is verified against spec.connections.
// postgresCASecret: an authority that did not sign it fails closed with its
// own reason (never a plain-text retry), the right one connects, the
// workloads get it as the file their DSNs name, and a refused password has
// its own reason too.
func TestPostgresCertificateAndPasswordFailClosed(t *testing.T) {
	needsAPIServer(t)
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pg-tls-ca", Namespace: "default"}, Data: map[string][]byte{"ca.crt": testenv.ForeignCA(t)}}
	require.NoError(t, k8sClient.Create(testCtx, ca))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ca) })
	s := newSale(t, "pg-tls", func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.Connections.PostgresCASecret = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: ca.Name}, Key: "ca.crt"}
	})
	a := s.eventually("degraded by the certificate", func(a *seckillv1alpha1.SeckillActivity) bool {
		c := condition(a, seckillv1alpha1.ConditionDegraded)
		return c.Status == metav1.ConditionTrue && c.Reason == ReasonPostgresTLS
	})
	require.Contains(t, condition(a, seckillv1alpha1.ConditionDegraded).Message, "certificate")
	var rows int
	require.NoError(t, s.pool.QueryRow(testCtx, `SELECT count(*) FROM sku_inventory WHERE activity_id = $1`, s.activity).Scan(&rows))
	require.Zero(t, rows, "nothing provisioned through an unverified connection")

	stackCA, err := os.ReadFile(testenv.Get(t, "SECKILL_TLS_CA"))
	require.NoError(t, err)
	require.NoError(t, k8sClient.Get(testCtx, client.ObjectKeyFromObject(ca), ca))
	ca.Data["ca.crt"] = stackCA
	require.NoError(t, k8sClient.Update(testCtx, ca))
	s.eventually("connected with the right authority", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionStockProvisioned).Status == metav1.ConditionTrue
	})
	var d appsv1.Deployment
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(s.get(), ComponentConsumer)}, &d))
	mounted := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		mounted = mounted || (v.Secret != nil && v.Secret.SecretName == ca.Name)
	}
	require.True(t, mounted, "the consumer's pods mount the authority")
	var sec corev1.Secret
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(s.get(), dbRolesSuffix)}, &sec))
	require.Contains(t, string(sec.Data[pgroles.Consumer+"-dsn"]), "sslrootcert=%2Fetc%2Fseckill%2Fpostgres-ca%2Fca.crt", "the role's DSN names the mounted file")

	conn2 := s.pool.Config().ConnString()
	var cs corev1.Secret
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: "pg-tls-conn"}, &cs))
	cs.Data["pg-dsn"] = []byte(strings.Replace(conn2, "seckill:seckill@", "seckill:wrong@", 1))
	require.NoError(t, k8sClient.Update(testCtx, &cs))
	a = s.eventually("degraded by the password", func(a *seckillv1alpha1.SeckillActivity) bool {
		c := condition(a, seckillv1alpha1.ConditionDegraded)
		return c.Status == metav1.ConditionTrue && c.Reason == ReasonPostgresAuth
	})
	require.NotContains(t, condition(a, seckillv1alpha1.ConditionDegraded).Message, "wrong", "the password is never shown")
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: "pg-tls-conn"}, &cs))
	cs.Data["pg-dsn"] = []byte(conn2)
	require.NoError(t, k8sClient.Update(testCtx, &cs))
	s.eventually("recovered", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionDegraded).Status == metav1.ConditionFalse
	})
}

// A Redis login the server refuses is Degraded RedisAuthFailed (never shown),
// and the operator recovers once the Secret holds the right one; the pods
// read the login from the same Secret.
func TestRedisLoginFailsClosed(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "redis-login", nil)
	a := s.eventually("active", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.Phase == seckillv1alpha1.PhaseActive })
	var d appsv1.Deployment
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentGateway)}, &d))
	env := map[string]corev1.EnvVar{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e
	}
	require.Equal(t, "redis-password", env["SECKILL_REDIS_PASSWORD"].ValueFrom.SecretKeyRef.Key)
	require.Equal(t, "redis-username", env["SECKILL_REDIS_USERNAME"].ValueFrom.SecretKeyRef.Key)

	var cs corev1.Secret
	key := types.NamespacedName{Namespace: "default", Name: "redis-login-conn"}
	require.NoError(t, k8sClient.Get(testCtx, key, &cs))
	good := cs.Data["redis-password"]
	cs.Data["redis-password"] = []byte("not-the-password")
	require.NoError(t, k8sClient.Update(testCtx, &cs))
	a = s.eventually("degraded by the login", func(a *seckillv1alpha1.SeckillActivity) bool {
		c := condition(a, seckillv1alpha1.ConditionDegraded)
		return c.Status == metav1.ConditionTrue && c.Reason == ReasonRedisAuth
	})
	require.NotContains(t, condition(a, seckillv1alpha1.ConditionDegraded).Message, "not-the-password")
	require.NoError(t, k8sClient.Get(testCtx, key, &cs))
	cs.Data["redis-password"] = good
	require.NoError(t, k8sClient.Update(testCtx, &cs))
	s.eventually("recovered", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionDegraded).Status == metav1.ConditionFalse
	})
}

// Redis's certificate is verified against spec.connections.redis.caSecret:
// a value that is no certificate is SecretInvalid naming the key, another
// authority is Degraded RedisTLSFailed with nothing provisioned (never a
// plain-text retry), the stack's CA connects, and every pod gets it as the
// file $SECKILL_REDIS_CA_FILE names.
func TestRedisCertificateFailsClosed(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "redis-tls", nil)
	var cs corev1.Secret
	key := types.NamespacedName{Namespace: "default", Name: "redis-tls-conn"}
	require.NoError(t, k8sClient.Get(testCtx, key, &cs))
	good := cs.Data["redis-ca.crt"]
	s.eventually("active over TLS", func(a *seckillv1alpha1.SeckillActivity) bool { return a.Status.Phase == seckillv1alpha1.PhaseActive })
	var d appsv1.Deployment
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(s.get(), ComponentGateway)}, &d))
	env := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	require.Equal(t, "/etc/seckill/redis-ca/ca.crt", env[names.EnvRedisCAFile])
	mounted := false
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounted = mounted || (m.Name == "redis-ca" && m.MountPath == "/etc/seckill/redis-ca" && m.ReadOnly)
	}
	require.True(t, mounted, "the gateway's pods mount the authority")

	for _, tc := range []struct {
		name, reason string
		ca           []byte
	}{
		{"a placeholder", ReasonSecretInvalid, []byte("changeme")},
		{"another authority", ReasonRedisTLS, testenv.ForeignCA(t)},
	} {
		require.NoError(t, k8sClient.Get(testCtx, key, &cs))
		cs.Data["redis-ca.crt"] = tc.ca
		require.NoError(t, k8sClient.Update(testCtx, &cs))
		a := s.eventually("degraded by "+tc.name, func(a *seckillv1alpha1.SeckillActivity) bool {
			c := condition(a, seckillv1alpha1.ConditionDegraded)
			return c.Status == metav1.ConditionTrue && c.Reason == tc.reason
		})
		msg := condition(a, seckillv1alpha1.ConditionDegraded).Message
		if tc.reason == ReasonSecretInvalid {
			require.Contains(t, msg, `"redis-ca.crt"`, "the bad key is named")
		} else {
			require.Contains(t, msg, "certificate")
		}
	}
	require.NoError(t, k8sClient.Get(testCtx, key, &cs))
	cs.Data["redis-ca.crt"] = good
	require.NoError(t, k8sClient.Update(testCtx, &cs))
	s.eventually("recovered with the stack's authority", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionDegraded).Status == metav1.ConditionFalse
	})
}

// The proxy's certificate is checked against spec.connections.
// rocketMQCASecret before any workload runs with it: another authority is
// Degraded RocketMQTLSFailed; the stack's CA passes, and every pod gets it
// as the file $SECKILL_RMQ_CA_FILE names.
func TestRocketMQCertificateIsChecked(t *testing.T) {
	needsAPIServer(t)
	stackCA, err := os.ReadFile(testenv.Get(t, "SECKILL_RMQ_CA_FILE"))
	require.NoError(t, err)
	rmqSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rmq-tls", Namespace: "default"}, Data: map[string][]byte{
		"endpoint": []byte(testenv.Get(t, "SECKILL_RMQ_ENDPOINT")), "ca.crt": testenv.ForeignCA(t)}}
	require.NoError(t, k8sClient.Create(testCtx, rmqSecret))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), rmqSecret) })
	s := newSale(t, "rmq-tls", func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.Connections.RocketMQEndpointSecret = corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: rmqSecret.Name}, Key: "endpoint"}
		a.Spec.Connections.RocketMQCASecret = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: rmqSecret.Name}, Key: "ca.crt"}
	})
	a := s.eventually("degraded by the proxy's certificate", func(a *seckillv1alpha1.SeckillActivity) bool {
		c := condition(a, seckillv1alpha1.ConditionDegraded)
		return c.Status == metav1.ConditionTrue && c.Reason == ReasonRocketMQTLS
	})
	var d appsv1.Deployment
	require.True(t, apierrors.IsNotFound(k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentGateway)}, &d)),
		"no workload runs before the certificate verifies")

	require.NoError(t, k8sClient.Get(testCtx, client.ObjectKeyFromObject(rmqSecret), rmqSecret))
	rmqSecret.Data["ca.crt"] = stackCA
	require.NoError(t, k8sClient.Update(testCtx, rmqSecret))
	s.eventually("verified", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionDegraded).Status == metav1.ConditionFalse
	})
	require.Eventually(t, func() bool {
		return k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentConsumer)}, &d) == nil
	}, 30*time.Second, 200*time.Millisecond)
	ctr := d.Spec.Template.Spec.Containers[0]
	file := ""
	for _, e := range ctr.Env {
		if e.Name == "SECKILL_RMQ_CA_FILE" {
			file = e.Value
		}
	}
	require.Equal(t, rocketMQCADir+"/ca.crt", file)
	mounted := false
	for _, m := range ctr.VolumeMounts {
		mounted = mounted || m.MountPath == rocketMQCADir
	}
	require.True(t, mounted)
}

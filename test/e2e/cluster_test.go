// Package e2e runs the product on the local single-node Kubernetes
// (hack/cluster.sh) as a platform team would: the chart installed with the
// local image, a Secret pointing at the local stack, a SeckillActivity
// applied, buyers at the gateway Service, and the activity's phases to
// Completed with the invariants checked in PostgreSQL.
//
// It needs the cluster: `make e2e` starts it and sets SECKILL_E2E=1, which
// turns a missing cluster into a failure instead of a skip.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/gateway"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/testenv"
)

const (
	nodeIP = "10.244.0.1"
	image  = "localhost/seckill:dev"
)

func repoRoot() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..")
}

// cluster connects to the local cluster, or skips (fails under SECKILL_E2E=1).
func cluster(t *testing.T) client.Client {
	t.Helper()
	kubeconfig := filepath.Join(repoRoot(), ".stack", "cluster", "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err == nil {
		cfg.Timeout = 5 * time.Second
		var c client.Client
		scheme := clientgoscheme.Scheme
		_ = seckillv1alpha1.AddToScheme(scheme)
		if c, err = client.New(cfg, client.Options{Scheme: scheme}); err == nil {
			var nodes corev1.NodeList
			if err = c.List(context.Background(), &nodes); err == nil && len(nodes.Items) > 0 {
				return c
			}
		}
	}
	if os.Getenv("SECKILL_E2E") == "1" {
		t.Fatalf("the local cluster does not answer (hack/cluster.sh up): %v", err)
	}
	t.Skipf("no local cluster (make e2e starts one): %v", err)
	return nil
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), "%s %s:\n%s", name, strings.Join(args, " "), out.String())
	return out.String()
}

// onNode rewrites a 127.0.0.1 address of the stack to the node's bridge
// address, where pods reach it (hack/forward).
func onNode(s string) string { return strings.ReplaceAll(s, "127.0.0.1", nodeIP) }

func TestSaleOnTheCluster(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	bin := filepath.Join(repoRoot(), ".stack", "cluster", "bin")
	kubeconfig := filepath.Join(repoRoot(), ".stack", "cluster", "kubeconfig")

	// 1. The chart, with the local image and leader election.
	run(t, filepath.Join(bin, "helm"), "--kubeconfig", kubeconfig, "upgrade", "--install", "seckill",
		filepath.Join(repoRoot(), "charts", "seckill-operator"), "--namespace", "seckill-system", "--create-namespace",
		"--set", "image.repository=localhost/seckill", "--set", "image.tag=dev", "--set", "image.pullPolicy=Never",
		"--set", "leaderElection=true", "--wait", "--timeout", "3m")
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(run(t, filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "get", "pods", "-A", "-o", "wide"))
			out, _ := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "-n", "seckill-system", "logs", "deploy/seckill-operator", "--tail", "60").CombinedOutput()
			t.Logf("operator log:\n%s", out)
		}
	})

	// 2. The activity's database, its Secret and the manifest.
	pool := testenv.Database(t)
	activity := time.Now().UnixNano()%1_000_000_000_000 + 1
	namespace := fmt.Sprintf("sale-%d", activity)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	require.NoError(t, c.Create(ctx, ns))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	tokenKey := strings.Repeat("t", 32)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("conn-%d", activity), Namespace: namespace},
		StringData: map[string]string{
			"pg-dsn": onNode(pool.Config().ConnString()), "redis-addrs": onNode(testenv.Get(t, "SECKILL_REDIS_ADDR")),
			"rmq-endpoint": onNode(testenv.Get(t, "SECKILL_RMQ_ENDPOINT")), "id-keys": "1:" + strings.Repeat("ab", 32),
			"token-key": tokenKey,
		}}
	require.NoError(t, c.Create(ctx, secret))
	ref := func(key string) corev1.SecretKeySelector {
		return corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret.Name}, Key: key}
	}
	const stock = 300
	start := time.Now().Add(30 * time.Second).UTC().Truncate(time.Second)
	act := &seckillv1alpha1.SeckillActivity{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sale-%d", activity), Namespace: namespace},
		Spec: seckillv1alpha1.SeckillActivitySpec{
			ActivityID: activity,
			SKUs:       []seckillv1alpha1.SKUSpec{{ID: 1, Stock: stock, Buckets: 2}},
			Schedule:   seckillv1alpha1.Schedule{Start: metav1.NewTime(start), End: metav1.NewTime(start.Add(90 * time.Second))},
			Connections: seckillv1alpha1.Connections{PostgresDSNSecret: ref("pg-dsn"),
				Redis:                  seckillv1alpha1.RedisConnection{Mode: "single", AddressesSecret: ref("redis-addrs")},
				RocketMQEndpointSecret: ref("rmq-endpoint"), IDKeysSecret: ref("id-keys"), TokenKeySecret: ref("token-key")},
			Workloads: seckillv1alpha1.WorkloadsSpec{Image: image, ImagePullPolicy: corev1.PullNever},
			Scaling:   seckillv1alpha1.ScalingSpec{MinConsumers: 1, MaxConsumers: 3},
		}}
	require.NoError(t, c.Create(ctx, act))
	// Deleted, and gone (archived by the operator), before the database is
	// dropped: a workload left running would keep consuming from the shared
	// topics for an activity whose database no longer exists.
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), act)
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(act), &seckillv1alpha1.SeckillActivity{}); err != nil {
				return
			}
			time.Sleep(time.Second)
		}
		t.Errorf("activity %s was not archived and deleted within 2 minutes", act.Name)
	})

	// 3. The phases, as `kubectl get seckillactivities -w` shows them.
	var mu sync.Mutex
	var phases []seckillv1alpha1.Phase
	var maxDesired int32
	phase := func() seckillv1alpha1.Phase {
		var cur seckillv1alpha1.SeckillActivity
		if err := c.Get(ctx, client.ObjectKeyFromObject(act), &cur); err != nil {
			return ""
		}
		mu.Lock()
		defer mu.Unlock()
		maxDesired = max(maxDesired, cur.Status.DesiredConsumers)
		if p := cur.Status.Phase; p != "" && (len(phases) == 0 || phases[len(phases)-1] != p) {
			phases = append(phases, p)
			t.Logf("%s phase %s (sold %s, consumers %d/%d)", time.Now().Format("15:04:05"), p, cur.Status.Sold, cur.Status.ReadyConsumers, cur.Status.DesiredConsumers)
		}
		return cur.Status.Phase
	}
	require.Eventually(t, func() bool { return phase() == seckillv1alpha1.PhaseActive }, 3*time.Minute, time.Second, "Active")
	require.Eventually(t, func() bool {
		var deps appsv1.DeploymentList
		if c.List(ctx, &deps, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/instance": act.Name}) != nil || len(deps.Items) == 0 {
			return false
		}
		for _, d := range deps.Items {
			if d.Status.ReadyReplicas < 1 {
				return false
			}
		}
		return true
	}, 3*time.Minute, time.Second, "every workload Ready")

	// 4. Buyers at the gateway Service's ClusterIP (kube-proxy).
	var svcs corev1.ServiceList
	require.NoError(t, c.List(ctx, &svcs, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/instance": act.Name}))
	require.Len(t, svcs.Items, 1)
	svc := svcs.Items[0]
	base := fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	queued := map[string]bool{}
	codes := map[string]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	hc := &http.Client{Timeout: 10 * time.Second}
	for u := int64(1); u <= 2*stock; u++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(user int64) {
			defer wg.Done()
			defer func() { <-sem }()
			body := `{"request_id":"` + ids.NewRandom().String() + `"}`
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/activities/%d/skus/1/reservations", base, activity), strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+gateway.SignToken(user, []byte(tokenKey), time.Now().Add(time.Hour)))
			resp, err := hc.Do(req)
			code := "TRANSPORT_ERROR"
			var a struct {
				Code string `json:"code"`
				RID  string `json:"reservation_id"`
			}
			if err == nil {
				_ = json.NewDecoder(resp.Body).Decode(&a)
				_ = resp.Body.Close()
				code = a.Code
			}
			mu.Lock()
			codes[code]++
			if code == gateway.CodeQueued {
				queued[a.RID] = true
			}
			mu.Unlock()
		}(u)
	}
	// A consumer pod killed mid-sale, as `kubectl delete pod --grace-period=0
	// --force` does: its deliveries come back to the others.
	var pods corev1.PodList
	require.NoError(t, c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/instance": act.Name, names.LabelComponent: "order-consumer"}))
	if len(pods.Items) > 0 {
		require.NoError(t, c.Delete(ctx, &pods.Items[0], client.GracePeriodSeconds(0)))
		t.Logf("killed consumer pod %s mid-sale", pods.Items[0].Name)
	}
	wg.Wait()
	t.Logf("answers: %v", codes)
	require.Equal(t, stock, len(queued), "every unit reserved")

	// 5. The end: Draining, Reconciling (the final Job), Completed.
	require.Eventually(t, func() bool { return phase() == seckillv1alpha1.PhaseCompleted }, 6*time.Minute, 2*time.Second, "Completed")
	mu.Lock()
	seen := append([]seckillv1alpha1.Phase(nil), phases...)
	mu.Unlock()
	for _, p := range []seckillv1alpha1.Phase{seckillv1alpha1.PhaseActive, seckillv1alpha1.PhaseReconciling, seckillv1alpha1.PhaseCompleted} {
		require.Contains(t, seen, p)
	}
	var jobs batchv1.JobList
	require.NoError(t, c.List(ctx, &jobs, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/instance": act.Name}))
	final := false
	for _, j := range jobs.Items {
		if j.Status.Succeeded > 0 {
			final = true
		}
	}
	require.True(t, final, "the final reconcile Job ran as a pod and exited 0")

	mu.Lock()
	t.Logf("phases %v; desired consumers peaked at %d", seen, maxDesired)
	mu.Unlock()

	// 6. The invariants, straight in PostgreSQL.
	checkInvariants(t, pool, activity, stock, len(queued))
}

func checkInvariants(t *testing.T, pool *pgxpool.Pool, activity int64, stock, queued int) {
	t.Helper()
	ctx := context.Background()
	var orders, dups, delta int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE activity_id = $1`, activity).Scan(&orders))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM orders WHERE activity_id = $1 GROUP BY user_id, sku_id HAVING count(*) > 1) d`, activity).Scan(&dups))
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(sum(initial_stock - available_stock - occupied_stock - sold_stock), 0) FROM sku_inventory WHERE activity_id = $1`, activity).Scan(&delta))
	require.Equal(t, queued, orders, "one order per accepted reservation")
	require.LessOrEqual(t, orders, stock, "no oversell")
	require.Zero(t, dups, "one order per user")
	require.Zero(t, delta, "PostgreSQL conserves stock")
}

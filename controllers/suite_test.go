package controllers

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/internal/testenv"
)

// One real kube-apiserver + etcd for the whole package (envtest), with the
// generated CRD installed and the manager running.
var (
	k8sClient client.Client
	testCtx   context.Context
	// testReconciler is the operator under test, for what it keeps in memory.
	testReconciler *SeckillActivityReconciler
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// make test-unit: the tests that need no kube-apiserver run, the
		// others skip (needsAPIServer).
		os.Exit(m.Run())
	}
	os.Exit(runSuite(m))
}

// apiServer: envtest is running (not -short).
var apiServer bool

// needsAPIServer skips a test that needs envtest under -short.
func needsAPIServer(t *testing.T) {
	t.Helper()
	if !apiServer {
		t.Skip("needs envtest's kube-apiserver (skipped with -short)")
	}
}

func runSuite(m *testing.M) int {
	// The manager's log only when asked for ($SECKILL_TEST_LOG=1): it is long.
	logTo := io.Discard
	if os.Getenv("SECKILL_TEST_LOG") != "" {
		logTo = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(logTo)))
	assets, err := testenv.KubernetesAssets(30*time.Minute, func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	})
	if err != nil {
		panic("the real stack is not available: " + err.Error())
	}
	_ = os.Setenv("KUBEBUILDER_ASSETS", assets)
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(seckillv1alpha1.AddToScheme(scheme))

	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		panic("starting envtest (real kube-apiserver and etcd): " + err.Error())
	}
	defer func() { _ = env.Stop() }()

	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		panic(err)
	}
	stores := &StoreCache{}
	defer stores.Close()
	testReconciler = &SeckillActivityReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: scheme,
		Recorder: mgr.GetEventRecorder("seckill-operator"), Stores: stores,
		WorkloadImage: "seckill/workloads:dev", AllowedImages: []string{"seckill/workloads:"},
		ConnRetry: time.Second, ActivePoll: time.Second}
	if err := testReconciler.SetupWithManager(mgr); err != nil {
		panic(err)
	}
	var cancel context.CancelFunc
	testCtx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(testCtx) }()
	apiServer = true
	return m.Run()
}

// validActivity is a manifest that the API server accepts.
func validActivity(name string) *seckillv1alpha1.SeckillActivity {
	sel := func(n string) corev1.SecretKeySelector {
		return corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "seckill-conn"}, Key: n}
	}
	start := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
	return &seckillv1alpha1.SeckillActivity{
		// No stores behind it: deletion skips archiving.
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{AnnotationSkipArchive: "true"}},
		Spec: seckillv1alpha1.SeckillActivitySpec{
			ActivityID: 1001,
			SKUs:       []seckillv1alpha1.SKUSpec{{ID: 90001, Stock: 100, Buckets: 4, PriceCents: 19900}, {ID: 90002, Stock: 20, PriceCents: 4900}},
			Schedule:   seckillv1alpha1.Schedule{Start: start, End: metav1.NewTime(start.Add(time.Hour))},
			Connections: seckillv1alpha1.Connections{
				PostgresDSNSecret:      sel("pg-dsn"),
				Redis:                  seckillv1alpha1.RedisConnection{AddressesSecret: sel("redis-addrs")},
				RocketMQEndpointSecret: sel("rmq-endpoint"),
				IDKeysSecret:           sel("id-keys"),
				TokenKeySecret:         ptr.To(sel("token-key")),
			},
			Workloads: seckillv1alpha1.WorkloadsSpec{Image: "seckill/workloads:dev"},
		},
	}
}

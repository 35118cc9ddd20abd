// Command seckill-operator runs the SeckillActivity controller manager.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/controllers"
	"github.com/seckill/seckill-operator/workloads/config"
	"github.com/seckill/seckill-operator/workloads/logs"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(seckillv1alpha1.AddToScheme(scheme))
}

func main() {
	var metricsAddr, probeAddr string
	var leaderElect, secureMetrics, enableHTTP2 bool
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "Address of the metrics endpoint (0 disables it).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader, so that only one manager reconciles at a time.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS with authentication and authorization.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false, "Allow HTTP/2 on the metrics server.")
	var workloadImage, allowedImages, watchNamespaces string
	flag.StringVar(&watchNamespaces, "watch-namespaces", "", "Comma-separated namespaces to watch (a namespace-scoped install: Roles there, no ClusterRole). Empty: all.")
	flag.StringVar(&workloadImage, "workload-image", os.Getenv("SECKILL_WORKLOAD_IMAGE"), "Image the workloads run (the operator's own; the chart sets it). Empty with no --allowed-workload-images: any manifest's image runs (development only).")
	flag.StringVar(&allowedImages, "allowed-workload-images", "", "Comma-separated image prefixes a SeckillActivity may name besides --workload-image.")
	logLevel := flag.String("log-level", "info", "Lowest level logged: debug, info, warn or error.")
	flag.Parse()
	level, err := logs.ParseLevel(*logLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "--log-level: %v\n", err)
		os.Exit(2)
	}
	// The workloads' logger (JSON lines, the same fields), through logr's
	// slog bridge: one format for the operator and every workload.
	ctrl.SetLogger(logr.FromSlogHandler(logs.New(os.Stderr, "operator", logs.Options{Level: level}).Handler()))
	log := ctrl.Log.WithName("setup")

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics, TLSOpts: tlsOpts}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	var cacheOpts cache.Options
	if nss := config.SplitList(watchNamespaces); len(nss) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range nss {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsOpts,
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "seckill-operator.seckill.io",
		// The process exits as soon as the manager stops, so the lease can
		// be handed over at once: a rollout's new pod leads without waiting
		// out the lease duration.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Error(err, "creating manager")
		os.Exit(1)
	}
	stores := &controllers.StoreCache{}
	defer stores.Close()
	if err := (&controllers.SeckillActivityReconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Scheme:        mgr.GetScheme(),
		Recorder:      mgr.GetEventRecorder("seckill-operator"),
		Stores:        stores,
		WorkloadImage: workloadImage,
		AllowedImages: config.SplitList(allowedImages),
	}).SetupWithManager(mgr); err != nil {
		log.Error(err, "setting up the SeckillActivity controller")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "adding health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "adding readiness check")
		os.Exit(1)
	}
	log.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running manager")
		os.Exit(1)
	}
}

package clustersale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/seckill/seckill-operator/test/monitoring"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// The run's Prometheus: Debian's prometheus on this host (127.0.0.1),
// scraping the operator's pods and the workload pods that carry the scrape
// annotations (found through the cluster's API) every 2 s, and
// evaluating the chart's alert rules as helm renders them (with a short
// pending time, so a run sees an alert fire and resolve in a minute).
const (
	promScrape = "2s"
	// promLagFor replaces alerts.thresholds.lagFor for the run.
	promLagFor = "10s"
	// promReader is the service account the run's Prometheus scrapes the
	// operator's authenticated /metrics as (bound to the chart's
	// metrics-reader role).
	promReader = "seckill-e2e-prometheus"
)

type prometheus struct {
	base string
	cmd  *exec.Cmd
	// stopDiscovery ends the loop that keeps the targets current.
	stopDiscovery context.CancelFunc
	// done is closed once the process has exited (stopped: its exit
	// status says nothing).
	done chan struct{}
}

// startPrometheus renders the chart's alerts, gives the run's Prometheus a
// token of a service account bound to the chart's metrics-reader role, and
// starts it. The caller stops it.
func (r *run) startPrometheus(ctx context.Context) (*prometheus, error) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		return nil, fmt.Errorf("prometheus (Debian's prometheus package; hack/stack.sh installs it): %w", err)
	}
	dir := filepath.Join(r.o.Root, ".stack", "cluster", "prometheus")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return nil, err
	}
	rendered, err := r.cmd(ctx, r.helm, "template", "seckill", filepath.Join(r.o.Root, "charts", "seckill-operator"),
		"--namespace", "seckill-system", "--set", "alerts.configMap=true", "--set", "alerts.thresholds.lagFor="+promLagFor,
		"--show-only", "templates/alerts.yaml")
	if err != nil {
		return nil, err
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal([]byte(rendered), &cm); err != nil {
		return nil, fmt.Errorf("the chart's alerts ConfigMap: %w", err)
	}
	rules := cm.Data["seckill-alerts.yaml"]
	if rules == "" {
		return nil, errors.New("the chart rendered no alert rules (alerts.configMap)")
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), []byte(rules), 0o600); err != nil {
		return nil, err
	}
	token, err := r.readerToken(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(promConfig()), 0o600); err != nil {
		return nil, err
	}
	if err := r.discover(ctx, dir); err != nil {
		return nil, err
	}
	addr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "prometheus.log")) //nolint:gosec // under the repository's .stack
	if err != nil {
		return nil, err
	}
	p := &prometheus{base: "http://" + addr, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "--config.file=prometheus.yml", "--storage.tsdb.path=data", //nolint:gosec // Debian's prometheus
		"--web.listen-address="+addr, "--log.level=warn")
	p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr = dir, logf, logf
	if err := p.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	go func() {
		defer close(p.done)
		if err := p.cmd.Wait(); err != nil {
			fmt.Fprintf(logf, "prometheus exited: %v\n", err)
		}
		_ = logf.Close()
	}()
	dctx, stopDiscovery := context.WithCancel(ctx)
	p.stopDiscovery = stopDiscovery
	go func() {
		for {
			select {
			case <-dctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			if err := r.discover(dctx, dir); err != nil && dctx.Err() == nil {
				r.logf("discovering the scrape targets: %v", err)
			}
		}
	}()
	r.logf("Prometheus on %s: scraping the operator and the annotated workload pods every %s, the chart's alerts loaded (pending %s)", addr, promScrape, promLagFor)
	if err := r.until(ctx, "Prometheus ready", time.Minute, func() bool {
		select {
		case <-p.done:
			return true // exited: the check below says so
		default:
		}
		resp, err := http.Get(p.base + "/-/ready") //nolint:gosec,noctx // our own Prometheus
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		p.stop()
		return nil, fmt.Errorf("%w (log: %s)", err, filepath.Join(dir, "prometheus.log"))
	}
	select {
	case <-p.done:
		p.stop()
		return nil, fmt.Errorf("prometheus exited at start (log: %s)", filepath.Join(dir, "prometheus.log"))
	default:
	}
	return p, nil
}

func (p *prometheus) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	if p.stopDiscovery != nil {
		p.stopDiscovery()
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// readerToken makes the run's Prometheus a service account bound to the
// chart's metrics-reader role and returns a token of it.
func (r *run) readerToken(ctx context.Context) (string, error) {
	manifest := fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s, namespace: seckill-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: seckill-operator-metrics-reader}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: seckill-system}]
`, promReader)
	f := filepath.Join(r.o.Root, ".stack", "cluster", "prometheus-reader.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		return "", err
	}
	if _, err := r.cmd(ctx, r.kubectl, "apply", "-f", f); err != nil {
		return "", err
	}
	out, err := r.cmd(ctx, r.kubectl, "-n", "seckill-system", "create", "token", promReader, "--duration=2h")
	return strings.TrimSpace(out), err
}

// promConfig scrapes the operator's pods (HTTPS, its own certificate, the
// reader's token) and every workload pod that asks for it, as file_sd
// target lists the run keeps current (discover): Debian's Prometheus is
// built without Kubernetes service discovery.
func promConfig() string {
	return fmt.Sprintf(`global: {scrape_interval: %[1]s, evaluation_interval: %[1]s}
rule_files: [alerts.yaml]
scrape_configs:
  - job_name: seckill-operator
    scheme: https
    tls_config: {insecure_skip_verify: true}  # the operator's self-signed serving certificate
    authorization: {credentials_file: token}
    file_sd_configs: [{files: [operator.json], refresh_interval: %[1]s}]
  - job_name: seckill-workloads
    file_sd_configs: [{files: [workloads.json], refresh_interval: %[1]s}]
`, promScrape)
}

// target is one file_sd entry.
type target struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// discover writes the scrape targets as a platform's Prometheus finds them:
// the running operator pods' port "metrics", and every running pod that
// carries prometheus.io/scrape: "true", at its prometheus.io/port — the
// annotations the operator puts on each workload.
func (r *run) discover(ctx context.Context, dir string) error {
	var pods corev1.PodList
	if err := r.c.List(ctx, &pods); err != nil {
		return err
	}
	operator, workloads := []target{}, []target{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		labels := map[string]string{"namespace": p.Namespace, "pod": p.Name}
		if p.Namespace == "seckill-system" && p.Labels["app.kubernetes.io/name"] == "seckill-operator" {
			for _, c := range p.Spec.Containers {
				for _, port := range c.Ports {
					if port.Name == "metrics" {
						operator = append(operator, target{[]string{net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.ContainerPort)))}, labels})
					}
				}
			}
			continue
		}
		if p.Annotations["prometheus.io/scrape"] == "true" && p.Annotations["prometheus.io/port"] != "" {
			workloads = append(workloads, target{[]string{net.JoinHostPort(p.Status.PodIP, p.Annotations["prometheus.io/port"])}, labels})
		}
	}
	for name, ts := range map[string][]target{"operator.json": operator, "workloads.json": workloads} {
		b, err := json.Marshal(ts)
		if err != nil {
			return err
		}
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// promSeries is one series of a query's answer.
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
	Value  [2]any            `json:"value"`
}

// get asks the Prometheus API; a query it refuses is an error.
func (p *prometheus) get(ctx context.Context, path string, q url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("prometheus %s %s: %s", path, q.Encode(), body.Error)
	}
	return json.Unmarshal(body.Data, out)
}

// query is an instant query.
func (p *prometheus) query(ctx context.Context, expr string) ([]promSeries, error) {
	var d struct {
		Result []promSeries `json:"result"`
	}
	err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &d)
	return d.Result, err
}

// queryRange is a range query over [from, now] at step.
func (p *prometheus) queryRange(ctx context.Context, expr string, from time.Time, step time.Duration) ([]promSeries, error) {
	var d struct {
		Result []promSeries `json:"result"`
	}
	err := p.get(ctx, "/api/v1/query_range", url.Values{"query": {expr}, "start": {strconv.FormatInt(from.Unix(), 10)},
		"end": {strconv.FormatInt(time.Now().Unix(), 10)}, "step": {strconv.Itoa(int(step.Seconds()))}}, &d)
	return d.Result, err
}

// firing lists the firing alerts named name for the activity, by severity.
func (p *prometheus) firing(ctx context.Context, name, activity string) (map[string]bool, error) {
	var d struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := p.get(ctx, "/api/v1/alerts", url.Values{}, &d); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, a := range d.Alerts {
		if a.State == "firing" && a.Labels["alertname"] == name && a.Labels["activity"] == activity {
			out[a.Labels["severity"]] = true
		}
	}
	return out, nil
}

// awaitAlert waits until the alert fires (or, with fire false, until it no
// longer does) for the run's activity; it records the check.
func (r *run) awaitAlert(ctx context.Context, name string, fire bool, limit time.Duration) {
	act := strconv.FormatInt(r.res.Activity, 10)
	var last map[string]bool
	var lastErr error
	what := map[bool]string{true: "fires", false: "resolves"}[fire]
	err := r.until(ctx, fmt.Sprintf("Prometheus: %s %s", name, what), limit, func() bool {
		last, lastErr = r.prom.firing(ctx, name, act)
		return lastErr == nil && (len(last) > 0) == fire
	})
	got := fmt.Sprintf("firing %v", last)
	if lastErr != nil {
		got = lastErr.Error()
	}
	if err == nil {
		r.logf("Prometheus: %s %s (%s)", name, what, got)
	}
	r.check(fmt.Sprintf("alert %s %s on the real metrics", name, what), err == nil, got)
}

// monitoringChecks: every workload series carries the activity, and every
// panel of the chart's dashboard showed this sale's data.
func (r *run) monitoringChecks(ctx context.Context) error {
	act := strconv.FormatInt(r.res.Activity, 10)
	unlabelled, err := r.prom.query(ctx, `count by (__name__, job) ({__name__=~"seckill_.+", activity=""})`)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(unlabelled))
	for _, s := range unlabelled {
		names = append(names, s.Metric["__name__"]+" ("+s.Metric["job"]+")")
	}
	labelled, err := r.prom.query(ctx, fmt.Sprintf(`count(count by (__name__) ({__name__=~"seckill_.+", activity=%q}))`, act))
	if err != nil {
		return err
	}
	n := "0"
	if len(labelled) == 1 {
		n = fmt.Sprint(labelled[0].Value[1])
	}
	r.check("every seckill_ series carries the activity", len(unlabelled) == 0 && n != "0",
		fmt.Sprintf("%s names with activity=%s; without: %v", n, act, names))

	panels, err := monitoring.DashboardPanels(filepath.Join(r.o.Root, "charts", "seckill-operator", "files", "dashboard.json"))
	if err != nil {
		return err
	}
	var empty []string
	for _, p := range panels {
		data := false
		for _, q := range p.Queries(act) {
			s, err := r.prom.queryRange(ctx, q, r.start, 5*time.Second)
			if err != nil {
				return fmt.Errorf("dashboard panel %q: %w", p.Title, err)
			}
			data = data || len(s) > 0
		}
		if !data {
			empty = append(empty, p.Title)
		}
	}
	r.check("every dashboard panel shows the sale", len(empty) == 0,
		fmt.Sprintf("%d/%d panels with data; empty: %v", len(panels)-len(empty), len(panels), empty))
	return nil
}

// conservationDelta makes a stock difference real for a moment: two units
// appear in one bucket's committed count in Redis that neither its stock
// nor PostgreSQL hold. The operator's next pass measures it, Prometheus
// fires SeckillStockConservation; the units are taken back and it resolves.
// It stays clear of the reconcile CronJob's minute (every 10 minutes), so
// that no run takes the moment up as an anomaly of the sale.
func (r *run) conservationDelta(ctx context.Context) error {
	for {
		if m := time.Now().Minute() % 10; m != 9 && m != 0 { // a minute clear of the run at :x0
			break
		}
		r.logf("waiting for the reconcile CronJob's minute to pass")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
		}
	}
	key := redisstore.BucketSlot(r.res.Activity, 1, 0).Counter()
	r.logf("redis HINCRBY %s committed 2 (a conservation difference)", key)
	if err := r.rdb.HIncrBy(ctx, key, "committed", 2).Err(); err != nil {
		return err
	}
	r.awaitAlert(ctx, "SeckillStockConservation", true, time.Minute)
	r.logf("redis HINCRBY %s committed -2 (taken back)", key)
	if err := r.rdb.HIncrBy(ctx, key, "committed", -2).Err(); err != nil {
		return err
	}
	r.awaitAlert(ctx, "SeckillStockConservation", false, time.Minute)
	return nil
}

package clustersale

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// plugin runs `kubectl seckill ARGS -n <the activity's namespace>` as a
// person does: kubectl finds the plugin on the PATH (make e2e and make demo
// build it into .stack/cluster/bin).
func (r *run) plugin(ctx context.Context, args ...string) (string, error) {
	bin := filepath.Dir(r.kubectl)
	if _, err := os.Stat(filepath.Join(bin, "kubectl-seckill")); err != nil {
		return "", fmt.Errorf("kubectl-seckill is not built (make e2e builds it): %w", err)
	}
	// The plugin's flags right after its command: what follows a runbook
	// verb is the runbook's.
	all := append([]string{"seckill", args[0], "-n", r.act.Namespace}, args[1:]...)
	r.logf("kubectl %s", strings.Join(all, " "))
	all = append(all[:2], append([]string{"--kubeconfig", r.kubeconfig}, all[2:]...)...)
	cmd := exec.CommandContext(ctx, r.kubectl, all...) //nolint:gosec // our own tools
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl seckill %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// pluginStatus prints `kubectl seckill status` while the sale runs and
// checks that it shows what the activity's status holds.
func (r *run) pluginStatus(ctx context.Context, moment string) {
	out, err := r.plugin(ctx, "status", r.act.Name)
	if err == nil {
		r.logf("kubectl seckill status (%s):\n%s", moment, indent(out))
		r.mu.Lock()
		r.res.PluginStatus = out
		r.mu.Unlock()
	}
	want := []string{fmt.Sprintf("activity %d", r.res.Activity), "SKU  STOCK  SOLD  AVAILABLE  RESERVED", "consumers", "CONDITIONS", "Ready"}
	var missing []string
	for _, w := range want {
		if !strings.Contains(out, w) {
			missing = append(missing, w)
		}
	}
	got := fmt.Sprintf("missing %q", missing)
	if err != nil {
		got = err.Error()
	}
	r.check("kubectl seckill status shows the sale ("+moment+")", err == nil && len(missing) == 0, got)
}

// pluginJobs runs a reconcile now and the runbook's verify as Jobs with the
// activity's Secrets, through the plugin, once the sale is settled.
func (r *run) pluginJobs(ctx context.Context) {
	out, err := r.plugin(ctx, "reconcile-now", r.act.Name)
	r.logf("kubectl seckill reconcile-now: %s", firstLines(out, 3))
	r.check("kubectl seckill reconcile-now: a reconcile Job ran clean", err == nil, firstLines(out+errText(err), 2))
	out, err = r.plugin(ctx, "runbook", r.act.Name, "verify", "-settled")
	r.logf("kubectl seckill runbook %s verify -settled: %s", r.act.Name, firstLines(out, 3))
	r.check("kubectl seckill runbook verify -settled: every invariant, from a Job", err == nil && strings.Contains(out, fmt.Sprintf(`"activity": %d`, r.res.Activity)),
		firstLines(out+errText(err), 3))
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return " " + err.Error()
}

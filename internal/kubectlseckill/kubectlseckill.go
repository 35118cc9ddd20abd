// Package kubectlseckill is the kubectl plugin `kubectl seckill`: an
// on-call person's console for a SeckillActivity — its status as a person
// reads it, the sale's switches (pause, resume, add stock, end), a
// reconcile run now, and the manual runbook's verbs run as a Job in the
// activity's namespace with the activity's own Secrets.
package kubectlseckill

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/names"
)

// Usage is the plugin's help.
const Usage = `usage: kubectl seckill <command> NAME [args] [-n NAMESPACE] [--kubeconfig FILE] [--context CTX]

commands:
  status NAME                 phase and health, per-SKU stock (sold, available, reserved), the backlog,
                              consumers desired/ready and why, the last reconcile, recent warnings
                              (-o json: the activity's status as JSON)
  pause NAME                  stop taking reservations (spec.paused: true)
  resume NAME                 take reservations again (spec.paused: false)
  add-stock NAME SKU N        raise a SKU's stock by N units
  end NAME                    end the sale now (spec.schedule.end); the backlog drains
  reconcile-now NAME          run the reconcile job now (a Job from its CronJob) and print its report
  runbook NAME VERB [FLAGS]   run "seckill runbook VERB FLAGS" as a Job with the activity's Secrets
                              (flags go to the runbook: -n and friends before NAME); e.g.
                              kubectl seckill runbook flash-sale list
                              kubectl seckill runbook flash-sale verify -settled

Exit status: 0 done, 1 the command failed (or the runbook/reconcile Job did), 2 bad usage.
`

// UsageError is bad input: exit status 2, nothing changed.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }

// Plugin is one invocation's cluster access and output.
type Plugin struct {
	Client    client.Client
	Clientset kubernetes.Interface
	Namespace string
	Out       io.Writer
	// Now is the clock (tests).
	Now func() time.Time
	// JobTimeout bounds reconcile-now and runbook.
	JobTimeout time.Duration
}

// Main parses args (without the program name), connects as kubectl would
// and runs the command.
func Main(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("kubectl seckill", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ns := fs.String("n", "", "namespace (default: the kubeconfig context's)")
	fs.StringVar(ns, "namespace", "", "namespace")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	kcontext := fs.String("context", "", "kubeconfig context")
	output := fs.String("o", "", "status: json")
	timeout := fs.Duration("timeout", 10*time.Minute, "reconcile-now, runbook: how long to wait for the Job")
	cmd, rest, err := parseInterspersed(fs, args)
	if err != nil {
		return UsageError{err}
	}
	if cmd == nil {
		return UsageError{errors.New("a command is required")}
	}
	if cmd[0] == "help" || cmd[0] == "-h" {
		_, err := fmt.Fprint(out, Usage)
		return err
	}
	if err := checkArgs(cmd, rest); err != nil {
		return UsageError{err}
	}
	if *output != "" && (*output != "json" || cmd[0] != "status") {
		return UsageError{fmt.Errorf("-o %s: only status -o json", *output)}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *kcontext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if *ns == "" {
		if *ns, _, err = cc.Namespace(); err != nil {
			return fmt.Errorf("kubeconfig namespace: %w", err)
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := seckillv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	p := &Plugin{Client: c, Clientset: cs, Namespace: *ns, Out: out, Now: time.Now, JobTimeout: *timeout}
	return p.Run(ctx, cmd, rest, *output == "json")
}

// parseInterspersed reads the flags wherever they stand among the command
// words, as kubectl does, up to the runbook's verb: what follows it is the
// runbook's own (rest).
func parseInterspersed(fs *flag.FlagSet, args []string) (cmd, rest []string, err error) {
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return cmd, nil, nil
		}
		cmd = append(cmd, args[0])
		args = args[1:]
		if cmd[0] == "runbook" && len(cmd) == 3 {
			return cmd, args, nil
		}
	}
}

func checkArgs(cmd, rest []string) error {
	want := map[string]int{"status": 2, "pause": 2, "resume": 2, "end": 2, "reconcile-now": 2, "add-stock": 4, "runbook": 3}
	n, ok := want[cmd[0]]
	if !ok {
		return fmt.Errorf("unknown command %q (kubectl seckill help)", cmd[0])
	}
	if len(cmd) != n {
		return fmt.Errorf("%s: want %d argument(s), got %d (kubectl seckill help)", cmd[0], n-1, len(cmd)-1)
	}
	if cmd[0] == "add-stock" {
		if _, err := strconv.ParseInt(cmd[2], 10, 64); err != nil {
			return fmt.Errorf("add-stock: SKU %q is not an id", cmd[2])
		}
		if n, err := strconv.ParseInt(cmd[3], 10, 64); err != nil || n <= 0 {
			return fmt.Errorf("add-stock: N %q must be a positive number of units", cmd[3])
		}
	}
	if cmd[0] == "runbook" && len(rest) > 0 && rest[0] == "" {
		return errors.New("runbook: empty flag")
	}
	return nil
}

// Run runs one parsed command.
func (p *Plugin) Run(ctx context.Context, cmd, rest []string, asJSON bool) error {
	name := cmd[1]
	switch cmd[0] {
	case "status":
		return p.Status(ctx, name, asJSON)
	case "pause", "resume":
		return p.setPaused(ctx, name, cmd[0] == "pause")
	case "add-stock":
		sku, _ := strconv.ParseInt(cmd[2], 10, 64)   // checked by checkArgs
		units, _ := strconv.ParseInt(cmd[3], 10, 64) // checked by checkArgs
		return p.AddStock(ctx, name, sku, units)
	case "end":
		return p.End(ctx, name)
	case "reconcile-now":
		return p.RunJob(ctx, name, "reconcile-now", nil)
	case "runbook":
		return p.RunJob(ctx, name, "runbook", append([]string{"runbook", cmd[2]}, rest...))
	}
	return UsageError{fmt.Errorf("unknown command %q", cmd[0])}
}

func (p *Plugin) get(ctx context.Context, name string) (*seckillv1alpha1.SeckillActivity, error) {
	var a seckillv1alpha1.SeckillActivity
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, &a); err != nil {
		return nil, fmt.Errorf("seckillactivity %s/%s: %w", p.Namespace, name, err)
	}
	return &a, nil
}

// update changes the activity's spec with change, again on a conflict.
func (p *Plugin) update(ctx context.Context, name string, change func(*seckillv1alpha1.SeckillActivity) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		a, err := p.get(ctx, name)
		if err != nil {
			return err
		}
		if err := change(a); err != nil {
			return err
		}
		return p.Client.Update(ctx, a)
	})
}

func (p *Plugin) setPaused(ctx context.Context, name string, paused bool) error {
	err := p.update(ctx, name, func(a *seckillv1alpha1.SeckillActivity) error {
		a.Spec.Paused = paused
		return nil
	})
	if err == nil {
		_, err = fmt.Fprintf(p.Out, "seckillactivity %s: paused=%v (the gateway follows within a pass)\n", name, paused)
	}
	return err
}

// AddStock raises one SKU's stock by units.
func (p *Plugin) AddStock(ctx context.Context, name string, sku, units int64) error {
	var before, after int64
	err := p.update(ctx, name, func(a *seckillv1alpha1.SeckillActivity) error {
		for i := range a.Spec.SKUs {
			if a.Spec.SKUs[i].ID == sku {
				before = a.Spec.SKUs[i].Stock
				a.Spec.SKUs[i].Stock += units
				after = a.Spec.SKUs[i].Stock
				return nil
			}
		}
		return UsageError{fmt.Errorf("seckillactivity %s has no SKU %d", name, sku)}
	})
	if err == nil {
		_, err = fmt.Fprintf(p.Out, "seckillactivity %s: SKU %d stock %d → %d\n", name, sku, before, after)
	}
	return err
}

// End brings the sale's end to now; an ended sale is left as it is.
func (p *Plugin) End(ctx context.Context, name string) error {
	now := metav1.NewTime(p.Now().UTC().Truncate(time.Second))
	err := p.update(ctx, name, func(a *seckillv1alpha1.SeckillActivity) error {
		if !a.Spec.Schedule.End.After(now.Time) {
			return UsageError{fmt.Errorf("seckillactivity %s already ended at %s", name, a.Spec.Schedule.End.UTC().Format(time.RFC3339))}
		}
		if a.Spec.Schedule.Start.After(now.Time) {
			return UsageError{fmt.Errorf("seckillactivity %s has not started (starts %s): change its schedule instead", name, a.Spec.Schedule.Start.UTC().Format(time.RFC3339))}
		}
		a.Spec.Schedule.End = now
		return nil
	})
	if err == nil {
		_, err = fmt.Fprintf(p.Out, "seckillactivity %s: ends at %s; the backlog drains, then Completed\n", name, now.Format(time.RFC3339))
	}
	return err
}

// RunJob runs a Job from the activity's reconcile CronJob (its image, its
// Secrets, its database role), with args in place of the reconcile's when
// given, waits for it and prints its pod's output.
func (p *Plugin) RunJob(ctx context.Context, name, purpose string, args []string) error {
	a, err := p.get(ctx, name)
	if err != nil {
		return err
	}
	var cjs batchv1.CronJobList
	if err := p.Client.List(ctx, &cjs, client.InNamespace(p.Namespace),
		client.MatchingLabels{"app.kubernetes.io/instance": a.Name, names.LabelComponent: "reconcile"}); err != nil {
		return err
	}
	if len(cjs.Items) != 1 {
		return fmt.Errorf("seckillactivity %s: %d reconcile CronJobs (want 1; the operator creates it once the activity is provisioned)", name, len(cjs.Items))
	}
	cj := cjs.Items[0]
	spec := *cj.Spec.JobTemplate.Spec.DeepCopy()
	spec.BackoffLimit = new(int32)
	ttl := int32(3600)
	spec.TTLSecondsAfterFinished = &ttl
	if len(args) > 0 {
		spec.Template.Spec.Containers[0].Args = args
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: fmt.Sprintf("%s-%s-", a.Name, purpose), Namespace: p.Namespace,
			Labels:      map[string]string{"app.kubernetes.io/instance": a.Name, names.LabelComponent: purpose},
			Annotations: map[string]string{"cronjob.kubernetes.io/instantiate": "manual", "seckill.io/by": "kubectl-seckill"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID,
				Controller: new(bool)}},
		},
		Spec: spec,
	}
	if err := p.Client.Create(ctx, job); err != nil {
		return fmt.Errorf("creating the %s Job: %w", purpose, err)
	}
	fmt.Fprintf(os.Stderr, "job %s/%s: %s\n", p.Namespace, job.Name, strings.Join(job.Spec.Template.Spec.Containers[0].Args, " "))
	wctx, cancel := context.WithTimeout(ctx, p.JobTimeout)
	defer cancel()
	var done *batchv1.Job
	for done == nil {
		var j batchv1.Job
		if err := p.Client.Get(wctx, client.ObjectKeyFromObject(job), &j); err != nil {
			return fmt.Errorf("job %s: %w", job.Name, err)
		}
		if j.Status.Succeeded > 0 || j.Status.Failed > 0 {
			done = &j
			break
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("job %s not finished within %s: %w", job.Name, p.JobTimeout, wctx.Err())
		case <-time.After(time.Second):
		}
	}
	if err := p.printLogs(ctx, job.Name); err != nil {
		return err
	}
	if done.Status.Succeeded == 0 {
		return fmt.Errorf("job %s failed (its output above)", job.Name)
	}
	return nil
}

func (p *Plugin) printLogs(ctx context.Context, job string) error {
	var pods corev1.PodList
	if err := p.Client.List(ctx, &pods, client.InNamespace(p.Namespace), client.MatchingLabels{"job-name": job}); err != nil {
		return err
	}
	for _, pod := range pods.Items {
		rc, err := p.Clientset.CoreV1().Pods(p.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).Stream(ctx)
		if err != nil {
			return fmt.Errorf("logs of %s: %w", pod.Name, err)
		}
		_, err = io.Copy(p.Out, rc)
		_ = rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/tokens"
)

// Components: the workloads one activity runs (one image, one subcommand each).
const (
	ComponentGateway      = "gateway"
	ComponentConsumer     = "order-consumer"
	ComponentProjector    = "projector"
	ComponentScanner      = "send-scanner"
	ComponentRelay        = "outbox-relay"
	ComponentCompensator  = "compensator"
	ComponentReconcile    = "reconcile"
	ComponentCompensation = "compensation-sweep"
	ComponentPayments     = "payments"
	ComponentCanceller    = "canceller"
)

// worker is one Deployment of the activity.
type worker struct {
	component string
	args      []string
	replicas  int32
	port      int32
	// pdb: the PodDisruptionBudget's maxUnavailable (0: none).
	pdb int32
}

// ObjectName is the name of an activity's object for a component.
func ObjectName(act *seckillv1alpha1.SeckillActivity, component string) string {
	return act.Name + "-" + component
}

// stopped: a Completed sale needs no workload any more. Its Deployments are
// kept at 0 replicas and its CronJobs suspended (the objects stay, for
// inspection, until the activity is deleted).
func stopped(act *seckillv1alpha1.SeckillActivity) bool {
	return act.Status.Phase == seckillv1alpha1.PhaseCompleted
}

func workers(act *seckillv1alpha1.SeckillActivity, consumers int32) []worker {
	ws := runningWorkers(act, consumers)
	if stopped(act) {
		for i := range ws {
			ws[i].replicas = 0
		}
	}
	return ws
}

func runningWorkers(act *seckillv1alpha1.SeckillActivity, consumers int32) []worker {
	s := act.Spec
	ws := []worker{
		{ComponentGateway, append([]string{"gateway", "-business-deadline=" + dur(s.BusinessDeadline, defaultDeadline).String(), "-drain-delay=5s"},
			limitArgs(s.Limits)...), s.Workloads.GatewayReplicas, names.GatewayPort, 1},
		{ComponentConsumer, []string{"consumer"}, consumers, names.MetricsPort, 1},
		{ComponentProjector, []string{"projector"}, 1, names.MetricsPort, 0},
		{ComponentScanner, []string{"scanner"}, 1, names.MetricsPort, 0},
		{ComponentRelay, []string{"relay"}, 2, names.MetricsPort, 1},
		{ComponentCompensator, []string{"compensator"}, 1, names.MetricsPort, 0},
	}
	if s.PaymentChannel != nil {
		ws = append(ws, worker{ComponentCanceller, []string{"canceller"}, 1, names.MetricsPort, 0})
	}
	if s.Connections.PaymentKeysSecret != nil {
		ws = append(ws, worker{ComponentPayments, []string{"payments", fmt.Sprintf("-rate=%d", i32(s.Limits.CallbacksPerSecond, defaultCallbacksPerSecond))}, 2, names.GatewayPort, 1})
	}
	if s.Connections.RocketMQNameServerSecret != nil {
		// The activity's own topics and groups (the shared ones are the
		// workloads' defaults).
		m := messaging(act)
		for i := range ws {
			ws[i].args = append(ws[i].args, m.Args(ws[i].args[0])...)
		}
	}
	return ws
}

// The limits' defaults when the manifest was stored without them (the
// CRD's defaults are the same).
const (
	defaultPerUserRequests    = 20
	defaultPerUserWindow      = 10 * time.Second
	defaultStatusPerSecond    = 1000
	defaultCallbacksPerSecond = 200
)

func i32(v *int32, def int32) int32 {
	if v == nil {
		return def
	}
	return *v
}

// limitArgs are the gateway's flags of spec.limits.
func limitArgs(l seckillv1alpha1.LimitsSpec) []string {
	return []string{
		fmt.Sprintf("-user-limit=%d", i32(l.PerUserRequests, defaultPerUserRequests)),
		"-user-window=" + dur(l.PerUserWindow, defaultPerUserWindow).String(),
		fmt.Sprintf("-status-rate=%d", i32(l.StatusRequestsPerSecond, defaultStatusPerSecond)),
		fmt.Sprintf("-rate=%d", l.GatewayRequestsPerSecond),
	}
}

// served are the components behind a Service (HTTP on port 80).
var served = []string{ComponentGateway, ComponentPayments}

// labels of every object of an activity's component.
func labels(act *seckillv1alpha1.SeckillActivity, component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":     "seckill",
		"app.kubernetes.io/instance": act.Name,
		names.LabelComponent:         component,
		names.LabelManagedBy:         names.ManagerName,
		names.LabelActivity:          strconv.FormatInt(act.Spec.ActivityID, 10),
	}
}

// AnnotationSecretsHash on a workload's pod template digests the Secret
// values its env references (CronJob pods read them fresh each run).
const AnnotationSecretsHash = "seckill.io/secrets-hash" //nolint:gosec // an annotation name, not a credential

// specHash changes when anything the pods are built from changes, so that a
// spec change rolls them.
func specHash(act *seckillv1alpha1.SeckillActivity) string {
	s := act.Spec
	// The SKUs enter as the pods see them (ids and buckets): a stock
	// increase is provisioned in the stores and needs no new pods.
	b, _ := json.Marshal([]any{s.ActivityID, skusEnv(act), s.BusinessDeadline, s.PaymentWindow, s.Connections, s.Workloads, s.PaymentChannel})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

func skusEnv(act *seckillv1alpha1.SeckillActivity) string {
	parts := make([]string, 0, len(act.Spec.SKUs))
	for _, s := range act.Spec.SKUs {
		parts = append(parts, fmt.Sprintf("%d:%d", s.ID, max(s.Buckets, 1)))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func secretEnv(name string, sel corev1.SecretKeySelector) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: sel.DeepCopy()}}
}

// podSpec is the pod of one component: the workloads image, configuration
// through env and Secret references, probes, a locked-down security context.
func podSpec(act *seckillv1alpha1.SeckillActivity, component string, args []string, port int32, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	c := act.Spec.Connections
	env := []corev1.EnvVar{
		{Name: names.EnvActivityID, Value: strconv.FormatInt(act.Spec.ActivityID, 10)},
		{Name: "SECKILL_SKUS", Value: skusEnv(act)},
		{Name: names.EnvRedisMode, Value: c.Redis.Mode},
		secretEnv(names.EnvRedisAddrs, c.Redis.AddressesSecret),
		secretEnv(names.EnvRMQEndpoint, c.RocketMQEndpointSecret),
		secretEnv(names.EnvIDKeys, c.IDKeysSecret),
	}
	if c.Redis.MasterName != "" {
		env = append(env, corev1.EnvVar{Name: names.EnvRedisMaster, Value: c.Redis.MasterName})
	}
	if o := act.Spec.Observability; o.OTLPEndpoint != "" {
		env = append(env, corev1.EnvVar{Name: names.EnvOTLPEndpoint, Value: o.OTLPEndpoint},
			corev1.EnvVar{Name: names.EnvOTLPInsecure, Value: strconv.FormatBool(o.OTLPInsecure)})
	}
	if c.Redis.UsernameSecret != nil {
		env = append(env, secretEnv(names.EnvRedisUsername, *c.Redis.UsernameSecret))
	}
	if c.Redis.PasswordSecret != nil {
		env = append(env, secretEnv(names.EnvRedisPassword, *c.Redis.PasswordSecret))
	}
	if rc := c.RocketMQCredentials; rc != nil {
		env = append(env, secretEnv(names.EnvRMQAccessKey, rc.AccessKeySecret), secretEnv(names.EnvRMQSecretKey, rc.SecretKeySecret))
	}
	// Each component connects as its own role, never with the operator's
	// DSN (which may migrate the schema).
	if role := dbRole(component); role != "" {
		env = append(env, secretEnv(names.EnvPGDSN, dbRoleSecret(act, role)))
	}
	switch {
	case component == ComponentGateway:
		if c.TokenKeySecret != nil {
			env = append(env, secretEnv(names.EnvTokenKey, *c.TokenKeySecret))
		}
		if c.TokenKeysSecret != nil {
			env = append(env, corev1.EnvVar{Name: names.EnvTokenKeysDir, Value: tokenKeysDir})
		}
		env = append(env, corev1.EnvVar{Name: names.EnvHTTPAddr, Value: fmt.Sprintf(":%d", port)},
			corev1.EnvVar{Name: names.EnvMetricsAddr, Value: fmt.Sprintf(":%d", names.MetricsPort)},
			corev1.EnvVar{Name: names.EnvTokenIssuer, Value: orDefault(act.Spec.Tokens.Issuer, tokens.DefaultIssuer)},
			corev1.EnvVar{Name: names.EnvTokenAudience, Value: orDefault(act.Spec.Tokens.Audience, tokens.DefaultAudience)})
	case component == ComponentCanceller && act.Spec.PaymentChannel != nil:
		env = append(env, corev1.EnvVar{Name: "SECKILL_PROVIDER_URL", Value: act.Spec.PaymentChannel.URL},
			corev1.EnvVar{Name: "SECKILL_PROVIDER_NAME", Value: act.Spec.PaymentChannel.Name},
			corev1.EnvVar{Name: names.EnvMetricsAddr, Value: fmt.Sprintf(":%d", port)})
	case component == ComponentPayments && c.PaymentKeysSecret != nil:
		env = append(env, secretEnv(names.EnvPaymentKeys, *c.PaymentKeysSecret),
			corev1.EnvVar{Name: names.EnvHTTPAddr, Value: fmt.Sprintf(":%d", port)},
			corev1.EnvVar{Name: names.EnvMetricsAddr, Value: fmt.Sprintf(":%d", names.MetricsPort)})
	case port > 0:
		env = append(env, corev1.EnvVar{Name: names.EnvMetricsAddr, Value: fmt.Sprintf(":%d", port)})
	}
	ctr := corev1.Container{
		Name: "seckill", Image: act.Spec.Workloads.Image, ImagePullPolicy: act.Spec.Workloads.ImagePullPolicy,
		Command: []string{"/seckill"}, Args: args, Env: env, Resources: workloadResources(act),
		// The root filesystem is read-only; the RocketMQ client writes its
		// log under the temp dir.
		VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	var scrapePort int32
	if port > 0 {
		name := "metrics"
		if component == ComponentGateway || component == ComponentPayments {
			name = "http"
		}
		ctr.Ports = []corev1.ContainerPort{{Name: name, ContainerPort: port, Protocol: corev1.ProtocolTCP}}
		scrapePort = port
		if name == "http" { // the metrics apart from the public port (and its Service)
			ctr.Ports = append(ctr.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: names.MetricsPort, Protocol: corev1.ProtocolTCP})
			scrapePort = names.MetricsPort
		}
		probe := func(path string) *corev1.Probe {
			return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(name)}},
				PeriodSeconds: 10, FailureThreshold: 3, TimeoutSeconds: 2}
		}
		ctr.LivenessProbe, ctr.ReadinessProbe = probe("/healthz"), probe("/readyz")
		// Readiness follows a lost store within 10 s; liveness stays slow
		// (a restart costs more than a few refused requests).
		ctr.ReadinessProbe.PeriodSeconds, ctr.ReadinessProbe.FailureThreshold = 5, 2
	}
	volumes := []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		SizeLimit: ptr.To(resource.MustParse("64Mi"))}}}}
	if component == ComponentGateway && c.TokenKeysSecret != nil {
		// The token keys as files: a rotated Secret reaches the files (the
		// pods roll too: the Secret is part of the secrets hash).
		volumes = append(volumes, corev1.Volume{Name: "token-keys", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: c.TokenKeysSecret.Name, DefaultMode: ptr.To(int32(0o440))}}})
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "token-keys", MountPath: tokenKeysDir, ReadOnly: true})
	}
	// The authorities as files (a rotated Secret rolls the pods: its value
	// is in the secrets hash).
	mountCA := func(volume, dir, file string, sel *corev1.SecretKeySelector) {
		volumes = append(volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: sel.Name, DefaultMode: ptr.To(int32(0o444)),
			Items: []corev1.KeyToPath{{Key: sel.Key, Path: file}}}}})
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: dir, ReadOnly: true})
	}
	if c.RocketMQCASecret != nil { // every component: most reach the broker
		mountCA("rocketmq-ca", rocketMQCADir, "ca.crt", c.RocketMQCASecret)
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: names.EnvRMQCAFile, Value: rocketMQCADir + "/ca.crt"})
	}
	if c.Redis.CASecret != nil { // every component reads the Redis settings
		mountCA("redis-ca", redisCADir, "ca.crt", c.Redis.CASecret)
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: names.EnvRedisCAFile, Value: redisCADir + "/ca.crt"})
	}
	if dbRole(component) != "" && c.PostgresCASecret != nil {
		// PostgreSQL's authority as the file the role's DSN names (sslrootcert).
		mountCA("postgres-ca", postgresCADir, postgresCAFile, c.PostgresCASecret)
	}
	if component == ComponentGateway {
		ctr.Args = append(ctr.Args, "-token-max-lifetime="+dur(act.Spec.Tokens.MaxLifetime, tokens.DefaultMaxLifetime).String())
	}
	annotations := map[string]string{"seckill.io/spec-hash": specHash(act)}
	if scrapePort > 0 { // the conventional scrape annotations, for a Prometheus without the chart's PodMonitor
		annotations["prometheus.io/scrape"] = "true"
		annotations["prometheus.io/port"] = strconv.Itoa(int(scrapePort))
		annotations["prometheus.io/path"] = "/metrics"
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels(act, component), Annotations: annotations},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{ctr}, RestartPolicy: restart,
			// Its own account, no API token: no workload calls the Kubernetes API.
			ServiceAccountName: ObjectName(act, component), AutomountServiceAccountToken: ptr.To(false),
			Volumes: volumes,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
		},
	}
}

// rocketMQCADir is where the pods find spec.connections.rocketMQCASecret.
const rocketMQCADir = "/etc/seckill/rocketmq-ca"

// redisCADir is where the pods find spec.connections.redis.caSecret.
const redisCADir = "/etc/seckill/redis-ca"

// tokenKeysDir is where the gateway finds the Secret of token keys.
const tokenKeysDir = "/etc/seckill/token-keys" //nolint:gosec // a mount path, not a credential

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// defaultRequests are the workloads' requests when the spec sets none: a
// pod without requests is BestEffort, the first evicted when the node runs
// short, and the scheduler places it as if it needed nothing. No default
// limit: a sale's gateway must not be throttled or OOM-killed by a guess.
var defaultRequests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}

func workloadResources(act *seckillv1alpha1.SeckillActivity) corev1.ResourceRequirements {
	r := *act.Spec.Workloads.Resources.DeepCopy()
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		r.Requests = defaultRequests.DeepCopy()
	}
	return r
}

// applyWorkloads creates or updates every object of the activity: the
// Deployments, the gateway's Service, PodDisruptionBudgets and the CronJobs,
// each owned by the activity. It returns the consumer Deployment's ready
// replicas and whether every Deployment is ready.
func (r *SeckillActivityReconciler) applyWorkloads(ctx context.Context, act *seckillv1alpha1.SeckillActivity, consumers int32, secretsHash string) (int32, bool, error) {
	ready, allReady := int32(0), true
	if err := r.applyIsolation(ctx, act, isolation(workers(act, consumers))); err != nil {
		return 0, false, err
	}
	for _, w := range workers(act, consumers) {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: ObjectName(act, w.component), Namespace: act.Namespace, Labels: labels(act, w.component)},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(w.replicas),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": act.Name, names.LabelComponent: w.component}},
				Template: podSpec(act, w.component, w.args, w.port, corev1.RestartPolicyAlways),
			}}
		// Env from Secrets is read at pod start: a rotated value needs new pods.
		d.Spec.Template.Annotations[AnnotationSecretsHash] = secretsHash
		if err := r.apply(ctx, act, d); err != nil {
			return 0, false, err
		}
		if w.component == ComponentConsumer {
			ready = d.Status.ReadyReplicas
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.ReadyReplicas < w.replicas {
			allReady = false
		}
		if w.pdb > 0 {
			pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: ObjectName(act, w.component), Namespace: act.Namespace, Labels: labels(act, w.component)},
				Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(w.pdb)), Selector: d.Spec.Selector.DeepCopy()}}
			if err := r.apply(ctx, act, pdb); err != nil {
				return 0, false, err
			}
		}
	}
	for _, w := range workers(act, consumers) {
		if !slices.Contains(served, w.component) {
			continue
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ObjectName(act, w.component), Namespace: act.Namespace, Labels: labels(act, w.component)},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app.kubernetes.io/instance": act.Name, names.LabelComponent: w.component},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
			}}
		if err := r.apply(ctx, act, svc); err != nil {
			return 0, false, err
		}
	}
	if err := r.pruneRemoved(ctx, act, workers(act, consumers)); err != nil {
		return 0, false, err
	}
	for _, cj := range []struct {
		component, schedule string
		args                []string
	}{
		{ComponentReconcile, act.Spec.Reconcile.Schedule, []string{"reconcile"}},
		{ComponentCompensation, act.Spec.Compensation.Schedule, []string{"compensator", "-once", "-metrics-addr=0"}},
	} {
		if err := r.applyCronJob(ctx, act, cj.component, cj.schedule, cj.args); err != nil {
			return 0, false, err
		}
	}
	return ready, allReady, nil
}

// optional are the components that run only while the spec asks for them:
// the canceller with a paymentChannel, payments with paymentKeysSecret.
var optional = []string{ComponentCanceller, ComponentPayments}

// pruneRemoved deletes the Deployment, PodDisruptionBudget and Service of
// an optional component the spec no longer asks for — only objects this
// activity controls.
func (r *SeckillActivityReconciler) pruneRemoved(ctx context.Context, act *seckillv1alpha1.SeckillActivity, ws []worker) error {
	for _, c := range optional {
		if slices.ContainsFunc(ws, func(w worker) bool { return w.component == c }) {
			continue
		}
		key := client.ObjectKey{Namespace: act.Namespace, Name: ObjectName(act, c)}
		for _, obj := range []client.Object{&appsv1.Deployment{}, &policyv1.PodDisruptionBudget{}, &corev1.Service{}} {
			if err := r.Get(ctx, key, obj); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("reading %s of removed component %s: %w", key.Name, c, err)
			}
			if !metav1.IsControlledBy(obj, act) {
				continue
			}
			if err := r.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting %T %s of removed component %s: %w", obj, key.Name, c, err)
			}
			r.Recorder.Eventf(act, nil, corev1.EventTypeNormal, "ComponentRemoved", "Prune", "%s: %T %s deleted (no longer in the spec)", c, obj, key.Name)
		}
	}
	return nil
}

func (r *SeckillActivityReconciler) applyCronJob(ctx context.Context, act *seckillv1alpha1.SeckillActivity, component, schedule string, args []string) error {
	if schedule == "" {
		schedule = "*/10 * * * *"
	}
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: ObjectName(act, component), Namespace: act.Namespace, Labels: labels(act, component)},
		Spec: batchv1.CronJobSpec{
			Schedule:                   schedule,
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			Suspend:                    ptr.To(stopped(act)),
			SuccessfulJobsHistoryLimit: ptr.To(int32(3)),
			FailedJobsHistoryLimit:     ptr.To(int32(3)),
			JobTemplate:                batchv1.JobTemplateSpec{Spec: jobSpec(act, component, args)},
		}}
	return r.apply(ctx, act, cj)
}

func jobSpec(act *seckillv1alpha1.SeckillActivity, component string, args []string) batchv1.JobSpec {
	return batchv1.JobSpec{
		BackoffLimit:          ptr.To(int32(2)),
		ActiveDeadlineSeconds: ptr.To(int64(1800)),
		Template:              podSpec(act, component, args, 0, corev1.RestartPolicyNever),
	}
}

// ensureFinalReconcile creates the one reconcile run after the end (
// design.md#reconcile) and reports whether it finished and whether it succeeded.
func (r *SeckillActivityReconciler) ensureFinalReconcile(ctx context.Context, act *seckillv1alpha1.SeckillActivity) (done, ok bool, err error) {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: ObjectName(act, "final-reconcile"), Namespace: act.Namespace}}
	err = r.Get(ctx, client.ObjectKeyFromObject(j), j)
	if client.IgnoreNotFound(err) != nil {
		return false, false, fmt.Errorf("reading job %s: %w", j.Name, err)
	}
	if err != nil { // not found: create it
		j.Labels = labels(act, ComponentReconcile)
		j.Spec = jobSpec(act, ComponentReconcile, []string{"reconcile", "-final"})
		if err := controllerutil.SetControllerReference(act, j, r.Scheme); err != nil {
			return false, false, err
		}
		if err := r.Create(ctx, j); err != nil {
			return false, false, fmt.Errorf("creating job %s: %w", j.Name, err)
		}
		return false, false, nil
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, true, nil
		case batchv1.JobFailed:
			return true, false, nil
		}
	}
	return false, false, nil
}

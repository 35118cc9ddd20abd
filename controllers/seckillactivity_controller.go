// Package controllers holds the SeckillActivity reconciler.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/control"
)

// Finalizer archives an activity before it goes away.
const Finalizer = "seckill.io/archive"

// AnnotationSkipArchive lets a deletion proceed without archiving when the
// stores are gone for good (set it by hand, knowingly).
const AnnotationSkipArchive = "seckill.io/skip-archive"

const (
	defaultDeadline      = 5 * time.Minute
	defaultPaymentWindow = 15 * time.Minute
	defaultRetention     = 168 * time.Hour
	// connRetry bounds the requeue after a connection failure: no crash
	// loop, no hot loop.
	connRetry = 30 * time.Second
	// activePoll is how often an active sale is re-measured (scaling, backlog).
	activePoll = 10 * time.Second
)

// SeckillActivityReconciler reconciles a SeckillActivity.
type SeckillActivityReconciler struct {
	client.Client
	// APIReader reads Secrets uncached.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Stores    Stores
	// Now is the clock (tests move it).
	Now func() time.Time
	// WorkloadImage is the image the workloads run (the operator's own: it
	// carries the workloads binary); a manifest may leave its image empty or
	// name this one. AllowedImages are further image prefixes a manifest may
	// name (e.g. "registry.example.com/seckill:"). With neither set — a
	// development operator — any image is run.
	WorkloadImage string
	AllowedImages []string
	// ConnRetry and ActivePoll override connRetry and activePoll (tests).
	ConnRetry, ActivePoll time.Duration

	// done: the idempotent steps this process has done per activity (the
	// workloads' PostgreSQL roles, the activity's own topics and groups,
	// the RocketMQ login check); forgotten with the activity. A new leader
	// starts without it and does each step once more, which changes
	// nothing; what must survive a change of leader is in status.progress.
	done doneCache
}

// forget drops what this process keeps about a deleted activity.
func (r *SeckillActivityReconciler) forget(act *seckillv1alpha1.SeckillActivity) {
	r.done.forget(act.UID)
	forgetActivity(act.Spec.ActivityID)
}

// +kubebuilder:rbac:groups=seckill.io,resources=seckillactivities,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=seckill.io,resources=seckillactivities/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=seckill.io,resources=seckillactivities/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=cronjobs;jobs,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch

// Reconcile runs the steps of one activity, in order:
//  1. finalize when deleted (archive, keep business data), else hold the finalizer (lifecycle.go);
//  2. read the connection Secrets and open the stores, check the broker's
//     TLS and login, create the activity's topics and groups and its
//     database roles (connections.go, messaging.go, dbroles.go);
//  3. provision the stock once per generation (provision.go);
//  4. move the window flag the gateway obeys (window.go);
//  5. measure counts, backlog and consumers, and size the order consumers
//     (measure.go; the decision itself, pure, in scaling.go);
//  6. apply the workloads (workloads.go, isolation.go);
//  7. the backlog guard (backlog.go);
//  8. the lifecycle phase, the final reconcile, events (lifecycle.go).
//
// Every path ends with the status patched: a step that fails marks the
// activity Degraded and Stalled and requeues after ConnRetry (degraded),
// or — for an error of the API server itself — patches what the pass
// learned and returns the error for controller-runtime's backoff (failed).
// A completed pass (success or degraded) sets Ready, Reconciling and
// Stalled and status.observedGeneration (health.go). With the annotation
// seckill.io/reconcile=paused the pass does nothing but say so.
func (r *SeckillActivityReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var act seckillv1alpha1.SeckillActivity
	if err := r.Get(ctx, req.NamespacedName, &act); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if reconcilePaused(&act) {
		return r.holdForPerson(ctx, &act)
	}
	if !act.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &act)
	}
	if controllerutil.AddFinalizer(&act, Finalizer) {
		if err := r.Update(ctx, &act); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}
	before := act.DeepCopy()
	r.resumeAfterPerson(&act)
	st := &act.Status
	observeSpec(&act, st)
	now := r.now()

	image, err := r.workloadImage(&act)
	if err != nil {
		return r.degraded(ctx, before, &act, err)
	}
	act.Spec.Workloads.Image = image // what the workloads run; in memory only, never written back

	store, e, err := r.open(ctx, &act, true)
	if err != nil {
		return r.degraded(ctx, before, &act, err)
	}
	if err := r.checkRocketMQTLSOnce(ctx, &act, e); err != nil {
		return r.degraded(ctx, before, &act, err)
	}
	if err := r.checkRocketMQLogin(ctx, &act, e); err != nil {
		return r.degraded(ctx, before, &act, err)
	}
	if err := r.ensureMessaging(ctx, &act, e); err != nil {
		return r.degraded(ctx, before, &act, err)
	}
	roles, err := r.ensureDBRoles(ctx, &act, store, e)
	if err != nil {
		return r.degraded(ctx, before, &act, err)
	}
	secrets := e.SecretsHash + roles
	setCondition(&act, seckillv1alpha1.ConditionDegraded, false, "Connected", "PostgreSQL and Redis answer")

	if err := r.provision(ctx, &act, store); err != nil {
		switch {
		case errors.Is(err, control.ErrStockDecrease):
			st.Phase = seckillv1alpha1.PhaseFailed
		case st.Phase == seckillv1alpha1.PhasePending:
			st.Phase = seckillv1alpha1.PhaseProvisioning
		}
		return r.degraded(ctx, before, &act, err)
	}
	next, err := r.moveWindow(ctx, &act, store, now)
	if err != nil {
		return r.degraded(ctx, before, &act, err)
	}
	backlog, err := r.measure(ctx, &act, store, now)
	if err != nil {
		return r.degraded(ctx, before, &act, err)
	}
	desired := r.scale(ctx, &act, store, backlog, now)
	ready, allReady, err := r.applyWorkloads(ctx, &act, desired, secrets)
	if err != nil {
		return r.failed(ctx, before, &act, err)
	}
	st.DesiredConsumers, st.ReadyConsumers = desired, ready
	observeConsumers(act.Spec.ActivityID, desired, ready)
	if allReady {
		setCondition(&act, seckillv1alpha1.ConditionWorkloadsReady, true, "Ready", "every workload is ready")
	} else {
		setCondition(&act, seckillv1alpha1.ConditionWorkloadsReady, false, "Progressing", "waiting for the workloads' pods")
	}
	if err := r.guardBacklog(ctx, &act, store, backlog); err != nil {
		return r.degraded(ctx, before, &act, err)
	}
	after, err := r.lifecycle(ctx, &act, store, backlog, now)
	if err != nil {
		return r.failed(ctx, before, &act, err)
	}
	health(&act, nil)
	if err := r.patchStatus(ctx, before, &act); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeueAfter(act.Status.Phase, next, after, now, orDur(r.ActivePoll, activePoll))}, nil
}

// ReasonImageNotAllowed: the manifest names an image the operator does not run.
const ReasonImageNotAllowed = "ImageNotAllowed"

// workloadImage is the image the activity's workloads run: whoever may
// create a SeckillActivity must not choose what code runs with its Secrets.
func (r *SeckillActivityReconciler) workloadImage(act *seckillv1alpha1.SeckillActivity) (string, error) {
	want := act.Spec.Workloads.Image
	switch {
	case want == "" && r.WorkloadImage != "":
		return r.WorkloadImage, nil
	case want == "":
		return "", &connError{ReasonImageNotAllowed, errors.New("spec.workloads.image is empty and the operator has no --workload-image")}
	case want == r.WorkloadImage || (r.WorkloadImage == "" && len(r.AllowedImages) == 0):
		return want, nil
	}
	for _, prefix := range r.AllowedImages {
		if prefix != "" && strings.HasPrefix(want, prefix) {
			return want, nil
		}
	}
	return "", &connError{ReasonImageNotAllowed, fmt.Errorf("spec.workloads.image %q is neither the operator's workload image %q nor under an allowed prefix %q",
		want, r.WorkloadImage, r.AllowedImages)}
}

func orDur(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (r *SeckillActivityReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// open reads the connection Secrets and opens the stores; it also returns
// the endpoints read (with the digest of the Secrets' values the workloads'
// pods are rolled on).
func (r *SeckillActivityReconciler) open(ctx context.Context, act *seckillv1alpha1.SeckillActivity, workloads bool) (ActivityStore, Endpoints, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	e, err := readEndpoints(ctx, reader, act, workloads)
	if err != nil {
		return nil, e, err
	}
	store, err := r.Stores.Open(ctx, e)
	return store, e, err
}

// degraded records a failure as the Degraded condition with its reason and
// requeues after a bounded delay instead of failing the reconcile.
func (r *SeckillActivityReconciler) degraded(ctx context.Context, before, act *seckillv1alpha1.SeckillActivity, cause error) (ctrl.Result, error) {
	reason := reasonOf(cause)
	logf.FromContext(ctx).Info("degraded", "reason", reason, "error", cause.Error())
	prev := meta.FindStatusCondition(before.Status.Conditions, seckillv1alpha1.ConditionDegraded)
	setCondition(act, seckillv1alpha1.ConditionDegraded, true, reason, cause.Error())
	if prev == nil || prev.Status != metav1.ConditionTrue || prev.Reason != reason {
		r.Recorder.Eventf(act, nil, corev1.EventTypeWarning, reason, "Degrade", "%s", cause.Error())
	}
	health(act, cause)
	if err := r.patchStatus(ctx, before, act); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: orDur(r.ConnRetry, connRetry)}, nil
}

// failed patches what this pass learned and returns err, so that
// controller-runtime retries with its backoff: an error of the API server,
// not of the activity's stores, so no Degraded condition.
func (r *SeckillActivityReconciler) failed(ctx context.Context, before, act *seckillv1alpha1.SeckillActivity, cause error) (ctrl.Result, error) {
	if err := r.patchStatus(ctx, before, act); err != nil {
		return ctrl.Result{}, errors.Join(cause, err)
	}
	return ctrl.Result{}, cause
}

// observeSpec fills the status fields that follow from the spec alone.
func observeSpec(act *seckillv1alpha1.SeckillActivity, st *seckillv1alpha1.SeckillActivityStatus) {
	if st.Phase == "" {
		st.Phase = seckillv1alpha1.PhasePending
	}
	var stock, sold int64
	skus := make([]seckillv1alpha1.SKUStatus, 0, len(act.Spec.SKUs))
	for _, s := range act.Spec.SKUs {
		prev := findSKU(st.SKUs, s.ID)
		prev.ID, prev.Stock = s.ID, s.Stock
		prev.Remaining = s.Stock - prev.Sold - prev.OpenReservations
		stock += s.Stock
		sold += prev.Sold
		skus = append(skus, prev)
	}
	st.SKUs = skus
	st.Sold = fmt.Sprintf("%d/%d", sold, stock)
	if meta.FindStatusCondition(st.Conditions, seckillv1alpha1.ConditionStockProvisioned) == nil {
		setCondition(act, seckillv1alpha1.ConditionStockProvisioned, false, "NotProvisioned", "stock has not been provisioned yet")
	}
}

func findSKU(list []seckillv1alpha1.SKUStatus, id int64) seckillv1alpha1.SKUStatus {
	for _, s := range list {
		if s.ID == id {
			return s
		}
	}
	return seckillv1alpha1.SKUStatus{}
}

func setCondition(act *seckillv1alpha1.SeckillActivity, typ string, status bool, reason, msg string) {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&act.Status.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason,
		Message: msg, ObservedGeneration: act.Generation})
}

func dur(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}

// patchStatus patches the status when it changed (each condition carries
// the generation it was evaluated for, set by setCondition) (optimistic lock: a
// conflict is returned and the reconcile is retried).
func (r *SeckillActivityReconciler) patchStatus(ctx context.Context, before, act *seckillv1alpha1.SeckillActivity) error {
	if equality.Semantic.DeepEqual(before.Status, act.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, act, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("status of %s changed meanwhile: %w", act.Name, err)
		}
		return fmt.Errorf("patching status of %s: %w", act.Name, err)
	}
	return nil
}

// requeueAfter: at the next window change at the latest; often while the
// sale runs or drains; rarely once it is completed.
func requeueAfter(phase seckillv1alpha1.Phase, nextWindow, after, now time.Time, poll time.Duration) time.Duration {
	d := 5 * time.Minute
	switch phase {
	case seckillv1alpha1.PhaseActive, seckillv1alpha1.PhaseDraining, seckillv1alpha1.PhaseReconciling, seckillv1alpha1.PhasePaused:
		d = poll
	case seckillv1alpha1.PhaseScheduled, seckillv1alpha1.PhasePending, seckillv1alpha1.PhaseProvisioning:
		d = min(time.Minute, 6*poll)
	}
	for _, t := range []time.Time{nextWindow, after} {
		if !t.IsZero() {
			if until := t.Sub(now) + 100*time.Millisecond; until < d {
				d = max(until, 100*time.Millisecond)
			}
		}
	}
	return d
}

// SetupWithManager registers the reconciler; changes to the objects it owns
// bring it back.
func (r *SeckillActivityReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&seckillv1alpha1.SeckillActivity{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&batchv1.CronJob{}).
		Owns(&batchv1.Job{}).
		Named("seckillactivity").
		Complete(r)
}

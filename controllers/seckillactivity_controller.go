// Package controllers holds the SeckillActivity reconciler.
package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
)

// SeckillActivityReconciler reconciles a SeckillActivity.
type SeckillActivityReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=seckill.io,resources=seckillactivities,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=seckill.io,resources=seckillactivities/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=seckill.io,resources=seckillactivities/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile is the step list of one activity. This first cut observes the
// manifest and records it in status; provisioning, workloads, scaling, the
// backlog guard and the lifecycle are the steps that follow.
func (r *SeckillActivityReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var act seckillv1alpha1.SeckillActivity
	if err := r.Get(ctx, req.NamespacedName, &act); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Observe: record the manifest's totals and the first phase.
	if err := r.updateStatus(ctx, &act, func(st *seckillv1alpha1.SeckillActivityStatus) {
		observeSpec(&act, st)
	}); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
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
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: seckillv1alpha1.ConditionStockProvisioned, Status: metav1.ConditionFalse,
			Reason: "NotProvisioned", Message: "stock has not been provisioned yet", ObservedGeneration: act.Generation,
		})
	}
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration = act.Generation
	}
	st.ObservedGeneration = act.Generation
}

func findSKU(list []seckillv1alpha1.SKUStatus, id int64) seckillv1alpha1.SKUStatus {
	for _, s := range list {
		if s.ID == id {
			return s
		}
	}
	return seckillv1alpha1.SKUStatus{}
}

// updateStatus applies mutate to a copy of the status and patches it only
// when something changed (optimistic lock: a conflict requeues).
func (r *SeckillActivityReconciler) updateStatus(ctx context.Context, act *seckillv1alpha1.SeckillActivity,
	mutate func(*seckillv1alpha1.SeckillActivityStatus)) error {
	before := act.DeepCopy()
	mutate(&act.Status)
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

// SetupWithManager registers the reconciler.
func (r *SeckillActivityReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&seckillv1alpha1.SeckillActivity{}).
		Named("seckillactivity").
		Complete(r)
}

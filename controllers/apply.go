package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
)

// fieldOwner is the operator's field manager for server-side apply.
const fieldOwner = "seckill-operator"

// apply makes the API server hold obj — built in full, every field this
// operator owns, owned by the activity — by server-side apply, and reads the
// result (status included) back into obj. The server merges: the fields
// other managers or the defaults set stay, a field this operator set before
// and leaves out now is removed, and an apply that changes nothing writes
// nothing (the object's resourceVersion stays put:
// TestPassesLeaveUnchangedObjectsUntouched).
func (r *SeckillActivityReconciler) apply(ctx context.Context, act *seckillv1alpha1.SeckillActivity, obj client.Object) error {
	if err := controllerutil.SetControllerReference(act, obj, r.Scheme); err != nil {
		return fmt.Errorf("owning %s: %w", obj.GetName(), err)
	}
	gvk, err := apiutil.GVKForObject(obj, r.Scheme)
	if err != nil {
		return fmt.Errorf("the kind of %s: %w", obj.GetName(), err)
	}
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("converting %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	u := &unstructured.Unstructured{Object: fields}
	u.SetGroupVersionKind(gvk)
	// Not ours to declare: the status is the controllers', the creation
	// times the server's (a typed object carries them as null).
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	for _, template := range [][]string{{"spec", "template"}, {"spec", "jobTemplate"}, {"spec", "jobTemplate", "spec", "template"}} {
		unstructured.RemoveNestedField(u.Object, append(template, "metadata", "creationTimestamp")...)
	}
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("reading back %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return nil
}

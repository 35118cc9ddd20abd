// Package v1alpha1 contains the SeckillActivity API.
// +kubebuilder:object:generate=true
// +groupName=seckill.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of this package.
	GroupVersion = schema.GroupVersion{Group: "seckill.io", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this package to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &SeckillActivity{}, &SeckillActivityList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

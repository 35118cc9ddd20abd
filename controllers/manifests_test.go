package controllers

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// render builds a kustomization directory the way `kubectl kustomize` does.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	out, err := res.AsYaml()
	require.NoError(t, err)
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) > 0 {
			objs = append(objs, &u)
		}
	}
	require.NotEmpty(t, objs)
	return objs
}

// Every object of the kustomize deployment and of the samples is accepted
// by the real API server (server-side apply, dry run): no hand-written YAML
// goes untested.
func TestKustomizeAndSamplesAreAcceptedByTheAPIServer(t *testing.T) {
	needsAPIServer(t)
	objs := render(t, filepath.Join("..", "config", "default"))
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() == "Namespace" {
			// Namespaced objects need their namespace to exist even in a dry run.
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.GetName()}}
			require.NoError(t, client.IgnoreAlreadyExists(k8sClient.Create(testCtx, ns)))
		}
	}
	for _, want := range []string{"CustomResourceDefinition", "Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Namespace"} {
		require.Positive(t, kinds[want], "kustomize output has a %s", want)
	}
	samples := render(t, filepath.Join("..", "config", "samples"))
	for _, s := range samples {
		s.SetNamespace("default")
	}
	for _, o := range append(objs, samples...) {
		err := k8sClient.Apply(testCtx, client.ApplyConfigurationFromUnstructured(o), client.ForceOwnership, client.FieldOwner("manifests-test"), client.DryRunAll)
		require.NoError(t, err, "%s %s", o.GetKind(), o.GetName())
	}
}

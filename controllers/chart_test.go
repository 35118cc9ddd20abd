package controllers

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func decodeAll(t *testing.T, name string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			require.ErrorContains(t, err, "EOF", name)
			break
		}
		if len(u.Object) > 0 {
			objs = append(objs, &u)
		}
	}
	return objs
}

// The Helm chart, rendered with its default values and with overrides the
// way `helm install` would, installs the CRD and the operator: every object
// is accepted by the real API server (server-side apply, dry run), and the
// RBAC it grants is the role generated from the markers.
func TestHelmChartIsAcceptedByTheAPIServer(t *testing.T) {
	needsAPIServer(t)
	chrt, err := loader.Load(filepath.Join("..", "charts", "seckill-operator"))
	require.NoError(t, err)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "seckill-helm"}}
	require.NoError(t, client.IgnoreAlreadyExists(k8sClient.Create(testCtx, ns)))
	for name, overrides := range map[string]map[string]any{
		"defaults": {},
		"two replicas, plain metrics": {"replicaCount": 2, "metrics": map[string]any{"secure": false, "port": 8080},
			"nodeSelector": map[string]any{"kubernetes.io/os": "linux"}, "allowedWorkloadImages": []any{"registry.example.com/seckill:", "mirror.example.com/seckill:"}},
		"namespace-scoped": {"watchNamespaces": []any{ns.Name}},
	} {
		t.Run(name, func(t *testing.T) {
			vals, err := util.ToRenderValues(chrt, overrides, common.ReleaseOptions{Name: "seckill", Namespace: ns.Name, IsInstall: true}, common.DefaultCapabilities)
			require.NoError(t, err)
			files, err := engine.Render(chrt, vals)
			require.NoError(t, err)
			var objs []*unstructured.Unstructured
			for _, crd := range chrt.CRDObjects() {
				objs = append(objs, decodeAll(t, crd.Filename, crd.File.Data)...)
			}
			for fname, out := range files {
				if strings.HasSuffix(fname, "NOTES.txt") || strings.TrimSpace(out) == "" {
					continue
				}
				objs = append(objs, decodeAll(t, fname, []byte(out))...)
			}
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
				err := k8sClient.Apply(testCtx, client.ApplyConfigurationFromUnstructured(o), client.ForceOwnership,
					client.FieldOwner("chart-test"), client.DryRunAll)
				require.NoError(t, err, "%s %s", o.GetKind(), o.GetName())
			}
			for _, want := range []string{"CustomResourceDefinition", "Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
				require.Positive(t, kinds[want], "the chart renders a %s", want)
			}
			managers := map[string]int{}
			for _, o := range objs {
				if (o.GetKind() == "ClusterRole" || o.GetKind() == "Role") && strings.HasSuffix(o.GetName(), "-manager") {
					managers[o.GetKind()]++
					rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
					require.Len(t, rules, len(generatedRules(t)), "the chart grants exactly the generated role")
				}
				if o.GetKind() == "ClusterRole" && strings.Contains(o.GetName(), "-activity-") {
					managers["user roles"]++
				}
				if o.GetKind() == "Deployment" {
					replicas, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
					require.Equal(t, int64(map[string]int{"defaults": 1, "two replicas, plain metrics": 2, "namespace-scoped": 1}[name]), replicas)
					ctrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
					args, _, _ := unstructured.NestedStringSlice(ctrs[0].(map[string]any), "args")
					image, _, _ := unstructured.NestedString(ctrs[0].(map[string]any), "image")
					require.Contains(t, args, "--workload-image="+image, "the workloads run the operator's image")
					switch name {
					case "defaults":
						require.NotContains(t, strings.Join(args, " "), "--allowed-workload-images", "no other image by default")
						require.NotContains(t, strings.Join(args, " "), "--watch-namespaces")
					case "namespace-scoped":
						require.Contains(t, args, "--watch-namespaces="+ns.Name)
					default:
						require.Contains(t, args, "--allowed-workload-images=registry.example.com/seckill:,mirror.example.com/seckill:")
					}
				}
			}
			want := map[string]int{"ClusterRole": 1, "user roles": 2}
			if name == "namespace-scoped" {
				want = map[string]int{"Role": 1, "user roles": 2} // no cluster-wide rights
			}
			require.Equal(t, want, managers)
		})
	}
}

func generatedRules(t *testing.T) []any {
	t.Helper()
	objs := render(t, filepath.Join("..", "config", "rbac"))
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == "manager-role" {
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			return rules
		}
	}
	t.Fatal("config/rbac has no manager-role")
	return nil
}

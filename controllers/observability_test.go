package controllers

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/names"
)

// spec.observability reaches every workload's environment: the collector
// when one is named, nothing (no export) otherwise.
func TestObservabilityReachesTheWorkloads(t *testing.T) {
	envOf := func(o seckillv1alpha1.ObservabilitySpec, component string) map[string]string {
		act := &seckillv1alpha1.SeckillActivity{Spec: seckillv1alpha1.SeckillActivitySpec{ActivityID: 7, Observability: o}}
		env := map[string]string{}
		for _, e := range podSpec(act, component, nil, 8080, corev1.RestartPolicyAlways).Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		return env
	}
	for _, c := range []string{ComponentGateway, ComponentConsumer, ComponentRelay, ComponentProjector} {
		env := envOf(seckillv1alpha1.ObservabilitySpec{OTLPEndpoint: "otel-collector.observability:4317", OTLPInsecure: true}, c)
		require.Equal(t, "otel-collector.observability:4317", env[names.EnvOTLPEndpoint], c)
		require.Equal(t, "true", env[names.EnvOTLPInsecure], c)
		require.NotContains(t, envOf(seckillv1alpha1.ObservabilitySpec{}, c), names.EnvOTLPEndpoint, c)
	}
}

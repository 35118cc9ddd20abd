package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/names"
)

// isolated is a component's identity and what it may be reached on.
type isolated struct {
	component string
	public    bool // its "http" port takes traffic from anywhere (gateway, payments)
	metrics   bool // it serves a metrics port (Deployments; not the jobs)
}

// isolation lists every component the activity runs, Deployments and jobs.
func isolation(ws []worker) []isolated {
	var out []isolated
	for _, w := range ws {
		out = append(out, isolated{component: w.component, public: w.port == names.GatewayPort, metrics: w.port > 0})
	}
	return append(out, isolated{component: ComponentReconcile}, isolated{component: ComponentCompensation})
}

// applyIsolation gives each component a ServiceAccount of its own that
// mounts no API token (no workload calls the Kubernetes API), and a
// NetworkPolicy that admits only the ports it serves: the public HTTP port
// of the gateway and payments from anywhere, the metrics port from inside
// the cluster, nothing else (the jobs: nothing at all). Egress is left open:
// the stores' addresses are the platform's.
func (r *SeckillActivityReconciler) applyIsolation(ctx context.Context, act *seckillv1alpha1.SeckillActivity, comps []isolated) error {
	for _, c := range comps {
		name := ObjectName(act, c.component)
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: act.Namespace, Labels: labels(act, c.component)},
			AutomountServiceAccountToken: ptr.To(false)}
		if err := r.apply(ctx, act, sa); err != nil {
			return err
		}
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: act.Namespace, Labels: labels(act, c.component)},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": act.Name, names.LabelComponent: c.component}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     ingressRules(c),
			}}
		if err := r.apply(ctx, act, np); err != nil {
			return err
		}
	}
	return nil
}

func ingressRules(c isolated) []networkingv1.NetworkPolicyIngressRule {
	tcp := corev1.ProtocolTCP
	port := func(p int32) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(p))}}
	}
	rules := []networkingv1.NetworkPolicyIngressRule{}
	if c.public {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: port(names.GatewayPort)}) // no From: anyone
	}
	if c.metrics {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: port(names.MetricsPort),
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}) // any pod of the cluster
	}
	return rules
}

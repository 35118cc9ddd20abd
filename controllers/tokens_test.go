package controllers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/names"
)

// A Secret of token keys is checked key by key and mounted into the
// gateway as files, with the manifest's issuer, audience and lifetime; a bad
// key is a Degraded condition naming it, not a crash-looping gateway.
func TestTokenKeysSecretIsCheckedAndMounted(t *testing.T) {
	needsAPIServer(t)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	require.NoError(t, err)
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token-keys-test", Namespace: "default"}, Data: map[string][]byte{
		"k2026.hs256":      []byte(strings.Repeat("h", 40)),
		"mobile.es256.pem": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
	}}
	require.NoError(t, k8sClient.Create(testCtx, keys))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), keys) })

	s := newSale(t, "token-keys", func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.Connections.TokenKeySecret = nil
		a.Spec.Connections.TokenKeysSecret = &corev1.LocalObjectReference{Name: keys.Name}
		a.Spec.Tokens = seckillv1alpha1.TokensSpec{Issuer: "https://login.shop.example", Audience: "flash-sale", MaxLifetime: &metav1.Duration{Duration: 30 * time.Minute}}
	})
	a := s.eventually("provisioned", func(a *seckillv1alpha1.SeckillActivity) bool {
		return condition(a, seckillv1alpha1.ConditionStockProvisioned).Status == metav1.ConditionTrue
	})
	var d appsv1.Deployment
	require.NoError(t, k8sClient.Get(testCtx, types.NamespacedName{Namespace: "default", Name: ObjectName(a, ComponentGateway)}, &d))
	pod := d.Spec.Template.Spec
	ctr := pod.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range ctr.Env {
		env[e.Name] = e
	}
	require.Equal(t, tokenKeysDir, env[names.EnvTokenKeysDir].Value)
	require.NotContains(t, env, names.EnvTokenKey, "no HMAC key Secret given")
	require.Equal(t, "https://login.shop.example", env[names.EnvTokenIssuer].Value)
	require.Equal(t, "flash-sale", env[names.EnvTokenAudience].Value)
	require.Contains(t, ctr.Args, "-token-max-lifetime=30m0s")
	// The limits' defaults (the CRD's) reach the gateway.
	for _, arg := range []string{"-user-limit=20", "-user-window=10s", "-status-rate=1000", "-rate=0"} {
		require.Contains(t, ctr.Args, arg)
	}
	var mounted bool
	for _, v := range pod.Volumes {
		mounted = mounted || (v.Secret != nil && v.Secret.SecretName == keys.Name)
	}
	require.True(t, mounted, "the Secret is a volume of the gateway")
	require.Contains(t, ctr.VolumeMounts, corev1.VolumeMount{Name: "token-keys", MountPath: tokenKeysDir, ReadOnly: true})

	// A key the gateway would refuse: the condition names it.
	keys.Data["old.hs256"] = []byte("too-short")
	require.NoError(t, k8sClient.Update(testCtx, keys))
	s.update(func(a *seckillv1alpha1.SeckillActivity) { a.Spec.Paused = true }) // a reconcile now, not at the next resync
	a = s.eventually("degraded", func(a *seckillv1alpha1.SeckillActivity) bool {
		d := meta.FindStatusCondition(a.Status.Conditions, seckillv1alpha1.ConditionDegraded)
		return d != nil && d.Status == metav1.ConditionTrue && d.Reason == ReasonSecretInvalid
	})
	msg := meta.FindStatusCondition(a.Status.Conditions, seckillv1alpha1.ConditionDegraded).Message
	require.Contains(t, msg, `key "old.hs256"`)
	require.Contains(t, msg, "at least 32 bytes")
}

// A short HMAC token key in the Secret the manifest names is refused with
// a condition naming the Secret's key.
func TestShortTokenKeyIsNamed(t *testing.T) {
	needsAPIServer(t)
	s := newSale(t, "short-token-key", func(a *seckillv1alpha1.SeckillActivity) {
		a.Spec.Connections.TokenKeySecret.Key = "rmq-endpoint" // "127.0.0.1:1": a value, far from 32 bytes
	})
	a := s.eventually("degraded", func(a *seckillv1alpha1.SeckillActivity) bool {
		d := meta.FindStatusCondition(a.Status.Conditions, seckillv1alpha1.ConditionDegraded)
		return d != nil && d.Status == metav1.ConditionTrue && d.Reason == ReasonSecretInvalid
	})
	require.Contains(t, meta.FindStatusCondition(a.Status.Conditions, seckillv1alpha1.ConditionDegraded).Message, `key "rmq-endpoint"`)
}

// Every Secret value the workloads read is checked as they will read it;
// the condition names the bad key (and never quotes a DSN's password).
func TestSecretValuesAreValidated(t *testing.T) {
	needsAPIServer(t)
	bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bad-values", Namespace: "default"}, StringData: map[string]string{
		"dsn": "postgres://user:hunter2@%zz/db", "addrs": "127.0.0.1", "endpoint": "localhost:99999",
		"id-keys": "1:abcd", "payment-keys": "sim:nothex",
	}}
	require.NoError(t, k8sClient.Create(testCtx, bad))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), bad) })
	for _, c := range []struct {
		key    string
		mutate func(*seckillv1alpha1.Connections, corev1.SecretKeySelector)
	}{
		{"dsn", func(c *seckillv1alpha1.Connections, s corev1.SecretKeySelector) { c.PostgresDSNSecret = s }},
		{"addrs", func(c *seckillv1alpha1.Connections, s corev1.SecretKeySelector) { c.Redis.AddressesSecret = s }},
		{"endpoint", func(c *seckillv1alpha1.Connections, s corev1.SecretKeySelector) { c.RocketMQEndpointSecret = s }},
		{"id-keys", func(c *seckillv1alpha1.Connections, s corev1.SecretKeySelector) { c.IDKeysSecret = s }},
		{"payment-keys", func(c *seckillv1alpha1.Connections, s corev1.SecretKeySelector) { c.PaymentKeysSecret = &s }},
	} {
		t.Run(c.key, func(t *testing.T) {
			s := newSale(t, "bad-"+c.key, func(a *seckillv1alpha1.SeckillActivity) {
				c.mutate(&a.Spec.Connections, corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: bad.Name}, Key: c.key})
				a.Annotations = map[string]string{AnnotationSkipArchive: "true"} // no store to archive into
			})
			a := s.eventually("degraded", func(a *seckillv1alpha1.SeckillActivity) bool {
				d := meta.FindStatusCondition(a.Status.Conditions, seckillv1alpha1.ConditionDegraded)
				return d != nil && d.Status == metav1.ConditionTrue && d.Reason == ReasonSecretInvalid
			})
			msg := meta.FindStatusCondition(a.Status.Conditions, seckillv1alpha1.ConditionDegraded).Message
			require.Contains(t, msg, `key "`+c.key+`"`)
			require.NotContains(t, msg, "hunter2")
		})
	}
}

package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/pgroles"
)

// ReasonPostgresRoles: the workloads' PostgreSQL roles could not be made.
const ReasonPostgresRoles = "PostgresRolesFailed"

// Where the workloads' pods find spec.connections.postgresCASecret.
const (
	postgresCADir  = "/etc/seckill/postgres-ca"
	postgresCAFile = "ca.crt"
)

// dbRolesSuffix names the operator's Secret of the workloads' DSNs.
const dbRolesSuffix = "db-roles"

// dbRole is the PostgreSQL role a component connects as ("" for none: the
// send-scanner does not use PostgreSQL).
func dbRole(component string) string {
	switch component {
	case ComponentGateway:
		return pgroles.Gateway
	case ComponentConsumer:
		return pgroles.Consumer
	case ComponentProjector:
		return pgroles.Projector
	case ComponentRelay:
		return pgroles.Relay
	case ComponentCompensator, ComponentCompensation:
		return pgroles.Compensator
	case ComponentCanceller:
		return pgroles.Canceller
	case ComponentPayments:
		return pgroles.Payments
	case ComponentReconcile:
		return pgroles.Reconcile
	}
	return ""
}

// dbRoleSecret is where a component's pods read their DSN.
func dbRoleSecret(act *seckillv1alpha1.SeckillActivity, role string) corev1.SecretKeySelector {
	return corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: ObjectName(act, dbRolesSuffix)}, Key: role + "-dsn"}
}

// roleIdentity is what a role's name derives from: the activity object's
// UID (a re-created activity gets new roles; the old ones were dropped).
func roleIdentity(act *seckillv1alpha1.SeckillActivity) string { return string(act.UID) }

// ensureDBRoles gives every workload its own login role with the grants of
// pgroles.Grants, and keeps the Secret of their DSNs (the operator's DSN
// with the role's user and password) in step. Passwords are made once and
// kept in that Secret; deleting the Secret rotates them (new passwords, the
// pods roll). It returns a digest of the Secret for the pods' secrets hash.
func (r *SeckillActivityReconciler) ensureDBRoles(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store ActivityStore, e Endpoints) (string, error) {
	adminDSN := e.PostgresDSN
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ObjectName(act, dbRolesSuffix), Namespace: act.Namespace}}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	err := reader.Get(ctx, client.ObjectKeyFromObject(sec), sec)
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("reading secret %s: %w", sec.Name, err)
	}
	exists := err == nil
	data := map[string][]byte{}
	for k, v := range sec.Data {
		data[k] = v
	}
	for _, role := range pgroles.Roles() {
		pw := string(data[role+"-password"])
		if pw == "" {
			if pw, err = pgroles.NewPassword(); err != nil {
				return "", err
			}
			data[role+"-password"] = []byte(pw)
		}
		dsn, err := pgroles.DSN(adminDSN, pgroles.Name(roleIdentity(act), role), pw)
		if err == nil && len(e.PostgresCA) > 0 { // the authority as the pods see it: a mounted file
			dsn, err = pgroles.SetParam(dsn, "sslrootcert", postgresCADir+"/"+postgresCAFile)
		}
		if err != nil {
			return "", &connError{ReasonSecretInvalid, err}
		}
		data[role+"-dsn"] = []byte(dsn)
	}
	// The roles first, then the Secret: a pod never reads a password its
	// role does not have yet.
	for _, role := range pgroles.Roles() {
		name, pw := pgroles.Name(roleIdentity(act), role), string(data[role+"-password"])
		inputs := rolesKey(adminDSN, name, pw)
		if r.done.fresh(act.UID, "role/"+name, inputs, r.now(), 0) {
			continue
		}
		if err := store.EnsureRole(ctx, name, role, pw); err != nil {
			return "", &connError{ReasonPostgresRoles, err}
		}
		r.done.done(act.UID, "role/"+name, inputs, r.now())
	}
	// Written with plain create/update, read uncached above: the operator
	// may get Secrets, never list or watch them.
	if !exists || !equalData(sec.Data, data) {
		sec.Labels = labels(act, dbRolesSuffix)
		sec.Type = corev1.SecretTypeOpaque
		sec.Data = data
		if err := controllerutil.SetControllerReference(act, sec, r.Scheme); err != nil {
			return "", err
		}
		write := func() error { return r.Update(ctx, sec) }
		if !exists {
			write = func() error { return r.Create(ctx, sec) }
		}
		if err := write(); err != nil {
			return "", fmt.Errorf("writing secret %s: %w", sec.Name, err)
		}
	}
	return digestData(data), nil
}

// dropDBRoles removes the activity's roles (its archive keeps the data).
func dropDBRoles(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store ActivityStore) error {
	for _, role := range pgroles.Roles() {
		if err := store.DropRole(ctx, pgroles.Name(roleIdentity(act), role)); err != nil {
			return err
		}
	}
	return nil
}

// rolesKey: a role ensured with this password on this server, by this
// operator process, needs no second round of statements. A changed grant
// table is a new operator binary, so a new process.
func rolesKey(adminDSN, name, pw string) string { return stepInputs(adminDSN, name, pw) }

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if string(b[k]) != string(v) {
			return false
		}
	}
	return true
}

func digestData(data map[string][]byte) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s\x00%d:", k, len(data[k]))
		h.Write(data[k])
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

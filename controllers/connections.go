package controllers

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/config"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/migrations"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/payment"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/tlsca"
	"github.com/seckill/seckill-operator/workloads/tokens"
)

// Endpoints are the stores of one activity, read from its Secrets.
type Endpoints struct {
	PostgresDSN string
	// PostgresCA is the PEM authority PostgreSQL's certificate is verified
	// against (spec.connections.postgresCASecret), if any.
	PostgresCA  []byte
	RedisMode   string
	RedisAddrs  string
	RedisMaster string
	// RocketMQEndpoint and RocketMQCA: the proxy and the authority its
	// certificate is verified against (workloads only; CA optional).
	RocketMQEndpoint string
	// RocketMQNameServer: where the activity's own topics and groups are
	// created ("": the shared ones).
	RocketMQNameServer string
	RocketMQCA         []byte
	// RocketMQAccessKey and RocketMQSecretKey: the ACL user, if any.
	RocketMQAccessKey, RocketMQSecretKey string
	// RedisUsername and RedisPassword: the Redis login, if any.
	RedisUsername, RedisPassword string
	// RedisCA: the authority Redis's certificate is verified against (TLS
	// to Redis when set).
	RedisCA []byte
	// SecretsHash digests every Secret value the workloads read: a rotated
	// DSN, key or endpoint rolls their pods (it is not part of key()).
	SecretsHash string
}

func (e Endpoints) key() string {
	h := sha256.Sum256([]byte(strings.Join([]string{e.PostgresDSN, string(e.PostgresCA), e.RedisMode, e.RedisAddrs, e.RedisMaster, e.RedisUsername, e.RedisPassword, string(e.RedisCA)}, "\x00")))
	return hex.EncodeToString(h[:])
}

// Reasons of the Degraded condition when a store cannot be reached.
const (
	ReasonSecretMissing       = "SecretMissing"
	ReasonSecretInvalid       = "SecretInvalid"
	ReasonPostgresUnreachable = "PostgresUnreachable"
	// ReasonPostgresTLS: PostgreSQL's certificate did not verify (an
	// untrusted authority, a name that does not match): never retried in
	// plain text.
	ReasonPostgresTLS = "PostgresTLSFailed"
	// ReasonPostgresAuth: PostgreSQL refused the DSN's user or password.
	ReasonPostgresAuth     = "PostgresAuthFailed"
	ReasonRedisUnreachable = "RedisUnreachable"
	// ReasonRedisAuth: Redis refused the login (user, password, or the
	// user's rights).
	ReasonRedisAuth = "RedisAuthFailed"
	// ReasonRedisTLS: Redis's certificate did not verify against
	// redis.caSecret (or Redis answered in plain text): never retried
	// without TLS.
	ReasonRedisTLS = "RedisTLSFailed"
	// ReasonRocketMQTLS: the proxy's certificate does not verify against
	// rocketMQCASecret (or the proxy speaks no TLS).
	ReasonRocketMQTLS = "RocketMQTLSFailed"
)

// connError is a connection failure with the condition reason it shows as.
type connError struct {
	reason string
	err    error
}

func (e *connError) Error() string { return e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

// readEndpoints reads the activity's connection Secrets (uncached: the
// operator needs get on Secrets, not a cluster-wide watch of them), and with
// workloads those the workloads read too, checked as they will read them.
func readEndpoints(ctx context.Context, r client.Reader, act *seckillv1alpha1.SeckillActivity, workloads bool) (Endpoints, error) {
	digest := sha256.New()
	read := map[string]string{}            // name/key → value: each read (and digested) once
	secrets := map[string]*corev1.Secret{} // name → Secret: each fetched once a pass, whatever its keys
	get := func(sel corev1.SecretKeySelector) (string, error) {
		if v, ok := read[sel.Name+"/"+sel.Key]; ok {
			return v, nil
		}
		s, ok := secrets[sel.Name]
		if !ok {
			s = &corev1.Secret{}
			if err := r.Get(ctx, types.NamespacedName{Namespace: act.Namespace, Name: sel.Name}, s); err != nil {
				if apierrors.IsNotFound(err) {
					return "", &connError{ReasonSecretMissing, fmt.Errorf("secret %s/%s not found", act.Namespace, sel.Name)}
				}
				return "", &connError{ReasonSecretMissing, fmt.Errorf("reading secret %s/%s: %w", act.Namespace, sel.Name, err)}
			}
			secrets[sel.Name] = s
		}
		v, ok := s.Data[sel.Key]
		if !ok || len(v) == 0 {
			return "", &connError{ReasonSecretMissing, fmt.Errorf("secret %s/%s has no key %q", act.Namespace, sel.Name, sel.Key)}
		}
		fmt.Fprintf(digest, "%s\x00%s\x00%d:", sel.Name, sel.Key, len(v))
		digest.Write(v)
		read[sel.Name+"/"+sel.Key] = strings.TrimSpace(string(v))
		return read[sel.Name+"/"+sel.Key], nil
	}
	c := act.Spec.Connections
	var e Endpoints
	var err error
	if e.PostgresDSN, err = get(c.PostgresDSNSecret); err != nil {
		return e, err
	}
	if e.RedisAddrs, err = get(c.Redis.AddressesSecret); err != nil {
		return e, err
	}
	if c.PostgresCASecret != nil {
		ca, err := get(*c.PostgresCASecret)
		if err != nil {
			return e, err
		}
		e.PostgresCA = []byte(ca)
		if err := checkPostgresCA(e.PostgresDSN, e.PostgresCA); err != nil {
			return e, &connError{ReasonSecretInvalid, fmt.Errorf("secret %s/%s key %q: %w", act.Namespace, c.PostgresCASecret.Name, c.PostgresCASecret.Key, err)}
		}
	}
	for _, v := range []struct {
		sel *corev1.SecretKeySelector
		to  *string
	}{{c.Redis.UsernameSecret, &e.RedisUsername}, {c.Redis.PasswordSecret, &e.RedisPassword}} {
		if v.sel == nil {
			continue
		}
		if *v.to, err = get(*v.sel); err != nil {
			return e, err
		}
	}
	if sel := c.Redis.CASecret; sel != nil {
		ca, err := get(*sel)
		if err != nil {
			return e, err
		}
		if _, err := tlsca.Config([]byte(ca), "the Redis CA"); err != nil {
			return e, &connError{ReasonSecretInvalid, fmt.Errorf("secret %s/%s key %q: %w", act.Namespace, sel.Name, sel.Key, err)}
		}
		e.RedisCA = []byte(ca)
	}
	e.RedisMode, e.RedisMaster = c.Redis.Mode, c.Redis.MasterName
	if e.RedisMode == "" {
		e.RedisMode = "single"
	}
	if rc := c.RocketMQCredentials; rc != nil { // the operator's admin calls sign with them too
		if e.RocketMQAccessKey, err = get(rc.AccessKeySecret); err != nil {
			return e, err
		}
		if e.RocketMQSecretKey, err = get(rc.SecretKeySecret); err != nil {
			return e, err
		}
	}
	if sel := c.RocketMQNameServerSecret; sel != nil { // archiving deletes the activity's topics too
		v, err := get(*sel)
		if err != nil {
			return e, err
		}
		if err := checkHostPort(v); err != nil {
			return e, &connError{ReasonSecretInvalid, fmt.Errorf("secret %s/%s key %q: %w", act.Namespace, sel.Name, sel.Key, err)}
		}
		e.RocketMQNameServer = v
	}
	if !workloads { // archiving needs the stores only
		return e, nil
	}
	// The workloads need these too; a missing or malformed one is reported
	// now, not when a pod crash-loops.
	more := []corev1.SecretKeySelector{c.RocketMQEndpointSecret, c.IDKeysSecret}
	for _, sel := range []*corev1.SecretKeySelector{c.TokenKeySecret, c.PaymentKeysSecret} {
		if sel != nil {
			more = append(more, *sel)
		}
	}
	for _, sel := range more {
		if _, err := get(sel); err != nil {
			return e, err
		}
	}
	e.RocketMQEndpoint, _ = get(c.RocketMQEndpointSecret)
	if c.RocketMQCASecret != nil {
		ca, err := get(*c.RocketMQCASecret)
		if err != nil {
			return e, err
		}
		if _, err := mq.TLSConfig([]byte(ca)); err != nil {
			return e, &connError{ReasonSecretInvalid, fmt.Errorf("secret %s/%s key %q: %w", act.Namespace, c.RocketMQCASecret.Name, c.RocketMQCASecret.Key, err)}
		}
		e.RocketMQCA = []byte(ca)
	}
	// Each value checked as the workloads will read it: a bad one is named
	// now (Degraded SecretInvalid), not found by a crash-looping pod.
	for _, v := range []struct {
		sel   *corev1.SecretKeySelector
		check func(string) error
	}{
		{&c.PostgresDSNSecret, checkDSN},
		{&c.Redis.AddressesSecret, checkAddrs},
		{&c.RocketMQEndpointSecret, checkHostPort},
		{&c.IDKeysSecret, checkIDKeys},
		{c.TokenKeySecret, func(v string) error { return tokens.NewVerifier().AddHMAC(tokens.DefaultKID, []byte(v)) }},
		{c.PaymentKeysSecret, func(v string) error { _, err := payment.ParseKeys(v); return err }},
	} {
		if v.sel == nil {
			continue
		}
		val, _ := get(*v.sel) // read above
		if err := v.check(val); err != nil {
			return e, &connError{ReasonSecretInvalid, fmt.Errorf("secret %s/%s key %q: %w", act.Namespace, v.sel.Name, v.sel.Key, err)}
		}
	}
	if c.TokenKeysSecret != nil {
		if err := checkTokenKeys(ctx, r, act.Namespace, c.TokenKeysSecret.Name, digest); err != nil {
			return e, err
		}
	}
	e.SecretsHash = hex.EncodeToString(digest.Sum(nil)[:8])
	return e, nil
}

// checkDSN parses a PostgreSQL connection string as pgx does.
func checkDSN(v string) error {
	if _, err := pgxpool.ParseConfig(v); err != nil {
		return errors.New("not a PostgreSQL connection string (URL or key=value)") // the parse error may quote the password
	}
	return nil
}

// checkPostgresCA checks that ca is PEM and that the DSN verifies the
// server with it (sslmode=verify-full).
func checkPostgresCA(dsn string, ca []byte) error {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return errors.New("the PostgreSQL DSN does not parse")
	}
	return config.PinPostgresCA(cfg.ConnConfig, ca)
}

// checkAddrs checks a comma-separated list of host:port.
func checkAddrs(v string) error {
	for _, a := range strings.Split(v, ",") {
		if err := checkHostPort(strings.TrimSpace(a)); err != nil {
			return err
		}
	}
	return nil
}

func checkHostPort(v string) error {
	host, port, err := net.SplitHostPort(v)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: want host:port", v)
	}
	return nil
}

// checkIDKeys parses the id keys as the workloads do (current version 1).
func checkIDKeys(v string) error {
	_, err := (&config.Common{IDKeys: v, IDKeyCurrent: 1}).Keyring()
	return err
}

// checkTokenKeys reads the Secret of token key files the gateway mounts and
// checks every key as the gateway will load it, naming the bad one.
func checkTokenKeys(ctx context.Context, r client.Reader, ns, name string, digest io.Writer) error {
	var s corev1.Secret
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return &connError{ReasonSecretMissing, fmt.Errorf("secret %s/%s not found", ns, name)}
		}
		return &connError{ReasonSecretMissing, fmt.Errorf("reading secret %s/%s: %w", ns, name, err)}
	}
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	v := tokens.NewVerifier()
	for _, k := range keys {
		if err := v.AddFile(k, s.Data[k]); err != nil {
			return &connError{ReasonSecretInvalid, fmt.Errorf("secret %s/%s key %q: %w", ns, name, k, err)}
		}
		fmt.Fprintf(digest, "%s\x00%s\x00%d:", name, k, len(s.Data[k]))
		_, _ = digest.Write(s.Data[k])
	}
	if v.Keys() == 0 {
		return &connError{ReasonSecretInvalid, fmt.Errorf("secret %s/%s holds no token key (<kid>.hs256 or <kid>.es256.pem)", ns, name)}
	}
	return nil
}

// Stores opens (and caches) the stores behind a set of endpoints. The
// schema is migrated once per PostgreSQL, on first use.
type Stores interface {
	Open(ctx context.Context, e Endpoints) (ActivityStore, error)
}

// StoreCache is the real Stores: one pool and one Redis client per distinct
// set of endpoints, kept while they answer.
type StoreCache struct {
	mu    sync.Mutex
	open  map[string]*control.Store
	close map[string]func()
}

// Open returns the stores for e, connecting, pinging and migrating on first use.
func (c *StoreCache) Open(ctx context.Context, e Endpoints) (ActivityStore, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := e.key()
	if s, ok := c.open[k]; ok {
		if err := ping(ctx, s); err == nil {
			return pgStore{s}, nil
		}
		c.close[k]()
		delete(c.open, k)
	}
	cfg := config.Common{PGDSN: e.PostgresDSN, PGCA: e.PostgresCA, RedisAddrs: e.RedisAddrs, RedisMode: e.RedisMode, RedisMaster: e.RedisMaster,
		RedisUsername: e.RedisUsername, RedisPassword: e.RedisPassword, RedisCA: e.RedisCA}
	if err := cfg.Check(config.Need{PG: true, Redis: true}); err != nil {
		return nil, &connError{ReasonSecretMissing, err}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pool, err := cfg.Postgres(pctx)
	if err != nil {
		return nil, &connError{ReasonPostgresUnreachable, err}
	}
	rdb, err := cfg.Redis()
	if err != nil {
		pool.Close()
		return nil, &connError{ReasonSecretInvalid, err}
	}
	s := &control.Store{Pool: pool, Redis: redisstore.New(rdb)}
	closeAll := func() { pool.Close(); _ = rdb.Close() }
	if err := ping(pctx, s); err != nil {
		closeAll()
		return nil, err
	}
	if _, err := migrations.Up(pctx, pool); err != nil {
		closeAll()
		return nil, &connError{ReasonPostgresUnreachable, fmt.Errorf("migrating PostgreSQL: %w", err)}
	}
	if err := redisstore.LoadScripts(pctx, rdb); err != nil {
		closeAll()
		return nil, &connError{ReasonRedisUnreachable, err}
	}
	if c.open == nil {
		c.open, c.close = map[string]*control.Store{}, map[string]func(){}
	}
	c.open[k], c.close[k] = s, closeAll
	return pgStore{s}, nil
}

// Close closes every cached connection.
func (c *StoreCache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, f := range c.close {
		f()
		delete(c.open, k)
		delete(c.close, k)
	}
}

func ping(ctx context.Context, s *control.Store) error {
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := s.Pool.Ping(pctx); err != nil {
		return postgresError(err)
	}
	if err := s.Redis.Client().Ping(pctx).Err(); err != nil {
		return redisError(err)
	}
	return nil
}

// postgresError names why PostgreSQL could not be used: an untrusted or
// mismatched certificate and a refused password are not outages.
func postgresError(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case tlsRefused(err):
		return &connError{ReasonPostgresTLS, fmt.Errorf("PostgreSQL's certificate does not verify: %w", err)}
	case errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000"):
		return &connError{ReasonPostgresAuth, fmt.Errorf("PostgreSQL refused the login: %w", err)}
	}
	return &connError{ReasonPostgresUnreachable, fmt.Errorf("PostgreSQL does not answer: %w", err)}
}

// checkRocketMQTLS makes the TLS handshake the workloads will make with
// the proxy, verifying its certificate against the activity's CA: a pod
// that cannot verify would only crash-loop. An unreachable proxy is not
// judged here (the workloads wait for it); a certificate that does not
// verify is. verified: the handshake was made and the certificate verified
// (false with no error: no CA to verify against, or the proxy unreachable).
func checkRocketMQTLS(ctx context.Context, e Endpoints) (verified bool, err error) {
	if len(e.RocketMQCA) == 0 {
		return false, nil
	}
	tc, err := mq.TLSConfig(e.RocketMQCA)
	if err != nil {
		return false, &connError{ReasonSecretInvalid, err}
	}
	host, _, err := net.SplitHostPort(e.RocketMQEndpoint)
	if err != nil {
		return false, &connError{ReasonSecretInvalid, err}
	}
	tc.ServerName, tc.NextProtos = host, []string{"h2"}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := (&tls.Dialer{Config: tc}).DialContext(dctx, "tcp", e.RocketMQEndpoint)
	if err == nil {
		return true, conn.Close()
	}
	if tlsRefused(err) {
		return false, &connError{ReasonRocketMQTLS, fmt.Errorf("the RocketMQ proxy's certificate does not verify: %w", err)}
	}
	return false, nil
}

// proxyLogin asks the proxy for topic's route as e's ACL user, as every
// workload's client does when it starts: a login the proxy refuses would
// only crash-loop the pods. A proxy that does not answer is not judged here
// (the workloads wait for it).
func proxyLogin(ctx context.Context, e Endpoints, topic string) error {
	var tc *tls.Config
	if len(e.RocketMQCA) > 0 {
		var err error
		if tc, err = mq.TLSConfig(e.RocketMQCA); err != nil {
			return &connError{ReasonSecretInvalid, err}
		}
	}
	err := mq.CheckLogin(ctx, e.RocketMQEndpoint, tc, e.RocketMQAccessKey, e.RocketMQSecretKey, topic)
	if errors.Is(err, mq.ErrLoginRefused) {
		return &connError{ReasonRocketMQAuth, err}
	}
	return nil
}

// tlsRefused tells a certificate that does not verify (an unknown
// authority, a name it does not carry) or a server that answered a TLS
// hello in plain text: a configuration fault, not an outage.
func tlsRefused(err error) bool {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	return errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &verify) || errors.As(err, &record)
}

// redisError names why Redis could not be used: a refused login is no outage.
func redisError(err error) error {
	if tlsRefused(err) {
		return &connError{ReasonRedisTLS, fmt.Errorf("redis's certificate does not verify: %w", err)}
	}
	msg := err.Error()
	for _, refused := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "invalid username-password"} {
		if strings.Contains(msg, refused) {
			return &connError{ReasonRedisAuth, fmt.Errorf("redis refused the login: %w", err)}
		}
	}
	return &connError{ReasonRedisUnreachable, fmt.Errorf("redis does not answer: %w", err)}
}

// reasonOf is the Degraded reason of err.
func reasonOf(err error) string {
	var ce *connError
	if errors.As(err, &ce) {
		return ce.reason
	}
	return "Error"
}

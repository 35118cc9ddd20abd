// Package testenv connects tests to the real local stack that
// hack/stack.sh starts (PostgreSQL, Redis, RocketMQ, envtest assets). It is
// the one place that knows where the servers are; every integration test
// uses it. A missing stack fails the test with the command that starts it:
// integration tests never skip silently.
package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/internal/stackenv"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/migrations"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/tlsca"
)

// Lookup returns one endpoint of the stack (an environment variable wins
// over the env file), for code that runs outside a test (TestMain).
func Lookup(key string) (string, error) {
	v, err := stackenv.Lookup(key)
	if err == nil {
		exportLogins.Do(exportRedisLogin)
	}
	return v, err
}

// Get returns one endpoint of the stack (an environment variable wins over
// the env file), failing the test when it is unknown.
// NeedsStack skips t under -short (make test-unit runs only what needs no
// server); every helper that reaches the stack calls it.
func NeedsStack(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real stack (skipped with -short)")
	}
}

func Get(t testing.TB, key string) string {
	t.Helper()
	NeedsStack(t)
	v, err := Lookup(key)
	if err != nil {
		t.Fatalf("the real stack is not available: %v", err)
	}
	return v
}

var exportLogins sync.Once

// exportRedisLogin puts the stack's Redis login (and the CA the RocketMQ
// proxy's certificate is verified against) into this process's environment,
// as a pod's env carries them from Secrets: every workload process a test
// starts inherits them (the stack refuses anonymous Redis clients).
func exportRedisLogin() {
	for _, k := range []string{names.EnvRedisUsername, names.EnvRedisPassword, names.EnvRedisCAFile, names.EnvRMQCAFile, names.EnvRMQAccessKey, names.EnvRMQSecretKey} {
		if v, err := stackenv.Lookup(k); err == nil && os.Getenv(k) == "" {
			_ = os.Setenv(k, v)
		}
	}
}

// RedisTLS is the client TLS configuration for the stack's Redis: its
// certificate verified against the stack's CA.
func RedisTLS(t testing.TB) *tls.Config {
	t.Helper()
	ca, err := tlsca.ReadFile(Get(t, names.EnvRedisCAFile), "the stack's Redis CA")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tlsca.Config(ca, "the stack's Redis CA")
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// RedisLogin is the stack's Redis ACL user and password.
func RedisLogin(t testing.TB) (user, password string) {
	return Get(t, names.EnvRedisUsername), Get(t, names.EnvRedisPassword)
}

// Database creates a fresh, migrated database for one test and drops it at
// cleanup. It returns a pool connected to it.
func Database(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := EmptyDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatalf("migrating the test database: %v", err)
	}
	return pool
}

// EmptyDatabase is Database without the migrations, for migration tests.
func EmptyDatabase(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := "t_" + strings.ReplaceAll(ids.NewRandom().String(), "-", "")
	admin, err := pgx.Connect(ctx, Get(t, "SECKILL_PG_ADMIN_DSN"))
	if err != nil {
		t.Fatalf("connecting to PostgreSQL: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	dsn := replaceDB(Get(t, "SECKILL_PG_ADMIN_DSN"), name)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parsing DSN: %v", err)
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connecting to %s: %v", name, err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, Get(t, "SECKILL_PG_ADMIN_DSN")); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	return pool, dsn
}

func replaceDB(dsn, name string) string {
	// postgres://user:pw@host:port/<db>?params (params may hold paths)
	u, err := url.Parse(dsn)
	if err != nil {
		panic(fmt.Sprintf("the stack's DSN does not parse: %v", err))
	}
	u.Path = "/" + name
	return u.String()
}

// RedisSingle is a client of the standalone primary. Tests keep apart by
// using their own activity ids, never by flushing.
func RedisSingle(t testing.TB) redis.UniversalClient {
	t.Helper()
	user, pw := RedisLogin(t)
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{Get(t, "SECKILL_REDIS_ADDR")}, Username: user, Password: pw, TLSConfig: RedisTLS(t)})
	ping(t, c)
	return c
}

// RedisCluster is a cluster client of the three-master local cluster.
func RedisCluster(t testing.TB) redis.UniversalClient {
	t.Helper()
	user, pw := RedisLogin(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(Get(t, "SECKILL_REDIS_CLUSTER_ADDRS"), ","), Username: user, Password: pw, TLSConfig: RedisTLS(t)})
	ping(t, c)
	return c
}

func ping(t testing.TB, c redis.UniversalClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis is not answering: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
}

// RedisSentinel is a client that finds the primary through the local
// Sentinel, the way the workloads' sentinel mode does.
func RedisSentinel(t testing.TB) redis.UniversalClient {
	t.Helper()
	user, pw := RedisLogin(t)
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: Get(t, "SECKILL_REDIS_SENTINEL_MASTER"),
		SentinelAddrs: []string{Get(t, "SECKILL_REDIS_SENTINEL_ADDR")}, Username: user, Password: pw, SentinelUsername: user, SentinelPassword: pw, TLSConfig: RedisTLS(t)})
	ping(t, c)
	return c
}

// Redises returns every topology, for tests that must pass on each.
func Redises(t testing.TB) map[string]redis.UniversalClient {
	return map[string]redis.UniversalClient{"single": RedisSingle(t), "cluster": RedisCluster(t), "sentinel": RedisSentinel(t)}
}

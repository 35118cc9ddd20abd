// Package config reads the workloads' configuration from flags with
// environment defaults (names.Env*), and refuses what is missing or malformed
// with one clear message per problem.
package config

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/tlsca"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

// Common is what every workload needs.
type Common struct {
	PGDSN string
	// PGCA is a PEM authority for PostgreSQL's certificate (the operator's:
	// from a Secret; the workloads name theirs in the DSN, sslrootcert).
	PGCA        []byte
	RedisAddrs  string
	RedisMode   string
	RedisMaster string
	// RedisUsername and RedisPassword log in to Redis (its ACL user; also
	// Sentinel's, in sentinel mode).
	RedisUsername string
	RedisPassword string
	// RedisCAFile names a PEM authority (Check reads it into RedisCA); with
	// RedisCA every Redis connection, Sentinel's included, is TLS and
	// verifies the server's certificate for the address dialled.
	RedisCAFile string
	RedisCA     []byte
	RMQEndpoint string
	ActivityID  int64
	// SKUs is "sku:buckets,sku:buckets".
	SKUs string
	// IDKeys is "version:hexkey,..."; IDKeyCurrent the version for new ids.
	IDKeys       string
	IDKeyCurrent int
	// LogLevel is the lowest level logged (the per-message events of a
	// sale's hot path are Debug).
	LogLevel slog.Level
	// OTLPEndpoint is the OpenTelemetry collector (gRPC host:port) the
	// workload's spans go to; "" exports none (design.md#traces).
	OTLPEndpoint string
	// OTLPInsecure sends the spans without TLS (a collector on the node).
	OTLPInsecure bool
}

// Tracing installs the workload's tracer provider (package tracing: no-op
// without an endpoint) and returns what flushes it, within 5 s, on exit.
func (c *Common) Tracing(ctx context.Context, workload string) (func(), error) {
	shutdown, err := tracing.Setup(ctx, tracing.Options{Endpoint: c.OTLPEndpoint, Insecure: c.OTLPInsecure,
		Service: workload, ActivityID: c.ActivityID})
	if err != nil {
		return nil, err
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = shutdown(sctx) // spans not flushed in 5 s are lost; the sale is not
	}, nil
}

// Logger is the workload's logger (package logs: JSON lines with the
// specification's fields), carrying the activity.
func (c *Common) Logger(workload string) *slog.Logger {
	return logs.New(os.Stderr, workload, logs.Options{Level: c.LogLevel, ActivityID: c.ActivityID})
}

// SplitList splits a comma-separated flag value, trimming items and
// dropping empty ones.
func SplitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Bind registers the common flags on fs.
func (c *Common) Bind(fs *flag.FlagSet) {
	fs.StringVar(&c.PGDSN, "pg-dsn", env(names.EnvPGDSN, ""), "PostgreSQL DSN ($"+names.EnvPGDSN+")")
	fs.StringVar(&c.RedisAddrs, "redis-addrs", env(names.EnvRedisAddrs, ""), "comma-separated Redis host:port ($"+names.EnvRedisAddrs+")")
	fs.StringVar(&c.RedisMode, "redis-mode", env(names.EnvRedisMode, "single"), "single, sentinel or cluster ($"+names.EnvRedisMode+")")
	fs.StringVar(&c.RedisMaster, "redis-master", env(names.EnvRedisMaster, ""), "Sentinel master name ($"+names.EnvRedisMaster+")")
	fs.StringVar(&c.RedisUsername, "redis-username", env(names.EnvRedisUsername, ""), "Redis ACL user ($"+names.EnvRedisUsername+")")
	c.RedisPassword = os.Getenv(names.EnvRedisPassword)
	fs.Func("redis-password-file", "file holding the Redis password (else $"+names.EnvRedisPassword+")", func(path string) error {
		b, err := os.ReadFile(path) //nolint:gosec // the operator's mounted Secret
		if err != nil {
			return fmt.Errorf("reading the Redis password: %w", err)
		}
		c.RedisPassword = strings.TrimSpace(string(b))
		return nil
	})
	fs.StringVar(&c.RedisCAFile, "redis-ca-file", env(names.EnvRedisCAFile, ""), "PEM CA of Redis's certificate: TLS to Redis, verified ($"+names.EnvRedisCAFile+")")
	fs.StringVar(&c.RMQEndpoint, "rmq-endpoint", env(names.EnvRMQEndpoint, ""), "RocketMQ proxy gRPC host:port ($"+names.EnvRMQEndpoint+")")
	act, _ := strconv.ParseInt(env(names.EnvActivityID, "0"), 10, 64)
	fs.Int64Var(&c.ActivityID, "activity-id", act, "activity id ($"+names.EnvActivityID+")")
	fs.StringVar(&c.SKUs, "skus", env("SECKILL_SKUS", ""), "sku:buckets,... of the activity ($SECKILL_SKUS)")
	fs.StringVar(&c.IDKeys, "id-keys", env(names.EnvIDKeys, ""), "HMAC keys version:hex,... ($"+names.EnvIDKeys+")")
	cur, _ := strconv.Atoi(env(names.EnvIDKeyCurrent, "1"))
	fs.IntVar(&c.IDKeyCurrent, "id-key-current", cur, "key version for new ids ($"+names.EnvIDKeyCurrent+")")
	if err := c.LogLevel.UnmarshalText([]byte(env("SECKILL_LOG_LEVEL", "info"))); err != nil {
		c.LogLevel = slog.LevelInfo // an unreadable environment default: -log-level says so when given
	}
	fs.TextVar(&c.LogLevel, "log-level", c.LogLevel, "lowest level logged: debug, info, warn, error ($SECKILL_LOG_LEVEL)")
	fs.StringVar(&c.OTLPEndpoint, "otlp-endpoint", env(names.EnvOTLPEndpoint, ""), "OpenTelemetry collector gRPC host:port for traces; empty: none ($"+names.EnvOTLPEndpoint+")")
	fs.BoolVar(&c.OTLPInsecure, "otlp-insecure", env(names.EnvOTLPInsecure, "") == "true", "send traces without TLS ($"+names.EnvOTLPInsecure+"=true)")
}

// Need lists the settings a workload requires; Check reports every missing one.
type Need struct{ PG, Redis, RMQ, Slots, Keys bool }

// Check validates the settings that n names.
func (c *Common) Check(n Need) error {
	var errs []error
	if n.PG && c.PGDSN == "" {
		errs = append(errs, errors.New("-pg-dsn is required"))
	}
	if n.Redis {
		if c.RedisAddrs == "" {
			errs = append(errs, errors.New("-redis-addrs is required"))
		}
		switch c.RedisMode {
		case "single", "cluster":
		case "sentinel":
			if c.RedisMaster == "" {
				errs = append(errs, errors.New("-redis-master is required in sentinel mode"))
			}
		default:
			errs = append(errs, fmt.Errorf("-redis-mode %q: want single, sentinel or cluster", c.RedisMode))
		}
		if c.RedisUsername != "" && c.RedisPassword == "" {
			errs = append(errs, errors.New("-redis-username needs a password ($"+names.EnvRedisPassword+" or -redis-password-file)"))
		}
		if c.RedisCAFile != "" && len(c.RedisCA) == 0 {
			ca, err := tlsca.ReadFile(c.RedisCAFile, "the Redis CA")
			if err != nil {
				errs = append(errs, fmt.Errorf("-redis-ca-file: %w", err))
			}
			c.RedisCA = ca
		}
	}
	if n.RMQ && c.RMQEndpoint == "" {
		errs = append(errs, errors.New("-rmq-endpoint is required"))
	}
	if n.Slots {
		if c.ActivityID <= 0 {
			errs = append(errs, errors.New("-activity-id must be positive"))
		}
		if _, err := c.Slots(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.Keys {
		if _, err := c.Keyring(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Slots parses -skus into the activity's Redis slots.
func (c *Common) Slots() ([]redisstore.Slot, error) {
	skus, err := c.SKUBuckets()
	if err != nil {
		return nil, err
	}
	var out []redisstore.Slot
	for _, s := range skus {
		out = append(out, redisstore.Slots(c.ActivityID, s.ID, s.Buckets)...)
	}
	return out, nil
}

// SKUBuckets is one -skus entry: a SKU and its number of Redis buckets.
type SKUBuckets struct {
	ID      int64
	Buckets int
}

// SKUBuckets parses -skus (sku:buckets,...).
func (c *Common) SKUBuckets() ([]SKUBuckets, error) {
	if c.SKUs == "" {
		return nil, errors.New("-skus is required (sku:buckets,...)")
	}
	var out []SKUBuckets
	for _, part := range strings.Split(c.SKUs, ",") {
		skuStr, bStr, ok := strings.Cut(strings.TrimSpace(part), ":")
		sku, err1 := strconv.ParseInt(skuStr, 10, 64)
		b, err2 := strconv.Atoi(bStr)
		if !ok || err1 != nil || err2 != nil || sku <= 0 || b < 1 || b > 64 {
			return nil, fmt.Errorf("-skus entry %q: want sku:buckets with sku > 0 and 1 <= buckets <= 64", part)
		}
		out = append(out, SKUBuckets{ID: sku, Buckets: b})
	}
	return out, nil
}

// Keyring parses -id-keys.
func (c *Common) Keyring() (*ids.Keyring, error) {
	if c.IDKeys == "" {
		return nil, errors.New("-id-keys is required (version:hexkey,...)")
	}
	keys := map[byte][]byte{}
	for _, part := range strings.Split(c.IDKeys, ",") {
		vStr, hexKey, ok := strings.Cut(strings.TrimSpace(part), ":")
		v, err := strconv.Atoi(vStr)
		key, herr := hex.DecodeString(hexKey)
		if !ok || err != nil || herr != nil || v < 0 || v > 255 {
			return nil, fmt.Errorf("-id-keys entry must be version:hexkey with 0 <= version <= 255")
		}
		keys[byte(v)] = key
	}
	if c.IDKeyCurrent < 0 || c.IDKeyCurrent > 255 {
		return nil, errors.New("-id-key-current must be 0..255")
	}
	return ids.NewKeyring(byte(c.IDKeyCurrent), keys)
}

// Postgres opens the pool. With PGCA (PEM), the server's certificate is
// verified against that authority instead of the one the DSN names.
func (c *Common) Postgres(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(c.PGDSN)
	if err != nil {
		return nil, errors.New("connecting to PostgreSQL: the DSN does not parse") // the error may quote the password
	}
	if len(c.PGCA) > 0 {
		if err := PinPostgresCA(cfg.ConnConfig, c.PGCA); err != nil {
			return nil, err
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	return pool, nil
}

// PinPostgresCA makes every TLS attempt of cfg verify the server against
// the PEM authority ca. The DSN must say sslmode=verify-full: a CA given for
// a connection that does not verify (or may fall back to plain text) would
// look safe and not be.
func PinPostgresCA(cfg *pgx.ConnConfig, ca []byte) error {
	roots, err := tlsca.Pool(ca, "the PostgreSQL CA")
	if err != nil {
		return err
	}
	tlsOf := []*tls.Config{cfg.TLSConfig}
	for _, fb := range cfg.Fallbacks {
		tlsOf = append(tlsOf, fb.TLSConfig)
	}
	for _, t := range tlsOf {
		if t == nil || t.InsecureSkipVerify || t.ServerName == "" {
			return errors.New("a PostgreSQL CA is set but the DSN does not say sslmode=verify-full")
		}
		t.RootCAs = roots
	}
	return nil
}

// Redis opens the client for the configured topology: TLS verified against
// RedisCA when one is set (go-redis names each server by the host it
// dials, so a certificate must carry that name or address).
func (c *Common) Redis() (redis.UniversalClient, error) {
	addrs := strings.Split(c.RedisAddrs, ",")
	user, pw := c.RedisUsername, c.RedisPassword
	var tc *tls.Config
	if len(c.RedisCA) > 0 {
		var err error
		if tc, err = tlsca.Config(c.RedisCA, "the Redis CA"); err != nil {
			return nil, err
		}
	}
	switch c.RedisMode {
	case "cluster":
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Username: user, Password: pw, TLSConfig: tc}), nil
	case "sentinel":
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: c.RedisMaster, SentinelAddrs: addrs,
			Username: user, Password: pw, SentinelUsername: user, SentinelPassword: pw, TLSConfig: tc}), nil
	default:
		return redis.NewClient(&redis.Options{Addr: addrs[0], Username: user, Password: pw, TLSConfig: tc}), nil
	}
}

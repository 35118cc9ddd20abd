package config

import (
	"context"
	"crypto/x509"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/names"
)

func TestCheckReportsEveryProblem(t *testing.T) {
	for _, k := range []string{names.EnvPGDSN, names.EnvRedisAddrs, names.EnvRMQEndpoint, names.EnvActivityID, names.EnvIDKeys} {
		t.Setenv(k, "") // the stack's environment may be loaded
	}
	var c Common
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.Bind(fs)
	require.NoError(t, fs.Parse([]string{"-redis-mode", "ring", "-skus", "1:0", "-redis-ca-file", "/nonexistent/ca.crt"}))
	err := c.Check(Need{PG: true, Redis: true, RMQ: true, Slots: true, Keys: true})
	require.Error(t, err)
	for _, want := range []string{"-pg-dsn", "-redis-addrs", "-redis-mode", "-rmq-endpoint", "-activity-id", "-skus entry", "-id-keys", "-redis-ca-file"} {
		require.True(t, strings.Contains(err.Error(), want), "missing %q in %v", want, err)
	}
}

func TestSlotsAndKeyring(t *testing.T) {
	c := Common{ActivityID: 9, SKUs: "5:3, 6:1", IDKeys: "1:" + strings.Repeat("ab", 32), IDKeyCurrent: 1}
	slots, err := c.Slots()
	require.NoError(t, err)
	require.Len(t, slots, 4)
	require.Equal(t, "{9:5:0}", slots[0].Tag())
	require.Equal(t, "{9:6}", slots[3].Tag())
	k, err := c.Keyring()
	require.NoError(t, err)
	require.Equal(t, byte(1), k.Current())
	c.IDKeys = "1:zz"
	_, err = c.Keyring()
	require.Error(t, err)
}

// Each Redis mode the workloads accept reaches the real server over TLS,
// verified against the stack's CA: single, cluster, and sentinel (the
// primary found through the local Sentinel). The stack refuses anonymous
// clients, plain text, and a certificate of another authority.
func TestRedisModesConnect(t *testing.T) {
	caFile := testenv.Get(t, names.EnvRedisCAFile)
	for mode, c := range map[string]Common{
		"single":   {RedisMode: "single", RedisAddrs: testenv.Get(t, "SECKILL_REDIS_ADDR")},
		"cluster":  {RedisMode: "cluster", RedisAddrs: testenv.Get(t, "SECKILL_REDIS_CLUSTER_ADDRS")},
		"sentinel": {RedisMode: "sentinel", RedisAddrs: testenv.Get(t, "SECKILL_REDIS_SENTINEL_ADDR"), RedisMaster: testenv.Get(t, "SECKILL_REDIS_SENTINEL_MASTER")},
	} {
		t.Run(mode, func(t *testing.T) {
			ping := func(c Common) error {
				rdb, err := c.Redis()
				require.NoError(t, err)
				defer rdb.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				return rdb.Ping(ctx).Err()
			}
			user, pw := testenv.RedisLogin(t)
			plain := c
			plain.RedisUsername, plain.RedisPassword = user, pw
			require.Error(t, ping(plain), "the stack speaks TLS only")

			anonymous := c
			anonymous.RedisCAFile = caFile
			require.NoError(t, anonymous.Check(Need{Redis: true}))
			require.Error(t, ping(anonymous), "the stack refuses anonymous clients")

			foreign := plain
			foreign.RedisCA = testenv.ForeignCA(t)
			var unknown x509.UnknownAuthorityError
			require.ErrorAs(t, ping(foreign), &unknown, "a certificate of another authority is refused")

			c.RedisUsername, c.RedisPassword, c.RedisCAFile = user, pw, caFile
			require.NoError(t, c.Check(Need{Redis: true}))
			rdb, err := c.Redis()
			require.NoError(t, err)
			defer rdb.Close()
			key := "seckill:{config-test}:" + mode
			require.NoError(t, rdb.Set(context.Background(), key, "ok", time.Minute).Err())
			v, err := rdb.Get(context.Background(), key).Result()
			require.NoError(t, err)
			require.Equal(t, "ok", v)
		})
	}
}

package config

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/testenv"
)

func TestCheckReportsEveryProblem(t *testing.T) {
	var c Common
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.Bind(fs)
	require.NoError(t, fs.Parse([]string{"-redis-mode", "ring", "-skus", "1:0"}))
	err := c.Check(Need{PG: true, Redis: true, RMQ: true, Slots: true, Keys: true})
	require.Error(t, err)
	for _, want := range []string{"-pg-dsn", "-redis-addrs", "-redis-mode", "-rmq-endpoint", "-activity-id", "-skus entry", "-id-keys"} {
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

// Each Redis mode the workloads accept reaches the real server: single,
// cluster, and sentinel (the primary found through the local Sentinel).
func TestRedisModesConnect(t *testing.T) {
	for mode, c := range map[string]Common{
		"single":   {RedisMode: "single", RedisAddrs: testenv.Get(t, "SECKILL_REDIS_ADDR")},
		"cluster":  {RedisMode: "cluster", RedisAddrs: testenv.Get(t, "SECKILL_REDIS_CLUSTER_ADDRS")},
		"sentinel": {RedisMode: "sentinel", RedisAddrs: testenv.Get(t, "SECKILL_REDIS_SENTINEL_ADDR"), RedisMaster: testenv.Get(t, "SECKILL_REDIS_SENTINEL_MASTER")},
	} {
		t.Run(mode, func(t *testing.T) {
			anonymous := c
			require.Error(t, anonymous.Redis().Ping(context.Background()).Err(), "the stack refuses anonymous clients")
			c.RedisUsername, c.RedisPassword = testenv.RedisLogin(t)
			require.NoError(t, c.Check(Need{Redis: true}))
			rdb := c.Redis()
			defer rdb.Close()
			key := "seckill:{config-test}:" + mode
			require.NoError(t, rdb.Set(context.Background(), key, "ok", time.Minute).Err())
			v, err := rdb.Get(context.Background(), key).Result()
			require.NoError(t, err)
			require.Equal(t, "ok", v)
		})
	}
}

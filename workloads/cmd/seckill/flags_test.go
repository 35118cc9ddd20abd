package main_test

import (
	"bytes"
	"errors"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// Bad flags are refused before anything connects: exit status 2 and a
// message naming the flag.
func TestBadFlagsAreRefused(t *testing.T) {
	bin := buildBinary(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"sell"}, `unknown command "sell"`},
		{"consumer without PostgreSQL", []string{"consumer", "-rmq-endpoint", "x:1", "-pg-dsn", ""}, "-pg-dsn is required"},
		{"consumer zero attempts", []string{"consumer", "-rmq-endpoint", "x:1", "-pg-dsn", "postgres://x", "-max-attempts", "0"}, "-max-attempts at least 1"},
		{"scanner bad redis mode", []string{"scanner", "-rmq-endpoint", "x:1", "-redis-addrs", "x:1", "-redis-mode", "ring", "-skus", "1:1"}, `-redis-mode "ring"`},
		{"redis user without password", []string{"compensator", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-redis-username", "u"}, "-redis-username needs a password"},
		{"redis password file missing", []string{"compensator", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-redis-password-file", "/nonexistent/pw"}, "reading the Redis password"},
		{"redis CA not a certificate", []string{"compensator", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-redis-ca-file", "/etc/hostname"}, "-redis-ca-file: the Redis CA (/etc/hostname): the Redis CA holds no PEM certificate"},
		{"sentinel without master", []string{"compensator", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-redis-mode", "sentinel"}, "-redis-master is required"},
		{"dlq-replay without group", []string{"dlq-replay", "-rmq-endpoint", "x:1"}, "-group is required"},
		{"dlq-replay unknown group", []string{"dlq-replay", "-rmq-endpoint", "x:1", "-group", "someone-else"}, "-topic is required"},
		{"dlq-replay negative max", []string{"dlq-replay", "-rmq-endpoint", "x:1", "-group", "seckill-order-consumer", "-max", "-1"}, "-max must be"},
		{"dlq-replay without endpoint", []string{"dlq-replay", "-group", "seckill-order-consumer", "-rmq-endpoint", ""}, "-rmq-endpoint is required"},
		{"reconcile without SKUs", []string{"reconcile", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1"}, "-skus"},
		{"reconcile negative lag", []string{"reconcile", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:1", "-activity-id", "5", "-watermark-lag", "-1s"}, "-watermark-lag"},
		{"reconcile zero grace", []string{"reconcile", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:1", "-activity-id", "5", "-hard-deadline-grace", "0s"}, "-hard-deadline-grace"},
		{"reconcile inbox kept shorter than the broker keeps a message", []string{"reconcile", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:1", "-activity-id", "5", "-inbox-retention", "1h"}, "-inbox-retention"},
		{"reconcile negative outbox retention", []string{"reconcile", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:1", "-activity-id", "5", "-outbox-retention", "-1h"}, "-outbox-retention"},
		{"runbook no verb", []string{"runbook"}, "a verb is required"},
		{"runbook freeze without reason", []string{"runbook", "freeze", "-pg-dsn", "postgres://x", "-order", "00000000-0000-0000-0000-000000000001", "-operator", "a"}, "-operator and -reason"},
		{"runbook evidence bad provider url", []string{"runbook", "evidence", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-id", "x", "-provider-url", "ftp://x"}, "-provider-url"},
		{"payments without keys", []string{"payments", "-pg-dsn", "postgres://x", "-payment-keys", ""}, "-payment-keys entries"},
		{"payments short key", []string{"payments", "-pg-dsn", "postgres://x", "-payment-keys", "sim:abcd"}, "at least 16 bytes"},
		{"activity no subcommand", []string{"activity"}, "a subcommand is required"},
		{"activity provision without stock", []string{"activity", "provision", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:2", "-activity-id", "5"}, "-stock is required"},
		{"activity provision unknown SKU", []string{"activity", "provision", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:2", "-activity-id", "5", "-stock", "1=5,2=3"}, "-skus does not list"},
		{"activity provision missing SKU", []string{"activity", "provision", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:2,2:1", "-activity-id", "5", "-stock", "1=5"}, "no entry for SKU 2"},
		{"activity provision without price", []string{"activity", "provision", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:2", "-activity-id", "5", "-stock", "1=5"}, "-price is required"},
		{"activity provision zero price", []string{"activity", "provision", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:2", "-activity-id", "5", "-stock", "1=5", "-price", "1=0"}, "want sku=cents with cents >= 1"},
		{"activity provision bad currency", []string{"activity", "provision", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:2", "-activity-id", "5", "-stock", "1=5", "-price", "1=5", "-currency", "rmb"}, "-currency \"rmb\""},
		{"payments with three keys of one provider", []string{"payments", "-pg-dsn", "postgres://x", "-payment-keys", "sim:00112233445566778899aabbccddeeff,sim:00112233445566778899aabbccddeef0,sim:00112233445566778899aabbccddeef1"}, "more than 2 keys"},
		{"activity provision negative stock", []string{"activity", "provision", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:2", "-activity-id", "5", "-stock", "1=-5"}, "units >= 0"},
		{"activity window bad state", []string{"activity", "window", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:2", "-activity-id", "5", "-state", "OPEN"}, `-state "OPEN"`},
		{"activity guard zero threshold", []string{"activity", "guard", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-skus", "1:2", "-activity-id", "5", "-pause-after", "0s"}, "-pause-after must be positive"},
		{"provider-sim without key", []string{"provider-sim", "-payment-keys", "other:00112233445566778899aabbccddeeff"}, `no key for channel "sim"`},
		{"provider-sim bad callback url", []string{"provider-sim", "-payment-keys", "sim:00112233445566778899aabbccddeeff", "-callback-url", "ftp://x"}, "-callback-url"},
		{"gateway short token key", []string{"gateway", "-pg-dsn", "postgres://x", "-redis-addrs", "x:1", "-rmq-endpoint", "x:1", "-skus", "1:1", "-id-keys", "1:00112233445566778899aabbccddeeff", "-token-key", "short"}, "-token-key must be at least 32 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"} // nothing from the caller's environment
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "want a refusal, got %v\n%s", err, stderr.String())
			require.Equal(t, 2, ee.ExitCode(), stderr.String())
			require.Contains(t, stderr.String(), tc.want)
		})
	}
}

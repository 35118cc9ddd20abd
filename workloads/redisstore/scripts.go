package redisstore

import (
	"context"
	"embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

func mustScript(name string) *redis.Script {
	src, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("redisstore: missing embedded script %s: %v", name, err))
	}
	return redis.NewScript(string(src))
}

// The scripts. Each file's header lists its KEYS, ARGV and return codes.
var (
	scriptReserve             = mustScript("reserve")
	scriptCompensate          = mustScript("compensate")
	scriptProjectOrderCreated = mustScript("project_order_created")
	scriptProjectRejected     = mustScript("project_order_rejected")
	scriptReleaseAfterCancel  = mustScript("release_after_cancel")
	scriptSendClaim           = mustScript("send_claim")
	scriptSendAck             = mustScript("send_ack")
	scriptSendReschedule      = mustScript("send_reschedule")
	scriptProvision           = mustScript("provision")
	scriptRebuildProjection   = mustScript("rebuild_projection")
	scriptRecount             = mustScript("recount")
	scriptMoveOut             = mustScript("move_out")
	scriptMoveIn              = mustScript("move_in")

	allScripts = []*redis.Script{scriptReserve, scriptCompensate, scriptProjectOrderCreated, scriptProjectRejected,
		scriptReleaseAfterCancel, scriptSendClaim, scriptSendAck, scriptSendReschedule, scriptProvision, scriptRebuildProjection, scriptRecount,
		scriptMoveOut, scriptMoveIn}
)

// LoadScripts loads every script once (on every master of a cluster), so the
// hot path runs EVALSHA. Running a script still falls back to EVAL when a
// server answers NOSCRIPT (after a restart or failover), so a missed load
// costs one round trip, never a failure.
func LoadScripts(ctx context.Context, c redis.UniversalClient) error {
	for _, s := range allScripts {
		if cc, ok := c.(*redis.ClusterClient); ok {
			if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				return s.Load(ctx, m).Err()
			}); err != nil {
				return fmt.Errorf("loading Lua script on cluster masters: %w", err)
			}
			continue
		}
		if err := s.Load(ctx, c).Err(); err != nil {
			return fmt.Errorf("loading Lua script: %w", err)
		}
	}
	return nil
}

// Package runbook is the tooling of the manual repair runbook (design.md#runbook):
// the evidence of one object gathered across PostgreSQL, Redis, the broker,
// the payment channel and the logs, ranked by authority (step 2 and 3), and
// the invariant queries every repair ends with (step 6). Freezing, audited
// repair tasks and the standard steps live in package repair.
package runbook

import (
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/workloads/invariants"
	"github.com/seckill/seckill-operator/workloads/provider"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var (
	qResolve = sqlfile.Must(sqlFiles, "evidence_resolve")
	qRows    = sqlfile.Must(sqlFiles, "evidence_rows")
)

// Authority is design.md#runbook step 3: what decides when sources disagree.
var Authority = []string{
	"payment channel / payment_record",
	"PostgreSQL orders and inventory_ledger",
	"consumer_inbox, event_outbox, compensation_task",
	"Redis state",
	"broker message trace (a message proves only that it may have been sent)",
	"application logs",
}

// ErrUnknownID: no source knows the id.
var ErrUnknownID = errors.New("no reservation, request, message, order or payment has this id")

// Sources are the optional sources beyond PostgreSQL and Redis.
type Sources struct {
	// BrokerQuery is a command prefix that answers "queryMsgByKey -t TOPIC
	// -k KEY" (e.g. "mqadmin -n namesrv:9876" or "hack/rocketmq/rmq.sh admin").
	BrokerQuery []string
	// Topics to look a reservation's keys up in.
	Topics []string
	// Channel is the payment channel to ask about each order.
	Channel provider.Channel
	// Logs are files of structured logs to search for the ids.
	Logs []string
	// MaxLogLines bounds the lines kept per file (default 200).
	MaxLogLines int
}

// Evidence is everything known about one reservation.
type Evidence struct {
	Query         string         `json:"query"`
	MatchedAs     []string       `json:"matched_as"`
	ReservationID uuid.UUID      `json:"reservation_id"`
	Authority     []string       `json:"authority"`
	Postgres      map[string]any `json:"postgres"`
	Redis         map[string]any `json:"redis"`
	Broker        []BrokerLookup `json:"broker,omitempty"`
	Channel       []ChannelState `json:"payment_channel,omitempty"`
	Logs          []string       `json:"logs,omitempty"`
	Errors        []string       `json:"errors,omitempty"`
}

// BrokerLookup is one key looked up in one topic.
type BrokerLookup struct {
	Topic  string `json:"topic"`
	Key    string `json:"key"`
	Output string `json:"output"`
}

// ChannelState is what the payment channel says about an order.
type ChannelState struct {
	OrderID uuid.UUID      `json:"order_id"`
	Paid    *provider.Paid `json:"paid"`
	Error   string         `json:"error,omitempty"`
}

// Gatherer collects evidence.
type Gatherer struct {
	Pool    *pgxpool.Pool
	Redis   *redisstore.Store
	Sources Sources
}

// Gather finds every reservation the id belongs to and collects each one's evidence.
func (g *Gatherer) Gather(ctx context.Context, id string) ([]Evidence, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return nil, errors.New("an id is required")
	}
	rows, err := g.Pool.Query(ctx, qResolve, id)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", id, err)
	}
	type match struct {
		ID   uuid.UUID
		Kind string
	}
	matches, err := pgx.CollectRows(rows, pgx.RowToStructByPos[match])
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", id, err)
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnknownID, id)
	}
	byRes := map[uuid.UUID][]string{}
	var order []uuid.UUID
	for _, m := range matches {
		if _, ok := byRes[m.ID]; !ok {
			order = append(order, m.ID)
		}
		byRes[m.ID] = append(byRes[m.ID], m.Kind)
	}
	out := make([]Evidence, 0, len(order))
	for _, rid := range order {
		ev, err := g.one(ctx, rid)
		if err != nil {
			return out, err
		}
		ev.Query, ev.MatchedAs = id, byRes[rid]
		out = append(out, ev)
	}
	return out, nil
}

func (g *Gatherer) one(ctx context.Context, rid uuid.UUID) (Evidence, error) {
	ev := Evidence{ReservationID: rid, Authority: Authority, Postgres: map[string]any{}, Redis: map[string]any{}}
	var raw []byte
	if err := g.Pool.QueryRow(ctx, qRows, rid).Scan(&raw); err != nil {
		return ev, fmt.Errorf("reading the PostgreSQL rows of %s: %w", rid, err)
	}
	if err := json.Unmarshal(raw, &ev.Postgres); err != nil {
		return ev, fmt.Errorf("decoding the PostgreSQL rows of %s: %w", rid, err)
	}
	res, _ := ev.Postgres["inventory_reservation"].(map[string]any)
	var (
		activity, sku, user, bucket int64
		requestID, messageID        string
	)
	if res != nil {
		activity, sku, user, bucket = num(res["activity_id"]), num(res["sku_id"]), num(res["user_id"]), num(res["bucket"])
		requestID, _ = res["request_id"].(string)
		messageID, _ = res["message_id"].(string)
	}
	slot := redisstore.Slot{ActivityID: activity, SKUID: sku, Bucket: int(bucket)}
	g.redis(ctx, &ev, slot, rid, user, requestID)

	ids := []string{rid.String(), requestID, messageID}
	var orders []uuid.UUID
	if list, ok := ev.Postgres["orders"].([]any); ok {
		for _, o := range list {
			if m, ok := o.(map[string]any); ok {
				if s, ok := m["order_id"].(string); ok {
					ids = append(ids, s)
					if u, err := uuid.Parse(s); err == nil {
						orders = append(orders, u)
					}
				}
			}
		}
	}
	if list, ok := ev.Postgres["payment_record"].([]any); ok {
		for _, p := range list {
			if m, ok := p.(map[string]any); ok {
				for _, k := range []string{"payment_id", "provider_transaction_id"} {
					if s, ok := m[k].(string); ok {
						ids = append(ids, s)
					}
				}
			}
		}
	}
	g.broker(ctx, &ev, rid, messageID, orders)
	g.channel(ctx, &ev, orders)
	g.logs(&ev, ids)
	return ev, nil
}

func num(v any) int64 {
	if f, ok := v.(float64); ok {
		return int64(f)
	}
	return 0
}

// redis reads the reservation hash, the compensation marker, the open and
// send_due entries, the user mark and the request mapping.
func (g *Gatherer) redis(ctx context.Context, ev *Evidence, sl redisstore.Slot, rid uuid.UUID, user int64, request string) {
	c := g.Redis.Client()
	h, err := c.HGetAll(ctx, sl.Reservation(rid)).Result()
	if err != nil {
		ev.Errors = append(ev.Errors, "redis: "+err.Error())
		return
	}
	ev.Redis["slot"] = sl.Tag()
	ev.Redis["reservation"] = h
	ev.Redis["reservation_ttl_ms"] = c.PTTL(ctx, sl.Reservation(rid)).Val().Milliseconds()
	ev.Redis["compensation_marker"] = strOrNil(c.Get(ctx, sl.Compensation(rid)))
	ev.Redis["open_since_ms"] = scoreOrNil(c.ZScore(ctx, sl.Open(), rid.String()))
	ev.Redis["send_due_at_ms"] = scoreOrNil(c.ZScore(ctx, sl.SendDue(), rid.String()))
	ev.Redis["user_mark"] = strOrNil(c.Get(ctx, sl.User(user)))
	if req, err := uuid.Parse(request); err == nil {
		ev.Redis["request_mapping"] = strOrNil(c.Get(ctx, sl.Request(user, req)))
	}
}

func strOrNil(cmd *redis.StringCmd) any {
	v, err := cmd.Result()
	if err != nil {
		return nil
	}
	return v
}

func scoreOrNil(cmd *redis.FloatCmd) any {
	v, err := cmd.Result()
	if err != nil {
		return nil
	}
	return int64(v)
}

// broker looks the reservation and its message id (the order-create keys)
// and its orders (the outbox keys) up in each topic.
func (g *Gatherer) broker(ctx context.Context, ev *Evidence, rid uuid.UUID, messageID string, orders []uuid.UUID) {
	if len(g.Sources.BrokerQuery) == 0 {
		return
	}
	keys := []string{rid.String()}
	if messageID != "" {
		keys = append(keys, messageID)
	}
	for _, o := range orders {
		keys = append(keys, o.String())
	}
	for _, topic := range g.Sources.Topics {
		for _, key := range keys {
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			args := append(append([]string{}, g.Sources.BrokerQuery[1:]...), "queryMsgByKey", "-t", topic, "-k", key)
			out, err := exec.CommandContext(cctx, g.Sources.BrokerQuery[0], args...).CombinedOutput() //nolint:gosec // the operator's own admin command
			cancel()
			text := strings.TrimSpace(string(out))
			if err != nil {
				text += "\n(error: " + err.Error() + ")"
			}
			ev.Broker = append(ev.Broker, BrokerLookup{Topic: topic, Key: key, Output: text})
		}
	}
}

func (g *Gatherer) channel(ctx context.Context, ev *Evidence, orders []uuid.UUID) {
	if g.Sources.Channel == nil {
		return
	}
	for _, o := range orders {
		paid, err := g.Sources.Channel.Query(ctx, o)
		st := ChannelState{OrderID: o, Paid: paid}
		if err != nil {
			st.Error = err.Error()
		}
		ev.Channel = append(ev.Channel, st)
	}
}

// logs keeps the log lines that name any of the ids.
func (g *Gatherer) logs(ev *Evidence, ids []string) {
	max := g.Sources.MaxLogLines
	if max <= 0 {
		max = 200
	}
	var needles []string
	for _, id := range ids {
		if id != "" {
			needles = append(needles, id)
		}
	}
	for _, path := range g.Sources.Logs {
		f, err := os.Open(path) //nolint:gosec // a file the operator names
		if err != nil {
			ev.Errors = append(ev.Errors, "logs: "+err.Error())
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		kept := 0
		for sc.Scan() && kept < max {
			line := sc.Text()
			for _, n := range needles {
				if strings.Contains(line, n) {
					ev.Logs = append(ev.Logs, path+": "+line)
					kept++
					break
				}
			}
		}
		_ = f.Close()
	}
}

// Verify is design.md#runbook step 6: every invariant of the activity, straight in
// PostgreSQL and Redis (package invariants, the one checker every test and
// demo uses), held to what the person verifying expects (the sale settled,
// reservations still frozen for review).
func Verify(ctx context.Context, pool *pgxpool.Pool, rs *redisstore.Store, activity int64, skus []invariants.SKU, exp invariants.Expect) (invariants.Report, error) {
	if activity <= 0 {
		return invariants.Report{}, fmt.Errorf("verify needs the activity (got %d)", activity)
	}
	return invariants.Run(ctx, invariants.Sources{Pool: pool, Redis: rs}, activity, skus, exp)
}

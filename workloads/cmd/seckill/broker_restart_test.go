package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/internal/testsale"
	"github.com/seckill/seckill-operator/workloads/gateway"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// Issue 12, as the workloads run: the binary's gateway, two consumers,
// relay, projector and send-scanner — processes, provisioned with `seckill
// activity` — against a RocketMQ of the test's own while buyers keep
// posting over HTTP. The broker is stopped for 10 s and started again, then
// the name server. Then:
//   - the gateway process takes reservations again within 20 s of the broker
//     being back and refuses none after that, nor while the name server is
//     away;
//   - the send-scanner resends what the gateway could not send during the
//     outage, and the relay sends what was written then, within 25 s of the
//     broker being back;
//   - every accepted reservation becomes exactly one order, projected;
//   - no process exited or had to be restarted.
func TestProcessesRecoverFromBrokerRestart(t *testing.T) {
	bin := buildBinary(t)
	mqs := testenv.OwnRocketMQ(t, map[string]string{names.TopicOrderCreate: "NORMAL", names.TopicOrderEvents: "NORMAL", names.TopicOrderCancel: "DELAY"},
		map[string]int{names.GroupOrderConsumer: names.RetryLimit, names.GroupProjector: names.RetryLimit})
	pool := testenv.Database(t)
	ctx := t.Context()
	activity := time.Now().UnixNano() % 1_000_000_000_000
	env := []string{
		"SECKILL_PG_DSN=" + pool.Config().ConnString(), "SECKILL_REDIS_ADDRS=" + testenv.Get(t, "SECKILL_REDIS_ADDR"),
		"SECKILL_RMQ_ENDPOINT=" + mqs.Endpoint, "SECKILL_ACTIVITY_ID=" + strconv.FormatInt(activity, 10),
		"SECKILL_SKUS=1:2,2:2", "SECKILL_ID_KEYS=1:" + strings.Repeat("ab", 32), "SECKILL_ID_KEY_CURRENT=1",
	}
	for _, args := range [][]string{{"activity", "provision", "-stock", "1=100000,2=0", "-price", "1=100,2=100"}, {"activity", "window", "-state", "ACTIVE"}} {
		c := exec.Command(bin, args...)
		c.Env = append(os.Environ(), env...)
		out, err := c.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	port := freeTCPPort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	logs := t.TempDir()
	procs := map[string]*exec.Cmd{}
	for _, w := range []string{"gateway", "consumer", "consumer-2", "relay", "projector", "scanner"} {
		args := []string{strings.TrimSuffix(w, "-2")}
		if w == "gateway" {
			args = append(args, "-addr", fmt.Sprintf("127.0.0.1:%d", port), "-insecure-dev-users")
		} else {
			args = append(args, "-metrics-addr", "0")
		}
		procs[w] = startLogged(t, bin, env, filepath.Join(logs, w+".log"), args...)
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "the gateway process is ready")

	type answer struct {
		at   time.Time
		code string
	}
	var (
		mu       sync.Mutex
		answers  []answer
		accepted = map[string]bool{}
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a new buyer every 40 ms; half want the sold-out SKU 2
		defer wg.Done()
		for user := int64(1); ; user++ {
			select {
			case <-stop:
				return
			case <-time.After(40 * time.Millisecond):
			}
			wg.Add(1)
			go func(u int64, req string) {
				defer wg.Done()
				for {
					code, rid := testsale.PostAsDevUser(base, activity, 1+u%2, u, req)
					mu.Lock()
					answers = append(answers, answer{time.Now(), code})
					if code == gateway.CodeQueued {
						accepted[rid] = true
					}
					mu.Unlock()
					if code != gateway.CodeServiceUnavailable && code != "" {
						return
					}
					select {
					case <-stop:
						return
					case <-time.After(500 * time.Millisecond):
					}
				}
			}(user, ids.NewRandom().String())
		}
	}()
	stopTraffic := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopTraffic)

	time.Sleep(5 * time.Second)
	t.Log("stopping the broker")
	mqs.StopBroker(t)
	down := time.Now()
	time.Sleep(10 * time.Second)
	mqs.StartBroker(t)
	back := time.Now()
	t.Logf("broker down for %s", back.Sub(down).Round(time.Second))
	time.Sleep(25 * time.Second)
	// The scanner and the relay: what the outage left unsent is sent within
	// 25 s of the broker being back — no send_due entry due before then, no
	// outbox event written before then still unsent.
	var slots []string
	for _, sl := range redisstore.Slots(activity, 1, 2) {
		slots = append(slots, sl.SendDue())
	}
	rdb := testenv.RedisSingle(t)
	unsent := func(before time.Time) (int64, int64) {
		var due int64
		for _, k := range slots {
			n, err := rdb.ZCount(ctx, k, "-inf", strconv.FormatInt(before.UnixMilli(), 10)).Result()
			require.NoError(t, err)
			due += n
		}
		var outbox int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM event_outbox WHERE status <> 'SENT' AND created_at < $1`, before).Scan(&outbox))
		return due, outbox
	}
	due, outbox := unsent(back)
	t.Logf("25 s after the broker was back: %d reservations and %d outbox events from before it still unsent", due, outbox)
	require.Zero(t, due, "the scanner resent what the gateway could not send during the outage")
	require.Zero(t, outbox, "the relay sent what was written during the outage")

	// The name server restarts too: the broker and its proxy keep running
	// on what they know, and re-register.
	t.Log("restarting the name server")
	mqs.StopNameServer(t)
	nsDown := time.Now()
	time.Sleep(10 * time.Second)
	mqs.StartBroker(t)
	nsBack := time.Now()
	t.Logf("name server down for %s", nsBack.Sub(nsDown).Round(time.Second))
	time.Sleep(15 * time.Second)
	stopTraffic()

	const bound = 20 * time.Second
	var last503 time.Time
	queuedLate, refusedLate, duringOutage := 0, 0, 0
	for _, a := range answers {
		if a.code == gateway.CodeServiceUnavailable && a.at.After(last503) {
			last503 = a.at
		}
		if a.code == gateway.CodeQueued && a.at.After(down) && a.at.Before(back) {
			duringOutage++
		}
		if a.at.After(back.Add(bound)) {
			switch a.code {
			case gateway.CodeQueued:
				queuedLate++
			case gateway.CodeServiceUnavailable:
				refusedLate++
			}
		}
	}
	refusedNS := 0
	for _, a := range answers {
		if a.code == gateway.CodeServiceUnavailable && a.at.After(nsDown) {
			refusedNS++
		}
	}
	t.Logf("accepted %d (%d while the broker was down); last SERVICE_UNAVAILABLE %s after the broker was back; %d refused since the name server stopped",
		len(accepted), duringOutage, last503.Sub(back).Round(100*time.Millisecond), refusedNS)
	require.Zero(t, refusedNS, "a name-server restart does not stop sales: the proxy sends on what it knows")
	require.Zero(t, refusedLate, "the gateway process refused reservations more than %s after the broker was back", bound)
	require.NotZero(t, queuedLate, "the gateway process took reservations more than %s after the broker was back", bound)

	require.Eventually(t, func() bool { due, outbox := unsent(time.Now()); return due == 0 && outbox == 0 },
		30*time.Second, 250*time.Millisecond, "nothing left unsent once traffic stopped")

	// Every accepted reservation is one order, projected in Redis.
	require.Eventually(t, func() bool {
		var orders int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE activity_id = $1`, activity).Scan(&orders))
		return orders == len(accepted)
	}, 120*time.Second, 500*time.Millisecond, "one order per accepted reservation")
	var dups int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM orders WHERE activity_id = $1 GROUP BY user_id, sku_id HAVING count(*) > 1) d`, activity).Scan(&dups))
	require.Zero(t, dups)
	out, errOut, code := run(t, bin, append([]string{"activity", "status", "-json"}, flagsOf(env)...)...)
	require.Zero(t, code, errOut)
	var st struct {
		SKUs []struct {
			Redis struct {
				OpenReserved int64 `json:"open_reserved"`
				Committed    int64 `json:"committed"`
			} `json:"redis_total"`
		} `json:"skus"`
		Problems []string `json:"problems"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Eventually(t, func() bool {
		out, _, _ := run(t, bin, append([]string{"activity", "status", "-json"}, flagsOf(env)...)...)
		_ = json.Unmarshal([]byte(out), &st)
		return st.SKUs[0].Redis.OpenReserved == 0 && st.SKUs[0].Redis.Committed == int64(len(accepted))
	}, 60*time.Second, 500*time.Millisecond, "every order projected in Redis")
	require.Empty(t, st.Problems)

	for w, p := range procs {
		require.NoError(t, p.Process.Signal(syscall.Signal(0)), "%s is still running", w)
		require.Nil(t, p.ProcessState, "%s exited", w)
	}
}

// startLogged starts a workload process with env added, its output in a
// file that is printed when the test fails; it is stopped at the end.
func startLogged(t *testing.T, bin string, env []string, logFile string, args ...string) *exec.Cmd {
	t.Helper()
	f, err := os.Create(logFile)
	require.NoError(t, err)
	c := exec.Command(bin, args...)
	c.Env = append(os.Environ(), env...)
	c.Stdout, c.Stderr = f, f
	require.NoError(t, c.Start())
	t.Cleanup(func() {
		_ = c.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
		_ = f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("%s (last lines):\n%s", strings.Join(args, " "), b)
		}
	})
	return c
}

// flagsOf turns SECKILL_* settings into the common flags, for commands run
// with the test's clean environment.
func flagsOf(env []string) []string {
	flagOf := map[string]string{"SECKILL_PG_DSN": "-pg-dsn", "SECKILL_REDIS_ADDRS": "-redis-addrs", "SECKILL_ACTIVITY_ID": "-activity-id", "SECKILL_SKUS": "-skus"}
	var out []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if f, ok := flagOf[k]; ok {
			out = append(out, f, v)
		}
	}
	return out
}

package main

import (
	"fmt"
	"image/color"
	"os"
	"slices"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func ms(h *hdr.Histogram, q float64) float64 {
	if h.TotalCount() == 0 {
		return 0
	}
	return float64(h.ValueAtQuantile(q)) / 1000
}

// renderTable is the report: a row per figure, a column per run and the
// median.
func renderTable(c config, rs []*saleResult) string {
	var b strings.Builder
	offered := fmt.Sprintf("offered at %d/s open loop", c.rate)
	if c.rate == 0 {
		offered = fmt.Sprintf("sent by %d clients each sending when answered (the gateway's saturation)", c.concurrency)
	}
	when := ""
	if c.ordersAfterLoad {
		when = " started when the load ended"
	}
	if c.retries > 0 {
		offered += fmt.Sprintf(", a buyer told 503 retrying up to %d times with the same request id", c.retries)
	}
	fmt.Fprintf(&b, "\nbench-sale: one SKU of %d units in %d buckets; %d reservations, each by a new user, %s; %d order consumers%s\n",
		c.stock, c.buckets, c.requests, offered, c.consumers, when)
	fmt.Fprintf(&b, "%-46s", "")
	for i := range rs {
		fmt.Fprintf(&b, "%11s", fmt.Sprintf("run %d", i+1))
	}
	fmt.Fprintf(&b, "%11s\n", "median")
	row := func(name, format string, f func(r *saleResult) float64) {
		fmt.Fprintf(&b, "%-46s", name)
		vs := make([]float64, len(rs))
		for i, r := range rs {
			vs[i] = f(r)
			fmt.Fprintf(&b, "%11s", fmt.Sprintf(format, vs[i]))
		}
		fmt.Fprintf(&b, "%11s\n", fmt.Sprintf(format, median(vs)))
	}
	row("offered (reservations/s)", "%.0f", func(r *saleResult) float64 { return float64(r.offered) / r.loadTook.Seconds() })
	row("answered (req/s)", "%.0f", func(r *saleResult) float64 { return float64(r.answered) / r.loadTook.Seconds() })
	row("not answered (transport errors)", "%.0f", func(r *saleResult) float64 { return float64(r.offered - r.answered) })
	row("reserve latency p50 (ms)", "%.1f", func(r *saleResult) float64 { return ms(r.reserve, 50) })
	row("reserve latency p99 (ms)", "%.1f", func(r *saleResult) float64 { return ms(r.reserve, 99) })
	row("reserve latency p99.9 (ms)", "%.1f", func(r *saleResult) float64 { return ms(r.reserve, 99.9) })
	row("reservation → order p50 (ms)", "%.1f", func(r *saleResult) float64 { return ms(r.toOrder, 50) })
	row("reservation → order p99 (ms)", "%.1f", func(r *saleResult) float64 { return ms(r.toOrder, 99) })
	row("reservation → order max (ms)", "%.1f", func(r *saleResult) float64 { return ms(r.toOrder, 100) })
	row("orders", "%.0f", func(r *saleResult) float64 { return float64(r.orders) })
	row("last order after (s, from the first request)", "%.1f", func(r *saleResult) float64 { return r.settled.Seconds() })
	row("orders/s (first request → last order)", "%.0f", func(r *saleResult) float64 { return float64(r.orders) / r.settled.Seconds() })
	row("peak backlog (queued, not yet orders)", "%.0f", func(r *saleResult) float64 {
		var m int64
		for _, s := range r.seconds {
			m = max(m, s.backlog)
		}
		return float64(m)
	})
	if rs[0].ceilings.evalsha > 0 {
		row("ceiling: redis-benchmark EVALSHA (calls/s)", "%.0f", func(r *saleResult) float64 { return r.ceilings.evalsha })
		row("ceiling: pgbench one-order tx (tx/s)", "%.0f", func(r *saleResult) float64 { return r.ceilings.pgbench })
		row("answered req/s ÷ EVALSHA ceiling", "%.2f", func(r *saleResult) float64 {
			return float64(r.answered) / r.loadTook.Seconds() / r.ceilings.evalsha
		})
		row("orders/s ÷ pgbench ceiling", "%.2f", func(r *saleResult) float64 {
			return float64(r.orders) / r.settled.Seconds() / r.ceilings.pgbench
		})
	}
	// Per core: what each would do with a core to itself, from the CPU time
	// it used — the whole stack and the load generator share this machine.
	perReq := func(d time.Duration, r *saleResult) float64 {
		return float64(d.Microseconds()) / float64(max(1, r.answered))
	}
	row("gateway CPU per answered request (µs)", "%.1f", func(r *saleResult) float64 { return perReq(r.gatewayCPU, r) })
	row("Redis CPU per answered request (µs)", "%.1f", func(r *saleResult) float64 { return perReq(r.redisCPU, r) })
	if rs[0].ceilings.evalshaCPU > 0 {
		row("Redis CPU per EVALSHA, redis-benchmark (µs)", "%.1f", func(r *saleResult) float64 {
			return float64(r.ceilings.evalshaCPU.Nanoseconds()) / 1e3
		})
		row("gateway req/s per core ÷ EVALSHA/s per core", "%.2f", func(r *saleResult) float64 {
			return float64(r.ceilings.evalshaCPU.Nanoseconds()) / 1e3 / max(0.001, perReq(r.gatewayCPU, r))
		})
	}
	// Every process, from /proc: what an order and a request cost each,
	// during the load and until the sale settled (docs/performance.md).
	groups := map[string]time.Duration{}
	for _, r := range rs {
		for g, d := range r.cpuLoad {
			groups[g] += d + r.cpuSettle[g]
		}
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	slices.SortFunc(names, func(a, b string) int { return int(groups[b] - groups[a]) })
	perOrder := func(d time.Duration, r *saleResult) float64 {
		return float64(d.Microseconds()) / 1e3 / float64(max(1, r.orders))
	}
	row("CPU s, every process, during the load", "%.1f", func(r *saleResult) float64 { return r.cpuLoad.Total().Seconds() })
	row("CPU s, every process, after it until settled", "%.1f", func(r *saleResult) float64 { return r.cpuSettle.Total().Seconds() })
	row("CPU ms per order, every process (both)", "%.2f", func(r *saleResult) float64 { return perOrder(r.cpuLoad.Total()+r.cpuSettle.Total(), r) })
	for _, g := range names {
		row("  ms/order "+g, "%.2f", func(r *saleResult) float64 { return perOrder(r.cpuLoad[g]+r.cpuSettle[g], r) })
	}
	for _, g := range names {
		row("  µs/request in the load "+g, "%.0f", func(r *saleResult) float64 { return perReq(r.cpuLoad[g], r) })
	}
	if c.fault != "" {
		row("fault "+c.fault+": from (s after the first request)", "%.1f", func(r *saleResult) float64 { return r.faultFrom.Sub(r.start).Seconds() })
		row("fault: to (s after the first request)", "%.1f", func(r *saleResult) float64 { return r.faultTo.Sub(r.start).Seconds() })
		row("first QUEUED after the fault ended (s)", "%.2f", func(r *saleResult) float64 { return r.recovered().Seconds() })
		row("reservation → order max, reserved in the fault (ms)", "%.0f", func(r *saleResult) float64 { return r.faultToOrderMax })
	}
	answerRow := "answer "
	if c.retries > 0 {
		row("requests sent again after a 503 (same id)", "%.0f", func(r *saleResult) float64 { return float64(r.retried) })
		row("last final answer after (s, from the first request)", "%.1f", func(r *saleResult) float64 { return r.lastAnswer.Seconds() })
		answerRow = "final answer "
	}
	codes := map[string]bool{}
	for _, r := range rs {
		for k := range r.codes {
			codes[k] = true
		}
	}
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		row(answerRow+k, "%.0f", func(r *saleResult) float64 { return float64(r.codes[k]) })
	}
	fmt.Fprintf(&b, "%-46s", "SLO: reservation → order p99 ≤ 3 s")
	for _, r := range rs {
		fmt.Fprintf(&b, "%11s", yes(ms(r.toOrder, 99) <= 3000))
	}
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "%-46s", "invariants")
	for _, r := range rs {
		fmt.Fprintf(&b, "%11s", yes(len(r.failed) == 0))
	}
	fmt.Fprintln(&b)
	for i, r := range rs {
		for _, ch := range r.checks {
			if !ch.ok {
				fmt.Fprintf(&b, "  run %d FAILED %s: %s\n", i+1, ch.name, ch.got)
			}
		}
	}
	return b.String()
}

func yes(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}

// plotSale draws one sale second by second: rates, latency percentiles,
// backlog.
func plotSale(r *saleResult, path string) error {
	rates, lat, backlog := plot.New(), plot.New(), plot.New()
	rates.Title.Text = "per second: reservations offered, sent again, queued, orders created"
	rates.Y.Label.Text = "per second"
	lat.Title.Text = "latency percentiles of the requests / reservations of each second"
	lat.Y.Label.Text = "ms"
	backlog.Title.Text = "backlog: reservations queued, not yet orders"
	backlog.Y.Label.Text = "reservations"
	backlog.X.Label.Text = "seconds since the first request"
	// The seconds that saw anything, and two more.
	end := 0
	for i, s := range r.seconds {
		if s.offered > 0 || s.retried > 0 || s.orders > 0 || s.backlog > 0 {
			end = i + 1
		}
	}
	seconds := r.seconds[:min(len(r.seconds), end+2)]
	series := func(f func(s *second) (float64, bool)) plotter.XYs {
		var xy plotter.XYs
		for i, s := range seconds {
			if v, ok := f(s); ok {
				xy = append(xy, plotter.XY{X: float64(i), Y: v})
			}
		}
		return xy
	}
	add := func(p *plot.Plot, name string, c color.Color, xy plotter.XYs) error {
		if len(xy) == 0 {
			return nil
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = c
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(name, l)
		return nil
	}
	blue, orange, green, red := color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255}, color.RGBA{214, 39, 40, 255}
	positive := func(v float64) (float64, bool) { return v, v > 0 }
	for _, l := range []struct {
		p    *plot.Plot
		name string
		c    color.Color
		f    func(s *second) (float64, bool)
	}{
		{rates, "offered", blue, func(s *second) (float64, bool) { return float64(s.offered), true }},
		{rates, "sent again after a 503", red, func(s *second) (float64, bool) { return float64(s.retried), s.retried > 0 }},
		{rates, "queued", orange, func(s *second) (float64, bool) { return float64(s.queued), true }},
		{rates, "orders", green, func(s *second) (float64, bool) { return float64(s.orders), true }},
		{lat, "reserve p50", blue, func(s *second) (float64, bool) { return positive(ms(s.reserve, 50)) }},
		{lat, "reserve p99", orange, func(s *second) (float64, bool) { return positive(ms(s.reserve, 99)) }},
		{lat, "reservation → order p50", green, func(s *second) (float64, bool) { return positive(ms(s.toOrder, 50)) }},
		{lat, "reservation → order p99", red, func(s *second) (float64, bool) { return positive(ms(s.toOrder, 99)) }},
		{backlog, "backlog", red, func(s *second) (float64, bool) { return float64(s.backlog), s.sampled }},
	} {
		if err := add(l.p, l.name, l.c, series(l.f)); err != nil {
			return err
		}
	}
	for _, p := range []*plot.Plot{rates, lat, backlog} {
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
	}
	img := vgimg.New(vg.Points(900), vg.Points(1000))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8), PadY: vg.Points(16)}
	canvases := plot.Align([][]*plot.Plot{{rates}, {lat}, {backlog}}, tiles, dc)
	rates.Draw(canvases[0][0])
	lat.Draw(canvases[1][0])
	backlog.Draw(canvases[2][0])
	f, err := os.Create(path) //nolint:gosec // our report directory
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

package kubectlseckill

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
)

// recentWarnings is how many of the activity's latest Warning events
// status shows.
const recentWarnings = 5

// Status prints the activity as an on-call person reads it (or its status
// as JSON).
func (p *Plugin) Status(ctx context.Context, name string, asJSON bool) error {
	a, err := p.get(ctx, name)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(p.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(a.Status)
	}
	var events corev1.EventList
	if err := p.Client.List(ctx, &events, client.InNamespace(p.Namespace)); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	var warnings []corev1.Event
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "SeckillActivity" && e.InvolvedObject.Name == name && e.Type == corev1.EventTypeWarning {
			warnings = append(warnings, e)
		}
	}
	return WriteStatus(p.Out, a, warnings, p.Now())
}

// WriteStatus renders the activity for a person: what it is doing, its
// stock per SKU, its backlog and consumers, its last reconcile, its
// conditions and its latest warnings.
func WriteStatus(w io.Writer, a *seckillv1alpha1.SeckillActivity, warnings []corev1.Event, now time.Time) error {
	st := a.Status
	b := &strings.Builder{}
	fmt.Fprintf(b, "%s/%s  activity %d  %s", a.Namespace, a.Name, a.Spec.ActivityID, orNone(string(st.Phase)))
	if a.Spec.Paused {
		b.WriteString(" (paused)")
	}
	fmt.Fprintf(b, "  generation %d, observed %d\n", a.Generation, st.ObservedGeneration)
	fmt.Fprintf(b, "window     %s → %s (%s)\n", a.Spec.Schedule.Start.UTC().Format(time.RFC3339), a.Spec.Schedule.End.UTC().Format(time.RFC3339), window(a, now))
	fmt.Fprintf(b, "sold       %s\n\n", orNone(st.Sold))

	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SKU\tSTOCK\tSOLD\tAVAILABLE\tRESERVED")
	for _, s := range st.SKUs {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\n", s.ID, s.Stock, s.Sold, s.Remaining, s.OpenReservations)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(b, "\nbacklog    %d open reservations, oldest %s\n", st.OpenReservations, time.Duration(st.OldestBacklogAgeSeconds)*time.Second)
	fmt.Fprintf(b, "consumers  %d desired, %d ready", st.DesiredConsumers, st.ReadyConsumers)
	if st.ScalingReason != "" {
		fmt.Fprintf(b, " — %s", st.ScalingReason)
	}
	b.WriteString("\n")
	if st.MeasuredPostgresCapacity > 0 || st.CommitRate > 0 {
		capacity := "not measured yet"
		if st.MeasuredPostgresCapacity > 0 {
			capacity = fmt.Sprintf("measured at %d/s", st.MeasuredPostgresCapacity)
		}
		fmt.Fprintf(b, "orders     %d/s committed now; PostgreSQL capacity %s\n", st.CommitRate, capacity)
	}
	if r := st.LastReconcile; r != nil {
		fmt.Fprintf(b, "reconcile  %s at %s: %d anomalies, %d repaired, %d for a person\n", r.Result, r.FinishedAt.UTC().Format(time.RFC3339), r.Anomalies, r.AutoRepaired, r.Manual)
	} else {
		b.WriteString("reconcile  no run yet\n")
	}
	b.WriteString("\nCONDITIONS\n")
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, c := range st.Conditions {
		stale := ""
		if c.ObservedGeneration < a.Generation {
			stale = " (stale)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s%s\t%s\n", c.Type, c.Status, c.Reason, stale, c.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	slices.SortFunc(warnings, func(x, y corev1.Event) int { return lastSeen(y).Compare(lastSeen(x)) })
	if len(warnings) > recentWarnings {
		warnings = warnings[:recentWarnings]
	}
	b.WriteString("\nRECENT WARNINGS\n")
	if len(warnings) == 0 {
		b.WriteString("  none\n")
	}
	for _, e := range warnings {
		fmt.Fprintf(b, "  %s ago\t%s\t%s\n", now.Sub(lastSeen(e)).Round(time.Second), e.Reason, e.Message)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func lastSeen(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func window(a *seckillv1alpha1.SeckillActivity, now time.Time) string {
	switch start, end := a.Spec.Schedule.Start.Time, a.Spec.Schedule.End.Time; {
	case now.Before(start):
		return "starts in " + start.Sub(now).Round(time.Second).String()
	case now.Before(end):
		return "ends in " + end.Sub(now).Round(time.Second).String()
	default:
		return "ended " + now.Sub(end).Round(time.Second).String() + " ago"
	}
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

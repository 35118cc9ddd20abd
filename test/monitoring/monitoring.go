// Package monitoring holds what the tests of the chart's monitoring share:
// the dashboard's panels and queries (charts/seckill-operator/files/dashboard.json).
// Its tests check the alerts and the dashboard with promtool; the cluster
// sale (test/clustersale) runs them on a real Prometheus.
package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Panel is one dashboard panel with its queries.
type Panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// Queries are the panel's queries for one activity (the dashboard's
// $activity variable set to it).
func (p Panel) Queries(activity string) []string {
	out := make([]string, 0, len(p.Targets))
	for _, t := range p.Targets {
		out = append(out, strings.ReplaceAll(t.Expr, "$activity", activity))
	}
	return out
}

// DashboardPanels reads a dashboard's graph panels (rows left out).
func DashboardPanels(path string) ([]Panel, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // the repository's own file
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []Panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Panel
	for _, p := range d.Panels {
		if p.Type != "row" {
			out = append(out, p)
		}
	}
	return out, nil
}

package monitoring

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// Every query of every panel is valid PromQL (promtool checks each as a
// recording rule, the activity variable as "every activity") and selects
// by the activity variable.
func TestDashboardQueriesAreValidPromQL(t *testing.T) {
	bin := promtool(t)
	panels, err := DashboardPanels(filepath.Join(chartDir, "files", "dashboard.json"))
	require.NoError(t, err)
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for _, p := range panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for i, q := range p.Queries(".*") {
			require.Contains(t, p.Targets[i].Expr, `activity=~"$activity"`, "%s/%s selects the dashboard's activity", p.Title, p.Targets[i].RefID)
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:panel_%d_%s", p.ID, p.Targets[i].RefID), Expr: q})
		}
	}
	require.GreaterOrEqual(t, len(panels), 12)
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dashboard.rules.yaml"), out, 0o600))
	cmd := exec.Command(bin, "check", "rules", "dashboard.rules.yaml")
	cmd.Dir = dir
	res, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", res)
}

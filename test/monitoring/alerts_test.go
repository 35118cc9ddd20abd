// The chart's alert rules (the specification's alert
// table, charts/seckill-operator/files/alerts.yaml) with promtool: the rules
// are rendered with the chart's values as helm's tpl does (they use Go
// template builtins only), checked, and unit-tested on synthetic series
// (alerts.test.yaml): every alert fires at its threshold and severity and
// resolves. promtool comes from Debian's prometheus package (make stack-up).

package monitoring

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/template"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/seckill/seckill-operator/internal/testenv"
)

const (
	chartDir  = "../../charts/seckill-operator"
	alertsDoc = "../../docs/alerts.md"
)

// render renders the rule file with the chart's values.yaml, thresholds
// overridden by over.
func render(t *testing.T, over map[string]any) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &values))
	thresholds := values["alerts"].(map[string]any)["thresholds"].(map[string]any)
	for k, v := range over {
		require.Contains(t, thresholds, k, "a threshold of values.yaml")
		thresholds[k] = v
	}
	src, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yaml"))
	require.NoError(t, err)
	tmpl, err := template.New("alerts.yaml").Option("missingkey=error").Parse(string(src))
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, tmpl.Execute(&out, map[string]any{"Values": values}))
	return out.Bytes()
}

type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func promtool(t *testing.T) string {
	t.Helper()
	testenv.NeedsStack(t)
	p, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool: make stack-up installs Debian's prometheus package")
	return p
}

// The rules pass promtool's checks and every unit test of alerts.test.yaml.
func TestAlertRulesFireAndResolve(t *testing.T) {
	bin := promtool(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), render(t, nil), 0o600))
	tests, err := os.ReadFile("alerts.test.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), tests, 0o600))
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "alerts.test.yaml"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// A promtool unit test of a broken rule fails: the tests can fail.
func TestAlertTestsCatchABrokenThreshold(t *testing.T) {
	bin := promtool(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), render(t, map[string]any{"outboxAgeWarning": 10}), 0o600))
	tests, err := os.ReadFile("alerts.test.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), tests, 0o600))
	cmd := exec.Command(bin, "test", "rules", "alerts.test.yaml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "a 10 s outbox threshold misses the 6 s case:\n%s", out)
	require.Contains(t, string(out), "SeckillOutboxLagging")
}

// Every alert and severity of the rules is fired by a unit test, and every
// runbook link names a section of docs/alerts.md.
func TestEveryAlertIsTestedAndDocumented(t *testing.T) {
	var rules ruleFile
	require.NoError(t, yaml.Unmarshal(render(t, nil), &rules))
	tests, err := os.ReadFile("alerts.test.yaml")
	require.NoError(t, err)
	doc, err := os.ReadFile(alertsDoc)
	require.NoError(t, err)
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllSubmatch(doc, -1) {
		anchors[slug(string(m[1]))] = true
	}
	fired := firedSeverities(t, tests)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			sev := r.Labels["severity"]
			require.Contains(t, []string{"warning", "critical"}, sev, r.Alert)
			require.True(t, fired[r.Alert+"/"+sev], "%s (%s) is fired by no test of alerts.test.yaml", r.Alert, sev)
			url := r.Annotations["runbook_url"]
			_, anchor, ok := strings.Cut(url, "#")
			require.True(t, ok && anchors[anchor], "%s: runbook_url %q names no section of docs/alerts.md", r.Alert, url)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
		}
	}
	require.Equal(t, 17, n, "the specification's 9 alerts, a warning and a critical where it has both")
}

// The thresholds are the chart's values.
func TestThresholdsComeFromValues(t *testing.T) {
	out := string(render(t, map[string]any{"reservationSendAgeWarning": 7, "lagFor": "2m"}))
	require.Contains(t, out, "(seckill_reservation_send_oldest_age_seconds) > 7\n")
	require.Contains(t, out, "for: 2m\n")
	require.NotContains(t, out, "<no value>")
}

// firedSeverities reads which alert/severity pairs some test expects firing.
func firedSeverities(t *testing.T, tests []byte) map[string]bool {
	var f struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []struct {
					ExpLabels map[string]string `json:"exp_labels"`
				} `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(tests, &f))
	out := map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			for _, e := range a.ExpAlerts {
				out[fmt.Sprintf("%s/%s", a.Alertname, e.ExpLabels["severity"])] = true
			}
		}
	}
	return out
}

// slug is a Markdown heading's anchor as GitHub makes it.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

package deploy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// family is one line of metrics/testdata/families.golden.
type family struct {
	typ    string
	labels []string
}

// loadFamilies reads the golden list metrics.TestGolden pins to the code.
func loadFamilies(t *testing.T) map[string]family {
	t.Helper()
	f, err := os.Open("../metrics/testdata/families.golden")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fams := map[string]family{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var name, typ, labels string
		if _, err := fmt.Sscan(sc.Text(), &name, &typ, &labels); err != nil {
			t.Fatalf("golden line %q: %v", sc.Text(), err)
		}
		var ls []string
		if l := strings.Trim(labels, "{}"); l != "" {
			ls = strings.Split(l, ",")
		}
		fams[name] = family{typ, ls}
	}
	if len(fams) < 30 {
		t.Fatalf("golden list has %d families; is it the right file?", len(fams))
	}
	return fams
}

var (
	metricRE = regexp.MustCompile(`\bflashsale_[a-z0-9_]+`)
	// groupRE finds the labels of by/without/on/ignoring clauses.
	groupRE = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	matchRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	// Labels Prometheus adds at scrape time and histogram buckets carry.
	extraLabels = []string{"instance", "job", "le"}
)

// checkExpr returns what is wrong with one PromQL expression: a metric not
// in the golden list (a histogram's _bucket, _sum and _count series and its
// bare native name count as the family), a label a selector or grouping
// uses that none of its families has.
func checkExpr(fams map[string]family, expr string) []string {
	var errs []string
	var known []string
	locs := metricRE.FindAllStringIndex(expr, -1)
	if len(locs) == 0 {
		return []string{"names no flashsale_ metric"}
	}
	for _, loc := range locs {
		name := expr[loc[0]:loc[1]]
		fam, suffix, ok := resolve(fams, name)
		if !ok {
			errs = append(errs, fmt.Sprintf("metric %s does not exist", name))
			continue
		}
		labels := fam.labels
		if suffix == "_bucket" {
			labels = append(slices.Clone(labels), "le")
		}
		known = append(known, labels...)
		rest := expr[loc[1]:]
		if !strings.HasPrefix(rest, "{") {
			continue
		}
		end := strings.Index(rest, "}")
		if end < 0 {
			errs = append(errs, fmt.Sprintf("%s: unclosed selector", name))
			continue
		}
		// Drop quoted values before looking for label names.
		sel := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`).ReplaceAllString(rest[1:end], `""`)
		for _, m := range matchRE.FindAllStringSubmatch(sel, -1) {
			if !slices.Contains(labels, m[1]) && !slices.Contains(extraLabels, m[1]) {
				errs = append(errs, fmt.Sprintf("%s has no label %q", name, m[1]))
			}
		}
	}
	for _, g := range groupRE.FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(g[1], ",") {
			l = strings.TrimSpace(l)
			if l != "" && !slices.Contains(known, l) && !slices.Contains(extraLabels, l) {
				errs = append(errs, fmt.Sprintf("groups by %q, a label none of its metrics has", l))
			}
		}
	}
	return errs
}

func resolve(fams map[string]family, name string) (family, string, bool) {
	if f, ok := fams[name]; ok {
		return f, "", true
	}
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, s); ok {
			if f, ok := fams[base]; ok && f.typ == "histogram" {
				return f, s, true
			}
		}
	}
	return family{}, "", false
}

// dashboardExprs returns every query of a Grafana dashboard: the panels'
// targets and the template variables'.
func dashboardExprs(t *testing.T, data []byte) []string {
	t.Helper()
	var d any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(d)
	return exprs
}

type rules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// anchors returns the GitHub anchors of a Markdown file's headings, and
// its in-page links, outside code blocks.
func anchors(md string) (heads map[string]bool, links []string) {
	heads = map[string]bool{}
	fence := false
	linkRE := regexp.MustCompile(`\]\(#([^)]+)\)`)
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		if h, ok := strings.CutPrefix(line, "#"); ok {
			heads[slug(strings.TrimLeft(h, "# "))] = true
		}
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			links = append(links, m[1])
		}
	}
	return heads, links
}

// slug is GitHub's heading anchor: lower case, punctuation dropped, spaces
// to hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func checkRunbook(heads map[string]bool, url string) error {
	_, anchor, ok := strings.Cut(url, "docs/runbook.md#")
	switch {
	case url == "":
		return fmt.Errorf("no runbook_url")
	case !ok || anchor == "":
		return fmt.Errorf("runbook_url %q names no section of docs/runbook.md", url)
	case !heads[anchor]:
		return fmt.Errorf("runbook_url %q: docs/runbook.md has no heading #%s", url, anchor)
	}
	return nil
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDashboard: every query of the Grafana dashboard names metrics and
// labels that exist.
func TestDashboard(t *testing.T) {
	fams := loadFamilies(t)
	exprs := dashboardExprs(t, []byte(read(t, "grafana/flashsale.json")))
	if len(exprs) < 20 {
		t.Fatalf("%d queries in the dashboard; the walk lost them", len(exprs))
	}
	used := map[string]bool{}
	for _, e := range exprs {
		for _, err := range checkExpr(fams, e) {
			t.Errorf("dashboard %q: %s", e, err)
		}
		for _, n := range metricRE.FindAllString(e, -1) {
			if _, _, ok := resolve(fams, n); ok {
				used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")] = true
			}
		}
	}
	// Every family is on the dashboard somewhere, so a new one is noticed.
	for name := range fams {
		if !used[name] {
			t.Errorf("no panel shows %s", name)
		}
	}
}

// TestAlerts: every alert rule names metrics and labels that exist and
// points at a section of docs/runbook.md; when promtool is installed it
// checks the file and runs prometheus/alerts_test.yaml.
func TestAlerts(t *testing.T) {
	fams := loadFamilies(t)
	var rs rules
	if err := yaml.Unmarshal([]byte(read(t, "prometheus/alerts.yaml")), &rs); err != nil {
		t.Fatal(err)
	}
	heads, _ := anchors(read(t, "../docs/runbook.md"))
	var names []string
	for _, g := range rs.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			if r.Alert == "" || r.Expr == "" {
				t.Errorf("group %s: a rule without alert or expr: %+v", g.Name, r)
			}
			for _, err := range checkExpr(fams, r.Expr) {
				t.Errorf("alert %s: %s", r.Alert, err)
			}
			if err := checkRunbook(heads, r.Annotations["runbook_url"]); err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
			}
		}
	}
	// The alerts issue 9 asks for.
	for _, want := range []string{"FlashsaleAuditDrift", "FlashsaleDeadLetters", "FlashsalePurchaseLatencyHigh",
		"FlashsaleBreakerOpen", "FlashsaleQueueBacklogGrowing", "FlashsaleHoldReleaseSlow"} {
		if !slices.Contains(names, want) {
			t.Errorf("no alert %s", want)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed: its check skipped")
		return
	}
	out, err := exec.Command(promtool, "check", "rules", "prometheus/alerts.yaml").CombinedOutput()
	if err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	// Each alert fires on the series it is about and not on the rest.
	out, err = exec.Command(promtool, "test", "rules", "prometheus/alerts_test.yaml").CombinedOutput()
	if err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}

// TestRunbookLinks: the runbook's links to its own sections resolve.
func TestRunbookLinks(t *testing.T) {
	heads, links := anchors(read(t, "../docs/runbook.md"))
	if len(heads) < 10 {
		t.Fatalf("%d headings in docs/runbook.md", len(heads))
	}
	for _, l := range links {
		if !heads[l] {
			t.Errorf("docs/runbook.md links to #%s, which is no heading", l)
		}
	}
}

// settings reads every FLASHSALE_* variable of docs/configuration.md's
// table, the list users are given (generated from the settings themselves).
func settings(t *testing.T) map[string]bool {
	t.Helper()
	row := regexp.MustCompile("(?m)^\\| `(FLASHSALE_[A-Z0-9_]+)` \\|")
	s := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(read(t, "../docs/configuration.md"), -1) {
		s[m[1]] = true
	}
	if len(s) < 20 {
		t.Fatalf("%d settings in docs/configuration.md's table", len(s))
	}
	return s
}

var envRE = regexp.MustCompile(`FLASHSALE_[A-Z0-9_]+`)

// TestSettings: every FLASHSALE_* variable the deployment files and the
// runbook set or name is a real setting.
func TestSettings(t *testing.T) {
	known := settings(t)
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("k8s manifests: %v %v", files, err)
	}
	files = append(files, "docker/compose.yaml", "docker/Dockerfile", "systemd/flashsale.service", "../docs/runbook.md")
	for _, f := range files {
		for _, v := range envRE.FindAllString(read(t, f), -1) {
			if !known[v] && !strings.HasPrefix(v, "FLASHSALE_TEST_") {
				t.Errorf("%s: %s is no setting in docs/configuration.md's table", f, v)
			}
		}
	}
}

// TestKubernetes: the manifests parse, and the Deployment gives the drain
// the time it needs, probes the right endpoints and runs unprivileged.
func TestKubernetes(t *testing.T) {
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "k8s/configmap.yaml")), &cm); err != nil {
		t.Fatal(err)
	}
	delay, err := time.ParseDuration(cm.Data["FLASHSALE_SHUTDOWN_DELAY"])
	if err != nil || delay <= 0 {
		t.Fatalf("ConfigMap FLASHSALE_SHUTDOWN_DELAY %q: %v", cm.Data["FLASHSALE_SHUTDOWN_DELAY"], err)
	}
	type probe struct {
		HTTPGet struct {
			Path string `yaml:"path"`
		} `yaml:"httpGet"`
	}
	type secctx struct {
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	}
	var dep struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Template struct {
				Spec struct {
					Grace      int    `yaml:"terminationGracePeriodSeconds"`
					Security   secctx `yaml:"securityContext"`
					Containers []struct {
						Name      string         `yaml:"name"`
						Readiness probe          `yaml:"readinessProbe"`
						Liveness  probe          `yaml:"livenessProbe"`
						Security  secctx         `yaml:"securityContext"`
						Resources map[string]any `yaml:"resources"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "k8s/deployment.yaml")), &dep); err != nil {
		t.Fatal(err)
	}
	ps := dep.Spec.Template.Spec
	// The delay, then requests in flight (1 s deadline each), the last
	// consumer batch and the publisher's confirms: 10 s of margin at least.
	if grace := time.Duration(ps.Grace) * time.Second; grace < delay+10*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v is not above the shutdown delay %v plus the drain", grace, delay)
	}
	if ps.Security.RunAsNonRoot == nil || !*ps.Security.RunAsNonRoot {
		t.Error("pod securityContext: runAsNonRoot is not true")
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers", len(ps.Containers))
	}
	c := ps.Containers[0]
	if c.Readiness.HTTPGet.Path != "/readyz" || c.Liveness.HTTPGet.Path != "/healthz" {
		t.Errorf("probes: readiness %q, liveness %q; want /readyz, /healthz", c.Readiness.HTTPGet.Path, c.Liveness.HTTPGet.Path)
	}
	if !c.Security.ReadOnlyRootFilesystem || c.Security.AllowPrivilegeEscalation == nil || *c.Security.AllowPrivilegeEscalation {
		t.Errorf("container securityContext %+v: want a read-only root and no privilege escalation", c.Security)
	}
	if c.Resources["requests"] == nil || c.Resources["limits"] == nil {
		t.Errorf("container resources %v: want requests and limits", c.Resources)
	}
	for _, f := range []string{"k8s/service.yaml", "k8s/pdb.yaml", "k8s/secret.example.yaml"} {
		var m struct {
			Kind string `yaml:"kind"`
		}
		if err := yaml.Unmarshal([]byte(read(t, f)), &m); err != nil || m.Kind == "" {
			t.Errorf("%s: kind %q, %v", f, m.Kind, err)
		}
	}
	var compose map[string]any
	if err := yaml.Unmarshal([]byte(read(t, "docker/compose.yaml")), &compose); err != nil {
		t.Errorf("compose.yaml: %v", err)
	}
}

// TestSystemd: the unit restarts on failure, drains on SIGTERM and waits
// for it.
func TestSystemd(t *testing.T) {
	unit := map[string]string{}
	for line := range strings.SplitSeq(read(t, "systemd/flashsale.service"), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			if k == "Environment" {
				k, v, _ = strings.Cut(v, "=")
			}
			unit[k] = v
		}
	}
	for k, want := range map[string]string{"Restart": "on-failure", "KillSignal": "SIGTERM",
		"DynamicUser": "yes", "StateDirectory": "flashsale", "FLASHSALE_DATA_DIR": "/var/lib/flashsale"} {
		if unit[k] != want {
			t.Errorf("%s=%q, want %q", k, unit[k], want)
		}
	}
	delay, err1 := time.ParseDuration(unit["FLASHSALE_SHUTDOWN_DELAY"])
	stop, err2 := time.ParseDuration(unit["TimeoutStopSec"])
	if err1 != nil || err2 != nil || stop < delay+10*time.Second {
		t.Errorf("TimeoutStopSec %q is not above FLASHSALE_SHUTDOWN_DELAY %q plus the drain (%v, %v)",
			unit["TimeoutStopSec"], unit["FLASHSALE_SHUTDOWN_DELAY"], err1, err2)
	}
}

// TestCheckerRefuses: the checks above fail on what they are there to
// catch, so a pass means something.
func TestCheckerRefuses(t *testing.T) {
	fams := loadFamilies(t)
	for _, expr := range []string{
		`rate(flashsale_nope_total[1m])`,
		`rate(flashsale_purchases_total_bucket[1m])`,          // a counter has no buckets
		`flashsale_queue_backlog_messages_count`,              // nor a gauge
		`sum(rate(flashsale_purchases_total{route="x"}[1m]))`, // a label it lacks
		`sum by (route) (rate(flashsale_purchases_total[1m]))`,
		`histogram_quantile(0.99, sum by (le) (rate(flashsale_http_request_duration_seconds_bucket{sale="x"}[1m])))`,
		`up == 0`,
	} {
		if len(checkExpr(fams, expr)) == 0 {
			t.Errorf("checkExpr(%q) found nothing wrong", expr)
		}
	}
	for _, expr := range []string{
		`histogram_quantile(0.99, sum by (le, route) (rate(flashsale_http_request_duration_seconds_bucket{route="GET /readyz"}[1m])))`,
		`histogram_quantile(0.99, sum(rate(flashsale_http_request_duration_seconds[1m])))`, // native
		`sum by (instance) (flashsale_breaker_state{state="open"})`,
	} {
		if errs := checkExpr(fams, expr); len(errs) > 0 {
			t.Errorf("checkExpr(%q): %v", expr, errs)
		}
	}
	heads := map[string]bool{"flashsaleauditdrift": true}
	for _, url := range []string{"", "https://example.com/docs/runbook.md", "https://example.com/docs/runbook.md#nope", "https://example.com/other.md#flashsaleauditdrift"} {
		if checkRunbook(heads, url) == nil {
			t.Errorf("checkRunbook(%q) passed", url)
		}
	}
	if slug("Switching the breaker's db mode") != "switching-the-breakers-db-mode" {
		t.Errorf("slug: %q", slug("Switching the breaker's db mode"))
	}
}

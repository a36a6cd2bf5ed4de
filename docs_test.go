package flashsale_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// knownStale lists what docs/design.md and docs/reliability.md cite that
// does not exist, file by file. Those two documents are being rewritten
// beside the code they describe (issue 22, items 1 and 2), by whoever moves
// that code, so this test does not fail on them; it logs each entry, and
// an entry that is no longer stale should go. Every other citation in
// README.md and docs/*.md must exist.
var knownStale = map[string][]string{}

// TestDocsCiteWhatExists: every repository path, test, benchmark, fuzz
// target, go command, FLASHSALE_* variable and relative link that
// README.md and docs/*.md cite exists, so the documents cannot send a
// reader to a file that moved or a test that was renamed.
func TestDocsCiteWhatExists(t *testing.T) {
	repo := scanRepo(t)
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{"README.md"}, docs...)
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var problems []string
		for _, p := range checkDoc(repo, doc, string(b)) {
			if !slices.Contains(problems, p) {
				problems = append(problems, p)
			}
		}
		stale := knownStale[doc]
		for _, p := range problems {
			if slices.Contains(stale, p) {
				t.Logf("%s: %s (known, listed in knownStale)", doc, p)
				continue
			}
			t.Errorf("%s: %s", doc, p)
		}
		for _, s := range stale {
			if !slices.Contains(problems, s) {
				t.Logf("%s: knownStale lists %q, which is no longer a problem: remove it", doc, s)
			}
		}
	}
}

// TestDocsCheckerFinds: the checker itself reports what it is for, so a
// regular expression gone wrong cannot make TestDocsCiteWhatExists pass by
// finding nothing.
func TestDocsCheckerFinds(t *testing.T) {
	repo := scanRepo(t)
	doc := "See `http/deadline.go`, `funnel/nope/`, `funnel.TestNoSuchThing`, `TestNoSuchThingEither`,\n" +
		"`go test -run TestNoSuchMatch ./funnel/`, `go test -run TestAudit ./nosuchdir/`,\n" +
		"`go test -run '^$' -bench BenchmarkNoSuch ./funnel/`, `FLASHSALE_NO_SUCH_SETTING`,\n" +
		"[a link](nosuch.md), [an anchor](README.md#no-such-heading) and `reserve.nope.lua`.\n" +
		"Fine: `README.md`, `cmd/flashsale/`, `metrics/metricstest`, `net/http/pprof`, `github.com/x/y`,\n" +
		"`go test -run '^$' -bench 'Distributed/burst_500' ./cmd/flashsale/`, [docs](docs/design.md),\n" +
		"`go build -o flashsale ./cmd/flashsale && ./flashsale bench --self`, `kubectl exec deploy/flashsale`,\n" +
		"`internal/poll.setDeadlineImpl`, `cmd/flashsale.TestHelp`, `../shared/bench/ceiling`.\n"
	got := checkDoc(repo, "README.md", doc)
	want := []string{
		"`http/deadline.go`: no such file or directory",
		"`funnel/nope/`: no such file or directory",
		"`funnel.TestNoSuchThing`: no func TestNoSuchThing in funnel/",
		"`TestNoSuchThingEither`: no func TestNoSuchThingEither in the repository",
		"`go test -run TestNoSuchMatch ./funnel/`: -run TestNoSuchMatch matches no test in ./funnel/",
		"`go test -run TestAudit ./nosuchdir/`: no package ./nosuchdir/",
		"`go test -run '^$' -bench BenchmarkNoSuch ./funnel/`: -bench BenchmarkNoSuch matches no benchmark in ./funnel/",
		"`FLASHSALE_NO_SUCH_SETTING`: named by no Go file, script or deployment file",
		"link nosuch.md: no such file",
		"link README.md#no-such-heading: README.md has no heading #no-such-heading",
		"`reserve.nope.lua`: no file of that name in the repository",
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("checker missed %q", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("checker reported %q, which exists", g)
		}
	}
}

// repoIndex is what the documents may cite: every file and directory, every
// Test, Benchmark and Fuzz func by directory, and the text of the files
// where FLASHSALE_* variables are read or set.
type repoIndex struct {
	paths     map[string]bool            // "funnel/audit.go", "funnel" (slash-separated, no trailing slash)
	basenames map[string]bool            // "reserve.lua"
	funcs     map[string]map[string]bool // directory → Test/Benchmark/Fuzz names
	envText   strings.Builder
}

var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w*)\(`)

func scanRepo(t *testing.T) *repoIndex {
	t.Helper()
	r := &repoIndex{paths: map[string]bool{}, basenames: map[string]bool{}, funcs: map[string]map[string]bool{}}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		p = filepath.ToSlash(p)
		r.paths[p] = true
		r.basenames[d.Name()] = true
		if d.IsDir() {
			return nil
		}
		ext := filepath.Ext(p)
		if ext != ".go" && ext != ".sh" && ext != ".yaml" && ext != ".service" && d.Name() != "Dockerfile" && p != ".ci/run" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if p != "docs_test.go" { // its own examples name what does not exist
			r.envText.Write(b)
		}
		if strings.HasSuffix(p, "_test.go") {
			dir := filepath.ToSlash(filepath.Dir(p))
			if r.funcs[dir] == nil {
				r.funcs[dir] = map[string]bool{}
			}
			for _, m := range testFunc.FindAllSubmatch(b, -1) {
				r.funcs[dir][string(m[1])] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	fence       = regexp.MustCompile("(?ms)^[ \t]*```.*?^[ \t]*```[ \t]*$")
	codeSpan    = regexp.MustCompile("`([^`]+)`")
	mdLink      = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	htmlSrc     = regexp.MustCompile(`\b(?:src|href)="([^"]+)"`)
	envVar      = regexp.MustCompile(`\bFLASHSALE_[A-Z0-9_]*[A-Z0-9]\b`)
	pathToken   = regexp.MustCompile(`^[A-Za-z0-9_.\-/]+$`)
	testName    = regexp.MustCompile(`(?:^|[^\w/.])(?:([a-z][\w/]*)\.)?((?:Test|Benchmark|Fuzz)[A-Z0-9_]\w*)`)
	goCommand   = regexp.MustCompile(`\bgo (?:test|run|build|vet|generate)\b`)
	fileExts    = []string{".go", ".md", ".yaml", ".yml", ".json", ".mjs", ".js", ".css", ".html", ".sql", ".golden", ".lua", ".sh", ".service", ".png", ".mod", ".sum"}
	headingLine = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)
)

// checkDoc returns what doc (a path from the repository's root) cites that
// does not exist, each as "citation: problem".
func checkDoc(r *repoIndex, doc, text string) []string {
	var problems []string
	add := func(format string, a ...string) {
		s := format
		for _, x := range a {
			s = strings.Replace(s, "%s", x, 1)
		}
		problems = append(problems, s)
	}
	// Commands in fenced blocks: the packages and patterns of go commands.
	for _, block := range fence.FindAllString(text, -1) {
		for line := range strings.SplitSeq(block, "\n") {
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			if goCommand.MatchString(line) {
				for _, p := range checkGoCommand(r, line) {
					add("%s: %s", strings.TrimSpace(line), p)
				}
			}
		}
	}
	prose := fence.ReplaceAllString(text, "")
	for _, m := range codeSpan.FindAllStringSubmatch(prose, -1) {
		// A span may break across lines; in a table, \| is a |.
		span := strings.ReplaceAll(strings.Join(strings.Fields(m[1]), " "), `\|`, "|")
		cite := "`" + span + "`"
		if goCommand.MatchString(span) {
			for _, p := range checkGoCommand(r, span) {
				add("%s: %s", cite, p)
			}
		} else {
			for _, tm := range testName.FindAllStringSubmatch(span, -1) {
				pkg, name := tm[1], tm[2]
				if pkg == "" {
					if !r.hasFunc("", name) {
						add("%s: no func %s in the repository", cite, name)
					}
					continue
				}
				dir := r.packageDir(pkg)
				if dir == "" {
					add("%s: no package %s", cite, pkg)
				} else if !r.hasFunc(dir, name) {
					add("%s: no func %s in %s/", cite, name, dir)
				}
			}
		}
		for _, tok := range strings.Fields(span) {
			if p := r.checkPath(tok, tok == span); p != "" {
				add("%s: %s", cite, p)
			}
		}
	}
	for _, v := range envVar.FindAllString(text, -1) {
		// A secret setting's _FILE twin is made from its name
		// (cmd/flashsale/settings.go, withFiles).
		base, twin := strings.CutSuffix(v, "_FILE")
		if twin && strings.Contains(r.envText.String(), base) {
			continue
		}
		if !strings.Contains(r.envText.String(), v) {
			add("%s: named by no Go file, script or deployment file", "`"+v+"`")
		}
	}
	var links []string
	for _, m := range mdLink.FindAllStringSubmatch(prose, -1) {
		links = append(links, m[1])
	}
	for _, m := range htmlSrc.FindAllStringSubmatch(prose, -1) {
		links = append(links, m[1])
	}
	for _, l := range links {
		if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
			continue
		}
		target, anchor, _ := strings.Cut(l, "#")
		file := doc
		if target != "" {
			file = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(doc), target)))
			if !r.paths[file] {
				add("link %s: no such file", l)
				continue
			}
		}
		if anchor != "" && strings.HasSuffix(file, ".md") {
			b, err := os.ReadFile(file)
			if file == doc {
				b, err = []byte(text), nil
			}
			if err != nil || !slices.Contains(headingAnchors(string(b)), anchor) {
				add("link %s: %s has no heading #%s", l, file, anchor)
			}
		}
	}
	return problems
}

// checkPath says what is wrong with a token that names a file or directory
// of the repository, and "" when it exists or names something else (a Go
// import path, an API route, a symbol, a path outside the repository). A
// word of a longer span (a command) is a path only when it names a file by
// its extension or ends with a slash: `kubectl exec deploy/flashsale` names
// a Kubernetes object, not the directory deploy/.
func (r *repoIndex) checkPath(tok string, whole bool) string {
	tok = strings.TrimRight(tok, ".,;:")
	if !pathToken.MatchString(tok) || strings.HasPrefix(tok, "/") || strings.HasPrefix(tok, "../") || strings.HasPrefix(tok, "-") {
		return ""
	}
	tok = strings.TrimPrefix(tok, "./")
	clean := strings.TrimSuffix(tok, "/")
	if clean == "" || clean == "." || clean == "..." || strings.HasSuffix(clean, "/...") {
		return ""
	}
	if !whole && filepath.Ext(clean) == "" && !strings.HasSuffix(tok, "/") {
		return ""
	}
	last := clean[strings.LastIndex(clean, "/")+1:]
	known := false
	if ext := filepath.Ext(last); ext != "" {
		known = slices.Contains(fileExts, ext)
		if !known {
			return "" // pkg.Symbol, order.*, a host name
		}
	}
	if !strings.Contains(clean, "/") {
		if known && !r.basenames[clean] {
			return "no file of that name in the repository"
		}
		return ""
	}
	first, _, _ := strings.Cut(clean, "/")
	if !known && !r.paths[first] {
		return "" // an import path: encoding/json/v2, net/http/pprof
	}
	if strings.Contains(first, ".") && !r.paths[first] && first != ".ci" {
		return "" // github.com/..., golang.org/x/...
	}
	if !r.paths[clean] {
		return "no such file or directory"
	}
	return ""
}

// packageDir finds the directory of a package named in a citation:
// "cmd/flashsale", "funnel", "metrics", or "flashsale" for the root.
func (r *repoIndex) packageDir(pkg string) string {
	if r.paths[pkg] {
		return pkg
	}
	if pkg == "flashsale" {
		return "."
	}
	return ""
}

func (r *repoIndex) hasFunc(dir, name string) bool {
	if dir != "" {
		return r.funcs[dir][name]
	}
	for _, names := range r.funcs {
		if names[name] {
			return true
		}
	}
	return false
}

// checkGoCommand checks a go command's packages, and that its -run, -bench
// and -fuzz patterns match at least one func in them.
func checkGoCommand(r *repoIndex, line string) []string {
	line = line[goCommand.FindStringIndex(line)[0]:]
	for _, sep := range []string{" && ", " || ", " | ", "; "} {
		line, _, _ = strings.Cut(line, sep) // the next command is not this one's
	}
	args := shellFields(line)
	var problems []string
	var pkgs []string
	patterns := map[string]string{}
	for i := 2; i < len(args); i++ {
		a := args[i]
		switch {
		case (a == "-run" || a == "-bench" || a == "-fuzz") && i+1 < len(args):
			patterns[a] = args[i+1]
			i++
		case strings.HasPrefix(a, "-run=") || strings.HasPrefix(a, "-bench=") || strings.HasPrefix(a, "-fuzz="):
			k, v, _ := strings.Cut(a, "=")
			patterns[k] = v
		case strings.HasPrefix(a, "./") || a == ".":
			pkgs = append(pkgs, a)
		}
	}
	var dirs []string
	for _, p := range pkgs {
		if strings.HasSuffix(p, "/...") {
			dirs = nil // the whole repository (or a subtree: good enough)
			break
		}
		d := strings.TrimSuffix(strings.TrimPrefix(p, "./"), "/")
		if d == "" {
			d = "."
		}
		if d != "." && !r.paths[d] {
			problems = append(problems, "no package "+p)
			return problems
		}
		dirs = append(dirs, d)
	}
	where := "the repository"
	if len(pkgs) > 0 && dirs != nil {
		where = strings.Join(pkgs, " ")
	}
	for flag, kinds := range map[string][]string{"-run": {"Test", "Fuzz"}, "-bench": {"Benchmark"}, "-fuzz": {"Fuzz"}} {
		pat, ok := patterns[flag]
		if !ok || pat == "^$" || pat == "." {
			continue
		}
		top := splitPattern(pat)[0]
		re, err := regexp.Compile(top)
		if err != nil {
			problems = append(problems, flag+" "+pat+": "+err.Error())
			continue
		}
		if !r.anyFunc(dirs, kinds, re) {
			kind := "test"
			if flag == "-bench" {
				kind = "benchmark"
			} else if flag == "-fuzz" {
				kind = "fuzz target"
			}
			problems = append(problems, flag+" "+pat+" matches no "+kind+" in "+where)
		}
	}
	return problems
}

func (r *repoIndex) anyFunc(dirs, kinds []string, re *regexp.Regexp) bool {
	for dir, names := range r.funcs {
		if dirs != nil && !slices.Contains(dirs, dir) {
			continue
		}
		for name := range names {
			for _, k := range kinds {
				if strings.HasPrefix(name, k) && re.MatchString(name) {
					return true
				}
			}
		}
	}
	return false
}

// splitPattern splits a -run or -bench pattern at its top-level slashes,
// as go test does: the first element names the top-level func.
func splitPattern(pat string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range pat {
		switch c {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case '/':
			if depth == 0 {
				out = append(out, pat[start:i])
				start = i + 1
			}
		}
	}
	return append(out, pat[start:])
}

// shellFields splits a command line into words, honouring single and
// double quotes (no escapes, no expansion: enough for the docs' commands).
func shellFields(line string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, c := range line {
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// headingAnchors are the anchors GitHub gives a document's headings: lower
// case, punctuation dropped, spaces as dashes, repeats numbered.
func headingAnchors(text string) []string {
	var out []string
	seen := map[string]int{}
	for _, m := range headingLine.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		var b strings.Builder
		for _, c := range strings.ToLower(m[1]) {
			switch {
			case c == ' ':
				b.WriteRune('-')
			case c == '-' || c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c):
				b.WriteRune(c)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}

package helm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template/parse"

	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// helm4OnlyFuncs are the template functions Helm 4's engine has and Helm
// 3's does not (the difference of the two engines' function maps, Helm
// v3.22.0 against v4.3.2). A chart that calls one renders under Helm 4 and
// fails under Helm 3 with "function not defined".
var helm4OnlyFuncs = map[string]bool{
	"mustToToml": true, "mustToYaml": true, "mustToJson": true,
	"mustToDuration": true, "durationSeconds": true, "durationMilliseconds": true,
	"durationMicroseconds": true, "durationNanoseconds": true, "durationMinutes": true,
	"durationHours": true, "durationDays": true, "durationWeeks": true,
	"durationRoundTo": true, "durationTruncateTo": true,
}

// TestHelm3Compatible: the chart is tested with Helm 4's packages, and
// Helm 3 users install it too. It stays an apiVersion v2 chart (the only
// kind Helm 3 reads), and no template calls a function that only Helm 4's
// engine defines. TestLint runs the v2 chart linter, whose rules Helm 3
// shares.
func TestHelm3Compatible(t *testing.T) {
	c := loadChart(t)
	if c.Metadata.APIVersion != chart.APIVersionV2 {
		t.Errorf("Chart.yaml apiVersion %q, want %q (Helm 3 reads v1 and v2 charts only)", c.Metadata.APIVersion, chart.APIVersionV2)
	}
	files, err := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var checked int
	for _, f := range files {
		if !strings.HasSuffix(f, ".yaml") && !strings.HasSuffix(f, ".tpl") && !strings.HasSuffix(f, ".txt") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		used, err := templateFuncs(f, string(src))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for name := range used {
			if helm4OnlyFuncs[name] {
				t.Errorf("%s calls %s, which Helm 3 does not define", f, name)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("no templates found under %s", chartDir)
	}
}

// templateFuncs returns the names of the functions a template calls.
func templateFuncs(name, src string) (map[string]bool, error) {
	tr := parse.New(name)
	tr.Mode = parse.SkipFuncCheck | parse.ParseComments
	treeSet := map[string]*parse.Tree{}
	if _, err := tr.Parse(src, "", "", treeSet); err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, t := range treeSet {
		walkFuncs(t.Root, used)
	}
	return used, nil
}

func walkFuncs(n parse.Node, used map[string]bool) {
	switch n := n.(type) {
	case nil:
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walkFuncs(c, used)
		}
	case *parse.ActionNode:
		walkFuncs(n.Pipe, used)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walkFuncs(c, used)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walkFuncs(a, used)
		}
	case *parse.IdentifierNode:
		used[n.Ident] = true
	case *parse.ChainNode:
		walkFuncs(n.Node, used)
	case *parse.IfNode:
		walkBranch(&n.BranchNode, used)
	case *parse.RangeNode:
		walkBranch(&n.BranchNode, used)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, used)
	case *parse.TemplateNode:
		walkFuncs(n.Pipe, used)
	}
}

func walkBranch(b *parse.BranchNode, used map[string]bool) {
	walkFuncs(b.Pipe, used)
	walkFuncs(b.List, used)
	walkFuncs(b.ElseList, used)
}

// TestTemplateFuncsFindsCalls: the walk above sees a function wherever a
// template can call one, so that TestHelm3Compatible cannot pass by not
// looking.
func TestTemplateFuncsFindsCalls(t *testing.T) {
	src := `{{ define "x" }}{{ a . }}{{ end }}{{ if b }}{{ range c }}{{ with d }}{{ e | f }}{{ else }}{{ (g) }}{{ end }}{{ end }}{{ end }}{{ template "x" (h .) }}{{ $v := mustToYaml . }}`
	used, err := templateFuncs("t", src)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "mustToYaml"} {
		if !used[want] {
			t.Errorf("%s not found; found %v", want, used)
		}
	}
}

// Command flakestream-chart lints and renders the flakestream Helm chart
// with helm's own Go packages, for `make helm` on a machine without the
// helm binary:
//
//	flakestream-chart lint [-f values.yaml]... [--set k=v]... [CHART]
//	flakestream-chart template [-f values.yaml]... [--set k=v]... [CHART]
//
// template prints what `helm template` prints (in strict mode); lint
// fails on any warning. CHART defaults to deploy/helm/flakestream.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/flakestream/flakestream/deploy/helm"
	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/strvals"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "flakestream-chart:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "lint" && args[0] != "template") {
		return fmt.Errorf("usage: flakestream-chart lint|template [-f values.yaml]... [--set k=v]... [CHART]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var files, sets list
	fs.Var(&files, "f", "a values file (repeatable; later ones win)")
	fs.Var(&sets, "set", "a value, key=value as helm's --set (repeatable)")
	name := fs.String("name", "flakestream", "the release name")
	ns := fs.String("namespace", "default", "the release namespace")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	dir := "deploy/helm/flakestream"
	if fs.NArg() > 0 {
		dir = fs.Arg(0)
	}
	values := map[string]any{}
	for _, f := range files {
		v, err := common.ReadValuesFile(f)
		if err != nil {
			return err
		}
		values = chartutil.CoalesceTables(v, values)
	}
	for _, s := range sets {
		if err := strvals.ParseInto(s, values); err != nil {
			return fmt.Errorf("--set %s: %w", s, err)
		}
	}
	if args[0] == "lint" {
		msgs := helm.Lint(dir, values, *ns)
		for _, m := range msgs {
			fmt.Fprintln(os.Stderr, m)
		}
		if len(msgs) > 0 {
			return fmt.Errorf("lint: %d warnings or errors", len(msgs))
		}
		fmt.Println("lint: ok:", dir)
		return nil
	}
	c, err := loader.LoadDir(dir)
	if err != nil {
		return err
	}
	out, err := helm.Render(c, values, helm.Release{Name: *name, Namespace: *ns})
	if err != nil {
		return err
	}
	fmt.Print(helm.Manifest(out))
	return nil
}

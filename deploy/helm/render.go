package helm

import (
	"context"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

// Release is the release a render is for.
type Release struct {
	Name, Namespace string
}

// Render renders chart c with values as `helm template` does, in strict
// mode (a template that reads a value values.yaml does not have fails),
// and returns the manifests by template name.
func Render(c *chart.Chart, values map[string]any, rel Release) (map[string]string, error) {
	vals, err := chartutil.ToRenderValues(c, values, common.ReleaseOptions{
		Name: rel.Name, Namespace: rel.Namespace, Revision: 1, IsInstall: true,
	}, common.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Engine{Strict: true}.RenderWithContext(context.Background(), c, vals)
}

// Document is one YAML document of a rendered template.
type Document struct {
	Source string // the template's name
	Key    string // releaseutil's key of the document within it
	Body   string
}

// Documents splits rendered templates into their YAML documents, in the
// order `helm template` prints them. NOTES.txt and empty templates are
// left out.
func Documents(out map[string]string) []Document {
	names := make([]string, 0, len(out))
	for name := range out {
		if strings.HasSuffix(name, ".yaml") && strings.TrimSpace(out[name]) != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var all []Document
	for _, name := range names {
		docs := releaseutil.SplitManifests(out[name])
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			all = append(all, Document{Source: name, Key: k, Body: docs[k]})
		}
	}
	return all
}

// Manifest joins rendered templates into one stream of YAML documents,
// in the order `helm template` prints them, each headed by its source.
// NOTES.txt and empty templates are left out.
func Manifest(out map[string]string) string {
	var b strings.Builder
	for _, d := range Documents(out) {
		b.WriteString("---\n# Source: " + d.Source + "\n" + strings.TrimSpace(d.Body) + "\n")
	}
	return b.String()
}

// Lint runs `helm lint`'s rules on the chart in dir with values and
// returns the messages of severity warning and above.
func Lint(dir string, values map[string]any, namespace string) []support.Message {
	var bad []support.Message
	for _, m := range lint.RunAll(dir, values, namespace).Messages {
		if m.Severity >= support.WarningSev {
			bad = append(bad, m)
		}
	}
	return bad
}

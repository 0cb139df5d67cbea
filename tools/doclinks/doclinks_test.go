package doclinks

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// TestRepositoryLinks checks the project's own Markdown: README.md,
// CHANGELOG.md, CONTRIBUTING.md, every page of docs/ and every record of
// bench/results/.
func TestRepositoryLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	files := []string{"README.md", "CHANGELOG.md", "CONTRIBUTING.md"}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md: the test is not looking at the repository")
	}
	for _, p := range pages {
		files = append(files, "docs/"+filepath.Base(p))
	}
	records, err := filepath.Glob(filepath.Join(root, "bench", "results", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(records) == 0 {
		t.Fatal("no bench/results/*.md: the test is not looking at the repository")
	}
	for _, r := range records {
		files = append(files, "bench/results/"+filepath.Base(r))
	}
	broken, err := Check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
	// The README links every page of docs/: a page nobody links is lost.
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if name := "docs/" + filepath.Base(p); !strings.Contains(string(readme), "]("+name) {
			t.Errorf("README.md does not link %s: add it to the Documentation table", name)
		}
	}
}

// TestCheckFindsBrokenLinks runs Check on a tree made for it, where every
// kind of broken link is present once, beside links that resolve and links
// that must not be read (code, absolute URLs).
func TestCheckFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/b.md", "# B page\n\n## A heading: `with code`\n\n## A heading: `with code`\n\n```sh\n# not a heading\n```\n")
	write("main.go", "package main\n")
	write("README.md", strings.Join([]string{
		"# Readme",
		"[ok](docs/b.md) [ok anchor](docs/b.md#a-heading-with-code) [ok duplicate](docs/b.md#a-heading-with-code-1)",
		"[ok here](#readme) ![ok image](docs/b.md) [ok dir](docs/) [ok web](https://example.com/x.md#y) [ok line](main.go#L1)",
		"[missing file](docs/nope.md)",
		"[missing anchor](docs/b.md#nope)",
		"[missing here](#nowhere)",
		"[third duplicate](docs/b.md#a-heading-with-code-2)",
		"[not a heading](docs/b.md#not-a-heading)",
		"`[in a code span](nope.md)` and ``[in a double span](nope.md)``",
		"```",
		"[in a fence](nope.md)",
		"```",
		"",
		"    [in an indented block](nope.md)",
		"",
		"[outside](../elsewhere.md)",
		"[ref]: docs/missing-ref.md",
	}, "\n"))
	write("docs/c.md", "[up](../README.md#readme) [up missing](../README.md#gone) [anchor on go](../main.go#main)\n")

	broken, err := Check(dir, []string{"README.md", "docs/c.md"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range broken {
		got = append(got, b.File+" "+b.Target)
	}
	want := []string{
		"README.md docs/nope.md",
		"README.md docs/b.md#nope",
		"README.md #nowhere",
		"README.md docs/b.md#a-heading-with-code-2",
		"README.md docs/b.md#not-a-heading",
		"README.md ../elsewhere.md",
		"README.md docs/missing-ref.md",
		"docs/c.md ../README.md#gone",
		"docs/c.md ../main.go#main",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("broken links:\n got %q\nwant %q", got, want)
	}
	if len(broken) > 0 && broken[0].Line != 4 {
		t.Errorf("first broken link on line %d, want 4", broken[0].Line)
	}
	if _, err := Check(dir, []string{"absent.md"}); err == nil {
		t.Error("Check of a file that does not exist: no error")
	}
}

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Runbook: FlakestreamDuplicateNumber", "runbook-flakestreamduplicatenumber"},
		{"A live demo: `flakestream demo --serve`", "a-live-demo-flakestream-demo---serve"},
		{"Go benchmarks (`make bench`)", "go-benchmarks-make-bench"},
		{"The orphaned-transaction guard (`internal/txnguard`)", "the-orphaned-transaction-guard-internaltxnguard"},
		{"Docker: `docker-compose.yml`", "docker-docker-composeyml"},
		{"The fault table (CI run of 42f5554, 2026-12-01)", "the-fault-table-ci-run-of-42f5554-2026-12-01"},
		{"snake_case & *emphasis* — dash", "snake_case--emphasis--dash"},
		{"A [linked](https://example.com) heading", "a-linked-heading"},
		{"Zahlen für Aufträge", "zahlen-für-aufträge"},
	} {
		if got := Slug(c.heading); got != c.want {
			t.Errorf("Slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

func TestAnchors(t *testing.T) {
	got := Anchors("# Tests\n## Tests ##\n### Tests\n<a name=\"Custom\"></a>\n    # indented code\n~~~\n# fenced\n~~~\n")
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if want := []string{"custom", "tests", "tests-1", "tests-2"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("anchors %q, want %q", keys, want)
	}
}

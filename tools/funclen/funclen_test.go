package funclen

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// MaxLines is the longest a non-test function of this module may be.
const MaxLines = 80

// TestLongestFunction fails when a non-test function of the module is longer
// than MaxLines, and logs the ten longest (`make funclen` shows them).
func TestLongestFunction(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	funcs, err := Measure(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(funcs) < 100 {
		t.Fatalf("measured only %d functions below %s; the walk is broken", len(funcs), root)
	}
	for i, f := range funcs[:min(10, len(funcs))] {
		t.Logf("%2d. %4d lines  %s:%d %s", i+1, f.Lines, f.File, f.Start, f.Name)
	}
	for _, f := range funcs {
		if f.Lines > MaxLines {
			t.Errorf("%s:%d %s is %d lines, over %d: split it by responsibility", f.File, f.Start, f.Name, f.Lines, MaxLines)
		}
	}
}

// TestMeasureCountsDeclLines checks the measure itself on a known file, so a
// broken count cannot make TestLongestFunction pass.
func TestMeasureCountsDeclLines(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\nfunc a() {\n\tx := 1\n\t_ = x\n}\n\ntype T struct{}\n\nfunc (t *T) b() {}\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nfunc long() {\n\n\n\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	funcs, err := Measure(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(funcs)
	want := "[{p.go a 3 4} {p.go T.b 10 1}]"
	if got != want {
		t.Fatalf("Measure = %s, want %s", got, want)
	}
}

package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The shipped binary links no package of the test kit (test/...): what the
// product reconciles with is the product's own code, which the tests use,
// not the other way round.
func TestBinaryLinksNoTestKit(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps .: %v", err)
	}
	const kit = "github.com/flakestream/flakestream/test/"
	var linked []string
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, kit) {
			linked = append(linked, pkg)
		}
	}
	if len(linked) > 0 {
		t.Fatalf("the binary links the test kit: %v", linked)
	}
}

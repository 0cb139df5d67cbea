package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The built binary's --version names the franz-go version go.mod requires,
// read from the module information Go stamps into it.
func TestVersionOfTheBinary(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/twmb/franz-go (v\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod requires no github.com/twmb/franz-go")
	}
	out, err := exec.Command(binary(t), "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	for _, want := range []string{"flakestream v", "\ncommit:   ", "\ngo:       go", "\nfranz-go: " + string(m[1]) + "\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--version lacks %q:\n%s", want, out)
		}
	}
}

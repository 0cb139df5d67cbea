package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestExact(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "faults.jsonl")
	lines := `{"fault":"f","records":10,"lost":0,"duplicated":0,"ok":true}
{"fault":"f","records":10,"lost":0,"duplicated":3,"ok":false}
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := readResults(path)
	if err != nil || len(res) != 2 {
		t.Fatalf("readResults: %d results, %v", len(res), err)
	}
	if res[1].Duplicated != 3 || string(res[0].raw()) != `{"fault":"f","records":10,"lost":0,"duplicated":0,"ok":true}` {
		t.Fatalf("parsed %+v", res)
	}
	for _, c := range []struct {
		name string
		res  []rawResult
		err  error
		want bool
	}{
		{"one exact result", res[:1], nil, true},
		{"a duplicate", res, nil, false},
		{"no result", nil, nil, false},
		{"test failed", res[:1], errors.New("exit status 1"), false},
		{"lost but ok (inconsistent)", []rawResult{{result: result{Lost: 1, OK: true}}}, nil, false},
	} {
		if got := exact(c.res, c.err); got != c.want {
			t.Errorf("%s: exact = %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := readResults(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

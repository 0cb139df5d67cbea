package cli

import (
	"strings"
	"testing"
)

// --lanes is auto (0) or a count of at least 1; anything else is a usage
// error that names the flag and the value.
func TestParseLanes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		bad  bool
	}{
		{"auto", 0, false},
		{"1", 1, false},
		{"4", 4, false},
		{"0", 0, true},
		{"-2", 0, true},
		{"two", 0, true},
		{"", 0, true},
		{"Auto", 0, true},
	} {
		n, err := parseLanes(tc.in)
		switch {
		case tc.bad && (err == nil || !strings.Contains(err.Error(), "--lanes") || !strings.Contains(err.Error(), "want auto or a number")):
			t.Errorf("--lanes %q: %d, %v; want a usage error naming --lanes", tc.in, n, err)
		case !tc.bad && (err != nil || n != tc.want):
			t.Errorf("--lanes %q: %d, %v; want %d", tc.in, n, err, tc.want)
		}
	}
}

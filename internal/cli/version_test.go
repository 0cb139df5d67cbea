package cli

import (
	"runtime"
	"strings"
	"testing"
)

// --version answers with the release, the commit and the Go and franz-go
// versions, and the -X override is the commit it shows. (A test binary
// carries no module versions; TestVersionOfTheBinary checks franz-go's on
// the built binary.)
func TestVersion(t *testing.T) {
	defer func(c string) { commit = c }(commit)
	commit = "0123456789abcdef"
	out, errOut, code := runApp(t, "", nil, "--version")
	if code != 0 {
		t.Fatalf("--version: exit %d: %s", code, errOut)
	}
	_, franz := buildInfo()
	for _, want := range []string{"flakestream " + Version + "\n", "commit:   0123456789abcdef\n", "go:       " + runtime.Version() + "\n", "franz-go: " + franz + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("--version lacks %q:\n%s", want, out)
		}
	}
}

// A mistyped command or flag is a usage error that names the nearest one.
func TestDidYouMean(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"replya"}, "flakestream: 'replya' is not a flakestream command. Did you mean 'replay'? (see --help)\n"},
		{[]string{"verfy", "--from", "0:1"}, "flakestream: 'verfy' is not a flakestream command. Did you mean 'verify'? (see --help)\n"},
		{[]string{"zzzzzzzz"}, "flakestream: 'zzzzzzzz' is not a flakestream command. (see --help)\n"},
		{[]string{"replay", "--frm", "0:1"}, "flakestream: flag provided but not defined: -frm (see --help) Did you mean '--from'?\n"},
		{[]string{"run", "--max-poll-record", "5"}, "flakestream: flag provided but not defined: -max-poll-record (see --help) Did you mean '--max-poll-records'?\n"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, errOut, code := runApp(t, "", nil, c.args...)
			if code != 2 || errOut != c.want {
				t.Fatalf("exit %d, stderr %q; want 2, %q", code, errOut, c.want)
			}
		})
	}
}

func TestNearest(t *testing.T) {
	names := []string{"max-poll-records", "max-record-bytes", "from", "to", "brokers"}
	cases := map[string]string{
		"max-poll-record":  "max-poll-records",
		"max-pol-records":  "max-poll-records",
		"max-record-byte":  "max-record-bytes",
		"brokres":          "brokers",
		"fro":              "from",
		"completely-other": "",
	}
	for in, want := range cases {
		if got := nearest(in, names); got != want {
			t.Errorf("nearest(%q) = %q, want %q", in, got, want)
		}
	}
}

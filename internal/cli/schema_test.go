package cli

import (
	"strings"
	"testing"
)

// A bad --value-format, a missing --schema-registry, a bad registry URL and
// a bad --subject-name-strategy are each one line and exit 2, on every
// command that takes them, before anything connects.
func TestValueFormatUserErrors(t *testing.T) {
	common := map[string][]string{
		"run":    {"run", "--input-topic", "in", "--output-topic", "out", "--server-id", "1", "--worker-id", "1", "--sequencer", "memory", "--log-level", "error"},
		"replay": {"replay", "--input-topic", "in", "--output-topic", "out", "--server-id", "1", "--worker-id", "1", "--sequencer", "memory", "--log-level", "error", "--brokers", "127.0.0.1:1"},
		"audit":  {"audit", "--input-topic", "in"},
		"bench":  {"bench"},
		"demo":   {"demo"},
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--value-format", "xml"}, `--value-format "xml": want json, avro or protobuf`},
		{[]string{"--value-format", "avro"}, "--schema-registry URL is required for --value-format avro"},
		{[]string{"--value-format", "protobuf", "--schema-registry", "ftp://x"}, `registry URL "ftp://x"`},
		{[]string{"--value-format", "avro", "--schema-registry", "http://127.0.0.1:1", "--subject-name-strategy", "nope"}, `--subject-name-strategy "nope"`},
	}
	for name, base := range common {
		for _, c := range cases {
			if name == "bench" || name == "demo" {
				if c.want == cases[1].want {
					continue // they start an embedded registry instead
				}
			}
			args := append(append([]string{}, base...), c.args...)
			_, stderr, code := runApp(t, "", nil, args...)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("%v: exit %d, stderr %q: want exit 2 and one line with %q", args, code, stderr, c.want)
			}
		}
	}
}

// The demo with Avro and Protobuf on the in-process registry: every order
// accounted for exactly once, as verify counts with the Format, and every
// registry dead-letter class present.
func TestDemoValueFormats(t *testing.T) {
	for _, vf := range []string{"avro", "protobuf"} {
		t.Run(vf, func(t *testing.T) {
			out, stderr, code := runApp(t, "", nil, "demo", "--orders", "3000", "--value-format", vf, "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, want := range []string{`"in":3000`, `"numbered":2997`, `"dlq":3`, `"duplicates":0`, `"lost":0`, `"audited":2997`} {
				if !strings.Contains(out, want) {
					t.Errorf("demo --json = %s, want %s", out, want)
				}
			}
		})
	}
}

// The text summary shows Avro and Protobuf samples as quoted bytes, once:
// a sample that is not JSON must not be quoted again and again (it once
// grew without end and took all the memory).
func TestDemoValueFormatsText(t *testing.T) {
	for _, vf := range []string{"avro", "protobuf"} {
		t.Run(vf, func(t *testing.T) {
			out, stderr, code := runApp(t, "", nil, "demo", "--orders", "2000", "--value-format", vf)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			i := strings.Index(out, "some numbered orders, decoded")
			if i < 0 {
				t.Fatalf("no samples in %q", out)
			}
			lines := strings.Split(out[i:], "\n")
			if len(lines) < 3 || !strings.HasPrefix(strings.TrimSpace(lines[1]), `"`) || strings.HasPrefix(strings.TrimSpace(lines[1]), `"\"`) {
				t.Fatalf("sample line %q: want the value quoted once", lines[1])
			}
			if len(lines[1]) > 200 {
				t.Fatalf("sample line is %d bytes, want it trimmed", len(lines[1]))
			}
		})
	}
}

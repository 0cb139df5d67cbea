package cli

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/flakestream/flakestream/eos"
)

// TestLogLevelTrace: --log-level trace enables eos.LevelTrace, prints it as
// TRACE in both formats, and leaves the other names to slog.
func TestLogLevelTrace(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		o := &opsConfig{logLevel: "trace", logFormat: format}
		log, err := o.logger(&buf)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		log.Log(context.Background(), eos.LevelTrace, "a franz-go debug line")
		want := `level=TRACE`
		if format == "json" {
			want = `"level":"TRACE"`
		}
		if !strings.Contains(buf.String(), want) {
			t.Errorf("%s: logged %q, want %s", format, buf.String(), want)
		}
	}
	for name, want := range map[string]slog.Level{"TRACE": eos.LevelTrace, "debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError} {
		got, err := parseLogLevel(name)
		if err != nil || got != want {
			t.Errorf("parseLogLevel(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	var buf bytes.Buffer
	log, err := (&opsConfig{logLevel: "debug", logFormat: "text"}).logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if log.Enabled(context.Background(), eos.LevelTrace) {
		t.Error("--log-level debug enables trace")
	}
}

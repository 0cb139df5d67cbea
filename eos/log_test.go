package eos

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKgoLoggerLevels: franz-go is asked for what the slog level shows one
// level down, and its lines arrive at the matching slog level, its debug
// lines only at LevelTrace.
func TestKgoLoggerLevels(t *testing.T) {
	for _, tc := range []struct {
		slog slog.Level
		kgo  kgo.LogLevel
	}{
		{LevelTrace, kgo.LogLevelDebug},
		{slog.LevelDebug, kgo.LogLevelInfo},
		{slog.LevelInfo, kgo.LogLevelWarn},
		{slog.LevelWarn, kgo.LogLevelWarn},
	} {
		var buf bytes.Buffer
		k := KgoLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.slog}))}
		if got := k.Level(); got != tc.kgo {
			t.Errorf("slog level %v: franz-go level %v, want %v", tc.slog, got, tc.kgo)
		}
	}

	var buf bytes.Buffer
	k := KgoLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: LevelTrace}))}
	k.Log(kgo.LogLevelDebug, "produced", "to", "out[0{retrying@5,3(CONCURRENT_TRANSACTIONS)}]")
	k.Log(kgo.LogLevelInfo, "beginning transaction")
	k.Log(kgo.LogLevelWarn, "unable to open connection")
	k.Log(kgo.LogLevelError, "fatal")
	want := []string{
		`level=DEBUG-4 msg="kafka: produced" to=out[0{retrying@5,3(CONCURRENT_TRANSACTIONS)}]`,
		`level=DEBUG msg="kafka: beginning transaction"`,
		`level=WARN msg="kafka: unable to open connection"`,
		`level=ERROR msg="kafka: fatal"`,
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want it to contain %q", i, lines[i], w)
		}
	}
}

package eos

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// LevelTrace is below slog's debug: the level at which KgoLogger passes on
// franz-go's own debug lines (each produce's outcome per partition, with
// its error code; each request written and read). It is for finding out
// what a stall waited for, not for running: it writes a line per request.
const LevelTrace = slog.LevelDebug - 4

// KgoLogger sends franz-go's logs to slog, one level down: the client is
// chatty at info about routine group and transaction work. Its info lines
// are logged at debug, its debug lines at LevelTrace.
type KgoLogger struct{ L *slog.Logger }

// Level implements kgo.Logger.
func (k KgoLogger) Level() kgo.LogLevel {
	switch ctx := context.Background(); {
	case k.L.Enabled(ctx, LevelTrace):
		return kgo.LogLevelDebug
	case k.L.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

// Log implements kgo.Logger.
func (k KgoLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	lv := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		lv = slog.LevelError
	case kgo.LogLevelWarn:
		lv = slog.LevelWarn
	case kgo.LogLevelDebug:
		lv = LevelTrace
	}
	k.L.Log(context.Background(), lv, "kafka: "+msg, kv...)
}

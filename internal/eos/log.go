package eos

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// KgoLogger sends franz-go's logs to slog, one level down: the client is
// chatty at info about routine group and transaction work.
type KgoLogger struct{ L *slog.Logger }

// Level implements kgo.Logger.
func (k KgoLogger) Level() kgo.LogLevel {
	if k.L.Enabled(context.Background(), slog.LevelDebug) {
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
	}
	k.L.Log(context.Background(), lv, "kafka: "+msg, kv...)
}

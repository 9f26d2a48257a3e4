package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/telemetry"
)

// logFlags are a long-running command's --log-format and --log-level.
type logFlags struct{ format, level string }

func (l *logFlags) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&l.format, "log-format", "text", "log line format: text or json (lines logged within a traced request carry trace_id and span_id)")
	cmd.Flags().StringVar(&l.level, "log-level", "info", "least severe level logged: debug, info, warn or error")
}

// shutdownTracing flushes the spans not exported yet, for at most 5 s.
func shutdownTracing(t *telemetry.Tracing, lg *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		lg.Warn("flushing traces", "err", err)
	}
}

package cli

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// JSON logs carry durations as text ("1s"), not integer nanoseconds
// (SPEC 17: the agent's retryIn was 1000000000).
func TestJSONLogDurationsAreText(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: durationsAsText})).Info("retrying", "retryIn", time.Second)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not a JSON line: %q", buf.String())
	}
	if line["retryIn"] != "1s" {
		t.Fatalf("retryIn = %#v, want \"1s\"", line["retryIn"])
	}
}

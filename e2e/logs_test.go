package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"stratum/internal/stratumtest"
)

// With --log-format json every line the founder writes is JSON, the start
// banner included (SPEC 17), so a log shipper reads one format.
func TestJSONLogsEveryLine(t *testing.T) {
	t.Parallel()
	f := stratumtest.StartFounder(t, stratumtest.FounderOptions{Dev: true, Args: []string{"--log-format", "json"}})
	// A refused login and a stop make the founder log more than its start.
	if code, _, err := f.AdminClient().Raw("POST", "/v1/auth/login", map[string]string{"email": "nobody@example.com", "password": "wrong"}); err != nil || code != 401 {
		t.Fatalf("a wrong login answered %d, %v", code, err)
	}
	if code, _ := f.Stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("the founder exited %d on SIGTERM", code)
	}
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(f.Output()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("a line is not JSON: %q", line)
			continue
		}
		if _, ok := v["msg"]; !ok {
			t.Errorf("a line has no msg: %q", line)
		}
		lines++
	}
	if lines < 3 {
		t.Fatalf("only %d lines written:\n%s", lines, f.Output())
	}
	if !strings.Contains(f.Stdout(), `"caPin":"sha256:`) {
		t.Errorf("the JSON banner does not carry the CA pin:\n%s", f.Stdout())
	}
}

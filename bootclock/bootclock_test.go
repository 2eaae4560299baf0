package bootclock

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	c := New()
	if s := c.Snapshot(); s.State() != "starting" || s.Phase != "init" || s.BootMs != 0 {
		t.Fatalf("%+v", s)
	}
	c.Phase("record")
	time.Sleep(20 * time.Millisecond)
	if s := c.Snapshot(); s.Phase != "record" || s.PhaseMs < 20 {
		t.Fatalf("%+v", s)
	}
	c.Ready()
	s := c.Snapshot()
	if s.State() != "ready" || s.Phase != "serving" || s.BootMs < 20 {
		t.Fatalf("%+v", s)
	}
	c.Ready()
	c.Phase("serving")
	if again := c.Snapshot(); again.BootMs != s.BootMs || !again.Ready {
		t.Fatalf("a second Ready moved the boot: %+v then %+v", s, again)
	}
}

package joiner

import (
	"fmt"
	"io"
	"sync"
)

// printer writes the joiner's one-line messages. While a progress bar is
// on screen it clears it first, so a retry notice does not land in the
// middle of the bar; the bar redraws on its next update.
type printer struct {
	mu  sync.Mutex
	w   io.Writer
	bar interface{ Clear() error }
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *printer) setBar(bar interface{ Clear() error }) {
	p.mu.Lock()
	p.bar = bar
	p.mu.Unlock()
}

// line prints one line as it is (a retry or failover notice).
func (p *printer) line(s string) { p.printf("%s", s) }

package joiner

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"stratum/release"
)

// progress shows a release download: a bar on a terminal, and plain lines
// (one per file) otherwise, since a bar's carriage returns make a mess of
// a journal or a log file.
type progress struct {
	mu        sync.Mutex
	log       *printer
	bar       *progressbar.ProgressBar
	total     int64
	files     int
	doneFiles int
	done      int64
}

func newProgress(log *printer, out io.Writer, total int64, files int, desc string) *progress {
	p := &progress{log: log, total: total, files: files}
	if isTerminal(out) {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(out),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(out) }),
		)
		log.setBar(p.bar)
	}
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// add counts n bytes done (negative when a file restarts).
func (p *progress) add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if p.bar != nil {
		_ = p.bar.Set64(p.done)
	}
}

// fileDone notes a finished file: a line when there is no bar.
func (p *progress) fileDone(f release.File, how string) {
	p.mu.Lock()
	p.doneFiles++
	n, done := p.doneFiles, p.done
	p.mu.Unlock()
	if p.bar != nil {
		return
	}
	pct := 100
	if p.total > 0 {
		pct = int(done * 100 / p.total)
	}
	p.log.printf("  %s %s (%s) [%d/%d files, %d%%]", how, f.Path, HumanBytes(f.Size), n, p.files, pct)
}

// stop ends the bar, if any.
func (p *progress) stop() {
	if p.bar != nil {
		p.log.setBar(nil)
		_ = p.bar.Finish()
	}
}

// HumanBytes renders a size in IEC units (8.0 MiB); the CLI shows sizes
// with it too.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

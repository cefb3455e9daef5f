package compare

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress draws the share of finished jobs of every entrant of a run
// ("waiting" until its run starts): on a terminal redrawn in place at most
// every half second; elsewhere (a log file, a pipe) as plain lines, at
// most every 10 s. Its Update is Options.Progress. Safe for concurrent
// use.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	names []string
	pct   []int // -1: waiting
	last  time.Time
	// printed is the last line written.
	printed string
}

// NewProgress returns a progress display on w for the entrants of these
// names; it redraws in place when w is a terminal.
func NewProgress(w io.Writer, names []string) *Progress {
	p := &Progress{w: w, names: names, pct: make([]int, len(names))}
	for i := range p.pct {
		p.pct[i] = -1
	}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// Update records that entrant i has finished done of total jobs and
// redraws when it is time to.
func (p *Progress) Update(i, done, total int) {
	if total == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < 0 || i >= len(p.pct) {
		return
	}
	p.pct[i] = 100 * done / total
	every := 10 * time.Second
	if p.tty {
		every = 500 * time.Millisecond
	}
	if time.Since(p.last) < every {
		return
	}
	p.last = time.Now()
	line := p.line()
	p.printed = line
	if p.tty {
		_, _ = fmt.Fprintf(p.w, "\r%s", line) // progress is best effort
	} else {
		_, _ = fmt.Fprintln(p.w, line)
	}
}

// line is the progress of every entrant.
func (p *Progress) line() string {
	parts := make([]string, len(p.names))
	for j, n := range p.names {
		if p.pct[j] < 0 {
			parts[j] = n + " waiting"
		} else {
			parts[j] = fmt.Sprintf("%s %3d%%", n, p.pct[j])
		}
	}
	return strings.Join(parts, "  ")
}

// Done ends the display: on a terminal, the line redrawn in place is
// closed with a newline; elsewhere the final state is written as a last
// line, when it changed since the last one written.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.last.IsZero():
	case p.tty:
		_, _ = fmt.Fprintf(p.w, "\r%s\n", p.line())
	case p.line() != p.printed:
		_, _ = fmt.Fprintln(p.w, p.line())
	}
}

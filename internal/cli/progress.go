package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows a replay's progress: a bar on a terminal, otherwise a log
// line every few seconds, with records done out of the total, rate and ETA.
//
// It is also the io.Writer the replay's logger writes to. On a terminal a
// log line clears the bar, is written on its own line, and the bar is drawn
// again below it, so no line is ever cut by the bar; one lock orders the
// bar's drawing and the log lines of every goroutine.
type progress struct {
	name        string // the command: "replay", "verify"
	mu          sync.Mutex
	w           io.Writer
	tty         bool
	bar         *progressbar.ProgressBar // drawn once the total is known
	log         *slog.Logger
	every       time.Duration
	throttle    time.Duration // least time between two drawings of the bar
	start, last time.Time
	first       int64
	done, total int64
}

func newProgress(w io.Writer, name string, every time.Duration) *progress {
	p := &progress{name: name, w: w, every: every, throttle: 200 * time.Millisecond, start: time.Now(), first: -1}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

// Write writes a log line above the bar.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil {
		return p.w.Write(b)
	}
	_ = p.bar.Clear()
	n, err := p.w.Write(b)
	_ = p.bar.RenderBlank()
	return n, err
}

// counts are the records done and the total, as last reported.
func (p *progress) counts() (done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done, p.total
}

func (p *progress) update(done, total int64) {
	if figs := p.record(done, total); figs != nil && p.log != nil {
		p.log.Info(p.name+" progress", figs...)
	}
}

// record takes in the progress and draws the bar; without a terminal it
// returns the figures to log when a log line is due.
func (p *progress) record(done, total int64) []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first < 0 {
		p.first = done // what earlier runs did is not this run's rate
	}
	p.done, p.total = done, total
	if p.tty {
		if total <= 0 {
			return nil // nothing to replay: no bar
		}
		if p.bar == nil {
			p.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(p.name),
				progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("records"),
				progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(p.throttle), progressbar.OptionFullWidth())
		}
		p.bar.ChangeMax64(total)
		// A bar at its maximum is finished for good, drawn complete: that
		// is finish's call, once the replay has returned without error.
		_ = p.bar.Set64(min(done, total-1))
		return nil
	}
	if now := time.Now(); now.Sub(p.last) >= p.every || done == total {
		p.last = now
		return p.figures()
	}
	return nil
}

// figures are the progress as log attributes: done, total, percent, rate
// and ETA.
func (p *progress) figures() []any {
	elapsed := time.Since(p.start).Seconds()
	rate := float64(p.done-p.first) / max(elapsed, 1e-3)
	eta := "unknown"
	if rate > 0 {
		eta = (time.Duration(float64(p.total-p.done)/rate) * time.Second).Round(time.Second).String()
	}
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(p.done) / float64(p.total)
	}
	return []any{"done", p.done, "total", p.total, "percent", fmt.Sprintf("%.1f", pct), "records_per_sec", int64(rate), "eta", eta}
}

// finish ends the bar: drawn complete if the replay completed, otherwise
// left as far as it got. Either way the cursor moves to a new line, so
// what follows (the error, last) starts on its own line. Later log lines
// are written plainly.
func (p *progress) finish(completed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil {
		return
	}
	if completed {
		_ = p.bar.Set64(p.total)
		_ = p.bar.Finish()
	} else {
		_ = p.bar.Exit()
	}
	fmt.Fprintln(p.w)
	p.bar = nil
	p.tty = false
}

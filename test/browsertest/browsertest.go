// Package browsertest drives a web page in headless Chromium for tests:
// it finds the browser (or skips), opens one tab, evaluates and waits on
// JavaScript, takes screenshots, and collects the page's uncaught
// JavaScript errors. It is for tests only.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/flakestream/flakestream/test/testenv"
)

// Chromium finds Debian's chromium, or skips the test (fails it under
// CI=true). Call it before setting up what the page needs, so that a
// machine without a browser skips at once.
func Chromium(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	testenv.Missing(t, "no chromium for the headless browser test (apt-get install chromium)")
	return ""
}

// Timeout bounds everything a Tab does, from Start.
const Timeout = 90 * time.Second

// Tab is one headless Chromium tab, 1400x1000, closed when the test ends.
// Its methods fail the test on error.
type Tab struct {
	// PollTimeout bounds each WaitJS; 30s unless set.
	PollTimeout time.Duration

	t        testing.TB
	ctx      context.Context
	mu       sync.Mutex
	jsErrors []string
}

// Start starts the browser at path chrome (from Chromium) with a blank
// tab, bounded by Timeout.
func Start(t testing.TB, chrome string) *Tab {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chrome), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
	}
	b := &Tab{PollTimeout: 30 * time.Second, t: t}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		// Runs in the tab's loop: record and return.
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			b.mu.Lock()
			b.jsErrors = append(b.jsErrors, e.ExceptionDetails.Text)
			b.mu.Unlock()
		}
	}))
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(bctx, Timeout)
	t.Cleanup(cancel)
	b.ctx = ctx
	return b
}

// Navigate loads url in the tab.
func (b *Tab) Navigate(url string) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url)); err != nil {
		b.t.Fatalf("load %s: %v", url, err)
	}
}

// Eval evaluates the JavaScript expression expr, which yields a string.
func (b *Tab) Eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// WaitJS waits up to PollTimeout for the JavaScript expression expr to be
// true; if it is not, it fails the test with what (what was awaited) and
// the text of the page's <main>.
func (b *Tab) WaitJS(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(b.PollTimeout))); err != nil {
		page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
		b.t.Fatalf("%s: %v\npage text:\n%.2000s", what, err, page)
	}
}

// Screenshot returns a PNG of the window, or with fullPage of the whole
// page.
func (b *Tab) Screenshot(fullPage bool) []byte {
	b.t.Helper()
	action := chromedp.CaptureScreenshot()
	if fullPage {
		action = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(b.ctx, action)
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	return png
}

// NoJSErrors fails the test if the page has thrown an uncaught JavaScript
// error since Start.
func (b *Tab) NoJSErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.jsErrors) > 0 {
		b.t.Fatalf("JavaScript errors: %q", b.jsErrors)
	}
}

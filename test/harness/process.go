// Package harness runs flakestream end to end, as the user does: the binary as a
// child process (started, killed with SIGKILL, restarted) against a Kafka and
// a Redis from test/testenv, with the input produced while it runs. It
// measures what a fault costs (the longest stall of the committed output, the
// time to recover) and records each run as one JSON line, so that the
// results table of bench/results/faults.md comes from runs, not from hand.
//
// The main package's process tests and the fault suite in test/faults/ share this
// one copy of the helpers.
package harness

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  string
}

// Binary builds flakestream (`go build -o <tmp>/flakestream
// github.com/flakestream/flakestream`) once per test process and returns
// its path. FLAKESTREAM_E2E_RACE=1 builds it with the race detector. Call
// RemoveBinary from TestMain when the tests are done.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "flakestream-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = dir
		build.path = filepath.Join(dir, "flakestream")
		args := []string{"build", "-o", build.path}
		if os.Getenv("FLAKESTREAM_E2E_RACE") == "1" {
			args = append(args, "-race")
		}
		args = append(args, "github.com/flakestream/flakestream")
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			build.err, build.out = err, string(out)
		}
	})
	if build.err != nil {
		t.Fatalf("test/faults: go build: %v\n%s", build.err, build.out)
	}
	return build.path
}

// Main is the TestMain of a package whose tests run the binary: it runs
// the tests, removes what Binary built and exits with their status.
func Main(m *testing.M) {
	code := m.Run()
	RemoveBinary()
	os.Exit(code)
}

// RemoveBinary removes what Binary built, if anything.
func RemoveBinary() {
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
}

// SyncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Process is a flakestream child process. It dies with the test binary
// (Pdeathsig), and is killed when the test that started it ends.
type Process struct {
	Name   string
	Cmd    *exec.Cmd
	Stderr *SyncBuffer   // everything the process wrote to stderr
	Done   chan struct{} // closed when the process has exited
	Err    error         // its exit status, once Done is closed

	Started time.Time
}

// Start runs the binary with args. Its stderr goes to p.Stderr and, if
// logPath is not "", to that file as well (for long runs whose logs are
// kept as artifacts).
func Start(t testing.TB, name, logPath string, args ...string) *Process {
	t.Helper()
	return StartEnv(t, name, logPath, nil, args...)
}

// StartEnv is Start with env (KEY=value) added to this process's
// environment.
func StartEnv(t testing.TB, name, logPath string, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{Name: name, Cmd: exec.Command(Binary(t), args...), Stderr: &SyncBuffer{}, Done: make(chan struct{})}
	if env != nil {
		p.Cmd.Env = append(os.Environ(), env...)
	}
	var w io.Writer = p.Stderr
	var f *os.File
	if logPath != "" {
		var err error
		if f, err = os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			t.Fatalf("test/faults: worker log: %v", err)
		}
		w = io.MultiWriter(p.Stderr, f)
	}
	p.Cmd.Stderr = w
	// The child dies with the test binary, even a killed one.
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("test/faults: start %s: %v", name, err)
	}
	p.Started = time.Now()
	go func() {
		p.Err = p.Cmd.Wait()
		if f != nil {
			f.Close()
		}
		close(p.Done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, Tail(p.Stderr.String(), 3000))
		}
	})
	return p
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.Done
}

// Stop sends SIGTERM and waits up to timeout for a clean exit; past it the
// process is killed and Stop says so.
func (p *Process) Stop(timeout time.Duration) error {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
		if p.Err != nil {
			return fmt.Errorf("%s exited after SIGTERM: %w", p.Name, p.Err)
		}
		return nil
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.Name, timeout)
	}
}

// WaitSuccess waits up to timeout for the process to exit by itself and
// fails the test, with the tail of its stderr, when it does not or when it
// exits with an error.
func (p *Process) WaitSuccess(t testing.TB, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.Done:
	case <-time.After(timeout):
		t.Fatalf("%s did not finish within %s:\n%s", p.Name, timeout, Tail(p.Stderr.String(), 2000))
	}
	if p.Err != nil {
		t.Fatalf("%s: %v\n%s", p.Name, p.Err, Tail(p.Stderr.String(), 2000))
	}
}

// Tail returns the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

package testenv

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ourRules returns the rules this process has added.
func ourRules(t *testing.T) []string {
	t.Helper()
	out, err := iptables("-S")
	if err != nil {
		t.Fatalf("iptables -S: %v %s", err, out)
	}
	var rules []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, ruleTag+strconv.Itoa(os.Getpid())+" ") {
			rules = append(rules, l)
		}
	}
	return rules
}

// A dropped port hangs (a dial times out: no reset, no refusal), heals
// when asked, and its rules are gone at the end of the test even without
// Heal.
func TestDropPorts(t *testing.T) {
	NeedNetFaults(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	dial := func() error {
		c, err := net.DialTimeout("tcp", l.Addr().String(), 500*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("before the partition: %v", err)
	}
	t.Run("cut", func(t *testing.T) {
		p := DropPorts(t, "test port", port)
		if n := len(ourRules(t)); n != 2 {
			t.Fatalf("%d rules, want 2 (--dport, --sport)", n)
		}
		err := dial()
		var ne net.Error
		if err == nil || !(errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("dial during the partition: %v, want a timeout (DROP, not REJECT)", err)
		}
		p.Heal(t)
		if err := dial(); err != nil {
			t.Fatalf("after Heal: %v", err)
		}
		DropPorts(t, "test port, left to the cleanup", port)
	})
	if r := ourRules(t); len(r) != 0 {
		t.Fatalf("rules left after the subtest's cleanup: %v", r)
	}
	if err := dial(); err != nil {
		t.Fatalf("after the cleanup: %v", err)
	}
}

// A paused process is stopped until resumed, and resumed at the end of the
// test at the latest.
func TestPause(t *testing.T) {
	cmd := execSleep(t)
	pid := cmd.Process.Pid
	t.Run("paused", func(t *testing.T) {
		Pause(t, "sleep", pid)
		if s := procState(t, pid); s != "T" {
			t.Fatalf("state %q, want T (stopped)", s)
		}
	})
	if s := procState(t, pid); s == "T" {
		t.Fatal("still stopped after the subtest's cleanup")
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

func execSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// procState is the one-letter state of pid from /proc/pid/stat.
func procState(t *testing.T, pid int) string {
	t.Helper()
	// Give a signal a moment to take effect.
	time.Sleep(50 * time.Millisecond)
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndex(s, ")")+1:])[0]
}

// DropFromCgroup cuts off the processes of one cgroup and no other: a
// shell in the cgroup cannot connect, the test itself still can.
func TestDropFromCgroup(t *testing.T) {
	NeedNetFaults(t)
	NeedCgroups(t)
	root := cgroup2Root()
	name := "flakestream-test-" + strconv.Itoa(os.Getpid())
	if err := os.Mkdir(root+"/"+name, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(root + "/" + name) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	// Connects from inside the cgroup; exit status 124 is timeout's.
	inside := func() error {
		return exec.Command("timeout", "2", "sh", "-c",
			`echo $$ >"$0/cgroup.procs" && exec bash -c "exec 3<>/dev/tcp/127.0.0.1/$1"`, root+"/"+name, port).Run()
	}
	if err := inside(); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	p := DropFromCgroup(t, "cgroup test", name, l.Addr().(*net.TCPAddr).Port)
	if err := inside(); err == nil {
		t.Fatal("a process in the cgroup connected through the cut")
	}
	c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second)
	if err != nil {
		t.Fatalf("the test (outside the cgroup) could not connect: %v", err)
	}
	c.Close()
	p.Heal(t)
	if err := inside(); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

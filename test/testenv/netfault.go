// Faults that hang instead of crash: network partitions on loopback
// (iptables DROP of chosen TCP ports) and pauses (SIGSTOP, SIGCONT). A
// dropped packet gets no reset, so a connection hangs until some timeout
// notices, as in a real partition; a stopped process keeps its sockets and
// comes back later as if nothing happened, as after a GC pause or a frozen
// VM.
//
// Every rule a test adds is removed when the test ends (t.Cleanup, which
// also runs after a failure or a panic in the test), and, should the test
// binary die without running its cleanups (a -timeout panic, SIGKILL), by a
// small reaper process that waits for this process to end and then deletes
// the rules tagged with its pid. Rules left by an earlier process that died
// with its reaper are swept at the first use in the next one.

package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ruleTag prefixes the comment of every iptables rule the tests add; the
// pid of the process that added it follows.
const ruleTag = "flakestream-test-pid-"

// Partition is a set of iptables rules that drop packets, added by
// DropPorts and removed by Heal (or at the end of the test).
type Partition struct {
	What  string // what is cut off, for logs
	mu    sync.Mutex
	rules [][]string // each rule: its chain, then its spec
	on    bool
}

// NetFaultsUnavailable says why iptables rules cannot be added here, or ""
// if they can.
func NetFaultsUnavailable() string {
	if os.Geteuid() != 0 {
		return "network partitions need root (iptables on loopback)"
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return "network partitions need iptables (apt-get install iptables)"
	}
	if out, err := iptables("-S", "INPUT"); err != nil {
		return fmt.Sprintf("iptables does not work here: %v %s", err, firstLine(out))
	}
	return ""
}

// NeedNetFaults skips t (fails it under CI=true) with a one-line reason when
// iptables rules cannot be added. Call it before starting the services, so
// that a skip is cheap.
func NeedNetFaults(t testing.TB) {
	t.Helper()
	if why := NetFaultsUnavailable(); why != "" {
		Missing(t, why)
	}
}

// DropPorts cuts off the TCP ports on loopback: every packet to or from
// them (--dport and --sport) is dropped, in both directions, until Heal or
// the end of t. what names the cut for logs.
func DropPorts(t testing.TB, what string, ports ...int) *Partition {
	t.Helper()
	var rules [][]string
	for _, port := range ports {
		for _, dir := range []string{"--dport", "--sport"} {
			rules = append(rules, []string{"INPUT", "-i", "lo", "-p", "tcp", dir, strconv.Itoa(port)})
		}
	}
	return addRules(t, what, rules)
}

// DropFromCgroup cuts the processes of cgroup v2 cgroup (a path relative
// to the cgroup2 root) off the TCP ports on loopback: every packet they
// send to one of them is dropped (OUTPUT, matched on the sending socket's
// cgroup), until Heal or the end of t. Other processes still reach the
// ports, so this cuts one process off some peers and not others, as
// scripts/kafka-local --cgroups allows for the nodes of a cluster.
func DropFromCgroup(t testing.TB, what, cgroup string, ports ...int) *Partition {
	t.Helper()
	var rules [][]string
	for _, port := range ports {
		rules = append(rules, []string{"OUTPUT", "-o", "lo", "-p", "tcp", "--dport", strconv.Itoa(port), "-m", "cgroup", "--path", cgroup})
	}
	return addRules(t, what, rules)
}

// addRules inserts the DROP rules (chain, match...) at the top of their
// chains and returns them as a Partition.
func addRules(t testing.TB, what string, rules [][]string) *Partition {
	t.Helper()
	NeedNetFaults(t)
	netfaultOnce.Do(func() { sweepStaleRules(t); startReaper(t) })
	p := &Partition{What: what}
	tag := ruleTag + strconv.Itoa(os.Getpid())
	for _, r := range rules {
		p.rules = append(p.rules, append(r, "-m", "comment", "--comment", tag, "-j", "DROP"))
	}
	// Registered before the rules go in, so that a failure half-way
	// removes the ones added.
	t.Cleanup(func() { p.heal(t) })
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = true
	for i, r := range p.rules {
		if out, err := iptables(append([]string{"-I"}, r...)...); err != nil {
			p.rules = p.rules[:i]
			t.Fatalf("testenv: iptables -I %s: %v %s", strings.Join(r, " "), err, out)
		}
	}
	return p
}

// Heal removes the partition's rules (idempotent).
func (p *Partition) Heal(t testing.TB) {
	t.Helper()
	p.heal(t)
}

func (p *Partition) heal(t testing.TB) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return
	}
	p.on = false
	for _, r := range p.rules {
		if out, err := iptables(append([]string{"-D"}, r...)...); err != nil {
			t.Errorf("testenv: remove iptables rule %s: %v %s", strings.Join(r, " "), err, out)
		}
	}
}

var netfaultOnce sync.Once

// iptables runs iptables, waiting up to 10 s for the xtables lock (other
// processes on the machine may hold it).
func iptables(args ...string) ([]byte, error) {
	cmd := exec.Command("iptables", append([]string{"-w", "10"}, args...)...)
	return cmd.CombinedOutput()
}

// sweepStaleRules removes the rules tagged with the pid of a process that
// is gone.
func sweepStaleRules(t testing.TB) {
	out, err := iptables("-S")
	if err != nil {
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, ruleTag)
		if i < 0 || !strings.HasPrefix(line, "-A ") {
			continue
		}
		pid, err := strconv.Atoi(strings.Fields(line[i+len(ruleTag):])[0])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		spec := strings.Fields(strings.TrimPrefix(line, "-A "))
		if out, err := iptables(append([]string{"-D"}, spec...)...); err != nil {
			t.Logf("testenv: stale iptables rule %q: %v %s", line, err, out)
		} else {
			t.Logf("testenv: removed a stale iptables rule of pid %d: %s", pid, line)
		}
	}
}

// startReaper starts, once per process, a shell that waits for this
// process to end and then deletes the rules tagged with its pid: the
// cleanup of last resort when the test binary dies without running its
// cleanups. It is bounded by this process's life (and by 6 h at most), and
// it is in a session of its own, so that it outlives a killed test binary.
func startReaper(t testing.TB) {
	tag := ruleTag + strconv.Itoa(os.Getpid())
	script := `pid=$1 tag=$2
while kill -0 "$pid" 2>/dev/null; do sleep 1; done
iptables -w 10 -S | grep -e "--comment $tag " | sed 's/^-A /-D /' |
while read -r rule; do eval "iptables -w 10 $rule"; done`
	cmd := exec.Command("timeout", "6h", "sh", "-c", script, "reaper", strconv.Itoa(os.Getpid()), tag)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Logf("testenv: iptables reaper: %v (the test's cleanups still remove its rules)", err)
		return
	}
	go func() { _ = cmd.Wait() }()
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// Pause stops process pid with SIGSTOP until the returned resume is called
// (SIGCONT; idempotent) or t ends: a paused process keeps its sockets and
// its state, and resumes as if no time had passed.
func Pause(t testing.TB, what string, pid int) (resume func()) {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("testenv: pause %s: no process", what)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("testenv: SIGSTOP %s (pid %d): %v", what, pid, err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && err != syscall.ESRCH {
				t.Errorf("testenv: SIGCONT %s (pid %d): %v", what, pid, err)
			}
		})
	}
	t.Cleanup(resume)
	return resume
}

// PauseFor pauses pid for d, then resumes it.
func PauseFor(t testing.TB, what string, pid int, d time.Duration) {
	t.Helper()
	resume := Pause(t, what, pid)
	time.Sleep(d)
	resume()
}

// NeedCgroups skips t (fails it under CI=true) with a one-line reason when
// no cgroup v2 hierarchy is mounted writable here, which
// KafkaNodeCgroups and DropFromCgroup need.
func NeedCgroups(t testing.TB) {
	t.Helper()
	root := cgroup2Root()
	probe := root + "/flakestream-probe-" + strconv.Itoa(os.Getpid())
	if root == "" || os.Mkdir(probe, 0o755) != nil {
		Missing(t, "isolating a node needs a writable cgroup v2 hierarchy (iptables -m cgroup)")
	}
	_ = os.Remove(probe)
}

// cgroup2Root is where the cgroup v2 hierarchy is mounted ("" if nowhere).
func cgroup2Root() string {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[2] == "cgroup2" {
			return f[1]
		}
	}
	return ""
}

package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// sample is one look at a run: the records its group has committed, and
// the CPU time the worker, the broker and Redis (flakestream's sequencer;
// 0 for the peer) have used so far.
type sample struct {
	at                       time.Time
	committed                int64
	workerCPU, broker, redis time.Duration
}

// steady is a run's steady state: the window from the first sample at or
// past lo of the backlog to the first at or past hi, which leaves out the
// start (joining, warming up) and the tail (partitions finishing unevenly).
type steady struct {
	Records        int64   `json:"records"`
	Seconds        float64 `json:"seconds"`
	RecordsPerSec  float64 `json:"records_per_sec"`
	WorkerCPUPerM  float64 `json:"worker_cpu_s_per_million"`
	BrokerCPUPerM  float64 `json:"broker_cpu_s_per_million"`
	RedisCPUPerM   float64 `json:"redis_cpu_s_per_million"`
	WorkerCores    float64 `json:"worker_cores"`
	BrokerCores    float64 `json:"broker_cores"`
	FirstCommitSec float64 `json:"first_commit_s"` // from the first sample to the first commit
	DoneSec        float64 `json:"done_s"`         // from the first sample to the whole backlog committed
}

// errShortWindow: the samples do not span the steady window.
var errShortWindow = errors.New("no steady window")

// steadyOf computes the steady state of samples over a backlog of total
// records, between the fractions lo and hi of it.
func steadyOf(samples []sample, total int64, lo, hi float64) (steady, error) {
	var s steady
	if len(samples) == 0 || total <= 0 {
		return s, errShortWindow
	}
	first, from, to := -1, -1, -1
	for i, p := range samples {
		if first < 0 && p.committed > 0 {
			first = i
		}
		if from < 0 && float64(p.committed) >= lo*float64(total) {
			from = i
		}
		if to < 0 && float64(p.committed) >= hi*float64(total) {
			to = i
		}
	}
	if from < 0 || to <= from {
		return s, fmt.Errorf("%w: %d samples, committed %d of %d", errShortWindow, len(samples), samples[len(samples)-1].committed, total)
	}
	a, b := samples[from], samples[to]
	s.Records = b.committed - a.committed
	s.Seconds = b.at.Sub(a.at).Seconds()
	s.RecordsPerSec = float64(s.Records) / s.Seconds
	s.WorkerCPUPerM = (b.workerCPU - a.workerCPU).Seconds() / float64(s.Records) * 1e6
	s.BrokerCPUPerM = (b.broker - a.broker).Seconds() / float64(s.Records) * 1e6
	s.RedisCPUPerM = (b.redis - a.redis).Seconds() / float64(s.Records) * 1e6
	s.WorkerCores = (b.workerCPU - a.workerCPU).Seconds() / s.Seconds
	s.BrokerCores = (b.broker - a.broker).Seconds() / s.Seconds
	s.FirstCommitSec = samples[first].at.Sub(samples[0].at).Seconds()
	if last := samples[len(samples)-1]; last.committed >= total {
		for _, p := range samples {
			if p.committed >= total {
				s.DoneSec = p.at.Sub(samples[0].at).Seconds()
				break
			}
		}
	}
	return s, nil
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which is 100 on every Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

// cpuTime returns the user plus system CPU time process pid has used, from
// /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// parseStat reads utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line. The command name, field 2, is in parentheses and
// may hold spaces and parentheses itself, so the fields are counted from
// the last ')'.
func parseStat(line string) (time.Duration, error) {
	end := strings.LastIndexByte(line, ')')
	if end < 0 {
		return 0, fmt.Errorf("stat %q: no command name", line)
	}
	f := strings.Fields(line[end+1:])
	// f[0] is field 3 (state); utime is field 14, stime 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat %q: %d fields after the name, want at least 13", line, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("stat: %w", err)
	}
	return time.Duration(u+s) * clockTick, nil
}

// peakRSS returns VmHWM, the peak resident set size, of process pid in
// bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseHWM(string(b))
}

func parseHWM(status string) (int64, error) {
	for _, l := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("status: no VmHWM line")
}

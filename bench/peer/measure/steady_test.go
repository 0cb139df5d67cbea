package main

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestParseStatCountsFromTheLastParenthesis(t *testing.T) {
	// A command name with a space and a ')' in it; utime 1234, stime 56.
	line := "4242 (java (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 56 0 0 20 0 40 0 100 0 0"
	got, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1290 * clockTick; got != want {
		t.Fatalf("parseStat = %s, want %s", got, want)
	}
	if _, err := parseStat("4242 (java) S 1 2"); err == nil {
		t.Fatal("a short line parsed")
	}
}

func TestParseHWM(t *testing.T) {
	got, err := parseHWM("Name:\tjava\nVmPeak:\t 999 kB\nVmHWM:\t  204800 kB\nVmRSS:\t 1 kB\n")
	if err != nil || got != 204800<<10 {
		t.Fatalf("parseHWM = %d, %v; want %d", got, err, 204800<<10)
	}
	if _, err := parseHWM("Name:\tjava\n"); err == nil {
		t.Fatal("no VmHWM line parsed")
	}
}

// The steady window runs from the first sample at 10% of the backlog to the
// first at 90%, whatever the start and the tail did.
func TestSteadyOfLeavesOutTheStartAndTheTail(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	samples := []sample{
		{at(0), 0, 0, 0, 0},
		{at(5), 0, 2 * time.Second, time.Second, 0},                         // joining: slow
		{at(6), 100, 3 * time.Second, 2 * time.Second, time.Second},         // 10%: the window opens
		{at(10), 500, 5 * time.Second, 4 * time.Second, time.Second},        // steady
		{at(14), 900, 7 * time.Second, 6 * time.Second, 2 * time.Second},    // 90%: the window closes
		{at(30), 1000, 20 * time.Second, 10 * time.Second, 3 * time.Second}, // a slow tail
	}
	s, err := steadyOf(samples, 1000, 0.1, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if s.Records != 800 || !near(s.Seconds, 8) || !near(s.RecordsPerSec, 100) {
		t.Errorf("window %d records in %.3fs (%.1f/s), want 800 in 8s (100/s)", s.Records, s.Seconds, s.RecordsPerSec)
	}
	// 4 s of worker CPU, 4 s of broker CPU and 1 s of Redis CPU for 800 records.
	if !near(s.WorkerCPUPerM, 5000) || !near(s.BrokerCPUPerM, 5000) || !near(s.RedisCPUPerM, 1250) || !near(s.WorkerCores, 0.5) || !near(s.BrokerCores, 0.5) {
		t.Errorf("cpu per million %.1f / %.1f, cores %.3f / %.3f; want 5000 / 5000, 0.5 / 0.5", s.WorkerCPUPerM, s.BrokerCPUPerM, s.WorkerCores, s.BrokerCores)
	}
	if !near(s.FirstCommitSec, 6) || !near(s.DoneSec, 30) {
		t.Errorf("first commit %.1fs, done %.1fs; want 6, 30", s.FirstCommitSec, s.DoneSec)
	}
	if _, err := steadyOf(samples[:3], 1000, 0.1, 0.9); !errors.Is(err, errShortWindow) {
		t.Errorf("a run stopped at 10%%: err %v, want errShortWindow", err)
	}
}

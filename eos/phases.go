package eos

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// PhaseMetricName is the histogram of one committed transaction's time, by
// phase (label phase, one of Phases).
const PhaseMetricName = "flakestream_txn_phase_seconds"

// The phases of one committed transaction, in order. Their sum is the time
// from the start of the poll to the end of EndTxn.
const (
	// PhasePoll: the poll, waiting for records when the input is idle.
	PhasePoll = "poll"
	// PhaseProcess: the step's work (the worker: numbering, encoding and
	// handing each record to the producer, which sends it meanwhile),
	// and the first produce's wait for the markers of the transaction
	// before (Config.MarkerWait).
	PhaseProcess = "process"
	// PhaseFlush: waiting for the records still buffered or in flight.
	PhaseFlush = "produce_flush"
	// PhaseOffsets: adding the consumed offsets to the transaction
	// (TxnOffsetCommit, and AddOffsetsToTxn before transactions v2).
	PhaseOffsets = "offset_commit"
	// PhaseHeartbeat: the heartbeat franz-go forces between the offsets
	// and EndTxn, to know the group has not moved on.
	PhaseHeartbeat = "heartbeat"
	// PhaseEndTxn: the EndTxn round trip; the coordinator writes the
	// markers that make the records visible to read_committed readers.
	PhaseEndTxn = "end_txn"
)

// Phases lists every phase label.
var Phases = []string{PhasePoll, PhaseProcess, PhaseFlush, PhaseOffsets, PhaseHeartbeat, PhaseEndTxn}

// NewPhaseHistogram returns the histogram PhaseMetricName, its buckets from
// 0.5ms to about 8s, for Metrics.Phases.
func NewPhaseHistogram() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    PhaseMetricName,
		Help:    "Time of each phase of a committed transaction: poll, process (numbering), produce_flush, offset_commit, heartbeat, end_txn.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 15),
	}, []string{"phase"})
}

// phaseClock is a franz-go hook that notes when the responses the end of a
// transaction waits for arrive, so that End's time splits into its parts.
type phaseClock struct {
	offsets, heartbeat atomic.Int64 // unix nanoseconds of the last response
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (p *phaseClock) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if e.Err() != nil {
		return
	}
	switch kmsg.Key(key) {
	case kmsg.TxnOffsetCommit:
		p.offsets.Store(time.Now().UnixNano())
	case kmsg.Heartbeat, kmsg.ConsumerGroupHeartbeat:
		p.heartbeat.Store(time.Now().UnixNano())
	}
}

// txnTimes are the marks of one transaction.
type txnTimes struct {
	pollStart, pollEnd, processEnd, flushEnd, end time.Time
}

// observe splits a committed transaction's time into its phases. The
// offsets and heartbeat marks count only if they fall inside End.
func (l *Loop) observe(t txnTimes) {
	h := l.m.Phases
	if h == nil {
		return
	}
	obs := func(phase string, from, to time.Time) {
		if !from.IsZero() && !to.Before(from) {
			h.WithLabelValues(phase).Observe(to.Sub(from).Seconds())
		}
	}
	obs(PhasePoll, t.pollStart, t.pollEnd)
	obs(PhaseProcess, t.pollEnd, t.processEnd)
	obs(PhaseFlush, t.processEnd, t.flushEnd)
	last := t.flushEnd
	if off := time.Unix(0, l.clock.offsets.Load()); off.After(t.flushEnd) && !off.After(t.end) {
		obs(PhaseOffsets, t.flushEnd, off)
		last = off
		if hb := time.Unix(0, l.clock.heartbeat.Load()); hb.After(off) && !hb.After(t.end) {
			obs(PhaseHeartbeat, off, hb)
			last = hb
		}
	}
	obs(PhaseEndTxn, last, t.end)
}

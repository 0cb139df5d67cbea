package eos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/flakestream/flakestream/internal/kafkaacl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Topics is what CheckTopics found.
type Topics struct {
	// MaxIn is the most partitions of any existing input topic (0 if
	// none exists yet).
	MaxIn int32
	// Partitions is each output topic's partition count.
	Partitions map[string]int32
}

// Produce lists every partition of the output topics, for Step.Start to
// return.
func (t Topics) Produce() map[string][]int32 {
	out := make(map[string][]int32, len(t.Partitions))
	for topic, n := range t.Partitions {
		ps := make([]int32, n)
		for i := range ps {
			ps[i] = int32(i)
		}
		out[topic] = ps
	}
	return out
}

// CheckTopics lists the input topics and the outputs, retrying while the
// brokers cannot answer yet, and waits up to Config.TopicWait for every one
// of them to exist with a leader on each partition: topics are often created
// a moment before the workers start (an init container, a compose service, a
// deploy script), and a broker reports a new topic's metadata a little after
// CreateTopics returns. Each topic waited for is logged once, by name.
//
// After the wait, a missing input is logged (the group consumes it once it
// exists); a missing output is created, with as many partitions as the
// largest input, if create is set (created at once, never waited for), and
// is ErrMissingTopic otherwise. An error that retrying cannot fix ends with
// ErrFatal and a hint at the settings to check.
func (s *Session) CheckTopics(ctx context.Context, create bool, outputs ...string) (Topics, error) {
	c := &s.loop.cfg
	log := c.Logger
	topics := append(append([]string{}, c.Topics...), outputs...)
	waitFor := topics // what is worth waiting for
	if create {
		waitFor = c.Topics
	}
	deadline := time.Now().Add(max(c.TopicWait, 0))
	logged := map[string]bool{}
	var details kadm.TopicDetails
	for attempt := 0; ; attempt++ {
		var err error
		if details, err = s.listTopics(ctx, topics); err != nil {
			return Topics{}, err
		}
		var pending []string
		for _, t := range waitFor {
			if why := notReady(details, t); why != "" {
				pending = append(pending, t)
				if !logged[t] {
					logged[t] = true
					log.Info("waiting for topic", "topic", t, "reason", why, "topic_wait", c.TopicWait)
				}
			}
		}
		if len(pending) == 0 || !time.Now().Before(deadline) {
			break
		}
		if Sleep(ctx, min(c.BackoffMin<<min(attempt, 4), time.Second, time.Until(deadline))) != nil {
			return Topics{}, ctx.Err()
		}
	}
	res := Topics{Partitions: map[string]int32{}}
	if err := refusedTopics(details, c.Topics, outputs); err != nil {
		return Topics{}, err
	}
	for _, t := range c.Topics {
		d, ok := details[t]
		if !ok || d.Err != nil {
			log.Warn("input topic does not exist yet; the "+c.Name+" will consume it once it does", "topic", t)
			continue
		}
		res.MaxIn = max(res.MaxIn, int32(len(d.Partitions)))
	}
	for _, t := range outputs {
		if d, ok := details[t]; ok && d.Err == nil {
			res.Partitions[t] = int32(len(d.Partitions))
			continue
		}
		if !create {
			return Topics{}, fmt.Errorf("%w: %s", ErrMissingTopic, t)
		}
		n := max(res.MaxIn, 1)
		if _, err := s.Admin.CreateTopic(ctx, n, -1, nil, t); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return Topics{}, fmt.Errorf("%w: create topic %s: %w", ErrFatal, t, err)
		}
		log.Info("created topic", "topic", t, "partitions", n)
		res.Partitions[t] = n
	}
	return res, nil
}

// refusedTopics is the fatal error for the first input or output topic
// the principal may not see (Metadata answers TOPIC_AUTHORIZATION_FAILED),
// nil if there is none: it is neither missing nor to be created, and
// waiting does not grant it.
func refusedTopics(details kadm.TopicDetails, inputs, outputs []string) error {
	for _, t := range append(append([]string{}, inputs...), outputs...) {
		if d, ok := details[t]; ok && kafkaacl.Is(d.Err) {
			op := "WRITE"
			if slices.Contains(inputs, t) {
				op = "READ"
			}
			return fmt.Errorf("%w: %w", ErrFatal, kafkaacl.Classify(fmt.Errorf("list topic %s: %w", t, d.Err), "Metadata",
				kafkaacl.Target{Type: kafkaacl.Topic, Name: t, Operation: op}))
		}
	}
	return nil
}

// listTopics lists topics, retrying while the brokers cannot answer.
func (s *Session) listTopics(ctx context.Context, topics []string) (kadm.TopicDetails, error) {
	c := &s.loop.cfg
	var details kadm.TopicDetails
	var err error
	for attempt := 0; ; attempt++ {
		details, err = kafkaacl.ListTopics(ctx, s.Admin, topics...)
		if err == nil || ctx.Err() != nil || attempt == 20 || IsFatalKafka(err) {
			break
		}
		c.Logger.Warn("cannot list topics yet; retrying", "err", err)
		if Sleep(ctx, c.BackoffMin<<min(attempt, 5)) != nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %w", ErrFatal, ErrListTopics, kafkaacl.Classify(err, "Metadata"))
	}
	return details, nil
}

// notReady says why topic t is worth waiting for ("" if it is not): it does
// not exist yet, or its metadata is not complete yet (a partition without a
// leader, as right after it was created). Any other error (not authorized)
// does not pass by waiting.
func notReady(details kadm.TopicDetails, t string) string {
	d, ok := details[t]
	switch {
	case !ok, errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		return "does not exist"
	case errors.Is(d.Err, kerr.LeaderNotAvailable):
		return "no leader yet"
	case d.Err != nil:
		return ""
	case len(d.Partitions) == 0:
		return "no partitions yet"
	}
	for _, p := range d.Partitions {
		if p.Err != nil && (errors.Is(p.Err, kerr.LeaderNotAvailable) || errors.Is(p.Err, kerr.UnknownTopicOrPartition)) || p.Leader < 0 {
			return "a partition has no leader yet"
		}
	}
	return ""
}

// trackLag refreshes the lag gauge from the group's committed offsets and
// the partitions' end offsets until ctx ends. The loop commits the offsets
// of transaction markers too, so a caught-up partition reads 0.
func trackLag(ctx context.Context, adm *kadm.Client, group string, g *prometheus.GaugeVec, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		lags, err := adm.Lag(ctx, group)
		if err == nil {
			for _, l := range lags {
				if l.Error() != nil {
					continue
				}
				for topic, ps := range l.Lag {
					for p, ml := range ps {
						if ml.Err == nil {
							g.WithLabelValues(topic, strconv.Itoa(int(p))).Set(float64(ml.Lag))
						}
					}
				}
			}
		} else if ctx.Err() == nil {
			log.Debug("consumer lag unavailable", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

package eos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

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
// brokers cannot answer yet. A missing input is logged (the group consumes
// it once it exists); a missing output is created, with as many partitions
// as the largest input, if create is set, and is ErrMissingTopic otherwise.
// An error that retrying cannot fix ends with ErrFatal and a hint at the
// settings to check.
func (s *Session) CheckTopics(ctx context.Context, create bool, outputs ...string) (Topics, error) {
	c := &s.loop.cfg
	log := c.Logger
	topics := append(append([]string{}, c.Topics...), outputs...)
	var details kadm.TopicDetails
	var err error
	for attempt := 0; ; attempt++ {
		details, err = s.Admin.ListTopics(ctx, topics...)
		if err == nil || ctx.Err() != nil || attempt == 20 || IsFatalKafka(err) {
			break
		}
		log.Warn("cannot list topics yet; retrying", "err", err)
		if Sleep(ctx, c.BackoffMin<<min(attempt, 5)) != nil {
			break
		}
	}
	if err != nil {
		return Topics{}, fmt.Errorf("%w: list topics: %w (check --brokers, the TLS and SASL settings, and that the brokers are up)", ErrFatal, err)
	}
	res := Topics{Partitions: map[string]int32{}}
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
			return Topics{}, fmt.Errorf("%w: %s (create it, or pass --create-topics)", ErrMissingTopic, t)
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

// Logger returns the loop's logger.
func (s *Session) Logger() *slog.Logger { return s.loop.cfg.Logger }

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

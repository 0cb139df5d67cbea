package pipeline

import (
	"fmt"
	"strconv"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
)

// DefaultMaxSkew is how far ahead of the worker's clock a pre-filled
// number's time may be (Trust.MaxSkew): clocks of the replicas that issue
// numbers differ by milliseconds, not seconds.
const DefaultMaxSkew = 5 * time.Second

// Trust says which pre-filled numbers the worker believes. A record that
// arrives with a number is input like any other: its number passes through
// only when it decodes under the layout (else invalid_number), its server
// and worker IDs are allowed (unknown_server, unknown_worker), its time is
// not further ahead of the worker's clock than MaxSkew (future_number) and,
// with an idempotency key, the key has no other number (key_mismatch).
// A zero field means its default.
type Trust struct {
	// Layout is the layout numbers are decoded under. Default: the
	// Numberer's own (an *idgen.Generator's), else idgen.DefaultLayout().
	Layout *idgen.Layout
	// Servers and Workers are the allowed server and worker IDs. Default
	// (nil): any.
	Servers, Workers []int64
	// MaxSkew is how far ahead of the clock a number's time may be.
	// Default DefaultMaxSkew; negative turns the check off.
	MaxSkew time.Duration
	// Renumber gives a record whose number is not believed a fresh number
	// (the key's number on key_mismatch), with the flakestream-renumbered
	// header naming the class, instead of dead-lettering it.
	Renumber bool
	// Now is the clock, for tests. Default time.Now.
	Now func() time.Time
}

// TrustNumbers sets which pre-filled numbers pass, overriding the default
// Trust{} (any server and worker, a skew of DefaultMaxSkew, dead-letter the
// rest).
func TrustNumbers(t Trust) Opt { return func(c *cfg) { c.trust = t } }

// judge is Trust made ready for the hot path.
type judge struct {
	layout           idgen.Layout
	servers, workers map[int64]bool // nil: any
	maxSkew          time.Duration
	renumber         bool
	now              func() time.Time
}

func newJudge(t Trust, n Numberer) (*judge, error) {
	j := &judge{layout: idgen.DefaultLayout(), maxSkew: t.MaxSkew, renumber: t.Renumber, now: t.Now}
	if g, ok := n.(interface{ Layout() idgen.Layout }); ok {
		j.layout = g.Layout()
	}
	if t.Layout != nil {
		j.layout = *t.Layout
	}
	if j.maxSkew == 0 {
		j.maxSkew = DefaultMaxSkew
	}
	if j.now == nil {
		j.now = time.Now
	}
	set := func(what string, ids []int64, check func(int64) error) (map[int64]bool, error) {
		if ids == nil {
			return nil, nil
		}
		m := make(map[int64]bool, len(ids))
		for _, id := range ids {
			if err := check(id); err != nil {
				return nil, fmt.Errorf("%w: allowed %s %d: %w", eos.ErrBadConfig, what, id, err)
			}
			m[id] = true
		}
		return m, nil
	}
	var err error
	if j.servers, err = set("server", t.Servers, j.layout.CheckServer); err != nil {
		return nil, err
	}
	if j.workers, err = set("worker", t.Workers, j.layout.CheckWorker); err != nil {
		return nil, err
	}
	return j, nil
}

// check says why number n is not believed ("" when it is). It is called
// once per pre-filled record, from every shard's goroutine.
func (j *judge) check(n int64) (codec.Class, string) {
	p, err := j.layout.Decompose(n)
	switch {
	case err != nil:
		return codec.ClassInvalidNumber, fmt.Sprintf("number %d does not decode under the layout: %v", n, err)
	case j.servers != nil && !j.servers[p.Server]:
		return codec.ClassUnknownServer, fmt.Sprintf("number %d: server id %d is not an allowed one", n, p.Server)
	case j.workers != nil && !j.workers[p.Worker]:
		return codec.ClassUnknownWorker, fmt.Sprintf("number %d: worker id %d is not an allowed one", n, p.Worker)
	case j.maxSkew > 0 && p.UnixMs > j.now().Add(j.maxSkew).UnixMilli():
		return codec.ClassFutureNumber, fmt.Sprintf("number %d: its time %s is more than %s ahead of the worker's clock",
			n, p.Time.Format(time.RFC3339Nano), j.maxSkew)
	}
	return "", ""
}

// mismatch is the message of a key_mismatch.
func mismatch(n, keys int64) string {
	return "pre-filled number " + strconv.FormatInt(n, 10) + ": the idempotency key already has number " + strconv.FormatInt(keys, 10)
}

// taken is the message of a number_taken.
func taken(n int64) string {
	return "pre-filled number " + strconv.FormatInt(n, 10) + ": another idempotency key already has it"
}

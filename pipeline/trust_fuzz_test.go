package pipeline

import (
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
)

// FuzzJudge checks the judge of pre-filled numbers on any number, allowed
// server and worker, and skew. Invariants: it never panics; it believes a
// number exactly when the number's server and worker are the allowed ones
// and its time is at most the skew ahead of the clock; and otherwise it
// names the first check that fails, in the order invalid_number,
// unknown_server, unknown_worker, future_number, with a message.
func FuzzJudge(f *testing.F) {
	l := idgen.DefaultLayout()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	n, _ := l.Compose(now.UnixMilli(), 1, 2, 3)
	f.Add(n, int64(1), int64(2), int64(5000))
	f.Add(n+1<<22*10000, int64(1), int64(2), int64(5000))
	f.Add(int64(-1), int64(0), int64(0), int64(-1))
	f.Add(int64(1<<63-1), int64(31), int64(31), int64(0))
	f.Fuzz(func(t *testing.T, n, server, worker, skewMs int64) {
		server, worker = server&l.MaxServer(), worker&l.MaxWorker()
		j, err := newJudge(Trust{Servers: []int64{server}, Workers: []int64{worker}, MaxSkew: time.Duration(skewMs) * time.Millisecond,
			Now: func() time.Time { return now }}, nil)
		if err != nil {
			t.Fatal(err)
		}
		class, msg := j.check(n)
		if (class == "") != (msg == "") {
			t.Fatalf("class %q with message %q", class, msg)
		}
		p, derr := l.Decompose(n)
		var want codec.Class
		switch {
		case derr != nil:
			want = codec.ClassInvalidNumber
		case p.Server != server:
			want = codec.ClassUnknownServer
		case p.Worker != worker:
			want = codec.ClassUnknownWorker
		case j.maxSkew > 0 && p.Time.After(now.Add(j.maxSkew)):
			want = codec.ClassFutureNumber
		}
		if class != want {
			t.Fatalf("number %d (%+v), allowed %d/%d, skew %s: %q, want %q", n, p, server, worker, j.maxSkew, class, want)
		}
	})
}

package audit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/codec/schema"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/testenv"
	"github.com/flakestream/flakestream/internal/verify"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// The audit reads the number of an Avro record without the number header
// from the value, through the registry (srfake here): a registry outage
// retries the batch (nothing is audited meanwhile, Ready says why), and
// once it is back every record is audited with its number; a record whose
// value holds none is audited as invalid.
func TestAuditAvroValueNumbers(t *testing.T) {
	k := testenv.Kafka(t)
	topic := k.NewTopic(t, 2)
	auditTopic := topic + ".audit"
	k.CreateTopic(t, auditTopic, 2)

	reg := srfake.New()
	defer reg.Close()
	var fail atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := fail.Load(); c != 0 {
			http.Error(w, "down", int(c))
			return
		}
		reg.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	ctx := context.Background()
	cl, err := sr.NewClient(sr.URLs(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	const writer = `{"type":"record","name":"Order","fields":[{"name":"ref","type":"string"}]}`
	wid, err := cl.RegisterSchema(ctx, topic+"-in-value", sr.Schema{Schema: writer}, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	// The numbering side: the worker's Format, writing to topic.
	num, err := schema.New(schema.Settings{Format: codec.ValueAvro, URL: srv.URL, OutputTopic: topic})
	if err != nil {
		t.Fatal(err)
	}
	l := idgen.DefaultLayout()
	now := time.Now()
	var recs []*kgo.Record
	want := map[int64]int64{} // offset in partition 0 -> number
	for i := range 20 {
		p, _ := avro.Marshal(avro.MustParse(writer), map[string]any{"ref": "R" + strconv.Itoa(i)})
		in := append([]byte{0, 0, 0, 0, byte(wid)}, p...)
		insp, err := num.Inspect(ctx, in)
		if err != nil || insp.Kind != codec.NeedsNumber {
			t.Fatalf("inspect: %v %v", insp, err)
		}
		id, err := l.Compose(now.UnixMilli(), 1, 1, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		v := in // the last record keeps no number
		if i < 19 {
			if v, err = num.AppendNumbered(ctx, nil, in, insp, id); err != nil {
				t.Fatal(err)
			}
			want[int64(i)] = id
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: v, Timestamp: now})
	}
	fail.Store(http.StatusServiceUnavailable)
	produceTo(t, k, recs...)

	read, err := schema.New(schema.Settings{Format: codec.ValueAvro, URL: srv.URL, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	run := startAuditor(t, k.Addrs, InputTopics(topic), Topic(auditTopic), Group(topic+"-audit"),
		InstanceID("a"), Layout(l), Format(read), CreateTopic())
	if !verify.WaitFor(20*time.Second, func() bool { return errors.Is(run.a.Ready(), codec.ErrUnavailable) }) {
		t.Fatalf("Ready() = %v during the registry outage, want codec.ErrUnavailable", run.a.Ready())
	}
	if n := run.a.Stats().Audited; n != 0 {
		t.Fatalf("audited %d records during the outage, want 0", n)
	}
	fail.Store(0)
	waitAudited(t, int64(len(recs)), run)
	run.stop(t)
	got := readAudit(t, k, auditTopic, 2)
	for off := range int64(len(recs)) {
		a, ok := got[string(codec.AppendSource(nil, topic, 0, off))]
		switch {
		case !ok:
			t.Fatalf("no audit record for offset %d", off)
		case off < 19 && (!a.Valid || a.ID != want[off]):
			t.Errorf("offset %d audited as %+v, want number %d", off, a.Decoded, want[off])
		case off == 19 && a.Valid:
			t.Errorf("the unnumbered record is audited valid (%d)", a.ID)
		}
	}
}

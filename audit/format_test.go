package audit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/codec/schema"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/encoding/protowire"
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
	run := startAuditor(t, k.Addrs, setLoop(func(s *eos.Config) { s.Topics = []string{topic} }), Topic(auditTopic), setLoop(func(s *eos.Config) { s.Group = topic + "-audit"; s.InstanceID = "a" }), Layout(l), Format(read), CreateTopic())
	if !accounting.WaitFor(20*time.Second, func() bool { return errors.Is(run.a.Ready(), codec.ErrUnavailable) }) {
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

// renumbered in Avro and Protobuf values without a number header: the
// number read from the value through the registry, the --key field
// (field:ref) too. An order whose key comes back with another number, and
// a source that comes back with another number, are renumbered, each
// naming its first copy; the others are clean.
func TestAuditRenumberedValueFormats(t *testing.T) {
	const proto = `syntax = "proto3";
package shop;
message Order {
  string ref = 1;
  string order_no = 2;
}
`
	for _, vf := range []codec.ValueFormat{codec.ValueAvro, codec.ValueProtobuf} {
		t.Run(string(vf), func(t *testing.T) {
			k := testenv.Kafka(t)
			topic := k.NewTopic(t, 1)
			auditTopic := topic + ".audit"
			k.CreateTopic(t, auditTopic, 1)
			reg := srfake.New()
			defer reg.Close()
			ctx := context.Background()
			cl, err := sr.NewClient(sr.URLs(reg.URL()))
			if err != nil {
				t.Fatal(err)
			}
			var input func(ref string) []byte
			if vf == codec.ValueAvro {
				const writer = `{"type":"record","name":"Order","fields":[{"name":"ref","type":"string"}]}`
				id, err := cl.RegisterSchema(ctx, topic+"-in-value", sr.Schema{Schema: writer}, -1, -1)
				if err != nil {
					t.Fatal(err)
				}
				input = func(ref string) []byte {
					p, _ := avro.Marshal(avro.MustParse(writer), map[string]any{"ref": ref})
					return append([]byte{0, 0, 0, 0, byte(id)}, p...)
				}
			} else {
				id, err := cl.RegisterSchema(ctx, topic+"-in-value", sr.Schema{Schema: proto, Type: sr.TypeProtobuf}, -1, -1)
				if err != nil {
					t.Fatal(err)
				}
				input = func(ref string) []byte {
					p := protowire.AppendTag(nil, 1, protowire.BytesType)
					p = protowire.AppendString(p, ref)
					return append([]byte{0, 0, 0, 0, byte(id), 0}, p...)
				}
			}
			num, err := schema.New(schema.Settings{Format: vf, URL: reg.URL(), OutputTopic: topic})
			if err != nil {
				t.Fatal(err)
			}
			l := idgen.DefaultLayout()
			now := time.Now()
			var recs []*kgo.Record
			add := func(ref, src string, seq int64) {
				in := input(ref)
				insp, err := num.Inspect(ctx, in)
				if err != nil || insp.Kind != codec.NeedsNumber {
					t.Fatalf("inspect: %v %v", insp, err)
				}
				v, err := num.AppendNumbered(ctx, nil, in, insp, mustCompose(t, l, now, 1, 1, seq))
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, &kgo.Record{Topic: topic, Value: v, Timestamp: now,
					Headers: []kgo.RecordHeader{{Key: codec.HeaderSource, Value: []byte(src)}}})
			}
			add("R-0", "in/0/0", 0)
			add("R-1", "in/0/1", 1)
			add("R-0", "in/0/2", 2) // the key again, another number
			add("R-2", "in/0/1", 3) // the source again, another number
			produceTo(t, k, recs...)

			read, err := schema.New(schema.Settings{Format: vf, URL: reg.URL(), Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			run := startAuditor(t, k.Addrs, setLoop(func(s *eos.Config) { s.Topics = []string{topic} }), Topic(auditTopic), setLoop(func(s *eos.Config) { s.Group = topic + "-audit"; s.InstanceID = "a" }), Layout(l), Format(read), Key(pipeline.KeySpec{Field: "ref"}))
			waitAudited(t, 4, run)
			run.stop(t)
			got := readAudit(t, k, auditTopic, 1)
			first := func(off, seq int64) *codec.Copy {
				return &codec.Copy{Topic: topic, Partition: 0, Offset: off, ID: mustCompose(t, l, now, 1, 1, seq)}
			}
			want := []*codec.Copy{nil, nil, first(0, 0), first(1, 1)}
			for off, w := range want {
				a := got[string(codec.AppendSource(nil, topic, 0, int64(off)))]
				wantAn := []string(nil)
				if w != nil {
					wantAn = []string{"renumbered"}
				}
				if !a.Valid || a.ID != mustCompose(t, l, now, 1, 1, int64(off)) || !reflect.DeepEqual(a.Anomalies, wantAn) || !reflect.DeepEqual(a.FirstCopy, w) {
					t.Errorf("offset %d: %+v, want number seq %d, anomalies %q, first copy %+v", off, a, off, wantAn, w)
				}
			}
		})
	}
}

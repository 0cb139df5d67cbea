package replay

import (
	"context"
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/codec/schema"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// A replay numbers Avro orders through the same Format as the worker: every
// order of the range comes out once, re-framed with the output schema
// registered under "<replay output>-value", exactly the Format's numbering
// of its input.
func TestReplayAvro(t *testing.T) {
	e := pipetest.NewEnv(t, 2)
	reg := srfake.New()
	t.Cleanup(reg.Close)
	ctx := context.Background()
	output := e.Input + ".replayed"
	f, err := schema.New(schema.Settings{Format: codec.ValueAvro, URL: reg.URL(), OutputTopic: output})
	if err != nil {
		t.Fatal(err)
	}
	id, err := schema.RegisterDemoSchema(ctx, f.Client(), codec.ValueAvro, e.Input+"-value")
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, 300)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: e.Input, Partition: int32(i % 2), Key: []byte(strconv.Itoa(i)),
			Value: schema.AppendDemoOrder(nil, codec.ValueAvro, id, i, 1_800_000_000_000)}
	}
	cl := e.Kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := replayInto(t, e, output, "start", "end", nil, pipeline.Format(f))
	dlq, err := e.ReadTopic(output + ".dlq")
	if err != nil {
		t.Fatal(err)
	}
	rep := accounting.CheckFormat(ctx, f, recs, out, dlq)
	if !rep.OK() || rep.Numbered != len(recs) {
		t.Fatalf("replay of Avro orders: %s, want %d numbered exactly once", rep, len(recs))
	}
	outID := int(binary.BigEndian.Uint32(out[0].Value[1:5]))
	if s, err := f.Client().SchemaByVersion(ctx, output+"-value", -1); err != nil || s.ID != outID {
		t.Fatalf("output subject %s-value: %+v %v, want the output schema id %d", output, s, err, outID)
	}
}

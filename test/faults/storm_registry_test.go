package faults_test

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/codec/schema"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/hostile"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/encoding/protowire"
)

// The registry storms' schemas besides the hostile ones (test/hostile).
const (
	// stormOtherAvro and stormOtherProto: harmless schemas, registered
	// under a subject --allowed-subjects does not name.
	stormOtherAvro  = `{"type":"record","name":"Other","namespace":"elsewhere","fields":[{"name":"x","type":"string"}]}`
	stormOtherProto = "syntax = \"proto3\";\npackage elsewhere;\nmessage Other {\n  string x = 1;\n}\n"
	// stormProtoMaxElements is --max-elements of the Protobuf storm: a
	// Protobuf item costs at least a byte, so over the default (100,000)
	// a value is too_large first; at 5,000 a 6 KB packed field is over.
	stormProtoMaxElements = 5000
)

// registryStorms run the storm through a schema registry, Avro and
// Protobuf side by side, each a worker (--value-format) and input of its
// own: a worker reads one value format, so JSON and registry-encoded
// records cannot share an input. The registry is franz-go's srfake, served
// by the test process on 127.0.0.1; the test registers the good schema and
// the hostile ones, and writes every 10th record hostile: an array-of-null
// bomb (Avro), a packed field over --max-elements (Protobuf), 10,000-deep
// nesting (both), a schema outside --allowed-subjects, an unknown schema
// ID, an unframed and an undecodable value. The good ones must be numbered,
// the bad ones dead-lettered under their class.
func registryStorms(t *testing.T, secs int) {
	reg := srfake.New()
	t.Cleanup(reg.Close)
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	var runs []*stormRun
	lats := make([]latencies, 2)
	for i, vf := range []codec.ValueFormat{codec.ValueAvro, codec.ValueProtobuf} {
		e := stormEnv(t)
		f := registryFlavor(t, cl, reg.URL(), e, vf)
		runs = append(runs, beginStorm(t, e, string(vf), "poison storm: "+string(vf)+" through a schema registry, 10% hostile", secs, f, &lats[i]))
	}
	writeBoth(t, runs...)
	for i, r := range runs {
		r.finish(time.Duration(secs)*time.Second + 3*time.Minute)
		t.Logf("%s storm: p99 %.0f ms, p50 %.0f ms", runs[i].flavor.format, lats[i].p(99), lats[i].p(50))
	}
}

// registryFlavor registers the storm's schemas of format vf and returns
// its records and worker flags; it points e's accounting at the registry.
func registryFlavor(t *testing.T, cl *sr.Client, url string, e *harness.Env, vf codec.ValueFormat) stormFlavor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	register := func(subject, text string) int {
		typ := sr.TypeAvro
		if vf == codec.ValueProtobuf {
			typ = sr.TypeProtobuf
		}
		id, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: text, Type: typ}, -1, -1)
		if err != nil {
			t.Fatalf("register %s: %v", subject, err)
		}
		return id
	}
	good, err := schema.RegisterDemoSchema(ctx, cl, vf, e.Input+"-value")
	if err != nil {
		t.Fatal(err)
	}
	var idx []int
	if vf == codec.ValueProtobuf {
		idx = []int{0}
	}
	frame := func(id int, payload []byte) []byte {
		var h sr.ConfluentHeader
		b, err := h.AppendEncode(nil, id, idx)
		if err != nil {
			panic(err)
		}
		return append(b, payload...)
	}
	other := register(e.Input+"-other-value", map[codec.ValueFormat]string{codec.ValueAvro: stormOtherAvro, codec.ValueProtobuf: stormOtherProto}[vf])
	allowed := []string{e.Input + "-value"}
	args := []string{"--value-format", string(vf), "--schema-registry", url}
	settings := schema.Settings{Format: vf, URL: url, OutputTopic: e.Output, MaxBytes: harness.MaxRecordBytes}
	const unknownID = 999999
	poisons := []poison{
		{name: "not in the wire format", class: codec.ClassNotFramed, make: plain(func(k int) []byte { return []byte(`{"order_ref":"ORD-` + strconv.Itoa(k) + `"}`) })},
		{name: "an unknown schema ID", class: codec.ClassUnknownSchema, make: plain(func(k int) []byte { return frame(unknownID, []byte{2, 'x'}) })},
		{name: "a schema outside --allowed-subjects", class: codec.ClassSchemaNotAllowed, make: plain(func(k int) []byte {
			return frame(other, protoOrAvroString(vf, "ORD-"+strconv.Itoa(k)))
		})},
		{name: "undecodable (cut short)", class: codec.ClassUndecodable, make: plain(func(k int) []byte {
			v := schema.AppendDemoOrder(nil, vf, good, k, time.Now().UnixMilli())
			return v[:len(v)-8]
		})},
	}
	switch vf {
	case codec.ValueAvro:
		bomb, linked := register(e.Input+"-bomb-value", hostile.NullArrayAvro), register(e.Input+"-linked-value", hostile.LinkedAvro)
		allowed = append(allowed, e.Input+"-bomb-value", e.Input+"-linked-value")
		poisons = append(poisons,
			poison{name: "a 401-byte array of about 100 million nulls", class: codec.ClassTooManyElements, make: plain(func(int) []byte { return frame(bomb, hostile.NullBlocks(396)) })},
			poison{name: "a record nested 10,000 deep", class: codec.ClassTooDeep, make: plain(func(int) []byte { return frame(linked, hostile.LinkedValue(10000)) })})
	case codec.ValueProtobuf:
		nodes := register(e.Input+"-nodes-value", hostile.NodesProto)
		allowed = append(allowed, e.Input+"-nodes-value")
		args = append(args, "--max-elements", strconv.Itoa(stormProtoMaxElements))
		settings.MaxElements = stormProtoMaxElements
		// 10,000 levels take about 34 KB, over the DLQ's limit: its
		// dead letter is a reference record.
		deep := frame(nodes, hostile.NodeValue(10000))
		poisons = append(poisons,
			poison{name: "a packed field over --max-elements", class: codec.ClassTooManyElements, make: plain(func(int) []byte { return frame(nodes, hostile.PackedValue(stormProtoMaxElements+1000)) })},
			poison{name: "a message nested 10,000 deep", class: codec.ClassTooDeep, ref: len(deep) > stormDLQ, make: plain(func(int) []byte { return deep })})
	}
	args = append(args, "--allowed-subjects", strings.Join(allowed, ","))
	settings.AllowedSubjects = allowed
	if e.Format, err = schema.New(settings); err != nil {
		t.Fatal(err)
	}
	e.VerifyArgs = append(args[:len(args):len(args)], "--max-record-bytes", strconv.Itoa(harness.MaxRecordBytes))
	return stormFlavor{format: vf, poisons: poisons, args: args, good: func(k int) stormRec {
		return stormRec{value: schema.AppendDemoOrder(nil, vf, good, k, time.Now().UnixMilli())}
	}}
}

// protoOrAvroString is a value of one string field (Avro: the only field;
// Protobuf: field 1).
func protoOrAvroString(vf codec.ValueFormat, s string) []byte {
	if vf == codec.ValueProtobuf {
		return protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), s)
	}
	return append(binary.AppendVarint(nil, int64(len(s))), s...)
}

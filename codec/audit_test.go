package codec

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAppendTime(t *testing.T) {
	tests := []struct {
		ms   int64
		want string
	}{
		{0, "1970-01-01T00:00:00.000Z"},
		{1636701167209, "2021-11-12T07:12:47.209Z"},
		{1636701167000, "2021-11-12T07:12:47.000Z"},
		{1636701167200, "2021-11-12T07:12:47.200Z"},
		{1636701167001, "2021-11-12T07:12:47.001Z"},
		{-1, "1969-12-31T23:59:59.999Z"},
	}
	for _, tt := range tests {
		got := string(appendTime(nil, tt.ms))
		if got != tt.want {
			t.Errorf("appendTime(%d) = %q, want %q", tt.ms, got, tt.want)
		}
		if p, err := time.Parse(time.RFC3339Nano, got); err != nil || p.UnixMilli() != tt.ms {
			t.Errorf("appendTime(%d) = %q parses back as %v, %v", tt.ms, got, p, err)
		}
	}
}

func TestAuditRecordAppendJSON(t *testing.T) {
	rec := sampleAuditRecord()
	rec.Topic = "t\"\\\n\x01é"
	rec.Source = "bad\xffutf8"
	rec.Anomalies = []string{"duplicate", "x\"y"}
	got := string(rec.AppendJSON(nil))
	want := `{"id":"229710323916801","unix_ms":1636701167209,"time":"2021-11-12T07:12:47.209Z",` +
		`"elapsed_ms":54767209,"server":1,"worker":2,"sequence":1,` +
		`"topic":"t\"\\\n\u0001é","partition":3,"offset":1234567,"record_unix_ms":1636701167250,` +
		`"lag_ms":41,"source":"bad\ufffdutf8","anomalies":["duplicate","x\"y"]}`
	if got != want {
		t.Fatalf("AppendJSON =\n%s\nwant\n%s", got, want)
	}
	m, err := json.Marshal(rec)
	if err != nil || string(m) != want {
		t.Errorf("json.Marshal = %s, %v; want AppendJSON's output", m, err)
	}
	m, err = json.Marshal(rec.Decoded)
	if err != nil || !strings.HasPrefix(want, strings.TrimSuffix(string(m), "}")+",") {
		t.Errorf("json.Marshal(Decoded) = %s, %v; want the audit record's first seven fields", m, err)
	}
}

// TestAuditSchema checks the struct tags against what AppendJSON writes, so
// the tags that document the schema cannot drift from it.
func TestAuditSchema(t *testing.T) {
	var keys []string
	dec := json.NewDecoder(strings.NewReader(string(sampleAuditRecord().AppendJSON(nil))))
	dec.Token()
	for dec.More() {
		tok, _ := dec.Token()
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(keys, auditFields[:]) {
		t.Fatalf("AppendJSON keys = %q, want %q", keys, auditFields)
	}
	var tags []string
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for f := range typ.Fields() {
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "-" {
				tags = append(tags, tag)
			}
		}
	}
	walk(reflect.TypeFor[AuditRecord]())
	// "time" has no field: it is derived from unix_ms. "first_copy" is
	// written only on a renumbered record (TestAuditRecordFirstCopy).
	want := append(append(append([]string{}, auditFields[:2]...), auditFields[3:]...), "first_copy")
	if !reflect.DeepEqual(tags, want) {
		t.Errorf("struct tags = %q, want %q", tags, want)
	}
}

func TestParseAuditRecordRoundTrip(t *testing.T) {
	for _, rec := range []AuditRecord{
		sampleAuditRecord(),
		{Topic: "t", Partition: 1, Offset: 2, RecordUnixMs: 3, LagMs: -4, Source: "s/1/1", Anomalies: []string{AnomalyInvalid}},
		{Decoded: Decoded{Valid: true}},
		{Decoded: Decoded{ID: 1<<63 - 1, UnixMs: -5, Valid: true}, Topic: "é\n", Anomalies: []string{"a", "b"}},
		{Decoded: Decoded{ID: 7, Valid: true}, Anomalies: []string{AnomalyRenumbered},
			FirstCopy: &Copy{Topic: "o\"é", Partition: 2, Offset: 1 << 40, ID: 1<<63 - 1}},
	} {
		b := rec.AppendJSON(nil)
		got, err := ParseAuditRecord(b)
		if err != nil {
			t.Fatalf("ParseAuditRecord(%s): %v", b, err)
		}
		if !reflect.DeepEqual(got, rec) {
			t.Errorf("ParseAuditRecord(%s) = %+v, want %+v", b, got, rec)
		}
		var viaJSON AuditRecord
		if err := json.Unmarshal(b, &viaJSON); err != nil || !reflect.DeepEqual(viaJSON, rec) {
			t.Errorf("json.Unmarshal(%s) = %+v, %v; want %+v", b, viaJSON, err, rec)
		}
	}
}

func TestParseAuditRecordErrors(t *testing.T) {
	valid := string(sampleAuditRecord().AppendJSON(nil))
	tests := []struct {
		name  string
		input string
	}{
		{"not json", valid[:len(valid)-1]},
		{"not object", `[` + valid + `]`},
		{"null", `null`},
		{"invalid utf-8", strings.Replace(valid, "orders-numbered", "orders\xff", 1)},
		{"id number", strings.Replace(valid, `"id":"229710323916801"`, `"id":229710323916801`, 1)},
		{"id negative", strings.Replace(valid, `"id":"229710323916801"`, `"id":"-1"`, 1)},
		{"id leading zero", strings.Replace(valid, `"id":"229710323916801"`, `"id":"0229710323916801"`, 1)},
		{"id letters", strings.Replace(valid, `"id":"229710323916801"`, `"id":"abc"`, 1)},
		{"id too big", strings.Replace(valid, `"id":"229710323916801"`, `"id":"9223372036854775808"`, 1)},
		{"id null", strings.Replace(valid, `"id":"229710323916801"`, `"id":null`, 1)},
		{"id missing", strings.Replace(valid, `"id":"229710323916801",`, ``, 1)},
		{"id wrong case", strings.Replace(valid, `"id":`, `"ID":`, 1)},
		{"time mismatch", strings.Replace(valid, `07:12:47.209Z`, `07:12:47.208Z`, 1)},
		{"time other zone", strings.Replace(valid, `07:12:47.209Z`, `07:12:47.209+00:00`, 1)},
		{"time missing", strings.Replace(valid, `"time":"2021-11-12T07:12:47.209Z",`, ``, 1)},
		{"fraction", strings.Replace(valid, `"offset":1234567`, `"offset":1.5`, 1)},
		{"partition overflow", strings.Replace(valid, `"partition":3`, `"partition":2147483648`, 1)},
		{"topic number", strings.Replace(valid, `"topic":"orders-numbered"`, `"topic":1`, 1)},
		{"anomalies null", strings.Replace(valid, `"anomalies":["duplicate"]`, `"anomalies":null`, 1)},
		{"anomalies string", strings.Replace(valid, `"anomalies":["duplicate"]`, `"anomalies":"duplicate"`, 1)},
		{"first_copy null", strings.Replace(valid, `]}`, `],"first_copy":null}`, 1)},
		{"first_copy not object", strings.Replace(valid, `]}`, `],"first_copy":[1]}`, 1)},
		{"first_copy no id", strings.Replace(valid, `]}`, `],"first_copy":{"topic":"t","partition":0,"offset":1}}`, 1)},
		{"first_copy id number", strings.Replace(valid, `]}`, `],"first_copy":{"topic":"t","partition":0,"offset":1,"id":5}}`, 1)},
		{"first_copy id leading zero", strings.Replace(valid, `]}`, `],"first_copy":{"topic":"t","partition":0,"offset":1,"id":"05"}}`, 1)},
		{"first_copy topic null", strings.Replace(valid, `]}`, `],"first_copy":{"topic":null,"partition":0,"offset":1,"id":"5"}}`, 1)},
		{"invalid with number fields", `{"id":"","unix_ms":5,"time":"","elapsed_ms":0,"server":0,"worker":0,"sequence":0,` +
			`"topic":"t","partition":0,"offset":0,"record_unix_ms":0,"lag_ms":0,"source":"","anomalies":[]}`},
		{"invalid with time", `{"id":"","unix_ms":0,"time":"1970-01-01T00:00:00.000Z","elapsed_ms":0,"server":0,"worker":0,"sequence":0,` +
			`"topic":"t","partition":0,"offset":0,"record_unix_ms":0,"lag_ms":0,"source":"","anomalies":[]}`},
	}
	if _, err := ParseAuditRecord([]byte(valid)); err != nil {
		t.Fatalf("ParseAuditRecord(%s): %v", valid, err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseAuditRecord([]byte(tt.input)); !errors.Is(err, ErrInvalidAuditRecord) {
				t.Errorf("ParseAuditRecord(%s) error = %v, want ErrInvalidAuditRecord", tt.input, err)
			}
		})
	}
	extra := strings.Replace(valid, `{`, `{"new_field":[1,{"x":2}],`, 1)
	if got, err := ParseAuditRecord([]byte(extra)); err != nil || !reflect.DeepEqual(got, sampleAuditRecord()) {
		t.Errorf("ParseAuditRecord with an unknown field = %+v, %v; want it ignored", got, err)
	}
}

// A renumbered record names its first copy in one more field, after
// "anomalies"; every other record is written exactly as before it existed.
func TestAuditRecordFirstCopy(t *testing.T) {
	rec := sampleAuditRecord()
	before := string(rec.AppendJSON(nil))
	if strings.Contains(before, "first_copy") {
		t.Fatalf("a record without a first copy writes one: %s", before)
	}
	rec.Anomalies = []string{AnomalyRenumbered}
	rec.FirstCopy = &Copy{Topic: "orders-numbered", Partition: 1, Offset: 99, ID: 229710323916800}
	got := string(rec.AppendJSON(nil))
	want := strings.Replace(before, `"anomalies":["duplicate"]}`,
		`"anomalies":["renumbered"],"first_copy":{"topic":"orders-numbered","partition":1,"offset":99,"id":"229710323916800"}}`, 1)
	if got != want {
		t.Fatalf("AppendJSON =\n%s\nwant\n%s", got, want)
	}
	var std struct {
		FirstCopy Copy `json:"first_copy"`
	}
	if err := json.Unmarshal([]byte(got), &std); err != nil || std.FirstCopy != *rec.FirstCopy {
		t.Fatalf("encoding/json reads first_copy as %+v, %v", std.FirstCopy, err)
	}
	// An old record (no first_copy) parses with none.
	if old, err := ParseAuditRecord([]byte(before)); err != nil || old.FirstCopy != nil {
		t.Fatalf("old record: %+v, %v", old, err)
	}
}

package schema

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/flakestream/flakestream/codec"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// avroPlan is what one Avro writer schema needs to number its records.
type avroPlan struct {
	// top is the plan of a top-level record; nil when the top level is a
	// union, whose record branches are in branches (nil for null).
	top      *recordPlan
	branches []*recordPlan
	out      sr.Schema
	subject  string
	outID    atomic.Int64 // see cache.outputID
}

// recordPlan numbers one record type.
type recordPlan struct {
	rec *avro.RecordSchema
	// field is the number field's index in rec, or -1 when the writer
	// schema lacks it (the splice path: append).
	field int
	// For a present field: whether it is a union, and its null, string and
	// long branches (-1 when absent; 0 for a plain string or long).
	union                            bool
	nullBranch, strBranch, lngBranch int
	// appendString: an added field is a string (else a long).
	appendString bool
	// lim is the budget of one walk of a value (Settings.MaxDepth and
	// MaxElements), copied for each.
	lim budget
}

// newAvroPlan parses the writer schema (and its references) and derives
// the output schema: a top-level record, or a union of records and null
// (each record gets the field; a null value is no_number_field).
func newAvroPlan(w *writer, s *Settings) (*avroPlan, *codec.InputError) {
	bad := func(class codec.Class, format string, a ...any) (*avroPlan, *codec.InputError) {
		return nil, planError(w, class, format, a...)
	}
	// A cache of its own: hamba's default cache is global and keyed by
	// name, and two versions of one record must not see each other.
	cache := &avro.SchemaCache{}
	for _, r := range w.refs {
		if _, err := avro.ParseWithCache(r.Schema.Schema, "", cache); err != nil {
			return bad(codec.ClassUnknownSchema, "reference %q does not parse as Avro: %v", r.name, err)
		}
	}
	sch, err := avro.ParseWithCache(w.text.Schema, "", cache)
	if err != nil {
		return bad(codec.ClassUnknownSchema, "does not parse as Avro: %v", err)
	}
	p := &avroPlan{}
	out := w.text
	switch top := deref(sch).(type) {
	case *avro.RecordSchema:
		rp, msg := newRecordPlan(top, s)
		if msg != "" {
			return bad(codec.ClassNoNumberField, "%s", msg)
		}
		if rp.field < 0 {
			if out.Schema, err = addField(w.text.Schema, s.Field, rp.appendString); err != nil {
				// The record is defined in a reference: not ours to change.
				return bad(codec.ClassNoNumberField, "add the number field: %v", err)
			}
		}
		p.top, p.subject = rp, s.Strategy.subject(s.OutputTopic, top.FullName())
	case *avro.UnionSchema:
		text, ierr := p.planUnion(w, s, top)
		if ierr != nil {
			return nil, ierr
		}
		out.Schema, p.subject = text, s.Strategy.subject(s.OutputTopic, "")
	default:
		return bad(codec.ClassNoNumberField, "top level is %s, not a record or a union of records: no field to number", sch.Type())
	}
	if out.Schema != w.text.Schema {
		// The output must parse too (with the references): a writer schema
		// that already uses the name elsewhere would break it.
		if _, err := avro.ParseWithCache(out.Schema, "", cloneCache(w)); err != nil {
			return bad(codec.ClassNoNumberField, "schema with the number field added does not parse: %v", err)
		}
	}
	p.out = sr.Schema{Schema: out.Schema, Type: sr.TypeAvro, References: out.References}
	return p, nil
}

// planError is a schema's error: what is wrong with writer schema w.
func planError(w *writer, class codec.Class, format string, a ...any) *codec.InputError {
	return &codec.InputError{Class: class, Offset: 1,
		Msg: fmt.Sprintf("schema id %d: ", w.id) + fmt.Sprintf(format, a...)}
}

// planUnion plans a top-level union of records and null: each record
// branch gets a recordPlan in p.branches (nil for null), and the output
// union is returned as JSON with the number field added where missing.
func (p *avroPlan) planUnion(w *writer, s *Settings, top *avro.UnionSchema) (string, *codec.InputError) {
	if s.Strategy != TopicName {
		return "", planError(w, codec.ClassNoNumberField, "top level is a union, which has no name for the %s subject strategy", s.Strategy)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal([]byte(w.text.Schema), &raws); err != nil || len(raws) != len(top.Types()) {
		return "", planError(w, codec.ClassUnknownSchema, "top-level union is not a JSON array of its branches")
	}
	records := 0
	for i, t := range top.Types() {
		if t.Type() == avro.Null {
			p.branches = append(p.branches, nil)
			continue
		}
		rec, ok := t.(*avro.RecordSchema) // a name (RefSchema) is defined elsewhere: not ours to change
		if !ok {
			return "", planError(w, codec.ClassNoNumberField, "top-level union branch %d is %s, want an inline record or null", i, t.Type())
		}
		rp, msg := newRecordPlan(rec, s)
		if msg != "" {
			return "", planError(w, codec.ClassNoNumberField, "union branch %s: %s", rec.FullName(), msg)
		}
		if rp.field < 0 {
			text, err := addField(string(raws[i]), s.Field, rp.appendString)
			if err != nil {
				return "", planError(w, codec.ClassUnknownSchema, "add the number field to branch %d: %v", i, err)
			}
			raws[i] = json.RawMessage(text)
		}
		p.branches = append(p.branches, rp)
		records++
	}
	if records == 0 {
		return "", planError(w, codec.ClassNoNumberField, "top-level union has no record")
	}
	text, err := json.Marshal(raws)
	if err != nil {
		return "", planError(w, codec.ClassUnknownSchema, "write the output union: %v", err)
	}
	return string(text), nil
}

func deref(s avro.Schema) avro.Schema {
	if ref, ok := s.(*avro.RefSchema); ok {
		return ref.Schema()
	}
	return s
}

// newRecordPlan finds the number field in rec; msg says why it cannot hold
// a number.
func newRecordPlan(rec *avro.RecordSchema, s *Settings) (*recordPlan, string) {
	p := &recordPlan{rec: rec, field: -1, nullBranch: -1, strBranch: -1, lngBranch: -1,
		appendString: s.NumberFormat == codec.FormatString, lim: newBudget(s)}
	for i, f := range rec.Fields() {
		if f.Name() == s.Field {
			p.field = i
		}
	}
	if p.field >= 0 && !p.classify(rec.Fields()[p.field].Type()) {
		return nil, fmt.Sprintf("field %q is %s: want string, long, or a union of null with them",
			s.Field, rec.Fields()[p.field].Type().Type())
	}
	return p, ""
}

// record returns the record plan for payload and where the record's
// encoding starts (after a top-level union's branch index).
func (p *avroPlan) record(payload []byte) (*recordPlan, int, *codec.InputError) {
	if p.top != nil {
		return p.top, 0, nil
	}
	k, j, err := readInt(payload, 0)
	if err == nil && (k < 0 || int(k) >= len(p.branches)) {
		err = errUnion
	}
	if err != nil {
		return nil, 0, &codec.InputError{Class: codec.ClassUndecodable, Offset: headerLen,
			Msg: "payload does not decode with its writer schema", Err: err}
	}
	rp := p.branches[k]
	if rp == nil {
		if j != len(payload) {
			return nil, 0, &codec.InputError{Class: codec.ClassUndecodable, Offset: headerLen + j,
				Msg: "payload does not decode with its writer schema", Err: errTrailing}
		}
		return nil, 0, &codec.InputError{Class: codec.ClassNoNumberField, Offset: headerLen,
			Msg: "value is the top-level union's null: no record to number"}
	}
	return rp, j, nil
}

// cloneCache returns a fresh cache holding only the references, so the
// output schema parses without clashing with the writer's own names.
func cloneCache(w *writer) *avro.SchemaCache {
	c := &avro.SchemaCache{}
	for _, r := range w.refs {
		_, _ = avro.ParseWithCache(r.Schema.Schema, "", c)
	}
	return c
}

// classify records a present field's branches; false if it cannot hold a
// number.
func (p *recordPlan) classify(t avro.Schema) bool {
	kind := func(t avro.Schema) avro.Type {
		if _, ok := t.(*avro.NullSchema); ok {
			return avro.Null
		}
		if ps, ok := t.(*avro.PrimitiveSchema); ok && ps.Logical() == nil {
			return ps.Type()
		}
		return ""
	}
	u, ok := t.(*avro.UnionSchema)
	if !ok {
		switch kind(t) {
		case avro.String:
			p.strBranch = 0
		case avro.Long:
			p.lngBranch = 0
		default:
			return false
		}
		return true
	}
	p.union = true
	for i, b := range u.Types() {
		switch kind(b) {
		case avro.Null:
			p.nullBranch = i
		case avro.String:
			p.strBranch = i
		case avro.Long:
			p.lngBranch = i
		default:
			return false
		}
	}
	return p.strBranch >= 0 || p.lngBranch >= 0
}

// addField returns the record schema text with a last field name of type
// "string" (default "") or "long" (default 0). Only the fields array is
// touched; every other attribute is kept.
func addField(text, name string, asString bool) (string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &top); err != nil {
		return "", fmt.Errorf("top level is not a JSON object: %w", err)
	}
	var fields []json.RawMessage
	if err := json.Unmarshal(top["fields"], &fields); err != nil {
		return "", fmt.Errorf("fields is not an array: %w", err)
	}
	f := map[string]any{"name": name, "type": "long", "default": 0,
		"doc": "order number, added by flakestream"}
	if asString {
		f["type"], f["default"] = "string", ""
	}
	raw, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	fields = append(fields, raw)
	if top["fields"], err = json.Marshal(fields); err != nil {
		return "", err
	}
	b, err := json.Marshal(top)
	return string(b), err
}

// inspect checks payload (the record's encoding, at offset base of the
// value) against the writer schema and says whether it needs a number.
func (p *recordPlan) inspect(payload []byte, base int, s *Settings) (codec.Kind, int64, *codec.InputError) {
	start, end, at, err := walkRecord(payload, p.rec, p.field, p.lim)
	if err != nil {
		return codec.Bad, 0, walkError(err, base+at, "with its writer schema")
	}
	if p.field < 0 {
		return codec.NeedsNumber, 0, nil
	}
	n, set, msg := p.readNumber(payload[start:end])
	if !set {
		return codec.NeedsNumber, 0, nil
	}
	if msg == "" && s.Valid != nil {
		if verr := s.Valid(n); verr != nil {
			return codec.Bad, 0, &codec.InputError{Class: codec.ClassInvalidNumber, Offset: base + start,
				Msg: fmt.Sprintf("field %q: number rejected by the configured check", s.Field), Err: verr}
		}
	}
	if msg != "" {
		return codec.Bad, 0, &codec.InputError{Class: codec.ClassInvalidNumber, Offset: base + start,
			Msg: fmt.Sprintf("field %q: %s", s.Field, msg)}
	}
	return codec.HasNumber, n, nil
}

// readNumber reads the present field's encoding b (already walked, so well
// formed). set is false for null, "" and a plain long's 0 (the defaults,
// meaning "no number yet"); msg says why a set value is no valid number.
func (p *recordPlan) readNumber(b []byte) (n int64, set bool, msg string) {
	branch, i := 0, 0
	if p.union {
		k, j, _ := readLong(b, 0)
		branch, i = int(k), j
	}
	switch branch {
	case p.nullBranch:
		return 0, false, ""
	case p.strBranch:
		l, j, _ := readLen(b, i)
		if l == 0 {
			return 0, false, ""
		}
		v, err := codec.ParseNumber(b[j : j+l])
		if err != nil {
			return 0, true, err.Error()
		}
		return v, true, ""
	}
	v, _, _ := readLong(b, i)
	switch {
	case v == 0 && !p.union:
		return 0, false, ""
	case v < 0:
		return 0, true, "holds a negative number, want 0..9223372036854775807"
	}
	return v, true, ""
}

// appendNumber appends the number's encoding for the present field (with
// its union branch) or, when absent, for the added field.
func (p *recordPlan) appendNumber(dst []byte, id int64) []byte {
	asString := p.appendString
	if p.field >= 0 {
		// The field's own type decides; the number format breaks a tie.
		asString = p.strBranch >= 0 && (p.lngBranch < 0 || p.appendString)
		if p.union {
			br := p.lngBranch
			if asString {
				br = p.strBranch
			}
			dst = binary.AppendVarint(dst, int64(br))
		}
	}
	if asString {
		var buf [20]byte
		digits := strconv.AppendInt(buf[:0], id, 10)
		dst = binary.AppendVarint(dst, int64(len(digits)))
		return append(dst, digits...)
	}
	return binary.AppendVarint(dst, id)
}

// fieldValue reads top-level field name of the record's encoding payload,
// at offset base of the value, as key bytes.
func (p *recordPlan) fieldValue(payload []byte, base int, name string) ([]byte, bool, *codec.InputError) {
	idx := -1
	for i, f := range p.rec.Fields() {
		if f.Name() == name {
			idx = i
		}
	}
	if idx < 0 {
		return nil, false, nil
	}
	start, end, at, err := walkRecord(payload, p.rec, idx, p.lim)
	if err != nil {
		return nil, false, walkError(err, base+at, "with its writer schema")
	}
	return keyBytes(payload[start:end], p.rec.Fields()[idx].Type(), name)
}

func keyBytes(b []byte, t avro.Schema, name string) ([]byte, bool, *codec.InputError) {
	if ref, ok := t.(*avro.RefSchema); ok {
		t = ref.Schema()
	}
	switch t := t.(type) {
	case *avro.UnionSchema:
		k, j, _ := readLong(b, 0)
		return keyBytes(b[j:], t.Types()[k], name)
	case *avro.NullSchema:
		return nil, false, nil
	case *avro.EnumSchema:
		k, _, _ := readLong(b, 0)
		return []byte(t.Symbols()[k]), true, nil
	case *avro.PrimitiveSchema:
		switch t.Type() {
		case avro.Null:
			return nil, false, nil
		case avro.String, avro.Bytes:
			l, j, _ := readLen(b, 0)
			return b[j : j+l], true, nil
		case avro.Int, avro.Long:
			v, _, _ := readLong(b, 0)
			return strconv.AppendInt(nil, v, 10), true, nil
		}
	}
	return nil, false, &codec.InputError{Class: codec.ClassMissingKey,
		Msg: fmt.Sprintf("field %q is %s, want a string, bytes, an integer or an enum", name, t.Type())}
}

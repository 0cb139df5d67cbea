package codec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Anomalies the audit consumer reports in AuditRecord.Anomalies.
const (
	// AnomalyDuplicate: the number was seen before on another record.
	AnomalyDuplicate = "duplicate"
	// AnomalyInvalid: the record carries no decodable number.
	AnomalyInvalid = "invalid"
	// AnomalyRenumbered: the order the record carries (its source, or its
	// order key) was seen before with another number. The audit record's
	// FirstCopy names that earlier copy.
	AnomalyRenumbered = "renumbered"
)

// timeLayout is RFC 3339 with exactly three fractional digits. Go writes
// "Z" for UTC through the Z07:00 verb, and ".000" never drops zeros the way
// RFC3339Nano's ".999999999" does, so every time has the same width (for
// years 0 to 9999) and sorts as text.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// appendTime appends the Unix millisecond time ms in timeLayout, in UTC.
func appendTime(dst []byte, ms int64) []byte {
	return time.UnixMilli(ms).UTC().AppendFormat(dst, timeLayout)
}

// Decoded is a number decoded into its parts, as the CLI's decode --json
// prints it and as the first seven fields of every [AuditRecord]:
//
//	{"id":"<decimal>","unix_ms":<int>,"time":"<RFC 3339 UTC, ms>",
//	 "elapsed_ms":<int>,"server":<int>,"worker":<int>,"sequence":<int>}
//
// The id is a string for the same reason numbers are strings in events:
// JavaScript loses precision above 2^53. "time" is not a field: it is
// always UnixMs formatted, so it cannot disagree with it.
//
// The json tags document the schema; MarshalJSON writes it with AppendJSON.
type Decoded struct {
	// ID is the number; non-negative.
	ID int64 `json:"id,string"`
	// UnixMs is the number's time in Unix milliseconds.
	UnixMs int64 `json:"unix_ms"`
	// ElapsedMs is the number's time field: milliseconds since the layout's
	// epoch.
	ElapsedMs int64 `json:"elapsed_ms"`
	// Server is the server ID field.
	Server int64 `json:"server"`
	// Worker is the worker ID (business line) field.
	Worker int64 `json:"worker"`
	// Sequence is the sequence within the millisecond.
	Sequence int64 `json:"sequence"`
	// Valid says the fields above hold a decoded number. When it is false
	// (a record without a decodable number) the JSON has id "" and time "",
	// and 0 for every other field above, whatever they hold.
	Valid bool `json:"-"`
}

// Time returns UnixMs as a UTC time.
func (d Decoded) Time() time.Time { return time.UnixMilli(d.UnixMs).UTC() }

// AppendJSON appends d as a JSON object to dst, without allocating when dst
// has room.
func (d Decoded) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = d.appendFields(dst)
	return append(dst, '}')
}

// MarshalJSON returns AppendJSON's output, so encoding/json writes the
// schema exactly.
func (d Decoded) MarshalJSON() ([]byte, error) { return d.AppendJSON(nil), nil }

// appendFields appends d's members without braces, so that AuditRecord
// shares them byte for byte.
func (d Decoded) appendFields(dst []byte) []byte {
	if !d.Valid {
		return append(dst, `"id":"","unix_ms":0,"time":"","elapsed_ms":0,"server":0,"worker":0,"sequence":0`...)
	}
	dst = append(dst, `"id":"`...)
	dst = strconv.AppendInt(dst, d.ID, 10)
	dst = append(dst, `","unix_ms":`...)
	dst = strconv.AppendInt(dst, d.UnixMs, 10)
	dst = append(dst, `,"time":"`...)
	dst = appendTime(dst, d.UnixMs)
	dst = append(dst, `","elapsed_ms":`...)
	dst = strconv.AppendInt(dst, d.ElapsedMs, 10)
	dst = append(dst, `,"server":`...)
	dst = strconv.AppendInt(dst, d.Server, 10)
	dst = append(dst, `,"worker":`...)
	dst = strconv.AppendInt(dst, d.Worker, 10)
	dst = append(dst, `,"sequence":`...)
	return strconv.AppendInt(dst, d.Sequence, 10)
}

// AuditRecord is what the audit consumer writes for each numbered record it
// reads. Its JSON has exactly these fields, in this order:
//
//	{"id":"<decimal>","unix_ms":<int>,"time":"<RFC 3339 UTC, ms>",
//	 "elapsed_ms":<int>,"server":<int>,"worker":<int>,"sequence":<int>,
//	 "topic":"<string>","partition":<int>,"offset":<int>,
//	 "record_unix_ms":<int>,"lag_ms":<int>,"source":"<string>",
//	 "anomalies":["duplicate",...]}
//
// and, only on a record flagged AnomalyRenumbered, one more field after
// "anomalies":
//
//	"first_copy":{"topic":"<string>","partition":<int>,"offset":<int>,"id":"<decimal>"}
//
// The first seven are the embedded Decoded's; for a record without a
// decodable number, Decoded.Valid is false and they are "" and 0.
// "anomalies" is always an array, [] when there are none.
type AuditRecord struct {
	Decoded
	// Topic, Partition and Offset locate the numbered record.
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// RecordUnixMs is the numbered record's Kafka timestamp.
	RecordUnixMs int64 `json:"record_unix_ms"`
	// LagMs is the lag the audit consumer measured for the record, in
	// milliseconds.
	LagMs int64 `json:"lag_ms"`
	// Source is where the record came from before it was numbered
	// (HeaderSource, "topic/partition/offset"), or "" if unknown.
	Source string `json:"source"`
	// Anomalies lists what is wrong with the number (AnomalyDuplicate,
	// AnomalyInvalid, ...); nil when nothing is.
	Anomalies []string `json:"anomalies"`
	// FirstCopy, on a record flagged AnomalyRenumbered, is the first copy
	// of the same order, with the number it had; nil otherwise (and the
	// field is then not written).
	FirstCopy *Copy `json:"first_copy,omitempty"`
}

// Copy is one numbered copy of an order: where it is and its number.
type Copy struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	ID        int64  `json:"id,string"`
}

// AppendJSON appends r as a JSON object to dst, escaping the strings as
// JSON requires (invalid UTF-8 becomes \ufffd). It does not allocate when
// dst has room.
func (r AuditRecord) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = r.Decoded.appendFields(dst)
	dst = append(dst, `,"topic":`...)
	dst = appendJSONString(dst, r.Topic)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(r.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, r.Offset, 10)
	dst = append(dst, `,"record_unix_ms":`...)
	dst = strconv.AppendInt(dst, r.RecordUnixMs, 10)
	dst = append(dst, `,"lag_ms":`...)
	dst = strconv.AppendInt(dst, r.LagMs, 10)
	dst = append(dst, `,"source":`...)
	dst = appendJSONString(dst, r.Source)
	dst = append(dst, `,"anomalies":[`...)
	for i, a := range r.Anomalies {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, a)
	}
	dst = append(dst, ']')
	if c := r.FirstCopy; c != nil {
		dst = append(dst, `,"first_copy":{"topic":`...)
		dst = appendJSONString(dst, c.Topic)
		dst = append(dst, `,"partition":`...)
		dst = strconv.AppendInt(dst, int64(c.Partition), 10)
		dst = append(dst, `,"offset":`...)
		dst = strconv.AppendInt(dst, c.Offset, 10)
		dst = append(dst, `,"id":"`...)
		dst = strconv.AppendInt(dst, c.ID, 10)
		dst = append(dst, `"}`...)
	}
	return append(dst, '}')
}

// MarshalJSON returns AppendJSON's output. It must be declared here: the
// one promoted from Decoded would write only the first seven fields.
func (r AuditRecord) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON parses b with ParseAuditRecord.
func (r *AuditRecord) UnmarshalJSON(b []byte) error {
	rec, err := ParseAuditRecord(b)
	if err != nil {
		return err
	}
	*r = rec
	return nil
}

// auditFields are the audit record's keys in schema order.
var auditFields = [...]string{"id", "unix_ms", "time", "elapsed_ms", "server", "worker", "sequence",
	"topic", "partition", "offset", "record_unix_ms", "lag_ms", "source", "anomalies"}

// ParseAuditRecord parses an audit record. It is strict where AppendJSON is
// exact, so that a record that parses writes back to the same fields: every
// schema field must be present and not null, keys match case-sensitively,
// id must be "" or a canonical decimal in 0..2^63-1, time must be unix_ms
// formatted as AppendJSON formats it (or "" when id is ""), and a record
// with id "" must have 0 in the other number fields. Fields outside the
// schema are ignored, so the schema can grow. An empty anomalies array
// parses to nil. "first_copy" may be absent (records written before it
// existed, and every record that is not renumbered); when present it must
// be an object with all four of its fields, its id a canonical decimal.
// Errors wrap ErrInvalidAuditRecord.
func ParseAuditRecord(b []byte) (AuditRecord, error) {
	var r AuditRecord
	if !utf8.Valid(b) {
		return r, fmt.Errorf("codec: audit record is not valid utf-8: %w", ErrInvalidAuditRecord)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return r, fmt.Errorf("codec: audit record: %w: %w", ErrInvalidAuditRecord, err)
	}
	var id, tm string
	targets := [len(auditFields)]any{&id, &r.UnixMs, &tm, &r.ElapsedMs, &r.Server, &r.Worker, &r.Sequence,
		&r.Topic, &r.Partition, &r.Offset, &r.RecordUnixMs, &r.LagMs, &r.Source, &r.Anomalies}
	for i, k := range auditFields {
		raw, ok := m[k]
		if !ok || string(raw) == "null" {
			return AuditRecord{}, fmt.Errorf("codec: audit record: field %q is missing or null: %w", k, ErrInvalidAuditRecord)
		}
		if err := json.Unmarshal(raw, targets[i]); err != nil {
			return AuditRecord{}, fmt.Errorf("codec: audit record: field %q: %w: %w", k, ErrInvalidAuditRecord, err)
		}
	}
	if len(r.Anomalies) == 0 {
		r.Anomalies = nil
	}
	if raw, ok := m["first_copy"]; ok {
		c, err := parseCopy(raw)
		if err != nil {
			return AuditRecord{}, err
		}
		r.FirstCopy = &c
	}
	if id == "" {
		if r.UnixMs != 0 || tm != "" || r.ElapsedMs != 0 || r.Server != 0 || r.Worker != 0 || r.Sequence != 0 {
			return AuditRecord{}, fmt.Errorf("codec: audit record without id has number fields set: %w", ErrInvalidAuditRecord)
		}
		return r, nil
	}
	n, msg := parseDigits([]byte(id))
	if msg != "" {
		return AuditRecord{}, fmt.Errorf("codec: audit record: id %q %s: %w", id, msg, ErrInvalidAuditRecord)
	}
	r.ID, r.Valid = n, true
	var buf [64]byte
	if want := appendTime(buf[:0], r.UnixMs); string(want) != tm {
		return AuditRecord{}, fmt.Errorf("codec: audit record: time %q does not match unix_ms %d (want %q): %w",
			tm, r.UnixMs, want, ErrInvalidAuditRecord)
	}
	return r, nil
}

// parseCopy parses an audit record's "first_copy" as strictly as the
// record itself.
func parseCopy(raw json.RawMessage) (Copy, error) {
	var c Copy
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return c, fmt.Errorf("codec: audit record: field \"first_copy\" is not an object: %w", ErrInvalidAuditRecord)
	}
	var id string
	targets := map[string]any{"topic": &c.Topic, "partition": &c.Partition, "offset": &c.Offset, "id": &id}
	for _, k := range [...]string{"topic", "partition", "offset", "id"} {
		v, ok := m[k]
		if !ok || string(v) == "null" {
			return Copy{}, fmt.Errorf("codec: audit record: field \"first_copy.%s\" is missing or null: %w", k, ErrInvalidAuditRecord)
		}
		if err := json.Unmarshal(v, targets[k]); err != nil {
			return Copy{}, fmt.Errorf("codec: audit record: field \"first_copy.%s\": %w: %w", k, ErrInvalidAuditRecord, err)
		}
	}
	n, msg := parseDigits([]byte(id))
	if msg != "" {
		return Copy{}, fmt.Errorf("codec: audit record: first_copy.id %q %s: %w", id, msg, ErrInvalidAuditRecord)
	}
	c.ID = n
	return c, nil
}

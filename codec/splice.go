package codec

// AppendNumbered appends to dst the event value with its number field set to
// id, and returns the extended buffer. insp must be the NeedsNumber result of
// c.Inspect(value); with a dst of enough capacity it does not allocate.
//
// Only the number is added: every other byte of value, including key order,
// spacing, unknown fields and trailing whitespace, is copied unchanged.
//   - A null field has just its null token replaced:
//     {"order_no": null} becomes {"order_no": "42"}. So has the number of
//     a renumbered value (see [Inspection.Renumber]).
//   - An absent field is added as the last member, written right after the
//     last member's value, before any whitespace that precedes the closing
//     brace: {"a":1 } becomes {"a":1,"order_no":"42" }. Attaching it there
//     keeps the original's layout of the closing brace intact.
//   - An empty object gets it right after its brace: { } becomes
//     {"order_no":"42" }.
//
// Removing the added bytes gives back value exactly.
//
// AppendNumbered panics if insp is not a NeedsNumber inspection of a value
// of len(value) bytes, or if id is negative: both are bugs in the caller,
// and writing on would emit an event that Inspect rejects.
func (c *Codec) AppendNumbered(dst, value []byte, insp Inspection, id int64) []byte {
	if insp.Kind != NeedsNumber || insp.size != len(value) {
		panic("codec: AppendNumbered needs the NeedsNumber Inspection of the same value")
	}
	if id < 0 {
		panic("codec: AppendNumbered: negative number")
	}
	if insp.replace {
		dst = append(dst, value[:insp.repAt]...)
		dst = c.appendNumber(dst, id)
		return append(dst, value[insp.repEnd:]...)
	}
	dst = append(dst, value[:insp.insertAt]...)
	if insp.empty {
		dst = append(dst, c.member[1:]...)
	} else {
		dst = append(dst, c.member...)
	}
	dst = c.appendNumber(dst, id)
	return append(dst, value[insp.insertAt:]...)
}

// NumberedLen returns the length of AppendNumbered's output for value, insp
// and id, so a caller can size a buffer once.
func (c *Codec) NumberedLen(value []byte, insp Inspection, id int64) int {
	n := len(value) + decimalLen(id)
	if c.format == FormatString {
		n += 2
	}
	switch {
	case insp.replace:
		n -= insp.repEnd - insp.repAt
	case insp.empty:
		n += len(c.member) - 1
	default:
		n += len(c.member)
	}
	return n
}

func (c *Codec) appendNumber(dst []byte, id int64) []byte {
	if c.format == FormatNumber {
		return AppendInt(dst, id)
	}
	dst = append(dst, '"')
	dst = AppendInt(dst, id)
	return append(dst, '"')
}

package schema

import (
	"errors"

	"github.com/flakestream/flakestream/codec"
)

// The limits on the work one value costs. The walkers build nothing, but
// their time grows with what a value holds, not with its bytes: an Avro
// array of null is a few bytes for any count, and a recursive schema lets
// the data choose the depth. So values are counted, at every level, and
// nesting is bounded, and a value over either limit is dead-lettered
// (too_many_elements, too_deep) as soon as the walk reaches it.

var (
	errTooDeep = errors.New("values nest deeper than the depth limit (Settings.MaxDepth)")
	errTooMany = errors.New("more values than the element limit (Settings.MaxElements)")
)

// budget is what is left of one walk's limits. Each walk has its own (it
// is copied by value from the plan), so walks on several goroutines share
// nothing.
type budget struct {
	maxDepth int // the deepest level a container may open; the top-level record or message is level 1
	left     int // values that may still be read
}

func newBudget(s *Settings) budget { return budget{maxDepth: s.MaxDepth, left: s.MaxElements} }

// take counts n values, or fails when fewer than n are left.
func (b *budget) take(n int64) error {
	if n > int64(b.left) {
		b.left = 0
		return errTooMany
	}
	b.left -= int(n)
	return nil
}

// open checks that a container may open at level.
func (b *budget) open(level int) error {
	if level > b.maxDepth {
		return errTooDeep
	}
	return nil
}

// walkClass is the class of a walk's error: a limit's, or undecodable.
func walkClass(err error) codec.Class {
	switch {
	case errors.Is(err, errTooDeep):
		return codec.ClassTooDeep
	case errors.Is(err, errTooMany):
		return codec.ClassTooManyElements
	}
	return codec.ClassUndecodable
}

// walkError is the InputError of a failed walk at offset at of the value.
func walkError(err error, at int, what string) *codec.InputError {
	class := walkClass(err)
	msg := "payload does not decode " + what
	switch class {
	case codec.ClassTooDeep:
		msg = "payload nests deeper than the depth limit (--max-depth)"
	case codec.ClassTooManyElements:
		msg = "payload holds more values than the limit (--max-elements)"
	}
	return &codec.InputError{Class: class, Offset: at, Msg: msg, Err: err}
}

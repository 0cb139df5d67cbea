package schema

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/sr"
)

// RegistryError is a registry request that failed for a reason other than
// the record: unreachable, 5xx, or (not retryable) refused credentials. It
// wraps codec.ErrUnavailable when a retry can help.
type RegistryError struct {
	// Op is what was asked, e.g. "fetch schema 7".
	Op string
	// StatusCode is the HTTP status, or 0 when no answer came.
	StatusCode int
	// Err is the cause.
	Err error
}

// Retryable reports whether a retry can help: no answer, 408, 429 or 5xx.
func (e *RegistryError) Retryable() bool {
	return e.StatusCode == 0 || e.StatusCode == http.StatusRequestTimeout ||
		e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
}

func (e *RegistryError) Error() string {
	s := "schema registry: " + e.Op
	if e.StatusCode != 0 {
		s += ": HTTP " + strconv.Itoa(e.StatusCode)
	}
	s += ": " + e.Err.Error()
	if !e.Retryable() {
		s += " (check --schema-registry and its credentials)"
	}
	return s
}

// Unwrap returns codec.ErrUnavailable when retryable, and the cause.
func (e *RegistryError) Unwrap() []error {
	if e.Retryable() {
		return []error{codec.ErrUnavailable, e.Err}
	}
	return []error{e.Err}
}

// ErrIncompatible is wrapped by every [*IncompatibleError].
var ErrIncompatible = errors.New("output schema refused by the registry")

// IncompatibleError is an output schema the registry refused to register
// (incompatible with the subject's earlier versions, or invalid). It is
// fatal: numbering the record would produce values no reader of the output
// subject could read.
type IncompatibleError struct {
	// Subject is the output subject.
	Subject string
	// InputID is the writer schema the output schema was derived from.
	InputID int
	// Reason is the registry's message.
	Reason string
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("schema: registry refused the output schema for subject %q (from schema id %d): %s",
		e.Subject, e.InputID, e.Reason)
}

// Unwrap returns ErrIncompatible.
func (e *IncompatibleError) Unwrap() error { return ErrIncompatible }

// errNotFound is a 404 from the registry, turned into ClassUnknownSchema.
var errNotFound = errors.New("not found")

// classify maps a pkg/sr error to errNotFound, a *RegistryError, or the
// context's error.
func classify(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if re, ok := errors.AsType[*sr.ResponseError](err); ok {
		if re.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%s: %w: %s", op, errNotFound, re.Error())
		}
		return &RegistryError{Op: op, StatusCode: re.StatusCode, Err: err}
	}
	return &RegistryError{Op: op, Err: err}
}

// writer is one input schema ID, fetched and prepared once.
type writer struct {
	id   int
	text sr.Schema
	// refs holds the text of every schema referenced, directly or not,
	// by reference name.
	refs  []namedText
	avro  *avroPlan
	proto *protoPlan
}

type namedText struct {
	name string
	sr.Schema
}

// entry is a cache slot: ready closes when w or bad is set.
type entry struct {
	ready   chan struct{}
	w       *writer
	bad     *codec.InputError // unknown or unusable schema
	expires time.Time         // for bad: when to ask again
	err     error             // not cached: the slot is removed
}

type outKey struct {
	id      int
	subject string
}

type outEntry struct {
	ready chan struct{}
	id    int
	err   error
}

// cache is the registry-facing half of a Format: schemas by ID and output
// IDs by (input ID, subject), each fetched once however many goroutines ask.
type cache struct {
	s *Settings

	// fast holds every loaded writer, copied on write, so the hot path
	// reads it without a lock.
	fast atomic.Pointer[map[int]*writer]

	mu   sync.Mutex
	byID map[int]*entry
	out  map[outKey]*outEntry
	refs map[string]sr.SubjectSchema // "subject\x00version"
}

// writer returns the prepared schema for id, fetching it on first use. It
// returns an InputError for an unknown or unusable schema, an error for a
// registry failure (nothing is cached then).
func (c *cache) writer(ctx context.Context, id int) (*writer, *codec.InputError, error) {
	if m := c.fast.Load(); m != nil {
		if w, ok := (*m)[id]; ok {
			return w, nil, nil
		}
	}
	c.mu.Lock()
	e, ok := c.byID[id]
	if ok {
		select {
		case <-e.ready:
			if e.bad != nil && !c.s.Now().Before(e.expires) {
				ok = false // ask again
			}
		default:
		}
	}
	if !ok {
		e = &entry{ready: make(chan struct{})}
		c.byID[id] = e
		c.mu.Unlock()
		e.w, e.bad, e.err = c.load(ctx, id)
		if e.bad != nil {
			e.expires = c.s.Now().Add(c.s.UnknownTTL)
		}
		c.mu.Lock()
		switch {
		case e.err != nil:
			if c.byID[id] == e {
				delete(c.byID, id)
			}
		case e.w != nil:
			old := c.fast.Load()
			m := make(map[int]*writer, 1)
			if old != nil {
				m = make(map[int]*writer, len(*old)+1)
				maps.Copy(m, *old)
			}
			m[id] = e.w
			c.fast.Store(&m)
		}
		c.mu.Unlock()
		close(e.ready)
		return e.w, e.bad, e.err
	}
	c.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if e.err != nil {
		// The loader's failure: ask ourselves rather than share it, as the
		// loader's context may have been the one that ended.
		return c.writer(ctx, id)
	}
	return e.w, e.bad, nil
}

func (c *cache) load(ctx context.Context, id int) (*writer, *codec.InputError, error) {
	op := "fetch schema id " + strconv.Itoa(id)
	s, err := c.s.Client.SchemaByID(ctx, id)
	if err != nil {
		err = classify(ctx, op, err)
		if errors.Is(err, errNotFound) {
			return nil, &codec.InputError{Class: codec.ClassUnknownSchema, Offset: 1,
				Msg: "schema id " + strconv.Itoa(id) + " is unknown to the registry"}, nil
		}
		return nil, nil, err
	}
	w := &writer{id: id, text: s}
	seen := map[string]bool{}
	if err := c.resolveRefs(ctx, s.References, &w.refs, seen, 0); err != nil {
		if errors.Is(err, errNotFound) {
			return nil, &codec.InputError{Class: codec.ClassUnknownSchema, Offset: 1,
				Msg: fmt.Sprintf("schema id %d: a reference is unknown to the registry: %v", id, err)}, nil
		}
		return nil, nil, err
	}
	var bad *codec.InputError
	switch c.s.Format {
	case codec.ValueAvro:
		if s.Type != sr.TypeAvro {
			return nil, wrongType(id, s.Type, sr.TypeAvro), nil
		}
		w.avro, bad = newAvroPlan(w, c.s)
	case codec.ValueProtobuf:
		if s.Type != sr.TypeProtobuf {
			return nil, wrongType(id, s.Type, sr.TypeProtobuf), nil
		}
		w.proto, bad = newProtoPlan(w, c.s)
	}
	if bad != nil {
		return nil, bad, nil
	}
	return w, nil, nil
}

func wrongType(id int, got, want sr.SchemaType) *codec.InputError {
	return &codec.InputError{Class: codec.ClassUnknownSchema, Offset: 1,
		Msg: fmt.Sprintf("schema id %d is %s, want %s (see --value-format)", id, got, want)}
}

// maxRefDepth bounds reference chains (the registry forbids cycles, but a
// registry is outside input too).
const maxRefDepth = 32

// resolveRefs appends every schema refs name, dependencies first, each once.
func (c *cache) resolveRefs(ctx context.Context, refs []sr.SchemaReference, out *[]namedText, seen map[string]bool, depth int) error {
	if depth > maxRefDepth {
		return fmt.Errorf("schema references nest deeper than %d: %w", maxRefDepth, errNotFound)
	}
	for _, r := range refs {
		if seen[r.Name] {
			continue
		}
		seen[r.Name] = true
		key := r.Subject + "\x00" + strconv.Itoa(r.Version)
		c.mu.Lock()
		ss, ok := c.refs[key]
		c.mu.Unlock()
		if !ok {
			var err error
			ss, err = c.s.Client.SchemaByVersion(ctx, r.Subject, r.Version)
			if err != nil {
				return classify(ctx, fmt.Sprintf("fetch reference %q (subject %q version %d)", r.Name, r.Subject, r.Version), err)
			}
			c.mu.Lock()
			c.refs[key] = ss
			c.mu.Unlock()
		}
		if err := c.resolveRefs(ctx, ss.References, out, seen, depth+1); err != nil {
			return err
		}
		*out = append(*out, namedText{name: r.Name, Schema: ss.Schema})
	}
	return nil
}

// outputID registers out under subject once and returns its ID, remembering
// it in *memo (the ID plus one; 0 is unknown) for a lock-free next time.
func (c *cache) outputID(ctx context.Context, w *writer, subject string, out sr.Schema, memo *atomic.Int64) (int, error) {
	if v := memo.Load(); v != 0 {
		return int(v - 1), nil
	}
	id, err := c.registerOnce(ctx, w, subject, out)
	if err == nil {
		memo.Store(int64(id) + 1)
	}
	return id, err
}

func (c *cache) registerOnce(ctx context.Context, w *writer, subject string, out sr.Schema) (int, error) {
	k := outKey{w.id, subject}
	c.mu.Lock()
	e, ok := c.out[k]
	if !ok {
		e = &outEntry{ready: make(chan struct{})}
		c.out[k] = e
		c.mu.Unlock()
		e.id, e.err = c.register(ctx, w.id, subject, out)
		if e.err != nil {
			c.mu.Lock()
			delete(c.out, k)
			c.mu.Unlock()
		}
		close(e.ready)
		return e.id, e.err
	}
	c.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if e.err != nil {
		return c.registerOnce(ctx, w, subject, out)
	}
	return e.id, nil
}

func (c *cache) register(ctx context.Context, inputID int, subject string, out sr.Schema) (int, error) {
	id, err := c.s.Client.RegisterSchema(ctx, subject, out, -1, -1)
	if err == nil {
		return id, nil
	}
	if re, ok := errors.AsType[*sr.ResponseError](err); ok && (re.StatusCode == http.StatusConflict || re.StatusCode == http.StatusUnprocessableEntity) {
		return 0, &IncompatibleError{Subject: subject, InputID: inputID, Reason: re.Error()}
	}
	return 0, classify(ctx, fmt.Sprintf("register the output schema under subject %q", subject), err)
}

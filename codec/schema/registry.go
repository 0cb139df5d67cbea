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
	"golang.org/x/sync/singleflight"
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
	return s + ": " + e.Err.Error()
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

// unknown is a schema ID the registry answered 404 for (or that does not
// prepare): a negative cache slot, asked again after expires.
type unknown struct {
	bad     *codec.InputError
	expires time.Time
}

type outKey struct {
	id      int
	subject string
}

// cache is the registry-facing half of a Format: schemas by ID and output
// IDs by (input ID, subject), each fetched once however many goroutines ask
// (singleflight), unknown IDs remembered for Settings.UnknownTTL.
type cache struct {
	s *Settings

	// fast holds every loaded writer, copied on write, so the hot path
	// reads it without a lock.
	fast atomic.Pointer[map[int]*writer]

	loads     singleflight.Group // by schema ID
	registers singleflight.Group // by input ID and output subject

	mu      sync.Mutex
	unknown map[int]unknown
	out     map[outKey]int
	refs    map[string]sr.SubjectSchema // "subject\x00version"
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
	u, ok := c.unknown[id]
	c.mu.Unlock()
	if ok && c.s.Now().Before(u.expires) {
		return nil, u.bad, nil
	}
	v, err := share(ctx, &c.loads, strconv.Itoa(id), func(ctx context.Context) (any, error) {
		w, bad, err := c.load(ctx, id)
		c.remember(id, w, bad)
		return unknown{bad: bad}, err
	})
	if err != nil {
		return nil, nil, err
	}
	if bad := v.(unknown).bad; bad != nil {
		return nil, bad, nil
	}
	m := c.fast.Load()
	return (*m)[id], nil, nil
}

// remember caches a loaded writer (for good) or an unknown ID (for
// UnknownTTL); a registry failure (both nil) is not cached.
func (c *cache) remember(id int, w *writer, bad *codec.InputError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case bad != nil:
		c.unknown[id] = unknown{bad: bad, expires: c.s.Now().Add(c.s.UnknownTTL)}
	case w != nil:
		delete(c.unknown, id)
		old := c.fast.Load()
		m := make(map[int]*writer, 1)
		if old != nil {
			m = make(map[int]*writer, len(*old)+1)
			maps.Copy(m, *old)
		}
		m[id] = w
		c.fast.Store(&m)
	}
}

// flight is what one shared call returned, and whether the context it ran
// under had ended by then.
type flight struct {
	v        any
	ctxEnded bool
}

// share runs fn once for every caller of key at the same time, each caller
// waiting under its own ctx. When the call that ran failed after its own
// context ended while ctx is still live, the caller asks again rather than
// share a cancellation that was not its own.
func share(ctx context.Context, g *singleflight.Group, key string, fn func(context.Context) (any, error)) (any, error) {
	for {
		ch := g.DoChan(key, func() (any, error) {
			v, err := fn(ctx)
			return flight{v: v, ctxEnded: ctx.Err() != nil}, err
		})
		select {
		case r := <-ch:
			f := r.Val.(flight)
			if r.Err != nil && f.ctxEnded && ctx.Err() == nil {
				continue
			}
			return f.v, r.Err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *cache) load(ctx context.Context, id int) (*writer, *codec.InputError, error) {
	// A schema outside the allow-list is neither fetched nor parsed.
	if bad, err := c.allowed(ctx, id); bad != nil || err != nil {
		return nil, bad, err
	}
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

// allowed checks schema id against Settings.AllowedSubjects: an ID in the
// list passes, else the registry is asked which subjects the ID is
// registered under (one request per ID, remembered like the schema).
func (c *cache) allowed(ctx context.Context, id int) (*codec.InputError, error) {
	if c.s.allowIDs == nil || c.s.allowIDs[id] {
		return nil, nil
	}
	subjects, err := c.s.Client.SubjectsByID(ctx, id)
	if err != nil {
		err = classify(ctx, "find the subjects of schema id "+strconv.Itoa(id), err)
		if errors.Is(err, errNotFound) {
			return &codec.InputError{Class: codec.ClassUnknownSchema, Offset: 1,
				Msg: "schema id " + strconv.Itoa(id) + " is unknown to the registry"}, nil
		}
		return nil, err
	}
	for _, sub := range subjects {
		if c.s.allowSubjects[sub] {
			return nil, nil
		}
	}
	return &codec.InputError{Class: codec.ClassSchemaNotAllowed, Offset: 1,
		Msg: fmt.Sprintf("schema id %d is registered under %q, none of them in the allowed subjects (--allowed-subjects)", id, subjects)}, nil
}

func wrongType(id int, got, want sr.SchemaType) *codec.InputError {
	return &codec.InputError{Class: codec.ClassUnknownSchema, Offset: 1,
		Msg: fmt.Sprintf("schema id %d is %s, want %s (the configured value format)", id, got, want)}
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
	id, ok := c.out[k]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	v, err := share(ctx, &c.registers, strconv.Itoa(w.id)+"\x00"+subject, func(ctx context.Context) (any, error) {
		id, err := c.register(ctx, w.id, subject, out)
		if err == nil {
			c.mu.Lock()
			c.out[k] = id
			c.mu.Unlock()
		}
		return id, err
	})
	if err != nil {
		return 0, err
	}
	return v.(int), nil
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

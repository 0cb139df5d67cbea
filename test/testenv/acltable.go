package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACLRow is one row of the ACL table in docs/security.md: what one command
// needs on one resource.
type ACLRow struct {
	Command    string   // run, replay, verify, audit, ...
	Resource   string   // topic, group, transactional-id, cluster
	Name       string   // with placeholders such as <input>
	Prefixed   bool     // pattern prefixed, not literal
	Operations []string // READ, WRITE, DESCRIBE, DESCRIBE_CONFIGS, ...
}

// ACLTable reads the ACL table of docs/security.md (the rows of the
// markdown table whose header starts "| command | resource |"). It fails t
// if the page or the table is missing or a row is malformed.
func ACLTable(t testing.TB) []ACLRow {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "docs", "security.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("testenv: the ACL table: %v", err)
	}
	rows, err := parseACLTable(string(b))
	if err != nil {
		t.Fatalf("testenv: the ACL table of %s: %v", path, err)
	}
	return rows
}

func parseACLTable(md string) ([]ACLRow, error) {
	var rows []ACLRow
	in := false
	for _, line := range strings.Split(md, "\n") {
		line = strings.TrimSpace(line)
		if !in {
			in = strings.HasPrefix(line, "| command | resource |")
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		if len(cells) < 5 {
			return nil, fmt.Errorf("row %q: want command, resource, name, pattern, operations", line)
		}
		r := ACLRow{Command: cells[0], Resource: cells[1], Name: cells[2], Prefixed: cells[3] == "prefixed"}
		if cells[3] != "prefixed" && cells[3] != "literal" {
			return nil, fmt.Errorf("row %q: pattern %q", line, cells[3])
		}
		for _, op := range strings.Split(cells[4], ",") {
			op = strings.TrimSpace(op)
			if _, err := kmsg.ParseACLOperation(strings.ReplaceAll(strings.ToLower(op), "_", "")); err != nil {
				return nil, fmt.Errorf("row %q: operation %q: %w", line, op, err)
			}
			r.Operations = append(r.Operations, op)
		}
		switch r.Resource {
		case "topic", "group", "transactional-id", "cluster":
		default:
			return nil, fmt.Errorf("row %q: resource %q", line, r.Resource)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, errors.New("no table with a header starting | command | resource |")
	}
	return rows, nil
}

var placeholder = regexp.MustCompile(`<[a-z-]+>`)

// Builders turns the rows of command into ACL builders for principal,
// with the placeholders replaced by values (<input> -> values["input"]).
// A row whose placeholder has no value is left out (an optional resource,
// like audit's <audit-topic>).
func (r ACLRow) builder(principal string, values map[string]string) (*kadm.ACLBuilder, bool, error) {
	name := r.Name
	ok := true
	name = placeholder.ReplaceAllStringFunc(name, func(p string) string {
		v, found := values[strings.Trim(p, "<>")]
		ok = ok && found
		return v
	})
	if !ok {
		return nil, false, nil
	}
	b := kadm.NewACLs().Allow(principal)
	switch r.Resource {
	case "topic":
		b.Topics(name)
	case "group":
		b.Groups(name)
	case "transactional-id":
		b.TransactionalIDs(name)
	case "cluster":
		b.Clusters()
	}
	var ops []kadm.ACLOperation
	for _, op := range r.Operations {
		o, err := kmsg.ParseACLOperation(strings.ReplaceAll(strings.ToLower(op), "_", ""))
		if err != nil {
			return nil, false, err
		}
		ops = append(ops, o)
	}
	b.Operations(ops...)
	if r.Prefixed {
		b.ResourcePatternType(kadm.ACLPatternPrefixed)
	} else {
		b.ResourcePatternType(kadm.ACLPatternLiteral)
	}
	return b, true, nil
}

// GrantCommand grants user, on the secured broker, exactly the rows of
// docs/security.md's ACL table for command, with the placeholders
// replaced by values (see ACLRow), and returns the rows it granted. It
// fails t if the table has no row for command.
func (c *KafkaCluster) GrantCommand(t testing.TB, user, command string, values map[string]string) []ACLRow {
	t.Helper()
	var granted []ACLRow
	for _, r := range ACLTable(t) {
		if r.Command != command {
			continue
		}
		b, ok, err := r.builder("User:"+user, values)
		if err != nil {
			t.Fatalf("testenv: ACL row %+v: %v", r, err)
		}
		if !ok {
			continue
		}
		c.AddACLs(t, b)
		granted = append(granted, r)
	}
	if len(granted) == 0 {
		t.Fatalf("testenv: docs/security.md grants %s nothing with %v", command, values)
	}
	return granted
}

// RevokeRow deletes, on the secured broker, the ACL of row r for user (as
// GrantCommand granted it) and returns how many ACLs it deleted.
func (c *KafkaCluster) RevokeRow(t testing.TB, user string, r ACLRow, values map[string]string) int {
	t.Helper()
	b, ok, err := r.builder("User:"+user, values)
	if err != nil || !ok {
		t.Fatalf("testenv: ACL row %+v with %v: %v", r, values, err)
	}
	b.AllowHosts() // a delete filter wants its hosts: none is any
	return c.DeleteACLs(t, b)
}

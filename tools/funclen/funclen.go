// Package funclen measures the length of the functions in this module, so
// the "no function longer than 80 lines" rule is a figure anyone can
// reproduce (`make funclen`) rather than a number in a closing note.
package funclen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// Func is one function or method declaration and its length in lines, from
// the line of `func` to the line of its closing brace.
type Func struct {
	File  string // path relative to the root, slash-separated
	Name  string // Recv.Name for methods
	Start int
	Lines int
}

// Measure parses every non-test .go file below root (skipping vendor and
// hidden folders) and returns its function declarations, longest first.
// Function literals count toward the declaration that holds them.
func Measure(root string) ([]Func, error) {
	var out []Func
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "vendor" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start := fset.Position(fn.Pos()).Line
			end := fset.Position(fn.End()).Line
			out = append(out, Func{File: filepath.ToSlash(rel), Name: funcName(fn), Start: start, Lines: end - start + 1})
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Lines != out[j].Lines {
			return out[i].Lines > out[j].Lines
		}
		return out[i].File+out[i].Name < out[j].File+out[j].Name
	})
	return out, err
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch r := t.(type) {
	case *ast.Ident:
		return r.Name + "." + fn.Name.Name
	case *ast.IndexExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			return id.Name + "." + fn.Name.Name
		}
	case *ast.IndexListExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			return id.Name + "." + fn.Name.Name
		}
	}
	return fn.Name.Name
}

package delayq

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestMessageNamesTheProblem: whatever layers wrapped a sentinel, the
// message for people is the job and the problem.
func TestMessageNamesTheProblem(t *testing.T) {
	layered := fmt.Errorf("diskstore: job %s: %w", Ref{ID: "nosuch"}, ErrNotFound)
	err := ForJob(Ref{ID: "nosuch"}, layered)
	if got := Message(err); got != `job "nosuch" not found` {
		t.Errorf("Message = %q", got)
	}
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, layered) || CodeOf(err) != CodeNotFound {
		t.Errorf("ForJob lost the sentinel or the cause: %v", err)
	}
	if got := Message(Invalid(CodeBadTTR, "ttr", "too short")); got != "ttr: too short" {
		t.Errorf("Message(validation) = %q", got)
	}
	if got := Message(fmt.Errorf("redisstore: put: %w: dial", ErrUnavailable)); got != "store unavailable; the server log says why" {
		t.Errorf("Message(unavailable) = %q", got)
	}
	if ForJob(Ref{ID: "a"}, ErrDraining) != ErrDraining || ForJob(Ref{}, nil) != nil {
		t.Error("ForJob changed an error that is not about a job")
	}
	nf := fmt.Errorf("schedule service: %w", NotFound("schedule %q not found", "nightly"))
	if got := Message(nf); got != `schedule "nightly" not found` || CodeOf(nf) != CodeNotFound || !errors.Is(nf, ErrNotFound) {
		t.Errorf("Message/CodeOf(not found, not a job) = %q/%q, want its own words and not_found", got, CodeOf(nf))
	}
	if SentinelOf(CodeNotReserved) != ErrNotReserved || SentinelOf(CodeBadTTR) != nil {
		t.Error("SentinelOf maps codes wrongly")
	}
}

// FuzzTruncateReason: whatever text a handler's error holds, the reason
// made of it is one the server accepts, and text that is already a good
// reason is kept as it is.
func FuzzTruncateReason(f *testing.F) {
	for _, s := range []string{"", "timeout", "a\x00b\x1b[31m", "\xff\xfe", strings.Repeat("é", MaxReasonLen)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := TruncateReason(s)
		if err := CheckReason(r); err != nil {
			t.Fatalf("CheckReason(TruncateReason(%q)) = %v", s, err)
		}
		if CheckReason(s) == nil && r != s {
			t.Fatalf("TruncateReason(%q) = %q, changed a good reason", s, r)
		}
	})
}

// A limit's refusal keeps its own code and words, so metrics and the
// original protocol name it (topic_full, not internal).
func TestLimitCodeAndMessage(t *testing.T) {
	err := fmt.Errorf("put: %w", &LimitError{Code: CodeTopicFull, Reason: `topic "t" holds 5 jobs, its policy's max_jobs`})
	if got := CodeOf(err); got != CodeTopicFull {
		t.Errorf("CodeOf = %q, want %q", got, CodeTopicFull)
	}
	if got := Message(err); got != `topic "t" holds 5 jobs, its policy's max_jobs` {
		t.Errorf("Message = %q", got)
	}
	if !errors.Is(err, ErrLimit) {
		t.Error("a LimitError does not match ErrLimit")
	}
}

// TestCodesByName: every code lives in codes.go and is used by name. No
// non-test file outside codes.go passes a string literal as the code of
// Invalid, a ValidationError, a LimitError or an httpError, nor declares
// a Code* constant of its own words, so a code cannot be misspelled in
// one place or exist without its doc comment (and its OpenAPI entry).
func TestCodesByName(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == "codes.go" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		isLit := func(e ast.Expr) bool {
			lit, ok := e.(*ast.BasicLit)
			return ok && lit.Kind == token.STRING
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if name := calleeName(n.Fun); name == "Invalid" && len(n.Args) > 0 && isLit(n.Args[0]) {
					t.Errorf("%s: Invalid(%s, ...): use the code's name from codes.go", fset.Position(n.Pos()), n.Args[0].(*ast.BasicLit).Value)
				}
			case *ast.CompositeLit:
				switch calleeName(n.Type) {
				case "ValidationError", "LimitError", "httpError":
				default:
					return true
				}
				for i, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Code" && isLit(kv.Value) {
							t.Errorf("%s: Code: %s: use the code's name from codes.go", fset.Position(kv.Pos()), kv.Value.(*ast.BasicLit).Value)
						}
					} else if i == 1 && calleeName(n.Type) == "httpError" && isLit(el) {
						t.Errorf("%s: httpError code %s: use the code's name from codes.go", fset.Position(el.Pos()), el.(*ast.BasicLit).Value)
					}
				}
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if strings.HasPrefix(name.Name, "Code") && i < len(n.Values) && isLit(n.Values[i]) {
						t.Errorf("%s: %s is a code of its own; declare it in codes.go", fset.Position(name.Pos()), name.Name)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files; the walk missed the tree", checked)
	}
}

// calleeName is the last name of a function or type expression:
// Invalid for delayq.Invalid, httpError for *httpError.
func calleeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.StarExpr:
		return calleeName(e.X)
	}
	return ""
}

package delayq_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportRules keeps the layout honest (as Pebble's
// TestForbiddenImports): the vocabulary and wire types stay stdlib-only,
// the engine never learns which store it runs on, front ends never reach
// past the engine (not even to the store interface: the engine has its
// own request types), and below the front ends nothing knows the wire
// types of package api.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/delayq/delayq"
	concrete := []string{mod + "/internal/store/diskstore", mod + "/internal/store/redisstore", mod + "/internal/store/memstore", mod + "/internal/store/pgstore"}
	frontends := []string{mod + "/internal/httpapi", mod + "/internal/beanstalk", mod + "/internal/grpcapi"}
	rules := map[string]func(imp string) bool{ // package → is this import allowed?
		mod:             stdlibOr(),
		mod + "/api":    stdlibOr(mod),
		mod + "/client": stdlibOr(mod, mod+"/api", "github.com/google/uuid"),
		// The transactional put: the client's options and pgx, no more
		// (the plain client never depends on a database driver).
		mod + "/client/pgtx": func(imp string) bool {
			return stdlibOr(mod, mod+"/client", "github.com/google/uuid")(imp) || strings.HasPrefix(imp, "github.com/jackc/pgx/v5")
		},
		mod + "/internal/engine": func(imp string) bool {
			return !hasAny(imp, append(concrete, frontends...))
		},
		mod + "/internal/httpapi":   func(imp string) bool { return !hasAny(imp, append(concrete, mod+"/internal/store")) },
		mod + "/internal/beanstalk": func(imp string) bool { return !hasAny(imp, append(concrete, mod+"/internal/store")) },
		mod + "/internal/grpcapi":   func(imp string) bool { return !hasAny(imp, append(concrete, mod+"/internal/store")) },
	}
	// Below the front ends: the engine, the stores and what they use.
	below := func(pkg string) bool {
		return pkg == mod+"/internal/engine" || pkg == mod+"/internal/metrics" || strings.HasPrefix(pkg, mod+"/internal/store")
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, ":")
		if below(pkg) {
			for _, imp := range strings.Fields(imps) {
				if imp == mod+"/api" || strings.HasPrefix(imp, mod+"/api/gen/") {
					t.Errorf("%s imports %s: below the front ends nothing knows the wire types (see docs/architecture.md)", pkg, imp)
				}
			}
		}
		allowed, ok := rules[pkg]
		if !ok {
			continue
		}
		for _, imp := range strings.Fields(imps) {
			if !allowed(imp) {
				t.Errorf("%s imports %s, which the layout forbids (see docs/architecture.md)", pkg, imp)
			}
		}
	}
}

// stdlibOr allows the standard library and the listed packages.
func stdlibOr(extra ...string) func(string) bool {
	return func(imp string) bool {
		first, _, _ := strings.Cut(imp, "/")
		if !strings.Contains(first, ".") {
			return true
		}
		return hasAny(imp, extra)
	}
}

func hasAny(imp string, list []string) bool {
	for _, p := range list {
		if imp == p {
			return true
		}
	}
	return false
}

package auth

import "testing"

// The table's checks, for principals with each kind of grant: a scope on
// one topic glob, on every topic, none at all, and nobody.
func TestOps(t *testing.T) {
	t.Parallel()
	shop := &Principal{Name: "shop", scopes: []Scope{Produce}, topics: []string{"order*"}}
	ops := &Principal{Name: "ops", scopes: []Scope{Admin}, topics: []string{"*"}}
	both := &Principal{Name: "both", scopes: []Scope{Produce, Consume}, topics: []string{"*"}}
	half := &Principal{Name: "half", scopes: []Scope{Produce, Consume}, topics: []string{"a"}}
	var nobody *Principal

	type check struct {
		p    *Principal
		op   Op
		may  string  // topic May is asked about
		want [3]bool // May(op, may), MaySome(op), MayAll(op)
	}
	for _, c := range []check{
		{shop, OpPut, "orders", [3]bool{true, true, false}},
		{shop, OpPut, "mail", [3]bool{false, true, false}},
		{shop, OpDelete, "orders", [3]bool{true, true, false}}, // a producer revokes its own jobs
		{shop, OpFinish, "orders", [3]bool{false, false, false}},
		{shop, OpTopics, "orders", [3]bool{false, false, false}},
		{shop, OpCluster, "", [3]bool{true, true, true}},
		{ops, OpDelete, "x", [3]bool{true, true, true}}, // admin implies produce
		{ops, OpCommand, "x", [3]bool{true, true, true}},
		{both, OpCommand, "x", [3]bool{true, true, true}},
		{half, OpCommand, "a", [3]bool{false, false, false}}, // the original protocol needs both on every topic
		{half, OpReserve, "a", [3]bool{true, true, false}},
		{nobody, OpCluster, "", [3]bool{false, false, false}},
		{nobody, OpHealth, "", [3]bool{true, true, true}},
		{nobody, OpGet, "a", [3]bool{false, false, false}},
		{Open, OpBackup, "", [3]bool{true, true, true}},
		{Open, Op("no-such-op"), "a", [3]bool{false, false, false}}, // an unknown operation is allowed nobody
	} {
		got := [3]bool{c.p.May(c.op, c.may), c.p.MaySome(c.op), c.p.MayAll(c.op)}
		if got != c.want {
			t.Errorf("%v on %s (%q): May, MaySome, MayAll = %v, want %v", c.p, c.op, c.may, got, c.want)
		}
	}
	if got, want := shop.Denied(OpPut, "mail"), `this token has no produce scope on topic "mail"`; got != want {
		t.Errorf("Denied = %q, want %q", got, want)
	}
	if got, want := half.Denied(OpCommand, ""), `this call needs the produce scope on every topic ("*")`; got != want {
		t.Errorf("Denied = %q, want %q", got, want)
	}
	if got, want := shop.Denied(OpFinish, ""), `this call needs the consume scope`; got != want {
		t.Errorf("Denied = %q, want %q", got, want)
	}
}

// Every operation has an entry, and every entry's scopes are real ones
// (an entry with a misspelt scope would be allowed nobody but admins).
func TestOpsTable(t *testing.T) {
	t.Parallel()
	if len(Ops()) != len(ops) {
		t.Fatalf("Ops() has %d, the table %d", len(Ops()), len(ops))
	}
	for op, n := range ops {
		for _, s := range n.Scopes {
			if !validScope(s) {
				t.Errorf("%s: scope %q is not a scope", op, s)
			}
		}
		if (n.On == OnAnyone || n.On == OnCaller) != (len(n.Scopes) == 0) {
			t.Errorf("%s: scopes %v with target %d", op, n.Scopes, n.On)
		}
	}
}

package search

import (
	"math"
	"testing"
)

// TestVisibleVectorsOnlyHidden: when only tools the searcher may not see have vectors, a search
// with a vector ranks and scores as over an index of the visible tools alone, which holds no
// vector: lexically (a fused score would tell that some hidden tool has a vector).
func TestVisibleVectorsOnlyHidden(t *testing.T) {
	pub := []Doc{
		{ID: "pub__create_invoice", Server: "pub", Name: "create_invoice", Description: "Create an invoice for a customer."},
		{ID: "pub__list_invoices", Server: "pub", Name: "list_invoices", Description: "List the invoices of a customer."},
		{ID: "pub__send_email", Server: "pub", Name: "send_email", Description: "Send an email message."},
	}
	hidden := Doc{ID: "hr__pay_invoice", Server: "hr", Name: "pay_invoice", Description: "Pay an invoice.",
		Vector: []float32{1, 0, 0, 0}}
	all, alone := New(Config{}), New(Config{})
	for _, d := range pub {
		all.Upsert(d)
		alone.Upsert(d)
	}
	all.Upsert(hidden)
	visible := func(id string) bool { return id != hidden.ID }
	q := Query{Text: "invoice", K: 5, Vector: []float32{1, 0, 0, 0}}
	want := alone.Search(q)
	q.Allow, q.Visible, q.VisibleKey = visible, visible, "pub"
	got := all.Search(q)
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > 1e-9*math.Abs(want[i].Score) {
			t.Errorf("hit %d is %v, want %v (as if alone)", i, got[i], want[i])
		}
	}
}

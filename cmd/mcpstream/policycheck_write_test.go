package main

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// cutWriter takes the first n bytes written, then fails every write as a full disk does.
type cutWriter struct {
	n   int
	out strings.Builder
}

func (w *cutWriter) Write(p []byte) (int, error) {
	if w.out.Len()+len(p) > w.n {
		return 0, syscall.ENOSPC
	}
	return w.out.Write(p)
}

// TestPolicyReportSummaryNotWrittenIsAnError: a report whose table was written but whose
// summary ("ok: ..." or "MISMATCH: ...") was not returned no error, so the check exited 1 (the
// output's failure, see run), the status of a mismatch, for a consistent policy; a report not
// written at all is "could not check" (3). The summary's write error is the report's too.
func TestPolicyReportSummaryNotWrittenIsAnError(t *testing.T) {
	a := "v1-" + strings.Repeat("a", 32)
	r := comparePolicies([]policyInstance{
		{Role: subjects.RoleIndexer, Instance: "idx-1:77/0", ID: "NUID1", Digest: a},
		{Role: subjects.RoleExecutor, Instance: "exec-1:4242", ID: "NUID2", Digest: a},
	}, "")
	var full strings.Builder
	if err := writePolicyReport(&full, r, false); err != nil {
		t.Fatal(err)
	}
	table, _, ok := strings.Cut(full.String(), "\n\n")
	if !ok {
		t.Fatalf("no summary after the table:\n%s", full.String())
	}
	for n := len(table) + 1; n < full.Len(); n++ {
		w := &cutWriter{n: n}
		if err := writePolicyReport(w, r, false); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("stdout full after %d of %d bytes: error %v, want the write error\n%s", n, full.Len(), err, w.out.String())
		}
	}
}

// Package suggest finds the public tool names a caller probably meant when the name it gave is
// not listed: "did you mean ticketing__createIssue?" for ticketing__createissue,
// ticketing.createIssue, createIssue or ticketing__creatIssue.
//
// Models write tool names from memory and get them slightly wrong: the case, the separator, the
// server prefix left out, a letter dropped. A not_found answer that names the tool meant lets
// the model correct itself in one turn instead of searching again.
//
// Names are compared by Key (ASCII letters and digits, lowercased; every other ASCII byte
// dropped; other characters kept) and, within one server's tools, by an edit distance of at
// most MaxDistance (Within). An Index maps keys to public names, sorted, so that a look-up costs
// a map read whatever the size of the catalog (its owner removes the names no longer listed) and
// a caller that stops early stops at the same names every time; the edit distance only runs
// over the tools of the server the given name starts with. What the caller may see is the
// caller's filter: this package knows nothing of policy, and a suggestion must never name a tool
// the principal may not call. A caller bounding its work asks that filter first and counts only
// the names it may offer, so that names hidden from the principal never change (nor hint at
// themselves in) what it is offered.
//
// The package has no state of its own and no I/O; an Index is safe for concurrent use (a
// Lookup folds in the changes made since, under the Index's own lock), and its owner keeps it
// in step with the rest of what it holds.
package suggest

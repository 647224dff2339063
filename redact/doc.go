// Package redact replaces known secret values — the credentials the host holds for MCP servers —
// with "[redacted]" wherever they would leave the host: in text (status reasons, errors, log
// lines) and in JSON documents (tool results, definitions, audit payloads).
//
// It consumes and produces no subjects and keeps no state beyond the values it was given.
// Registrysync derives a server's values from its configuration (secrets, credential-like
// headers and environment variables, URL passwords, literal credentials in a stdio server's
// arguments); the executor redacts its audit events with every configured value. Values
// shorter than 3 bytes (MinLen) are ignored: they would shred ordinary text.
//
// A value is found as it is and in the spellings a tool may echo it in: as encoding/json escapes
// it; with JSON escapes of some of its characters (\u0065, a surrogate pair, \/) and percent
// escapes (%2F or %2f, of any of its bytes; '+' for a space), found by searching the text again
// decoded (both kinds of escape at once, and, in text that holds both, each kind alone: a value
// holding "%40" in JSON text that escapes '/', a value holding a backslash percent-escaped
// elsewhere; JSON text percent-escaped, "p%5Cu00e4ss", decoded in that order; text redacted once is
// searched again, a value next to another may have made an escape with it); in base64, standard or
// URL alphabet, padded or not, alone or inside a longer base64 text at any of its 3 alignments
// there (values of MinBase64Len bytes or more); for a value made of hex digits (MinCaseLen bytes or
// more), in either letter case; and, for a value made of digits, as a JSON number, in exponent form
// too (8.675309e6). Other values are matched case-sensitively: folding every value would make
// "Summer2026" hide "SUMMER2026" and a short value hide ordinary words in any case.
//
// Text cut short before it is redacted may end with a value's first bytes, which no longer spell
// the value: StringCut also replaces the start of a value (MinLen bytes or more of any form, or of
// the value spelled with escapes String decodes: "tok%2Ben%2F…", "hunt\u0065…", an escape cut short
// "tok%2…" too: the earliest such start) just before each mark of a cut ("…"), and PartialEnd says
// where text cut with no mark (a body cut by a read limit) ends before one (and before a whole
// value that start is inside of). The look back from a mark stops at the mark before it (unless a
// value holds the mark): time linear in the text however many marks it holds.
//
// Every value has at most 16 forms, none longer than 6 times the value: the one-pass matcher
// (Wu–Manber over 3-byte blocks, a 1–64 KiB shift table) grows with the values' total length,
// not with a product of forms.
package redact

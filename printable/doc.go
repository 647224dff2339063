// Package printable escapes text that came from outside (a configuration file, a caller's
// member names, a server's names) before it goes into an error message, a log line or a
// terminal, so that what a terminal would act on (escape sequences, carriage returns, bidi
// overrides) is shown instead. It holds no state.
//
// Escaping is for display only, not reversible: a backslash is kept as it is, so a literal
// `\x1b` and an escaped ESC byte read alike. On purpose: the texts escaped hold values already
// quoted by %q (escaping backslashes would double them), and where the exact value matters it
// travels beside the message unescaped (an argument's location in subjects.Error.Path).
package printable

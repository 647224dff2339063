// Package printable escapes text that came from outside (a configuration file, a caller's
// member names, a server's names) before it goes into an error message, a log line or a
// terminal, so that what a terminal would act on (escape sequences, carriage returns, bidi
// overrides) is shown instead. It holds no state.
package printable

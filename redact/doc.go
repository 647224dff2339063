// Package redact replaces known secret values — the credentials the host holds for MCP servers —
// with "[redacted]" wherever they would leave the host: in text (status reasons, errors, log
// lines) and in JSON documents (tool results, definitions, audit payloads).
//
// It consumes and produces no subjects and keeps no state beyond the values it was given.
// Registrysync derives a server's values from its configuration (secrets, credential-like
// headers and environment variables, URL passwords); the executor redacts its audit events
// with every configured value. Values shorter than 3 bytes are ignored: they would shred
// ordinary text.
package redact

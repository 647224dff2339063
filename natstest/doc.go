// Package natstest starts a real embedded JetStream server per test (random loopback port,
// temporary store) with mcpstream's streams declared, for the tests of every package.
package natstest

// Package natsembed runs the embedded nats-server that `mcpstream up` uses by default: a real
// JetStream server (the nats-server Go module, no external binary) with its store on disk,
// listening on loopback by default (Config.Listen) so the standard `nats` CLI can watch it.
//
// It consumes and produces nothing itself; its state is the JetStream store under Config.StoreDir.
package natsembed

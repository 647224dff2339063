package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestHealthzAnswersWhileDeclaringStreams: /healthz is documented to answer 503 until every role
// runs, but up opened its HTTP listener first and served it only once the streams were declared:
// while NATS was slow to answer the JetStream API (a cluster electing its meta leader, up to the
// 30 s the declaration may take) a probe's connection was accepted and never answered. It
// answers 503 "starting" from the moment the listener is open.
func TestHealthzAnswersWhileDeclaringStreams(t *testing.T) {
	ns := startNATS(t, &server.Options{})
	// A JetStream API that takes the requests and never answers: up waits in its stream
	// declaration.
	stub, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer stub.Close()
	asked := make(chan struct{}, 1)
	if _, err := stub.Subscribe("$JS.API.>", func(*nats.Msg) {
		select {
		case asked <- struct{}{}:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := stub.Flush(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out, errOut syncBuffer
	go func() {
		done <- run(ctx, []string{"up", "--nats", ns.ClientURL(), "--data", t.TempDir(), "--http-listen", addr}, &out, &errOut)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("up interrupted while starting: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("up still running 60s after interrupt")
		}
	}()
	select {
	case <-asked:
	case err := <-done:
		done <- err
		t.Fatalf("up exited before declaring its streams: %v\n%s", err, errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatal("up never asked the JetStream API")
	}

	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz while up declares its streams: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string            `json:"status"`
		Roles  map[string]string `json:"roles"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("/healthz body: %v", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || body.Status != "starting" || body.Roles["registrysync"] != "starting" {
		t.Errorf("/healthz while starting: %d %+v, want 503 starting", resp.StatusCode, body)
	}
	// /metrics answers too (the process's own metrics at least).
	mresp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics while starting: %v", err)
	}
	mresp.Body.Close()
	if mresp.StatusCode != http.StatusOK {
		t.Errorf("/metrics while starting: %d", mresp.StatusCode)
	}
}

// TestUpExternalNATSUnreachableHint: `up --nats URL` with nothing there said "is `mcpstream up`
// running? set --nats or $MCPSTREAM_NATS" — about itself, and naming a variable up does not
// read (its --nats has no environment default). It says that no NATS server answered there.
func TestUpExternalNATSUnreachableHint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err = runCmd(t, ctx, "up", "--nats", url, "--data", t.TempDir(), "--http-listen", "")
	if err == nil || !strings.Contains(err.Error(), "connect to NATS at "+url) ||
		strings.Contains(err.Error(), "MCPSTREAM_NATS") || strings.Contains(err.Error(), "mcpstream up` running") ||
		!strings.Contains(err.Error(), "no NATS server answered") {
		t.Errorf("up --nats against nothing: %v, want the URL and \"no NATS server answered\" without the clients' hint", err)
	}
	// The role subcommands read $MCPSTREAM_NATS: theirs keeps the hint.
	_, _, err = runCmd(t, ctx, "executor", "--nats", url, "--data", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "$MCPSTREAM_NATS") {
		t.Errorf("executor --nats against nothing: %v, want the hint", err)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// Without --follow, a replay ends with what the stream held when it began, even while events
// keep coming faster than it reads them: it waited for a message with nothing pending after it,
// which steady traffic never gives.
func TestEventsReplayEndsUnderSteadyTraffic(t *testing.T) {
	env := natstest.Start(t)
	status := func(i int) []byte {
		return fmt.Appendf(nil, `{"v":1,"type":"status","server":"kb","status":"ready","reason":"%d","at":"2026-03-01T12:00:00Z"}`, i)
	}
	// More than the consumer fetches at once: the later batches come after the traffic.
	const stored = 1500
	futs := make([]jetstream.PubAckFuture, 0, stored)
	for i := range stored {
		f, err := env.JS.PublishAsync(subjects.RegistryStatus("kb"), status(i))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatal("no PubAck")
		}
	}
	errTooMany := errors.New("the replay did not end")
	seen := 0
	err := readStream(context.Background(), env.JS, subjects.RegistryStream, jetstream.OrderedConsumerConfig{}, false, func(jetstream.Msg) error {
		seen++
		if seen > 3*stored {
			return errTooMany
		}
		// One more event for every one read: traffic faster than the reader.
		publish(t, env.JS, subjects.RegistryStatus("kb"), status(stored+seen))
		return nil
	})
	if err != nil || seen != stored {
		t.Fatalf("read %d events (err %v), want the %d stored when the replay began", seen, err, stored)
	}
}

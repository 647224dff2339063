package registrysync

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// BenchmarkPublishSnapshots measures how many definition events per second the registry stream
// takes from the connector's publish path (fingerprint, encode, synchronous JetStream publish
// with Nats-Msg-Id, from 32 connectors at once, every snapshot new content) against raw JetStream
// async publishes of messages of the same size in the same run, on the same file-backed
// embedded server. Reported: connector-events/s, raw-async-events/s and their ratio.
func BenchmarkPublishSnapshots(b *testing.B) {
	const connectors, tools = 32, 20
	env := natstest.Start(b)
	m := New(env.JS, env.NC, Config{}, zerolog.Nop())

	type bench struct {
		c    *connector
		l    [2]*listing
		size int
	}
	bs := make([]*bench, connectors)
	for i := range bs {
		c := newConnector(m, ServerConfig{Name: fmt.Sprintf("bench-%02d", i), Transport: TransportHTTP, URL: "http://127.0.0.1:1/mcp"})
		c.loaded = true
		x := &bench{c: c}
		for v := range 2 {
			l := &listing{Kind: subjects.KindTools, Pages: 1}
			for j := range tools {
				l.Items = append(l.Items, json.RawMessage(fmt.Sprintf(
					`{"name":"tool_%d_v%d","description":"%s","inputSchema":{"type":"object","properties":{"q":{"type":"string","description":"query"},"limit":{"type":"integer"}},"required":["q"]}}`,
					j, v, strings.Repeat("Describes what the tool does. ", 8))))
			}
			x.l[v] = l
		}
		data, _ := encodeJSON(subjects.Snapshot{V: 1, Type: "snapshot", Server: c.sc.Name, Kind: subjects.KindTools,
			Fingerprint: strings.Repeat("f", 64), ListedAt: time.Now(), Items: x.l[0].Items})
		x.size = len(data)
		bs[i] = x
	}
	ctx := context.Background()

	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, x := range bs {
		n := b.N / connectors
		if i < b.N%connectors {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range n {
				// Every snapshot is new content: one tool changes (the common case of a
				// list_changed), so nothing is de-duplicated.
				l := *x.l[k%2]
				l.Items = append([]json.RawMessage{json.RawMessage(fmt.Sprintf(
					`{"name":"changing","description":"version %d","inputSchema":{"type":"object"}}`, k))}, l.Items[1:]...)
				res, err := x.c.publishSnapshot(ctx, &l, nil)
				if err != nil {
					b.Error(err)
					return
				}
				if !res.published {
					b.Errorf("snapshot %d of %s not published", k, x.c.sc.Name)
					return
				}
			}
		}()
	}
	wg.Wait()
	connectorSecs := time.Since(start).Seconds()
	b.StopTimer()

	// Raw async publishes of same-size messages.
	payload := make([]byte, bs[0].size)
	for i := range payload {
		payload[i] = 'x'
	}
	js, err := jetstream.New(env.NC, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	start = time.Now()
	for i := range b.N {
		msg := nats.NewMsg(subjects.RegistrySnapshot(fmt.Sprintf("raw-%02d", i%connectors), subjects.KindTools))
		msg.Data = payload
		msg.Header.Set(subjects.HeaderMsgID, fmt.Sprintf("raw/%d", i))
		if _, err := js.PublishMsgAsync(msg); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("raw async publishes did not complete")
	}
	rawSecs := time.Since(start).Seconds()

	connectorRate := float64(b.N) / connectorSecs
	rawRate := float64(b.N) / rawSecs
	b.ReportMetric(connectorRate, "connector-events/s")
	b.ReportMetric(rawRate, "raw-async-events/s")
	b.ReportMetric(connectorRate/rawRate, "ratio")
	b.ReportMetric(float64(bs[0].size), "event-bytes")
}

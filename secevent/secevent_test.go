package secevent_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/authd/authd/secevent"
)

func TestRecord(t *testing.T) {
	var buf bytes.Buffer
	count := secevent.NewCounter()
	r := secevent.New(slog.New(slog.NewJSONHandler(&buf, nil)), count)
	r.Record(t.Context(), secevent.Event{Kind: secevent.CodeReuse, ClientID: "app", GrantID: "g1", Source: "192.0.2.1"})
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["level"] != "WARN" || line["msg"] != "security event" || line["event"] != "code_reuse" ||
		line["client_id"] != "app" || line["grant_id"] != "g1" || line["source"] != "192.0.2.1" {
		t.Fatalf("log line: %s", buf.String())
	}
	if _, ok := line["sub"]; ok {
		t.Fatalf("an empty sub is left out: %s", buf.String())
	}
	if got := testutil.ToFloat64(count.WithLabelValues("code_reuse")); got != 1 {
		t.Fatalf("code_reuse = %v", got)
	}
	if got := testutil.CollectAndCount(count); got != len(secevent.Kinds) {
		t.Fatalf("%d series, want one per kind (%d) from the start", got, len(secevent.Kinds))
	}
	var nilRecorder *secevent.Recorder
	nilRecorder.Record(t.Context(), secevent.Event{Kind: secevent.CodeReuse}) // no panic
}

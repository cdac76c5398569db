package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/authd/authd/idempotency"
	"github.com/authd/authd/storage/memory"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

const secret = "idempotency-test-secret-0123456789-0123456789"

// stores are the backends the engine runs on.
func stores(t *testing.T) map[string]idempotency.Store {
	return map[string]idempotency.Store{
		"memory":   memory.New(),
		"postgres": postgres.New(pgtest.New(t)),
	}
}

// TestWrite: the engine on its own, as the user operations use it: an
// answer or none is stored and replayed with its outcome; another request
// under the key is ErrKeyReused (also when Confidential); a failing Do
// leaves no key; Resource and Endpoint scope the key.
func TestWrite(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e, err := idempotency.New(idempotency.Config{Secret: []byte(secret), Store: store})
			if err != nil {
				t.Fatal(err)
			}
			caller := e.LocalCaller("test")
			runs := 0
			write := func(key, resource string, outcome int, request string, confidential bool, body []byte, fail error) (*idempotency.Written, error) {
				return e.Run(ctx, idempotency.Write{
					Caller: caller, Endpoint: "POST /things/*", Resource: resource, Outcome: outcome,
					Key: key, Request: []byte(request), Confidential: confidential,
					Do: func(context.Context) ([]byte, error) { runs++; return body, fail },
				})
			}

			first, err := write("k1", "alice", 200, `{"password":"one"}`, true, []byte("{\"n\":1}\n"), nil)
			if err != nil || first.Outcome != 200 || first.Replayed {
				t.Fatalf("first: %+v %v", first, err)
			}
			again, err := write("k1", "alice", 200, `{"password":"one"}`, true, []byte("other"), nil)
			if err != nil || !again.Replayed || again.Outcome != 200 || !bytes.Equal(again.Answer, first.Answer) || runs != 1 {
				t.Fatalf("replay: %+v %v (runs %d)", again, err, runs)
			}
			if _, err := write("k1", "alice", 200, `{"password":"two"}`, true, nil, nil); !errors.Is(err, idempotency.ErrKeyReused) {
				t.Fatalf("another confidential request under the key: %v", err)
			}
			// Another resource or endpoint: its own key space.
			if w, err := write("k1", "bob", 200, `{"password":"two"}`, true, nil, nil); err != nil || w.Replayed {
				t.Fatalf("other resource: %+v %v", w, err)
			}

			// No answer (204), replayed as none.
			if w, err := write("k2", "alice", 204, `{}`, false, nil, nil); err != nil || w.Outcome != 204 || len(w.Answer) != 0 {
				t.Fatalf("204: %+v %v", w, err)
			}
			if w, err := write("k2", "alice", 204, `{}`, false, nil, nil); err != nil || !w.Replayed || w.Outcome != 204 || len(w.Answer) != 0 {
				t.Fatalf("204 replay: %+v %v", w, err)
			}

			// A failing Do returns its error and leaves no key.
			boom := errors.New("boom")
			if _, err := write("k3", "alice", 200, `{"a":1}`, false, nil, boom); !errors.Is(err, boom) {
				t.Fatalf("failing Do: %v", err)
			}
			if w, err := write("k3", "alice", 200, `{"a":2}`, false, []byte("ok"), nil); err != nil || w.Replayed || string(w.Answer) != "ok" {
				t.Fatalf("after a failure, the key is free: %+v %v", w, err)
			}

			if _, err := write("bad key", "alice", 200, `{}`, false, nil, nil); !errors.Is(err, idempotency.ErrInvalidKey) {
				t.Fatalf("bad key: %v", err)
			}
			if _, err := write("", "alice", 0, `{}`, false, nil, nil); err == nil {
				t.Fatal("outcome 0 accepted")
			}
			if c, err := idempotency.Canonical(map[string]any{"b": 1, "a": []int{2}}); err != nil || string(c) != `{"a":[2],"b":1}` {
				t.Fatalf("Canonical = %s %v", c, err)
			}
		})
	}
}

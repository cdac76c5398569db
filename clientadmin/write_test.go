package clientadmin_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/authd/authd/clientadmin"
)

// TestWrite: the engine on its own, as the user endpoints use it: a body
// or none is stored and replayed with its status; another request under the
// key is ErrKeyReused (also when Confidential); a failing Do leaves no key;
// Resource and Endpoint scope the key.
func TestWrite(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			svc, err := clientadmin.New(clientadmin.Config{Secret: []byte(secret), Store: store, Audit: func(context.Context, clientadmin.AuditEvent) {}})
			if err != nil {
				t.Fatal(err)
			}
			caller := svc.LocalCaller("test")
			runs := 0
			write := func(key, resource string, status int, request string, confidential bool, body []byte, fail error) (*clientadmin.Written, error) {
				return svc.Write(ctx, clientadmin.Write{
					Caller: caller, Endpoint: "POST /things/*", Resource: resource, Status: status,
					IdempotencyKey: key, Request: []byte(request), Confidential: confidential,
					Do: func(context.Context) ([]byte, error) { runs++; return body, fail },
				})
			}

			first, err := write("k1", "alice", 200, `{"password":"one"}`, true, []byte("{\"n\":1}\n"), nil)
			if err != nil || first.Status != 200 || first.Replayed {
				t.Fatalf("first: %+v %v", first, err)
			}
			again, err := write("k1", "alice", 200, `{"password":"one"}`, true, []byte("other"), nil)
			if err != nil || !again.Replayed || again.Status != 200 || !bytes.Equal(again.Body, first.Body) || runs != 1 {
				t.Fatalf("replay: %+v %v (runs %d)", again, err, runs)
			}
			if _, err := write("k1", "alice", 200, `{"password":"two"}`, true, nil, nil); !errors.Is(err, clientadmin.ErrKeyReused) {
				t.Fatalf("another confidential request under the key: %v", err)
			}
			// Another resource or endpoint: its own key space.
			if w, err := write("k1", "bob", 200, `{"password":"two"}`, true, nil, nil); err != nil || w.Replayed {
				t.Fatalf("other resource: %+v %v", w, err)
			}

			// No body (204), replayed as none.
			if w, err := write("k2", "alice", 204, `{}`, false, nil, nil); err != nil || w.Status != 204 || len(w.Body) != 0 {
				t.Fatalf("204: %+v %v", w, err)
			}
			if w, err := write("k2", "alice", 204, `{}`, false, nil, nil); err != nil || !w.Replayed || w.Status != 204 || len(w.Body) != 0 {
				t.Fatalf("204 replay: %+v %v", w, err)
			}

			// A failing Do returns its error and leaves no key.
			boom := errors.New("boom")
			if _, err := write("k3", "alice", 200, `{"a":1}`, false, nil, boom); !errors.Is(err, boom) {
				t.Fatalf("failing Do: %v", err)
			}
			if w, err := write("k3", "alice", 200, `{"a":2}`, false, []byte("ok"), nil); err != nil || w.Replayed || string(w.Body) != "ok" {
				t.Fatalf("after a failure, the key is free: %+v %v", w, err)
			}

			if _, err := write("bad key", "alice", 200, `{}`, false, nil, nil); !errors.Is(err, clientadmin.ErrInvalidRequest) {
				t.Fatalf("bad key: %v", err)
			}
			if _, err := write("", "alice", 0, `{}`, false, nil, nil); err == nil {
				t.Fatal("status 0 accepted")
			}
			if c, err := clientadmin.Canonical(map[string]any{"b": 1, "a": []int{2}}); err != nil || string(c) != `{"a":[2],"b":1}` {
				t.Fatalf("Canonical = %s %v", c, err)
			}
		})
	}
}

package clientadmin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/authd/authd/idempotency"
)

// writeOp is one write.
type writeOp struct {
	action    string // audit name, e.g. client.create
	endpoint  string // Idempotency-Key scope, e.g. "POST /admin/clients"
	outcome   int    // idempotency.OutcomeCreated or OutcomeOK
	clientID  string // the client concerned, when known beforehand
	idemKey   string // the raw Idempotency-Key; "" for none
	canonical []byte // the canonical JSON of the request
	// do performs the write with the transaction's context.
	do func(ctx context.Context) (*ClientInformation, error)
}

// write runs op through the Idempotency-Key engine (package idempotency)
// and adds what is particular to clients: the client information decoded
// from a replayed answer, the client_id of the audit event, and the
// translation of storage and engine errors.
func (s *Service) write(ctx context.Context, caller Caller, op writeOp) (*Result, error) {
	hasKey := op.idemKey != ""
	clientID := op.clientID
	var info *ClientInformation
	w, err := s.idem.Run(ctx, idempotency.Write{
		Caller:   caller,
		Endpoint: op.endpoint,
		Outcome:  op.outcome,
		Key:      op.idemKey,
		Request:  op.canonical,
		Do: func(ctx context.Context) ([]byte, error) {
			i, err := op.do(ctx)
			if err != nil {
				return nil, err
			}
			info, clientID = i, i.ClientID
			return encodeInfo(i)
		},
	})
	if err != nil {
		return nil, s.finish(ctx, caller, op.action, clientID, hasKey, false, err)
	}
	if w.Replayed {
		info = new(ClientInformation)
		if err := json.Unmarshal(w.Answer, info); err != nil {
			return nil, s.finish(ctx, caller, op.action, clientID, hasKey, false, fmt.Errorf("clientadmin: stored response: %w", err))
		}
		if clientID == "" {
			clientID = info.ClientID
		}
	}
	return &Result{Client: info, JSON: w.Answer, Replayed: w.Replayed}, s.finish(ctx, caller, op.action, clientID, hasKey, w.Replayed, nil)
}

// canonicalOf is the canonical JSON of a decoded request
// (idempotency.Canonical), or ErrInvalidMetadata.
func canonicalOf(v any) ([]byte, error) {
	decoded, err := json.Marshal(v)
	if err != nil {
		return nil, newError(ErrInvalidMetadata, "The request body is not valid client metadata.")
	}
	canonical, err := idempotency.CanonicalJSON(decoded)
	if err != nil {
		return nil, newError(ErrInvalidMetadata, "The request body is not valid JSON.")
	}
	return canonical, nil
}

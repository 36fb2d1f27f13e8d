package api

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"

	"github.com/shardplan/shardplan/internal/cost"
	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/sharding"
)

// The planned-response path of reshard and graph requests. A handler decodes and keys
// the request, then hands answerPlanned a function that plans and renders the answer.
// The answer is encoded once and memoized under the plan id; what the policy check and
// the text answer need from it (its verdict: the violations, the diagram) is computed
// from the rendered answer, not decoded back from the bytes:
//
//	request ─► memo.Do(plan id) ─ miss ─► plan, render ─► encode once ─► bytes
//	             │                                  └─► verdict (when asked)
//	             └─ hit ─► bytes; the verdict memoized for these bytes,
//	                       or decoded from them once when absent
//
// A plan memoized before verdicts were kept (or whose verdict was evicted) still gets its
// policy check: its bytes are decoded once and the verdict stored beside them.

// verdictFormat versions the stored verdict (it is part of its key).
const verdictFormat = 1

// verdict is what the policy check and the text answer read from a planned answer. It is
// memoized beside the answer under verdictKey.
type verdict struct {
	// Violated says the answer breaks forbid_full_rematerialization; Detail and
	// Violations are then the policy-violation problem's.
	Violated   bool        `json:"violated,omitempty"`
	Detail     string      `json:"detail,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
	// SuggestedConstraints is a reshard's top-level member of the problem (the answer's
	// suggested_constraints); nil for a graph, whose are per violation.
	SuggestedConstraints json.RawMessage `json:"suggested_constraints,omitempty"`
	// Diagram is a reshard's text answer (include "diagram").
	Diagram string `json:"diagram,omitempty"`
}

// verdictKey is the memo key of the verdict of body, the answer memoized under planID: the
// format, the plan id and the body's CRC-32C and length, so a verdict never speaks for
// other bytes (an answer recomputed since, or another format). The prefix keeps it apart
// from plan ids (GET /v1/plans never serves it).
func verdictKey(planID string, body []byte) string {
	return fmt.Sprintf("verdict%d-%s-%08x-%d", verdictFormat, planID, crc32.Checksum(body, castagnoli), len(body))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// planned is an encoded answer and a way to its verdict without decoding it.
type planned struct {
	body    []byte
	verdict func() (*verdict, error)
}

// answerPlanned memoizes the answer plan computes under key (the plan id) and returns the
// 200 body: the JSON answer, or its diagram when text. With policy forbidding full
// rematerialization, an answer that rematerializes is a 422 carrying it. readVerdict
// reads the verdict of an answer memoized without one. planHit says whether the memo
// answered.
func (s *Server) answerPlanned(ctx context.Context, key string, policy *Policy, text bool,
	plan func(context.Context) (*planned, error), readVerdict func(body []byte) (*verdict, error), ref *string) (out []byte, planHit bool, err error) {
	var fresh *planned
	body, hit, err := s.memo.Do(ctx, key, func(ctx context.Context) ([]byte, error) {
		p, err := plan(ctx)
		if err != nil {
			return nil, err
		}
		fresh = p
		return p.body, nil
	})
	if err != nil {
		return nil, false, err
	}
	checks := policy.forbidsRemat()
	if !checks && !text {
		setRef(ref, key)
		return body, hit, nil
	}
	v, err := s.verdictFor(ctx, key, body, fresh, readVerdict)
	if err != nil {
		return nil, false, err
	}
	if checks && v.Violated {
		return nil, hit, v.problem(body)
	}
	if text {
		return []byte(v.Diagram), hit, nil
	}
	setRef(ref, key)
	return body, hit, nil
}

// setRef records in ref (when not nil) that the answer is the plan memo's entry under key.
func setRef(ref *string, key string) {
	if ref != nil {
		*ref = key
	}
}

// verdictFor returns the verdict of body: fresh's when this request planned it (and then
// memoized for later hits), else the memoized one, else the one readVerdict reads from
// body (memoized in turn).
func (s *Server) verdictFor(ctx context.Context, key string, body []byte, fresh *planned, readVerdict func([]byte) (*verdict, error)) (*verdict, error) {
	derive := func() (*verdict, error) {
		if fresh != nil && fresh.verdict != nil {
			return fresh.verdict()
		}
		return readVerdict(body)
	}
	var derived *verdict
	stored, _, err := s.memo.Do(ctx, verdictKey(key, body), func(context.Context) ([]byte, error) {
		v, err := derive()
		if err != nil {
			return nil, err
		}
		derived = v
		return encodeJSON(v)
	})
	switch {
	case err != nil:
		return nil, err
	case derived != nil:
		return derived, nil
	}
	var v verdict
	if err := json.Unmarshal(stored, &v); err != nil {
		return derive() // not a verdict (never written so): the body says
	}
	return &v, nil
}

// forbidsRemat reports whether p (nil: no policy) forbids full rematerialization.
func (p *Policy) forbidsRemat() bool { return p != nil && p.ForbidFullRematerialization }

// problem is the 422 of an answer that breaks the policy, carrying the answer.
func (v *verdict) problem(body []byte) *Problem {
	p := NewProblem(http.StatusUnprocessableEntity, slugPolicyViolation, "Policy violation", "%s", v.Detail).
		With("violations", v.Violations).
		With("plan", json.RawMessage(body))
	if v.SuggestedConstraints != nil {
		p.With("suggested_constraints", v.SuggestedConstraints)
	}
	return p
}

// Shared pieces of the reshard and graph answers.

// modelFingerprint names model in a plan id by everything its answers depend on: the
// name and every figure (cost.Fabric.Fingerprint), so two requests share a plan id only
// when their models price alike. A model without a fingerprint (none the API resolves)
// is named by its name.
func modelFingerprint(model cost.Model) string {
	if cm, ok := model.(interface{ Fingerprint() string }); ok {
		return cm.Fingerprint()
	}
	return model.Name()
}

// listsFor reports whether an answer on m gives per-device lists in full: the mesh is
// within the list limit, or include asks for "pairs".
func (s *Server) listsFor(m *sharding.Mesh, include map[string]bool) bool {
	return m.NumDevices() <= s.limits.ListDeviceLimit || include["pairs"]
}

// listsOmittedNote is the note of an answer on m whose lists were left out.
func (s *Server) listsOmittedNote(m *sharding.Mesh) string {
	return fmt.Sprintf(listsNote, m.NumDevices(), s.limits.ListDeviceLimit)
}

// appendSuggestions renders XLA's suggested constraints onto dst.
func appendSuggestions(dst []Suggestion, sgs []planner.Suggestion, sw *shardingWriter) []Suggestion {
	for _, sg := range sgs {
		dst = append(dst, Suggestion{PartitionSpec: sg.PartitionSpec, Sharding: sw.json(sg.Sharding)})
	}
	return dst
}

// rawJSON encodes v for a json.RawMessage member (as the answer encodes it).
func rawJSON(v any) (json.RawMessage, error) {
	b, err := encodeJSON(v)
	return json.RawMessage(b), err
}

// encodePlanned encodes answer once; verdict gives its verdict from the value.
func encodePlanned(answer any, verdict func() (*verdict, error)) (*planned, error) {
	var body []byte
	var err error
	if r, ok := answer.(*ReshardResponse); ok {
		body, err = encodeReshardJSON(r)
	} else {
		body, err = encodeJSON(answer)
	}
	if err != nil {
		return nil, err
	}
	return &planned{body: body, verdict: verdict}, nil
}

// remat is what a policy reads of a plan's (or a graph's) summary.
type remat struct {
	FullRematerialization bool `json:"full_rematerialization"`
	XLAFallback           bool `json:"xla_fallback"`
}

func (r remat) any() bool { return r.FullRematerialization || r.XLAFallback }

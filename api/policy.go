package api

import (
	"encoding/json"
	"net/http"
)

// The CI gate: a request's policy, and the 422 policy-violation problem of an answer
// that breaks it.

// Policy is what a CI gate refuses.
type Policy struct {
	ForbidFullRematerialization bool `json:"forbid_full_rematerialization"`
} // @name Policy

// Violation is one entry of a 422 policy-violation's "violations": the policy, what
// broke it (a graph names the op and tensor of the reshard) and that reshard's
// suggested constraints.
type Violation struct {
	// Policy is the policy broken.
	Policy string `json:"policy" example:"forbid_full_rematerialization"`
	// OpName and Tensor name the reshard that breaks it (graph only).
	OpName string `json:"op_name,omitempty" example:"mm"`
	Tensor string `json:"tensor,omitempty" example:"y"`
	// Message says how it breaks it.
	Message string `json:"message"`
	// SuggestedConstraints are Suggestion objects (graph only; a reshard's are at the
	// top level of the problem).
	SuggestedConstraints json.RawMessage `json:"suggested_constraints,omitempty" swaggertype:"array,object"`
	// SuggestionNote says why there are no suggested constraints.
	SuggestionNote string `json:"suggestion_note,omitempty"`
} // @name Violation

// forbidsRemat reports whether p (nil: no policy) forbids full rematerialization.
func (p *Policy) forbidsRemat() bool { return p != nil && p.ForbidFullRematerialization }

// problem is the 422 of an answer that breaks the policy, carrying the answer.
func (v *verdict) problem(body []byte) *Problem {
	p := NewProblem(http.StatusUnprocessableEntity, slugPolicyViolation, "Policy violation", "%s", v.Detail)
	p.Violations, p.Plan, p.SuggestedConstraints = v.Violations, json.RawMessage(body), v.SuggestedConstraints
	return p
}

// remat is what a policy reads of a plan's (or a graph's) summary.
type remat struct {
	FullRematerialization bool `json:"full_rematerialization"`
	XLAFallback           bool `json:"xla_fallback"`
}

func (r remat) any() bool { return r.FullRematerialization || r.XLAFallback }

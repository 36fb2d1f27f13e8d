package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"github.com/shardplan/shardplan/api"
)

// auditOptions are the audit command's request options and gates.
type auditOptions struct {
	mesh, costModel, strategy, function string
	budget                              int64
	failOnRemat                         bool
	allowUnmodeled                      bool
	maxTimeUS                           float64
	maxExposedUS                        float64
}

// request builds the audit's body, Content-Type and query: a JSON graph request gets
// the options as fields, a compiled module (HloModule text) is sent as text/x-hlo and a
// StableHLO module as application/mlir, with the options as query parameters.
func (o *auditOptions) request(body []byte) (out []byte, contentType, query string, err error) {
	t := bytes.TrimSpace(body)
	if len(t) > 0 && t[0] == '{' {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(t, &m); err != nil {
			return nil, "", "", fmt.Errorf("the input starts with '{' but is not a JSON object: %v", err)
		}
		set := func(k string, v any) {
			if _, given := m[k]; !given {
				b, _ := json.Marshal(v) // strings and numbers always encode
				m[k] = b
			}
		}
		if o.mesh != "" {
			set("mesh", o.mesh)
		}
		if o.costModel != "" {
			set("cost_model", o.costModel)
		}
		if o.strategy != "" {
			set("strategy", o.strategy)
		}
		if o.function != "" {
			set("function", o.function)
		}
		if o.budget > 0 {
			set("memory_budget_bytes_per_device", o.budget)
		}
		out, err := json.Marshal(m)
		return out, "application/json", "", err
	}
	q := url.Values{}
	if o.mesh != "" {
		q.Set("mesh", o.mesh)
	}
	if o.costModel != "" {
		q.Set("cost_model", o.costModel)
	}
	if o.budget > 0 {
		q.Set("memory_budget_bytes_per_device", strconv.FormatInt(o.budget, 10))
	}
	contentType = "text/x-hlo"
	if !bytes.HasPrefix(t, []byte("HloModule")) {
		contentType = "application/mlir"
		if o.strategy != "" {
			q.Set("strategy", o.strategy)
		}
		if o.function != "" {
			q.Set("function", o.function)
		}
	}
	if len(q) > 0 {
		query = "?" + q.Encode()
	}
	return body, contentType, query, nil
}

// report prints the audit (the text report, or the raw JSON) and applies the gates.
func (o *auditOptions) report(stdout, stderr io.Writer, body []byte, asJSON bool) int {
	var a api.AuditResponse
	if err := json.Unmarshal(body, &a); err != nil {
		fmt.Fprintf(stderr, "shardplan: the server's audit is not what /v1/audit returns: %v\n", err)
		return exitServer
	}
	printAnswer(stdout, body, asJSON, func() string { return api.AuditText(&a) })
	var failed []string
	if o.failOnRemat {
		if n := len(a.Totals.XLARemats) + len(a.Remats); n > 0 {
			failed = append(failed, api.Count(n, "full rematerialization")+" (--fail-on-remat)")
		}
	}
	if n := len(a.Unmodeled); n > 0 && !o.allowUnmodeled {
		failed = append(failed, fmt.Sprintf("%s communicating without a price, first %s %%%s at line %d (%s); --allow-unmodeled accepts them", api.Count(n, "instruction"), a.Unmodeled[0].Opcode, a.Unmodeled[0].Name, a.Unmodeled[0].Line, a.Unmodeled[0].Reason))
	}
	switch m := a.Memory; {
	case m == nil:
	case o.budget > 0 && m.PeakBytesPerDevice > o.budget:
		failed = append(failed, fmt.Sprintf("memory peak %d bytes per device at op %s exceeds --memory-budget %d", m.PeakBytesPerDevice, m.PeakOp, o.budget))
	case o.budget <= 0 && m.MemoryBudgetBytesPerDevice != nil && m.OverBudget:
		// the budget the request file gives
		failed = append(failed, fmt.Sprintf("memory peak %d bytes per device at op %s exceeds the request's memory_budget_bytes_per_device %d", m.PeakBytesPerDevice, m.PeakOp, *m.MemoryBudgetBytesPerDevice))
	}
	if o.maxTimeUS > 0 && a.Totals.TimeUS > o.maxTimeUS {
		failed = append(failed, fmt.Sprintf("communication time %.2f us exceeds --max-time-us %g", a.Totals.TimeUS, o.maxTimeUS))
	}
	if o.maxExposedUS > 0 {
		switch e := a.Totals.ExposedUS; {
		case e == nil:
			failed = append(failed, "--max-exposed-us gates a compiled module's schedule; this audit has none (send the compiled HLO module)")
		case *e > o.maxExposedUS:
			failed = append(failed, fmt.Sprintf("exposed communication %.2f us exceeds --max-exposed-us %g", *e, o.maxExposedUS))
		}
	}
	return gate(stderr, "audit", failed)
}

// printAnswer prints the server's answer: the raw JSON body (ending in a newline) when
// asJSON, else the text report.
func printAnswer(stdout io.Writer, body []byte, asJSON bool, text func() string) {
	if !asJSON {
		fmt.Fprint(stdout, text())
		return
	}
	stdout.Write(body)
	if len(body) > 0 && body[len(body)-1] != '\n' {
		fmt.Fprintln(stdout)
	}
}

// gate prints each failed check of the named gate and returns the exit status:
// exitViolation when any failed, else exitOK.
func gate(stderr io.Writer, name string, failed []string) int {
	for _, f := range failed {
		fmt.Fprintf(stderr, "shardplan: %s gate failed: %s\n", name, f)
	}
	if len(failed) > 0 {
		return exitViolation
	}
	return exitOK
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/shardplan/shardplan/api"
)

// calibrateOptions are the calibrate command's flags.
type calibrateOptions struct {
	base, name, out string
	ranks, nodes    int
}

// request is the POST /v1/cost-models/fit body for the nccl-tests outputs in files (-:
// standard input).
func (o calibrateOptions) request(files []string, stdin io.Reader) ([]byte, error) {
	base := json.RawMessage(o.base)
	if t := strings.TrimSpace(o.base); !strings.HasPrefix(t, "{") {
		b, _ := json.Marshal(t) // a string always encodes
		base = b
	}
	req := api.FitRequest{Base: base, Name: o.name}
	for _, f := range files {
		text, err := readInput(f, stdin)
		if err != nil {
			return nil, err
		}
		req.Outputs = append(req.Outputs, api.FitOutput{Name: filepath.Base(f), Text: string(text), Ranks: o.ranks, Nodes: o.nodes})
	}
	return json.Marshal(req)
}

// report writes the fitted model (to --out, or standard output) and prints the errors
// per collective and scope and the outliers; with asJSON, the raw answer.
func (o calibrateOptions) report(stdout, stderr io.Writer, body []byte, asJSON bool) int {
	var ans api.FitResponse
	if err := json.Unmarshal(body, &ans); err != nil {
		fmt.Fprintf(stderr, "shardplan: the server's answer is not what /v1/cost-models/fit returns: %v\n", err)
		return exitServer
	}
	if asJSON {
		stdout.Write(body)
		fmt.Fprintln(stdout)
		return exitOK
	}
	var model bytes.Buffer
	if err := json.Indent(&model, ans.CostModel, "", "  "); err != nil {
		fmt.Fprintf(stderr, "shardplan: the fitted cost model is not JSON: %v\n", err)
		return exitServer
	}
	model.WriteByte('\n')
	text := stderr
	if o.out != "" {
		if err := os.WriteFile(o.out, model.Bytes(), 0o644); err != nil {
			fmt.Fprintf(stderr, "shardplan: %v\n", err)
			return exitBadInput
		}
		text = stdout
	} else {
		stdout.Write(model.Bytes())
	}
	fmt.Fprint(text, calibrateText(&ans))
	return exitOK
}

// calibrateText is the report of a fit: errors per collective and scope (points of
// 1 MiB or more), before (the base) and after, then the outliers.
func calibrateText(a *api.FitResponse) string {
	var b strings.Builder
	fitted := 0
	for _, p := range a.Points {
		if p.Fitted {
			fitted++
		}
	}
	fmt.Fprintf(&b, "fitted %d of %d points (1 MiB and more)\n\n", fitted, len(a.Points))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "collective\tscope\tpoints\tgeomean error\tworst\tbase geomean\tbase worst\t")
	for _, g := range a.Groups {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t\n", g.Collective, g.Scope, g.Points,
			100*g.GeomeanError, 100*g.WorstError, 100*g.BaseGeomeanError, 100*g.BaseWorstError)
	}
	tw.Flush()
	if len(a.Outliers) == 0 {
		b.WriteString("\nno outliers (every fitted point within 25%)\n")
		return b.String()
	}
	fmt.Fprintf(&b, "\n%d outliers (fitted points missed by more than 25%%):\n", len(a.Outliers))
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "source\tcollective\tbytes\tmeasured us\tpredicted us\terror\t")
	for _, p := range a.Outliers {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\t%+.1f%%\t\n", p.Source, p.Collective, p.Bytes, p.MeasuredUS, p.PredictedUS, 100*p.Error)
	}
	tw.Flush()
	return b.String()
}

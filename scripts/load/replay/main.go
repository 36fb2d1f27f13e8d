// Command replay posts request bodies (JSON lines) to a running server one after
// another and reports the latency percentiles it saw, the status codes, and how many
// answers were cache hits (X-Cache). BENCHMARKS.md's random-set load run:
//
//	SHARDPLAN_RANDOMSET_BODIES=/tmp/rs.jsonl go test -run TestRandomSetDump ./internal/planner/
//	go run ./scripts/load/replay -url http://127.0.0.1:8080/v1/reshard -bodies /tmp/rs.jsonl
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080/v1/reshard", "endpoint to POST to")
	path := flag.String("bodies", "", "file of request bodies, one JSON document per line")
	passes := flag.Int("passes", 1, "times to post the whole file")
	flag.Parse()
	bodies, err := readLines(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	client := &http.Client{Timeout: 2 * time.Minute}
	for pass := range *passes {
		var lat []time.Duration
		codes, hits := map[int]int{}, 0
		for _, b := range bodies {
			t0 := time.Now()
			resp, err := client.Post(*url, "application/json", bytes.NewReader(b))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			lat = append(lat, time.Since(t0))
			codes[resp.StatusCode]++
			if resp.Header.Get("X-Cache") == "hit" {
				hits++
			}
		}
		slices.Sort(lat)
		pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
		fmt.Printf("pass %d: %d requests, p50 %v, p90 %v, p99 %v, max %v; status %v; cache hits %d\n",
			pass+1, len(lat), pct(0.5), pct(0.9), pct(0.99), lat[len(lat)-1], codes, hits)
	}
}

func readLines(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			out = append(out, slices.Clone(line))
		}
	}
	return out, sc.Err()
}

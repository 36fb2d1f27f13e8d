// Command replay posts request bodies (JSON lines) to a running server and reports the
// latency percentiles it saw, the throughput, the status codes, and how many answers
// were cache hits (X-Cache). The server latency of docs/PERFORMANCE.md runs:
//
//	SHARDPLAN_RANDOMSET_BODIES=/tmp/rs.jsonl go test -run TestRandomSetDump ./internal/planner/
//	go run ./scripts/load/replay -url http://127.0.0.1:8080/v1/reshard -bodies /tmp/rs.jsonl
//
// -concurrency N posts from N clients at once (each body once per pass, in file order
// across the clients); -dtypes bf16,f32 posts every body once per dtype (its "dtype"
// member replaced), which makes distinct plans of the same reshards. -warm-dtypes
// s8,s16,s4,c128 first posts every body once per such dtype, unreported: a fresh
// server's heap grows through its first thousand requests, and the page faults of that
// growth are not what a long-running server pays.
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
	"strings"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080/v1/reshard", "endpoint to POST to")
	path := flag.String("bodies", "", "file of request bodies, one JSON document per line")
	passes := flag.Int("passes", 1, "times to post the whole file")
	conc := flag.Int("concurrency", 1, "clients posting at once")
	dtypes := flag.String("dtypes", "", `comma-separated dtypes: post every body once with each (replacing its "dtype")`)
	warm := flag.String("warm-dtypes", "", `comma-separated dtypes: first post every body once with each, unreported (choose element sizes -dtypes does not use, or they are cache hits)`)
	flag.Parse()
	bodies, err := readLines(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *dtypes != "" {
		bodies = withDtypes(bodies, strings.Split(*dtypes, ","))
	}
	client := &http.Client{Timeout: 2 * time.Minute}
	if *warm != "" {
		for _, b := range withDtypes(bodies, strings.Split(*warm, ",")) {
			resp, err := client.Post(*url, "application/json", bytes.NewReader(b))
			if err != nil {
				fmt.Fprintln(os.Stderr, "warm-up:", err)
				os.Exit(1)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
	for pass := range *passes {
		var (
			mu         sync.Mutex
			lat        []time.Duration
			codes      = map[int]int{}
			hits, next int
			failed     error
		)
		work := func() {
			for {
				mu.Lock()
				if next >= len(bodies) || failed != nil {
					mu.Unlock()
					return
				}
				b := bodies[next]
				next++
				mu.Unlock()
				t0 := time.Now()
				resp, err := client.Post(*url, "application/json", bytes.NewReader(b))
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				codes[resp.StatusCode]++
				if resp.Header.Get("X-Cache") == "hit" {
					hits++
				}
				mu.Unlock()
			}
		}
		start := time.Now()
		var wg sync.WaitGroup
		for range max(*conc, 1) {
			wg.Go(work)
		}
		wg.Wait()
		if failed != nil {
			fmt.Fprintln(os.Stderr, failed)
			os.Exit(1)
		}
		elapsed := time.Since(start)
		slices.Sort(lat)
		pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
		fmt.Printf("pass %d: %d requests, p50 %v, p90 %v, p99 %v, max %v; %.0f req/s; status %v; cache hits %d\n",
			pass+1, len(lat), pct(0.5), pct(0.9), pct(0.99), lat[len(lat)-1], float64(len(lat))/elapsed.Seconds(), codes, hits)
	}
}

// withDtypes is every body once per dtype, its "dtype" member set to it (bodies
// without one are kept once).
func withDtypes(bodies [][]byte, dtypes []string) [][]byte {
	var out [][]byte
	for _, b := range bodies {
		i := bytes.Index(b, []byte(`"dtype":"`))
		if i < 0 {
			out = append(out, b)
			continue
		}
		j := i + len(`"dtype":"`)
		k := bytes.IndexByte(b[j:], '"')
		for _, dt := range dtypes {
			v := slices.Concat(b[:j], []byte(strings.TrimSpace(dt)), b[j+k:])
			out = append(out, v)
		}
	}
	return out
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

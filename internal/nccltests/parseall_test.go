package nccltests

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseAllReadsEveryRun(t *testing.T) {
	f, err := os.Open("testdata/xxrjun-h100-10x1-five-runs.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs, err := ParseAll(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []Collective{AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv}
	if len(runs) != len(want) {
		t.Fatalf("%d runs, want %d", len(runs), len(want))
	}
	prevLast := 0
	for i, r := range runs {
		if r.Collective != want[i] {
			t.Errorf("run %d: %s, want %s", i, r.Collective, want[i])
		}
		// The header keys at the top apply to every run, and agree with each run's list.
		if r.Ranks != 10 || r.Nodes != 10 || r.GPUsPerNode != 1 || len(r.Hosts) != 10 || r.Header["source"] == "" {
			t.Errorf("run %d: ranks %d nodes %d per node %d hosts %d", i, r.Ranks, r.Nodes, r.GPUsPerNode, len(r.Hosts))
		}
		if len(r.Points) != 10 || r.TestsVersion != "2.17.8" {
			t.Errorf("run %d: %d points, version %q", i, len(r.Points), r.TestsVersion)
		}
		if first := r.Points[0].Line; first <= prevLast {
			t.Errorf("run %d starts at line %d, before the previous run ended (%d)", i, first, prevLast)
		}
		prevLast = r.Points[len(r.Points)-1].Line
		if mm, err := r.CheckBusBW(); err != nil || len(mm) > 0 {
			t.Errorf("run %d: %v %v", i, mm, err)
		}
	}
	// Parse refuses the same input, naming where the second run starts.
	f2, _ := os.Open("testdata/xxrjun-h100-10x1-five-runs.log")
	defer f2.Close()
	_, err = Parse(f2)
	var le *LineError
	if !errors.As(err, &le) || !strings.Contains(le.Msg, "a second run starts here") || le.Line != 43 {
		t.Errorf("Parse: %v; want the second run named at line 43", err)
	}
}

func TestParseAllSplits(t *testing.T) {
	row := "     8388608       2097152     float     sum      -1    80.32  104.44  182.77      0    80.32  104.44  182.77      0\n"
	tests := []struct {
		name  string
		in    string
		runs  int
		lines [][]int // the rows' lines per run
	}{
		{"one run", "# ranks: 8\n" + row + row, 1, [][]int{{2, 3}}},
		{"nThread starts a run", "# nThread 1 nGpus 8\n" + row + "# nThread 1 nGpus 8\n" + row, 2, [][]int{{2}, {4}}},
		{"version starts a run", "# nccl-tests version 2.17.8\n" + row + "# nccl-tests version 2.17.8\n# Collective test starting: sendrecv_perf\n" + row, 2, [][]int{{2}, {5}}},
		{"start line starts a run", row + "# Collective test starting: all_reduce_perf\n" + row + row, 2, [][]int{{1}, {3, 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runs, err := ParseAll(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != tc.runs {
				t.Fatalf("%d runs, want %d", len(runs), tc.runs)
			}
			for i, r := range runs {
				var got []int
				for _, p := range r.Points {
					got = append(got, p.Line)
				}
				if len(got) != len(tc.lines[i]) {
					t.Fatalf("run %d rows on lines %v, want %v", i, got, tc.lines[i])
				}
				for j := range got {
					if got[j] != tc.lines[i][j] {
						t.Errorf("run %d rows on lines %v, want %v", i, got, tc.lines[i])
					}
				}
			}
		})
	}
	// A run header repeated before any row (each MPI process printing it) starts one run.
	runs, err := ParseAll(strings.NewReader(row + "# nThread 1\n# nThread 1\n" + row))
	if err != nil || len(runs) != 2 || len(runs[1].Points) != 1 {
		t.Errorf("repeated run header: %d runs, %v", len(runs), err)
	}
	// Header keys after the first run belong to that run only.
	runs, err = ParseAll(strings.NewReader("# profile: h100\n" + row + "# nThread 1\n# ranks: 4\n" + row))
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].Header["profile"] != "h100" || runs[1].Header["profile"] != "h100" || runs[0].Ranks != 0 || runs[1].Ranks != 4 {
		t.Errorf("headers %v / %v, ranks %d / %d", runs[0].Header, runs[1].Header, runs[0].Ranks, runs[1].Ranks)
	}
}

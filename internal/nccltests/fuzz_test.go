package nccltests

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse feeds Parse arbitrary text. Parse must not panic; it either fails with a
// *LineError that names a line of the input, or returns rows whose line numbers lie in
// the input. Tagging every line with Open MPI's "[1,0]<stdout>:" must not change the
// outcome, since the parser strips launcher prefixes.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(datasetDir, "*.txt"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add(fullRun)
	f.Add("# collective: sendrecv\n   134217728      33554432     float     sum      -1   1211.2  110.81  110.81      0   1211.8  110.76  110.76    N/A\n")
	f.Add("       32768          4096   float    13.39    1.22    1.22  0e+00    11.85    1.38    1.38  0e+00\n")
	f.Add("0:            8             2     float     sum      -1    164.3    0.00    0.00      0    163.3    0.00    0.00      0\n")
	f.Add("# ranks: 0\n1 1 a b c d e f g h i j k\n")
	if b, err := os.ReadFile("testdata/xxrjun-h100-10x1-five-runs.log"); err == nil {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, in string) {
		lines := strings.Count(in, "\n") + 1
		r, err := Parse(strings.NewReader(in))
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a *LineError", err)
			}
			if le.Line < 0 || le.Line > lines+1 {
				t.Fatalf("error names line %d of a %d-line input", le.Line, lines)
			}
		} else {
			if len(r.Points) == 0 {
				t.Fatal("success without rows")
			}
			for _, p := range r.Points {
				if p.Line < 1 || p.Line > lines || p.Bytes < 0 || p.Count < 0 || p.OutOfPlace.TimeUS < 0 {
					t.Fatalf("row %+v out of range", p)
				}
			}
			if r.Ranks < 0 || r.Nodes < 0 || r.GPUsPerNode < 0 {
				t.Fatalf("negative counts %d %d %d", r.Ranks, r.Nodes, r.GPUsPerNode)
			}
		}
		// ParseAll agrees with Parse on input holding one run.
		if runs, errAll := ParseAll(strings.NewReader(in)); err == nil {
			if errAll != nil || len(runs) != 1 || !reflect.DeepEqual(runs[0], r) {
				t.Fatalf("ParseAll disagrees with Parse: %d runs, %v", len(runs), errAll)
			}
		} else if errAll == nil {
			var le *LineError
			if errors.As(err, &le) && !strings.Contains(le.Msg, "second run") {
				t.Fatalf("ParseAll accepted what Parse refused with %v", err)
			}
		}
		if len(in) > 1<<16 || strings.ContainsRune(in, '\r') {
			return
		}
		var tagged bytes.Buffer
		for _, l := range strings.Split(in, "\n") {
			tagged.WriteString("[1,0]<stdout>:" + l + "\n")
		}
		r2, err2 := Parse(&tagged)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("tagging every line changed the outcome: %v vs %v", err, err2)
		}
		if err != nil {
			var a, b *LineError
			errors.As(err, &a)
			errors.As(err2, &b)
			if a.Line != b.Line || a.Msg != b.Msg {
				t.Fatalf("tagging every line changed the error: %v vs %v", err, err2)
			}
			return
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("tagging every line changed the result:\n%+v\n%+v", r, r2)
		}
	})
}

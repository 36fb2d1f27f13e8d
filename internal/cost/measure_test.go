package cost

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/nccltests"
)

// measuredFile is one nccl-tests output of testdata/nccl.
type measuredFile struct {
	id      string
	profile string
	heldOut bool
	points  []Measurement
}

// readMeasured reads testdata/nccl/*.txt (see its README) through package nccltests.
func readMeasured(t testing.TB) []measuredFile {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "nccl", "*.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	sort.Strings(files)
	var out []measuredFile
	for _, path := range files {
		f, err := os.Open(path)
		require.NoError(t, err)
		res, err := nccltests.Parse(f)
		f.Close()
		require.NoError(t, err, path)
		ms, err := MeasurementsOf(res, filepath.Base(path))
		require.NoError(t, err)
		out = append(out, measuredFile{id: filepath.Base(path), profile: res.Header["profile"], heldOut: res.Header["set"] == "heldout", points: ms})
	}
	return out
}

// geoWorst is the geometric-mean and the worst error of pe's points of at least min
// bytes: exp(mean |log(predicted/measured)|) - 1 and the largest |predicted/measured - 1|
// either way (a factor f off counts f - 1).
func geoWorst(pe []PointError, min int64) (geo, worst float64, n int) {
	s := 0.0
	for _, e := range pe {
		if e.Bytes < min {
			continue
		}
		l := math.Abs(math.Log1p(e.Error))
		s += l
		worst = math.Max(worst, math.Expm1(l))
		n++
	}
	if n == 0 {
		return 0, 0, 0
	}
	return math.Expm1(s / float64(n)), worst, n
}

// TestFitReproducesItsCluster fits each built-in GPU profile to one cluster's output
// alone: the fitted profile reproduces that cluster's points of 1 MiB and more within
// 5% (geometric mean), every figure it moved cites the file, and fitting is
// deterministic.
func TestFitReproducesItsCluster(t *testing.T) {
	for _, id := range []string{"aws-p5-h100-1x8-allreduce.txt", "aws-p5-h100-2x8-allreduce.txt", "gcp-a3ultra-h200-2x1-allgather.txt", "gcp-a4-b200-1x2-allgather.txt"} {
		t.Run(id, func(t *testing.T) {
			var mf measuredFile
			for _, f := range readMeasured(t) {
				if f.id == id {
					mf = f
				}
			}
			require.NotEmpty(t, mf.points, id)
			base, ok := Lookup(mf.profile)
			require.True(t, ok)
			p, pe, err := Fit(mf.points, base)
			require.NoError(t, err)
			require.Len(t, pe, len(mf.points))
			geo, worst, n := geoWorst(pe, FitMinBytes)
			t.Logf("%s: %d points >= 1 MiB, geomean %.3f, worst %.3f", id, n, geo, worst)
			assert.LessOrEqual(t, geo, 0.05)
			cited := false
			for _, a := range p.Collectives.Algorithms {
				for _, s := range a.Sources {
					cited = cited || s == "fitted by cost.Fit to nccl-tests measurements >= 1 MiB: "+id
				}
			}
			assert.True(t, cited, "a fitted figure cites %s", id)
			_, err = New(p)
			require.NoError(t, err)
			again, _, err := Fit(mf.points, base)
			require.NoError(t, err)
			assert.Equal(t, collectivesKey(p.Collectives), collectivesKey(again.Collectives))
		})
	}
}

func TestFitErrors(t *testing.T) {
	tpu, _ := Lookup("tpu-v5p")
	_, _, err := Fit(nil, tpu)
	assert.ErrorContains(t, err, "no collectives figures")
	h100, _ := Lookup("h100")
	_, _, err = Fit([]Measurement{{Source: "x:1", Kind: AllGather, Ranks: 1, Nodes: 1, Bytes: 1, TimeUS: 1}}, h100)
	assert.ErrorContains(t, err, "x:1")
	p, pe, err := Fit(nil, h100)
	require.NoError(t, err)
	assert.Empty(t, pe)
	assert.Equal(t, collectivesKey(h100.Collectives), collectivesKey(p.Collectives), "nothing to fit: the base's figures")
}

// TestDevFit writes each GPU profile's collectives figures fitted to the dataset's
// non-held-out files into $SHARDPLAN_FIT_OUT (how profiles/*.json's fitted figures are
// made: scripts/fit-profiles.sh).
func TestDevFit(t *testing.T) {
	dir := os.Getenv("SHARDPLAN_FIT_OUT")
	if dir == "" {
		t.Skip("set SHARDPLAN_FIT_OUT to a directory to write fitted profiles")
	}
	byProfile := map[string][]Measurement{}
	for _, mf := range readMeasured(t) {
		if !mf.heldOut {
			byProfile[mf.profile] = append(byProfile[mf.profile], mf.points...)
		}
	}
	for name, ms := range byProfile {
		base, ok := Lookup(name)
		require.True(t, ok, name)
		p, pe, err := Fit(ms, base)
		require.NoError(t, err)
		geo, worst, n := geoWorst(pe, FitMinBytes)
		t.Logf("%s: %d points >= 1 MiB, geomean %.3f, worst %.3f", name, n, geo, worst)
		for _, mf := range readMeasured(t) {
			if mf.profile != name {
				continue
			}
			fe, err := Errors(p, mf.points)
			require.NoError(t, err)
			g, w, k := geoWorst(fe, FitMinBytes)
			t.Logf("  %-45s heldout=%-5v %3d points, geomean %.3f, worst %.3f", mf.id, mf.heldOut, k, g, w)
		}
		data, err := json.MarshalIndent(p.Collectives, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644))
	}
}

// FitContext stops at its context: a cancelled fit answers the context's error.
func TestFitContextStops(t *testing.T) {
	files := readMeasured(t)
	var ms []Measurement
	for _, f := range files {
		if f.profile == "h100" {
			ms = append(ms, f.points...)
		}
	}
	require.NotEmpty(t, ms)
	base, ok := Lookup("h100")
	require.True(t, ok)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := FitContext(ctx, ms, base)
	require.ErrorIs(t, err, context.Canceled)
}

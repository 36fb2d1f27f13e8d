package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/planner"
	"github.com/shardplan/shardplan/internal/propagation"
)

// referenceGraphKey is graphKey written with json.Marshal throughout (as it was before
// the hand-written tensors and ops): the plan ids must not change.
func referenceGraphKey(in *graphInput) (string, error) {
	h := sha256.New()
	inc := slices.Compact(slices.Sorted(slices.Values(in.req.Include)))
	head, _ := json.Marshal([]any{planner.Version, "graph", in.mesh.String(), in.mesh.Name, in.mesh.DeviceIDs,
		modelFingerprint(in.model), string(in.strategy), inc, in.opts, in.graph.Inputs, in.graph.Outputs})
	h.Write(head)
	if in.imp != nil {
		opaque, _ := json.Marshal(in.imp.Opaque)
		h.Write(opaque)
	}
	for _, id := range slices.Sorted(maps.Keys(in.graph.Tensors)) {
		t := in.graph.Tensors[id]
		ann := "-"
		if t.Sharding != nil {
			ann = t.Sharding.Body()
		}
		line, _ := json.Marshal([]any{id, t.Shape, t.ElemBits, ann})
		h.Write(line)
	}
	canon, err := json.Marshal(in.graph.Ops)
	if err != nil {
		return "", err
	}
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)), nil
}

func TestGraphKeyUnchanged(t *testing.T) {
	s := newTestServer(t, nil)
	bodies := graphBodies(t)
	// Names and attributes with bytes json.Marshal escapes, nested attribute values.
	bodies["escapes"] = `{"mesh": "x=2", "tensors": {"a<&>\u2028": {"shape": [4], "sharding": ["x"]}, "b\"\\\u0001é": {"shape": [4]}},
			"ops": [{"name": "n<>&\u2029", "op": "custom", "operands": ["a<&>\u2028"], "results": ["b\"\\\u0001é"], "rule": "([i])->([i])",
			"attrs": {"z": [1, 2.5e-9, -0, "s<", true, null, {"k&": [1e300]}], "a": {"y": 1E+2, "x": "\ud800"}}}]}`
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			in, err := prepareGraphKeyed(s, []byte(body))
			require.NoError(t, err)
			want, err := referenceGraphKey(in)
			require.NoError(t, err)
			require.Equal(t, want, in.key)
		})
	}
}

// TestOpJSONRandom compares the hand-written ops with json.Marshal on random names
// and attribute values of every type the decoders produce (and some they do not).
func TestOpJSONRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 13))
	for i := range 500 {
		ops := []propagation.Op{randomOp(rng, 2)}
		want, err := json.Marshal(ops[0])
		require.NoError(t, err)
		e := jsonAppender{html: true}
		e.op(&ops[0])
		require.NoError(t, e.err)
		require.Equal(t, string(want), string(e.b), "op %d", i)
	}
}

func TestOpJSONErrors(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(-1), json.Number("1x"), json.Number("+1"), json.Number("0x10"), json.Number(".5"), json.Number("")} {
		want, wantErr := json.Marshal(v)
		e := jsonAppender{html: true}
		e.value(v)
		if wantErr != nil {
			require.EqualError(t, e.err, wantErr.Error(), "%#v", v)
			continue
		}
		require.NoError(t, e.err)
		require.Equal(t, string(want), string(e.b), "%#v", v)
	}
}

func FuzzJSONNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "1.5e-7", "1E+2", "01", "1.", "-", "1e", "", "12.34e56"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := json.Marshal(json.Number(s))
		require.Equal(t, err == nil && s != "", isJSONNumber(s), "%q", s)
	})
}

func FuzzAppendJSONStringHTML(f *testing.F) {
	for _, s := range []string{"", "a<b>&c", "\u2028\u2029", "\x00\x1f\x7f\"\\", "\xff\xe4\xb8", "é世🙂"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendJSONString(nil, s, true)))
	})
}

// TestOpJSONKnowsEveryField fails when propagation.Op or Region changes: graphdomain.go
// writes their fields by name.
func TestOpJSONKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{{propagation.Op{}, "Name Kind Operands Results Attrs Rule Cond Body"}, {propagation.Region{}, "Params Ops Returns"}} {
		typ := reflect.TypeOf(tc.v)
		var names []string
		for i := range typ.NumField() {
			require.Empty(t, typ.Field(i).Tag, typ.Name())
			names = append(names, typ.Field(i).Name)
		}
		require.Equal(t, tc.want, strings.Join(names, " "), typ.Name())
	}
}

func randomOp(rng *rand.Rand, depth int) propagation.Op {
	o := propagation.Op{Name: randomString(rng), Kind: randomString(rng), Operands: randomStrings(rng), Results: randomStrings(rng), Rule: randomString(rng)}
	if rng.IntN(4) > 0 {
		o.Attrs = map[string]any{}
		for range rng.IntN(4) {
			o.Attrs[randomString(rng)] = randomValue(rng, 2)
		}
	}
	if depth > 0 && rng.IntN(4) == 0 {
		o.Cond = &propagation.Region{Params: randomStrings(rng), Returns: randomStrings(rng)}
		o.Body = &propagation.Region{Params: randomStrings(rng), Ops: []propagation.Op{randomOp(rng, depth-1)}}
	}
	return o
}

func randomValue(rng *rand.Rand, depth int) any {
	switch n := rng.IntN(13); {
	case n == 0:
		return nil
	case n == 1:
		return randomString(rng)
	case n == 2:
		return rng.IntN(2) == 0
	case n == 3:
		return json.Number(fmt.Sprint(rng.IntN(2000) - 1000))
	case n == 4:
		return json.Number("-1.25e-7")
	case n == 5:
		return randomFloat(rng)
	case n == 6:
		return rng.IntN(100)
	case n == 7:
		return rng.Int64()
	case n == 8:
		return randomInts[int](rng)
	case n == 9:
		return randomInts[int64](rng)
	case n == 10:
		return struct {
			A string `json:"a"`
		}{randomString(rng)} // not a decoded type: json.Marshal writes it
	case depth == 0:
		return nil
	case n == 11:
		a := make([]any, rng.IntN(3))
		for i := range a {
			a[i] = randomValue(rng, depth-1)
		}
		return a
	}
	m := map[string]any{}
	for range rng.IntN(3) {
		m[randomString(rng)] = randomValue(rng, depth-1)
	}
	return m
}

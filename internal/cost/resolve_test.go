package cost

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/shardplan/shardplan/internal/fielderr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResolveGood(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want string // model name
	}{
		{"absent", ``, "tpu-v5p"},
		{"null", ` null `, "tpu-v5p"},
		{"profile", `"h100"`, "h100"},
		{"alias", `"h100-nvlink"`, "h100"},
		{"base only", `{"base":"tpu-v6e"}`, "tpu-v6e"},
		{"base and name", `{"base":"tpu-v6e","name":"mine"}`, "mine"},
		{"base with overrides", `{"base":"h100","efficiency":0.824,"axis_links":{"data":"ib"}}`, "h100+custom"},
		{"null members are absent", `{"base":"b200","mode":null}`, "b200"},
		{"custom", `{"links":{"ici":{"bandwidth_gbps":50,"latency_us":1,"topology":"ring_bidi"}}}`, "custom"},
		{"custom named", `{"name":"lab-1","mode":"max","links":{"ici":{"bandwidth_gbps":50,"topology":"torus","wrap":"size16"}}}`, "lab-1"},
		{"custom gpu", `{"gpus_per_node":4,"links":{"nvlink":{"bandwidth_gbps":300,"topology":"switch"},"ib":{"bandwidth_gbps":25,"topology":"switch"}}}`, "custom"},
		{"builtin name with equal figures", `{"name":"tpu-v6e","links":{"ici":{"bandwidth_gbps":90,"latency_us":1,"topology":"torus","wrap":"size16"},
			"dcn":{"bandwidth_gbps":12.5,"latency_us":10,"topology":"switch"}}}`, "tpu-v6e"},
		{"builtin document", builtinDoc(t, "h100"), "h100"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Resolve(json.RawMessage(tc.raw), "cost_model")
			require.NoError(t, err)
			assert.Equal(t, tc.want, m.Name())
		})
	}
}

func TestResolveOverrides(t *testing.T) {
	m := mustResolve(t, `{"base":"tpu-v5p","links":{"ici":{"bandwidth_gbps":100,"sources":{"bandwidth_gbps":"GCP v5p"}},"dcn":{"latency_us":20}}}`)
	info := m.(*Fabric).Info()
	ici, dcn := info.Links["ici"], info.Links["dcn"]
	assert.Equal(t, 100.0, ici.BandwidthGBps)
	assert.Equal(t, "GCP v5p", ici.Sources["bandwidth_gbps"])
	assert.Equal(t, "cube", ici.Wrap, "unset figures keep the base's")
	assert.Equal(t, 1.0, ici.LatencyUS)
	assert.Equal(t, 20.0, dcn.LatencyUS)
	assert.Equal(t, fromRequest, dcn.Sources["latency_us"])
	assert.Equal(t, 6.25, dcn.BandwidthGBps)

	// a topology change drops the base's torus wrap rule
	m = mustResolve(t, `{"base":"tpu-v5p","links":{"ici":{"topology":"line"}}}`)
	assert.Empty(t, m.(*Fabric).Info().Links["ici"].Wrap)

	// the base is not modified
	base, _ := Lookup("tpu-v5p")
	assert.Equal(t, 90.0, base.Links["ici"].BandwidthGBps)
}

// TestResolveRoundTrip: every GET /v1/cost-models/{name} document is a valid cost_model
// that resolves to the profile itself.
func TestResolveRoundTrip(t *testing.T) {
	for _, p := range Profiles() {
		t.Run(p.Name, func(t *testing.T) {
			raw, err := json.Marshal(p)
			require.NoError(t, err)
			m := mustResolve(t, string(raw))
			want, _ := Profile(p.Name)
			assert.Same(t, want, m)
		})
	}
}

func TestResolveBad(t *testing.T) {
	cases := []struct {
		name, raw, field, msg string
	}{
		{"number", `42`, "cost_model", "must be a profile name"},
		{"array", `["h100"]`, "cost_model", "not an array"},
		{"unknown profile", `"h101"`, "cost_model", `unknown cost model "h101"; use one of a100, b200, gb200-nvl72, h100`},
		{"unknown base", `{"base":"v5p"}`, "cost_model.base", "unknown profile"},
		{"base not a string", `{"base":5}`, "cost_model.base", "must be a string, not the number 5"},
		{"unknown field", `{"base":"h100","bandwidth":3}`, "cost_model.bandwidth", "unknown field; allowed fields are aliases, axis_links"},
		{"unknown link field", `{"base":"h100","links":{"ib":{"bw":3}}}`, "cost_model.links.ib.bw", "unknown field; allowed fields are bandwidth_gbps"},
		{"unknown link class", `{"base":"h100","links":{"pcie":{"bandwidth_gbps":3}}}`, "cost_model.links.pcie", "use ici, nvlink, ib or dcn"},
		{"link not an object", `{"base":"h100","links":{"ib":3}}`, "cost_model.links.ib", "must be an object"},
		{"links not an object", `{"base":"h100","links":[]}`, "cost_model.links", "must be an object, not an array"},
		{"bandwidth string", `{"base":"h100","links":{"ib":{"bandwidth_gbps":"fast"}}}`, "cost_model.links.ib.bandwidth_gbps", "must be a finite number"},
		{"bandwidth zero", `{"base":"h100","links":{"ib":{"bandwidth_gbps":0}}}`, "cost_model.links.ib.bandwidth_gbps", "GB/s"},
		{"bandwidth huge", `{"base":"h100","links":{"ib":{"bandwidth_gbps":1e300}}}`, "cost_model.links.ib.bandwidth_gbps", "between"},
		{"bandwidth overflow", `{"base":"h100","links":{"ib":{"bandwidth_gbps":1e999}}}`, "cost_model.links.ib.bandwidth_gbps", "must be a finite number"},
		{"latency negative", `{"base":"h100","links":{"ib":{"latency_us":-1}}}`, "cost_model.links.ib.latency_us", "latency per step"},
		{"base latency negative", `{"base":"h100","links":{"ib":{"base_latency_us":-1}}}`, "cost_model.links.ib.base_latency_us", "per collective"},
		{"topology", `{"base":"h100","links":{"ib":{"topology":"fat_tree"}}}`, "cost_model.links.ib.topology", "use torus, ring_bidi, ring_uni, line or switch"},
		{"wrap rule", `{"base":"tpu-v4","links":{"ici":{"wrap":"sometimes"}}}`, "cost_model.links.ici.wrap", "use always, never, size16 or cube"},
		{"wrap on a switch", `{"base":"h100","links":{"ib":{"wrap":"always"}}}`, "cost_model.links.ib.wrap", "only to topology \"torus\""},
		{"links per chip", `{"base":"tpu-v4","links":{"ici":{"links_per_chip":2.5}}}`, "cost_model.links.ici.links_per_chip", "whole number"},
		{"new link without bandwidth", `{"base":"h100","links":{"dcn":{"topology":"switch"}}}`, "cost_model.links.dcn.bandwidth_gbps", "GB/s"},
		{"custom without links", `{"mode":"max"}`, "cost_model.links", `needs link "ici"`},
		{"gpu model without ib", `{"gpus_per_node":8,"links":{"nvlink":{"bandwidth_gbps":450,"topology":"switch"}}}`, "cost_model.links", `needs link "ib"`},
		{"tpu base made gpu", `{"base":"tpu-v5p","gpus_per_node":8}`, "cost_model.links", `needs link "nvlink"`},
		{"gpus per node negative", `{"base":"h100","gpus_per_node":-8}`, "cost_model.gpus_per_node", "number of GPUs per NVLink domain"},
		{"gpus per node fraction", `{"base":"h100","gpus_per_node":7.5}`, "cost_model.gpus_per_node", "whole number, not the number 7.5"},
		{"mode", `{"base":"h100","mode":"sum"}`, "cost_model.mode", `use "additive"`},
		{"hierarchy", `{"base":"h100","hierarchy":"nested"}`, "cost_model.hierarchy", `use "sequential" or "overlapped"`},
		{"efficiency zero", `{"base":"h100","efficiency":0}`, "cost_model.efficiency", "[1e-06, 1]"},
		{"efficiency above 1", `{"base":"h100","efficiency":1.5}`, "cost_model.efficiency", "[1e-06, 1]"},
		{"efficiency subnormal", `{"base":"h100","efficiency":5e-324}`, "cost_model.efficiency", "[1e-06, 1]"},
		{"efficiency below the floor", `{"base":"h100","efficiency":1e-9}`, "cost_model.efficiency", "[1e-06, 1]"},
		{"axis link class", `{"base":"h100","axis_links":{"x":"pcie"}}`, "cost_model.axis_links.x", "unknown link class"},
		{"axis link undefined", `{"base":"h100","axis_links":{"x":"dcn"}}`, "cost_model.axis_links.x", `link "dcn" is not defined by this model (links: ib, nvlink)`},
		{"axis link bad axis", `{"base":"h100","axis_links":{"1x":"ib"}}`, "cost_model.axis_links.1x", "not a mesh axis name"},
		{"axis link not a string", `{"base":"h100","axis_links":{"x":1}}`, "cost_model.axis_links.x", "must be a string"},
		{"name", `{"base":"h100","name":"a b"}`, "cost_model.name", "letters, digits"},
		{"builtin name, other figures", `{"base":"h100","name":"h100","efficiency":0.5}`, "cost_model.name", "built-in profile with other figures"},
		{"alias name, other figures", `{"base":"h100","name":"h100-nvlink","efficiency":0.5}`, "cost_model.name", "built-in profile with other figures"},
		{"aliases not strings", `{"base":"h100","aliases":[1]}`, "cost_model.aliases", "array of strings"},
		{"malformed", `{"base":`, "cost_model", "is not valid JSON"},
		{"bad string", `"h100`, "cost_model", "is not a valid JSON string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Resolve(json.RawMessage(tc.raw), "cost_model")
			require.Error(t, err)
			assert.Nil(t, m)
			var fe *fielderr.FieldError
			require.True(t, errors.As(err, &fe), "%T", err)
			assert.Equal(t, tc.field, fe.Field)
			assert.Contains(t, fe.Message, tc.msg)
		})
	}
}

func TestNewRejectsBadProfileInfo(t *testing.T) {
	_, err := New(ProfileInfo{Name: "x", Links: map[string]LinkInfo{"ici": {BandwidthGBps: -1, Topology: "switch"}}})
	var fe *fielderr.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "links.ici.bandwidth_gbps", fe.Field)

	_, err = New(ProfileInfo{Name: "", Links: map[string]LinkInfo{"ici": {BandwidthGBps: 1, Topology: "switch"}}})
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "name", fe.Field)
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		``, `null`, `"h100"`, `"nope"`, `3`, `[]`, `{}`, `{"base":"h100"}`,
		`{"base":"tpu-v5p","axis_links":{"dcn":"dcn"},"links":{"ici":{"bandwidth_gbps":1e-7}}}`,
		`{"links":{"ici":{"bandwidth_gbps":50,"latency_us":1,"topology":"torus","wrap":"cube"}},"mode":"max"}`,
		`{"gpus_per_node":1e20,"links":{"nvlink":{"bandwidth_gbps":1,"topology":"switch"}}}`,
		`{"base":"h100","links":{"ib":{"sources":{"bandwidth_gbps":7}}}}`,
	} {
		f.Add([]byte(s))
	}
	m := testMesh(f, "a=4,b=2,c=8")
	f.Fuzz(func(t *testing.T, raw []byte) {
		model, err := Resolve(raw, "cost_model")
		if err != nil {
			var fe *fielderr.FieldError
			if !errors.As(err, &fe) || fe.Field == "" || fe.Message == "" {
				t.Fatalf("error %T %v is not a *fielderr.FieldError with a field and message", err, err)
			}
			if model != nil {
				t.Fatalf("model %v with error", model)
			}
			return
		}
		// A resolved model prices without panicking, with finite non-negative times.
		for _, kind := range allKinds {
			e := model.Estimate(Collective{Kind: kind, Bytes: 1 << 40, Mesh: m, Axes: group(t, m, "a", "c"), Hops: 3})
			if !(e.TimeUS >= 0 && e.TimeUS < 1e300) {
				t.Fatalf("%s: time %v", kind, e.TimeUS)
			}
		}
	})
}

// builtinDoc is GET /v1/cost-models/{name}'s document of a built-in profile.
func builtinDoc(t testing.TB, name string) string {
	p, ok := Lookup(name)
	require.True(t, ok)
	data, err := json.Marshal(p)
	require.NoError(t, err)
	return string(data)
}

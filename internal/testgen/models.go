package testgen

import (
	"encoding/json"
)

// ModelTensor is one weight of a model as a transfer request lists it: Repeat tensors
// ("{i}" in Name) of one shape, with the source sharding on a trainer mesh with axes
// fsdp and tp (and ep for experts) and the target sharding on an inference mesh with
// axes tp (and ep).
type ModelTensor struct {
	Name   string `json:"name"`
	Shape  []int  `json:"shape"`
	DType  string `json:"dtype"`
	Source any    `json:"source"`
	Target any    `json:"target"`
	Repeat int    `json:"repeat,omitempty"`
}

// Llama is a Llama-style dense decoder's shapes (Llama 3: grouped-query attention,
// SwiGLU MLP, untied embeddings).
type Llama struct {
	Layers, Hidden, Heads, KVHeads, Intermediate, Vocab int
}

// Llama3_8B and Llama3_70B are the published Llama 3 configurations.
var (
	Llama3_8B  = Llama{Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, Intermediate: 14336, Vocab: 128256}
	Llama3_70B = Llama{Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, Intermediate: 28672, Vocab: 128256}
)

// Params is the model's parameter count.
func (l Llama) Params() int64 {
	var n int64
	for _, t := range l.Tensors() {
		e := int64(max(t.Repeat, 1))
		for _, d := range t.Shape {
			e *= int64(d)
		}
		n += e
	}
	return n
}

// Tensors lists the weights in bf16, [out, in] as PyTorch stores them. The trainer
// shards column-parallel weights (q, k, v, gate, up, the embeddings) on dim 0 over
// fsdp then tp, row-parallel ones (o, down) with fsdp on dim 0 and tp on dim 1, norms
// over fsdp; the inference replicas shard column-parallel weights on dim 0 over tp,
// row-parallel on dim 1, and replicate the norms (Megatron's tensor parallelism).
func (l Llama) Tensors() []ModelTensor {
	head := l.Hidden / l.Heads
	kv := l.KVHeads * head
	col := func(name string, out, in, rep int) ModelTensor {
		return ModelTensor{Name: name, Shape: []int{out, in}, DType: "bf16", Source: []any{[]string{"fsdp", "tp"}, nil}, Target: []any{"tp", nil}, Repeat: rep}
	}
	row := func(name string, out, in, rep int) ModelTensor {
		return ModelTensor{Name: name, Shape: []int{out, in}, DType: "bf16", Source: []any{"fsdp", "tp"}, Target: []any{nil, "tp"}, Repeat: rep}
	}
	norm := func(name string, rep int) ModelTensor {
		return ModelTensor{Name: name, Shape: []int{l.Hidden}, DType: "bf16", Source: []any{"fsdp"}, Target: []any{nil}, Repeat: rep}
	}
	L := l.Layers
	return []ModelTensor{
		col("model.embed_tokens.weight", l.Vocab, l.Hidden, 0),
		col("model.layers.{i}.self_attn.q_proj.weight", l.Hidden, l.Hidden, L),
		col("model.layers.{i}.self_attn.k_proj.weight", kv, l.Hidden, L),
		col("model.layers.{i}.self_attn.v_proj.weight", kv, l.Hidden, L),
		row("model.layers.{i}.self_attn.o_proj.weight", l.Hidden, l.Hidden, L),
		col("model.layers.{i}.mlp.gate_proj.weight", l.Intermediate, l.Hidden, L),
		col("model.layers.{i}.mlp.up_proj.weight", l.Intermediate, l.Hidden, L),
		row("model.layers.{i}.mlp.down_proj.weight", l.Hidden, l.Intermediate, L),
		norm("model.layers.{i}.input_layernorm.weight", L),
		norm("model.layers.{i}.post_attention_layernorm.weight", L),
		norm("model.norm.weight", 0),
		col("lm_head.weight", l.Vocab, l.Hidden, 0),
	}
}

// MoELayer is one mixture-of-experts layer's expert weights: Experts experts of
// [ffn, hidden] (gate, up) and [hidden, ffn] (down), with the router. The trainer
// shards experts over ep and their hidden dim over fsdp; the inference replicas shard
// experts over ep and each expert's ffn dim over tp.
func MoELayer(experts, hidden, ffn, layers int) []ModelTensor {
	return []ModelTensor{
		{Name: "model.layers.{i}.mlp.gate.weight", Shape: []int{experts, hidden}, DType: "bf16", Source: []any{nil, "fsdp"}, Target: []any{nil, nil}, Repeat: layers},
		{Name: "model.layers.{i}.mlp.experts.gate_proj", Shape: []int{experts, ffn, hidden}, DType: "bf16", Source: []any{"ep", nil, "fsdp"}, Target: []any{"ep", "tp", nil}, Repeat: layers},
		{Name: "model.layers.{i}.mlp.experts.up_proj", Shape: []int{experts, ffn, hidden}, DType: "bf16", Source: []any{"ep", nil, "fsdp"}, Target: []any{"ep", "tp", nil}, Repeat: layers},
		{Name: "model.layers.{i}.mlp.experts.down_proj", Shape: []int{experts, hidden, ffn}, DType: "bf16", Source: []any{"ep", "fsdp", nil}, Target: []any{"ep", nil, "tp"}, Repeat: layers},
	}
}

// Placement is a transfer request's placement.
type Placement struct {
	Name        string `json:"name,omitempty"`
	Mesh        string `json:"mesh"`
	FirstDevice *int   `json:"first_device,omitempty"`
	DeviceIDs   []int  `json:"device_ids,omitempty"`
}

// At is a placement of mesh on consecutive ids from first.
func At(name, mesh string, first int) Placement {
	return Placement{Name: name, Mesh: mesh, FirstDevice: &first}
}

// TransferRequestJSON is a POST /v1/transfer body.
func TransferRequestJSON(costModel string, devices int, source Placement, targets []Placement, tensors []ModelTensor) []byte {
	body, _ := json.Marshal(map[string]any{
		"cost_model": costModel, "fabric_devices": devices,
		"source": source, "targets": targets, "tensors": tensors,
	})
	return body
}

// Replicas are n placements of mesh, each on size consecutive ids from first.
func Replicas(mesh string, n, size, first int) []Placement {
	out := make([]Placement, n)
	for i := range out {
		out[i] = At("replica", mesh, first+i*size)
	}
	return out
}

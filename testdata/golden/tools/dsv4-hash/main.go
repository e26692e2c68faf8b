// dsv4-hash writes a copy of a deepseek4 GGUF whose first layers route by
// token id: hash_layer_count = n, and each of those layers' exp_probs_b.bias
// replaced by an I32 ffn_gate_tid2eid.weight {k, vocab} of distinct expert
// ids per token (a seeded shuffle), as llama.cpp's converter writes it.
//
// usage (in this folder): go run . IN.gguf OUT.gguf
package main

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"strings"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/quant"
)

func main() {
	in, out, n := os.Args[1], os.Args[2], 1
	f, err := gguf.Open(in)
	if err != nil {
		panic(err)
	}
	raw, err := os.ReadFile(in)
	if err != nil {
		panic(err)
	}
	getU := func(k string) int { v, _ := f.Get(k); u, _ := v.Uint(); return int(u) }
	ne, k := getU("deepseek4.expert_count"), getU("deepseek4.expert_used_count")
	vocab := 0
	for _, t := range f.Tensors {
		if t.Name == "token_embd.weight" {
			vocab = int(t.Dims[1])
		}
	}
	o, err := os.Create(out)
	if err != nil {
		panic(err)
	}
	w := gguf.NewWriter(o)
	for _, kv := range f.KV {
		if kv.Key == "deepseek4.hash_layer_count" {
			if err := w.AddKV(kv.Key, uint32(n)); err != nil {
				panic(err)
			}
			continue
		}
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			panic(err)
		}
	}
	type tw struct {
		name string
		data []byte
	}
	var ts []tw
	r := rand.New(rand.NewSource(7))
	for _, t := range f.Tensors {
		drop := false
		for l := 0; l < n; l++ {
			if t.Name == fmt.Sprintf("blk.%d.exp_probs_b.bias", l) {
				drop = true
				b := make([]byte, 4*k*vocab)
				for tok := 0; tok < vocab; tok++ {
					p := r.Perm(ne)
					for j := 0; j < k; j++ {
						binary.LittleEndian.PutUint32(b[4*(tok*k+j):], uint32(p[j]))
					}
				}
				name := strings.Replace(t.Name, "exp_probs_b.bias", "ffn_gate_tid2eid.weight", 1)
				if err := w.AddTensor(name, quant.I32, []uint64{uint64(k), uint64(vocab)}); err != nil {
					panic(err)
				}
				ts = append(ts, tw{name, b})
			}
		}
		if drop {
			continue
		}
		if err := w.AddTensor(t.Name, t.Type, t.Dims); err != nil {
			panic(err)
		}
		ts = append(ts, tw{t.Name, raw[t.Offset : t.Offset+t.Size]})
	}
	if err := w.WriteHeader(); err != nil {
		panic(err)
	}
	for _, t := range ts {
		if err := w.WriteTensor(t.name, t.data); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	o.Close()
}

package gen

import (
	"context"
	"fmt"
	"sort"

	concpool "github.com/sourcegraph/conc/pool"

	"github.com/pipe-engine/pipe/quant"
)

// Large tensors are assembled from pools of quantized blocks, because
// quantizing 30 billion fresh floats with the reference K-quant quantizers
// would take an hour on two cores (Q4_K runs at ~110 ns per element). A pool
// holds poolBlocks blocks, each quant.Quantize applied to a block of fresh
// random floats; a tensor row is made of blocks picked from the pool by a
// seeded generator. The ggml quantizers of every type gen emits treat blocks
// independently, so such a row is byte for byte what the quantizer produces
// for the concatenation of the picked blocks' source floats: every byte is a
// real quantizer output, and with 8192 blocks per pool and 3–16 blocks per row
// rows practically never repeat. Tensors of at most freshLimit elements are
// quantized from fresh floats row by row instead.

// blockKind is what a block's source floats look like.
type blockKind uint8

const (
	kindNormal      blockKind = iota // N(0, std)
	kindAnchorZero                   // N(0, std) with the last anchor positions 0
	kindAnchorConst                  // N(0, std) with the last anchor positions = embedAnchor(std)
)

type poolKey struct {
	typ     quant.Type
	std     float64
	kind    blockKind
	anchors int
}

func (k poolKey) String() string {
	return fmt.Sprintf("pool/%s/%g/%d/%d", k.typ, k.std, k.kind, k.anchors)
}

// pool is poolBlocks quantized blocks of one key, back to back.
type pool struct {
	blockBytes int
	data       []byte
}

func (pl *pool) block(i int) []byte { return pl.data[i*pl.blockBytes : (i+1)*pl.blockBytes] }

func buildPool(seed uint64, k poolKey) (*pool, error) {
	bs := k.typ.BlockSize()
	n := poolBlocks * bs
	src := make([]float32, n)
	r := newRNG(seed, k.String(), 0)
	for i := range src {
		src[i] = float32(k.std * r.norm())
	}
	if k.kind != kindNormal && k.anchors > 0 {
		for b := 0; b < poolBlocks; b++ {
			blk := src[b*bs : (b+1)*bs]
			for i := bs - k.anchors; i < bs; i++ {
				if k.kind == kindAnchorConst {
					blk[i] = embedAnchor(k.std)
				} else {
					blk[i] = 0
				}
			}
		}
	}
	rs, err := k.typ.RowSize(int64(n))
	if err != nil {
		return nil, err
	}
	pl := &pool{blockBytes: k.typ.TypeSize(), data: make([]byte, rs)}
	if err := quant.Quantize(k.typ, src, pl.data); err != nil {
		return nil, fmt.Errorf("gen: %s: %w", k, err)
	}
	return pl, nil
}

// pooled reports whether tensor t is assembled from pools.
func pooled(t *TensorSpec) bool {
	return isQuantized(t.Type) && t.Elements() > freshLimit
}

// lastBlockKind is the kind of the last block of t's rows (that are not zero
// rows); every other block is kindNormal. Every quantized type has blocks of at
// least 32 elements, so the anchors never fill a block.
func lastBlockKind(p *Preset, t *TensorSpec) blockKind {
	if anchorDims(p) == 0 {
		return kindNormal
	}
	if t.Role == RoleEmbed {
		return kindAnchorConst
	}
	if readsResidual(p, t) {
		return kindAnchorZero
	}
	return kindNormal
}

// poolKeys lists the pools plan needs, in a fixed order.
func poolKeys(pl *Plan) []poolKey {
	seen := map[poolKey]bool{}
	var keys []poolKey
	add := func(k poolKey) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for i := range pl.Tensors {
		t := &pl.Tensors[i]
		if !pooled(t) {
			continue
		}
		a := anchorDims(&pl.Preset)
		std := stdOf(&pl.Preset, t)
		add(poolKey{typ: t.Type, std: std, kind: kindNormal})
		if k := lastBlockKind(&pl.Preset, t); k != kindNormal {
			add(poolKey{typ: t.Type, std: std, kind: k, anchors: a})
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// buildPools builds every pool plan needs, in parallel.
func buildPools(ctx context.Context, seed uint64, pl *Plan, workers int) (map[poolKey]*pool, error) {
	keys := poolKeys(pl)
	pools := make([]*pool, len(keys))
	g := concpool.New().WithMaxGoroutines(max(workers, 1)).WithContext(ctx).WithCancelOnError().WithFirstError()
	for i, k := range keys {
		g.Go(func(ctx context.Context) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			p, err := buildPool(seed, k)
			pools[i] = p
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	m := make(map[poolKey]*pool, len(keys))
	for i, k := range keys {
		m[k] = pools[i]
	}
	return m, nil
}

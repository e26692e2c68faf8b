package stages

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/pipe-engine/pipe/model"
)

// TestStateSaveLoad: a sequence's state saved after its prompt and two
// steps and loaded into a fresh state continues with the logits the
// original does, bit for bit — attention layers (qwen3moe), recurrent ones
// (qwen35moe), a K-only latent cache (deepseek2), f16 and f32 rows — and a
// file of another shape is ErrStateFile.
func TestStateSaveLoad(t *testing.T) {
	ctx := context.Background()
	for _, m := range []string{"tiny-qwen3moe-Q4_K_M", "tiny-qwen35moe-Q4_K_M", "tiny-deepseek2-Q4_K_M"} {
		for _, kv := range []model.KVType{model.KVF16, model.KVF32} {
			t.Run(fmt.Sprintf("%s/%v", m, kv), func(t *testing.T) {
				cfg := baseCfg()
				cfg.Path = fmt.Sprintf("../testdata/golden/models/%s.gguf", m)
				e, err := Open(ctx, cfg, Inputs{})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				a, err := e.newState(len(prompt)+8, kv)
				if err != nil {
					t.Fatal(err)
				}
				seq := &batchSeq{st: a, prompt: prompt}
				runBatch(ctx, t, e, []*batchSeq{seq}, len(prompt), 2)
				var buf bytes.Buffer
				if _, err := a.Save(&buf); err != nil {
					t.Fatal(err)
				}
				saved := buf.Bytes()
				b, err := e.newState(len(prompt)+8, kv)
				if err != nil {
					t.Fatal(err)
				}
				if n, err := b.Load(bytes.NewReader(saved)); err != nil || n != int64(len(saved)) || b.Pos != a.Pos {
					t.Fatalf("load: %d of %d bytes, pos %d (want %d): %v", n, len(saved), b.Pos, a.Pos, err)
				}
				next := seq.next
				for step := 0; step < 3; step++ {
					ra, err := e.ForwardBatch(ctx, []model.Seq{{State: a, Tokens: []int32{next}}})
					if err != nil {
						t.Fatal(err)
					}
					rowA := append([]float32(nil), ra[0][0]...)
					rb, err := e.ForwardBatch(ctx, []model.Seq{{State: b, Tokens: []int32{next}}})
					if err != nil {
						t.Fatal(err)
					}
					if !sameBits([][]float32{rowA}, rb[0]) {
						t.Fatalf("step %d after the load: logits differ from the saved sequence's", step)
					}
					next = int32(argmax(rowA))
				}
				other := model.KVF32
				if kv == model.KVF32 {
					other = model.KVF16
				}
				c, err := e.newState(len(prompt)+8, other)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Load(bytes.NewReader(saved)); !errors.Is(err, model.ErrStateFile) || c.Pos != 0 {
					t.Fatalf("another KV type: %v, pos %d", err, c.Pos)
				}
				if _, err := b.Load(bytes.NewReader(saved[:len(saved)-3])); !errors.Is(err, model.ErrStateFile) || b.Pos != 0 {
					t.Fatalf("a truncated file: %v, pos %d", err, b.Pos)
				}
			})
		}
	}
}

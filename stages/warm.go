package stages

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
)

// ModelID identifies the model file for its hot set (see ModelIDOf).
func (e *Engine) ModelID() (cache.ModelID, error) { return ModelIDOf(e.desc.File) }

// ModelIDOf identifies a model file for its hot set: the total size of its
// shards and the SHA-256 of the first shard's header (metadata and tensor
// infos, the bytes before the data section).
func ModelIDOf(f *gguf.File) (cache.ModelID, error) {
	var id cache.ModelID
	for _, sh := range f.Shards {
		id.Size += int64(sh.Size)
	}
	r, err := os.Open(f.Path)
	if err != nil {
		return id, fmt.Errorf("model id: %w", err)
	}
	defer r.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, r, int64(f.DataOffset)); err != nil {
		return id, fmt.Errorf("model id: %s header: %w", f.Path, err)
	}
	id.HeaderSHA = hex.EncodeToString(h.Sum(nil))
	return id, nil
}

// ExpertShapeOf is the number of experts of every layer of d (0 for a layer
// without routed experts), the shape of the model's hot set.
func ExpertShapeOf(d *model.Desc) []int {
	s := make([]int, len(d.Experts))
	for i, exps := range d.Experts {
		s[i] = len(exps)
	}
	return s
}

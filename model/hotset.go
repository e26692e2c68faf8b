package model

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/pipe-engine/pipe/cache"
)

// HotSetID identifies the model's file for its hot set (cache.HotSet): the
// total size of its shards and the SHA-256 of the first shard's header
// (metadata and tensor infos, the bytes before the data section).
func (d *Desc) HotSetID() (cache.ModelID, error) {
	f := d.File
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

// ExpertShape is the number of experts of every layer (0 for a layer
// without routed experts), the shape of the model's hot set.
func (d *Desc) ExpertShape() []int {
	s := make([]int, len(d.Experts))
	for i, exps := range d.Experts {
		s[i] = len(exps)
	}
	return s
}

package warmstart

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pipe-engine/pipe/gguf"
)

// FileID identifies a model file for its hot set: the total size of its
// shards and the SHA-256 of the first shard's header (metadata and tensor
// infos, the bytes before the data section).
func FileID(f *gguf.File) (ModelID, error) {
	var id ModelID
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

// Auto as Options.Path puts the hot set in the user cache directory:
// <user cache dir>/pipe/<header SHA-256>.hot (DefaultPath).
const Auto = "auto"

// Options configure a run's warm start.
type Options struct {
	// Path is the hot-set file ("": none — nothing read, nothing saved;
	// Auto: DefaultPath).
	Path string
	// Warm starts reading the hottest experts of the hot set at Path into the
	// expert cache in the background while the model loads (before its dense
	// weights are read) and on while the prompt is tokenized and prefilled
	// (--warm-start).
	Warm bool
}

// DefaultPath is where Auto keeps the hot set of the model id.
func DefaultPath(id ModelID) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("hot set: %w", err)
	}
	return filepath.Join(dir, "pipe", id.HeaderSHA+".hot"), nil
}

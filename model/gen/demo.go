package gen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pipe-engine/pipe/internal/status"
)

// The demo model: Qwen3-30B-A3B's real layer shapes (128 experts of
// 2048×768, top-8, 32/4 heads of 128, Q4_K_M mix) with DemoLayers blocks and a
// DemoVocab-token built-in vocabulary: ≈ 0.4 GB, written in well under a
// minute here, large enough that a cache smaller than its experts streams.
const (
	DemoPreset = "qwen3-30b-a3b"
	DemoLayers = 1
	DemoVocab  = 8192
	DemoSeed   = 1
	// DemoFile is the file name under the cache directory; the version suffix
	// changes whenever the demo model's content would.
	DemoFile = "pipe-demo-qwen3-30b-a3b-1l-v3.gguf"
)

// DemoOptions are the options EnsureDemo generates with.
func DemoOptions() Options {
	return Options{Preset: DemoPreset, Layers: DemoLayers, VocabSize: DemoVocab, Seed: DemoSeed, RoutingSkew: DefaultRoutingSkew}
}

// DefaultCacheDir is where pipe keeps generated models: $XDG_CACHE_HOME/pipe
// (os.UserCacheDir), or the temporary directory when there is none.
func DefaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "pipe")
	}
	return filepath.Join(os.TempDir(), "pipe-cache")
}

// EnsureDemo returns the path of the demo model under cacheDir ("" means
// DefaultCacheDir()), generating it first if it is not there. Generation is
// atomic (temporary file + rename), so a concurrent or interrupted call never
// leaves a partial model at the returned path; two concurrent first calls may
// both generate, and the second rename replaces the first identical file.
// Generation shows its progress on line (nil: none).
func EnsureDemo(ctx context.Context, cacheDir string, line *status.Line) (string, error) {
	o := DemoOptions()
	o.Status = line
	return ensureDemo(ctx, cacheDir, o)
}

func ensureDemo(ctx context.Context, cacheDir string, o Options) (string, error) {
	if cacheDir == "" {
		cacheDir = DefaultCacheDir()
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("gen: demo cache dir: %w", err)
	}
	path := filepath.Join(cacheDir, DemoFile)
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
		return path, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("gen: demo model: %w", err)
	}
	if _, err := GenerateFile(ctx, o, path); err != nil {
		return "", fmt.Errorf("gen: demo model: %w", err)
	}
	return path, nil
}

package decode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
)

// HotSetAuto as Options.HotSet.Path puts the hot set in the user cache
// directory: <user cache dir>/pipe/<header SHA-256>.hot.
const HotSetAuto = "auto"

// HotSetOptions configure the warm start (see Options.HotSet).
type HotSetOptions struct {
	// Path is the hot-set file ("": none — nothing read, nothing saved;
	// HotSetAuto: DefaultHotSetPath).
	Path string
	// Warm starts reading the hottest experts of the hot set at Path into the
	// expert cache in the background while the model loads (before its dense
	// weights are read) and on while the prompt is tokenized and prefilled
	// (--warm-start).
	Warm bool
}

// DefaultHotSetPath is where HotSetAuto keeps the hot set of the model id.
func DefaultHotSetPath(id cache.ModelID) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("hot set: %w", err)
	}
	return filepath.Join(dir, "pipe", id.HeaderSHA+".hot"), nil
}

// hotState is a model's hot-set bookkeeping: where it lives, the one read at
// Open and this run's routing counts.
type hotState struct {
	path   string
	loaded *cache.HotSet // nil: none or refused
	counts *cache.HotSet // this process's routings
	warm   bool          // a warm start was started
}

// hotLoader is the engine's Inputs.WarmKeys: when the model is described it
// resolves the hot-set path and reads the hot set (a stale or corrupt one is
// ignored with a warning), and with HotSetOptions.Warm it answers with the
// hot set's experts, hottest first, which the engine starts reading before
// the dense weights load. Nothing here fails the load: without a hot set the
// run starts cold.
type hotLoader struct {
	o   HotSetOptions
	log zerolog.Logger
	st  *hotState // set by keys; nil: no hot set kept
}

func (h *hotLoader) keys(d *model.Desc) []cache.Key {
	id, err := d.HotSetID()
	if err != nil {
		h.log.Warn().Str("event", "hot_set_ignored").Err(err).Msg("no warm start")
		return nil
	}
	path := h.o.Path
	if path == HotSetAuto {
		if path, err = DefaultHotSetPath(id); err != nil {
			h.log.Warn().Str("event", "hot_set_ignored").Err(err).Msg("no warm start, no hot set saved")
			return nil
		}
	}
	shape := d.ExpertShape()
	h.st = &hotState{path: path, counts: cache.NewHotSet(id, shape)}
	old, err := cache.LoadHotSet(path, id, shape)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		h.log.Info().Str("event", "hot_set").Str("path", path).Msg("no hot set yet: cold start; it is saved when the run ends")
		return nil
	case err != nil:
		h.log.Warn().Str("event", "hot_set_ignored").Str("path", path).Err(err).Msg("hot set ignored (stale or corrupt): cold start; a new one is saved when the run ends")
		return nil
	}
	h.st.loaded = old
	if !h.o.Warm {
		return nil
	}
	return old.Hottest(int(^uint(0) >> 1))
}

// initHotSet takes the hot-set state the loader left and logs whether the
// engine warm-started from it.
func (m *Model) initHotSet(h *hotLoader) {
	if h == nil || h.st == nil {
		return
	}
	m.hot = h.st
	if h.st.loaded == nil || !h.o.Warm {
		return
	}
	m.hot.warm = m.eng.Metrics().WarmStarted
	h.log.Info().Str("event", "warm_start").Str("path", m.hot.path).Bool("started", m.hot.warm).
		Msg("reading the hottest experts of the last runs into the cache in the background")
}

// countRoute adds one layer's routing to the hot set.
func (m *Model) countRoute(layer int, ids [][]int) {
	if m.hot == nil {
		return
	}
	for _, t := range ids {
		m.hot.counts.Add(layer, t)
	}
}

// HotSet returns the hot set this run would save: its routing counts plus
// cache.HotSetDecay × the hot set read at Open (nil without Options.HotSet).
// The returned value is a copy.
func (m *Model) HotSet() *cache.HotSet {
	if m.hot == nil {
		return nil
	}
	h := m.hot.counts.Clone()
	if m.hot.loaded != nil {
		_ = h.Merge(m.hot.loaded) // same shape: checked at load
	}
	return h
}

// SaveHotSet writes HotSet to path ("": the hot-set path of Options.HotSet).
// Close calls it; a server may call it at any time (e.g. on shutdown, or
// periodically). It does nothing when no token was routed.
func (m *Model) SaveHotSet(path string) error {
	h := m.HotSet()
	if h == nil || m.hot.counts.Empty() {
		return nil
	}
	if path == "" {
		path = m.hot.path
	}
	if err := h.Save(path, gguf.ShardPaths(m.eng.Config().Path)...); err != nil {
		return err
	}
	m.log().Info().Str("event", "hot_set_saved").Str("path", path).Msg("hot set saved for the next warm start")
	return nil
}

// closeHotSet records the warm start in the summary and saves the hot set
// (a failure to save is a warning: the run itself succeeded).
func (m *Model) closeHotSet() {
	if m.hot == nil {
		return
	}
	m.sink.Set("warm_start", m.hot.warm)
	if ws := m.eng.Metrics().Warm; m.hot.warm {
		m.sink.Set("warm_reads", ws.Completed)
		m.sink.Set("warm_used", ws.Used)
	}
	if err := m.SaveHotSet(""); err != nil {
		m.log().Warn().Str("event", "hot_set_not_saved").Err(err).Msg("the next run starts cold")
	}
}

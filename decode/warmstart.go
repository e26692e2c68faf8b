package decode

import (
	"errors"
	"io/fs"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/warmstart"
)

// hotState is a model's warm-start bookkeeping: its hot-set run and whether
// the engine warm-started from it.
type hotState struct {
	run  *warmstart.Run
	warm bool // a warm start was started
}

// hotLoader is the engine's Inputs.WarmKeys: when the model is described it
// resolves the hot-set path and reads the hot set (a stale or corrupt one is
// ignored with a warning), and with warmstart.Options.Warm it answers with
// the hot set's experts, hottest first, which the engine starts reading
// before the dense weights load. Nothing here fails the load: without a hot
// set the run starts cold.
type hotLoader struct {
	o   warmstart.Options
	log zerolog.Logger
	st  *hotState // set by keys; nil: no hot set kept
}

func (h *hotLoader) keys(d *model.Desc) []warmstart.Key {
	id, err := warmstart.FileID(d.File)
	if err != nil {
		h.log.Warn().Str("event", "hot_set_ignored").Err(err).Msg("no warm start")
		return nil
	}
	path, err := warmstart.ResolvePath(h.o.Path, id)
	if err != nil {
		h.log.Warn().Str("event", "hot_set_ignored").Err(err).Msg("no warm start, no hot set saved")
		return nil
	}
	run, err := warmstart.Start(path, id, d.ExpertShape())
	h.st = &hotState{run: run}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		h.log.Info().Str("event", "hot_set").Str("path", path).Msg("no hot set yet: cold start; it is saved when the run ends")
		return nil
	case err != nil:
		h.log.Warn().Str("event", "hot_set_ignored").Str("path", path).Err(err).Msg("hot set ignored (stale or corrupt): cold start; a new one is saved when the run ends")
		return nil
	}
	if !h.o.Warm {
		return nil
	}
	return run.Hottest()
}

// initHotSet takes the hot-set state the loader left and logs whether the
// engine warm-started from it.
func (m *Model) initHotSet(h *hotLoader) {
	if h == nil || h.st == nil {
		return
	}
	m.hot = h.st
	if !h.st.run.Loaded() || !h.o.Warm {
		return
	}
	m.hot.warm = m.eng.Metrics().WarmStarted
	h.log.Info().Str("event", "warm_start").Str("path", m.hot.run.Path()).Bool("started", m.hot.warm).
		Msg("reading the hottest experts of the last runs into the cache in the background")
}

// countRoute adds one layer's routing to the hot set.
func (m *Model) countRoute(layer int, ids [][]int) {
	if m.hot != nil {
		m.hot.run.Add(layer, ids)
	}
}

// HotSet returns the hot set this run would save: its routing counts plus
// warmstart.Decay × the hot set read at Open (nil without Options.HotSet).
// The returned value is a copy.
func (m *Model) HotSet() *warmstart.HotSet {
	if m.hot == nil {
		return nil
	}
	return m.hot.run.HotSet()
}

// SaveHotSet writes HotSet to path ("": the hot-set path of Options.HotSet).
// Close calls it; a server may call it at any time (e.g. on shutdown, or
// periodically). It does nothing when no token was routed.
func (m *Model) SaveHotSet(path string) error {
	if m.hot == nil {
		return nil
	}
	if path == "" {
		path = m.hot.run.Path()
	}
	saved, err := m.hot.run.Save(path, gguf.ShardPaths(m.eng.Config().Path)...)
	if err != nil || !saved {
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

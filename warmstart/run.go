package warmstart

// Run is one run's hot set: the file it is kept in, the hot set read from it
// when the run started (none when there was none or it was refused) and the
// run's own routings. Save writes their sum for the next run. A Run is not
// safe for concurrent use.
type Run struct {
	path   string
	loaded *HotSet // nil: none, or refused
	counts *HotSet // this run's routings
}

// ResolvePath is the hot-set file that path names for the model id: path
// itself, or DefaultPath for Auto.
func ResolvePath(path string, id ModelID) (string, error) {
	if path == Auto {
		return DefaultPath(id)
	}
	return path, nil
}

// Start begins a run of the model id (per-layer expert counts shape) whose
// hot set is kept at path, and reads the hot set there. It always returns a
// run; the error is the read's: one wrapping fs.ErrNotExist when there is no
// hot set yet, ErrStale or ErrCorrupt when it was refused. Either way the run
// starts cold and its routings are saved at its end.
func Start(path string, id ModelID, shape []int) (*Run, error) {
	r := &Run{path: path, counts: NewHotSet(id, shape)}
	old, err := Load(path, id, shape)
	if err != nil {
		return r, err
	}
	r.loaded = old
	return r, nil
}

// Path is the file the run's hot set is kept in.
func (r *Run) Path() string { return r.path }

// Loaded reports whether a hot set was read at Start.
func (r *Run) Loaded() bool { return r.loaded != nil }

// Hottest is every expert of the hot set read at Start, hottest first (none
// without one): what a warm start reads.
func (r *Run) Hottest() []Key {
	if r.loaded == nil {
		return nil
	}
	return r.loaded.Hottest(int(^uint(0) >> 1))
}

// Add counts one layer's routing: the experts chosen for each token.
func (r *Run) Add(layer int, ids [][]int) {
	for _, t := range ids {
		r.counts.Add(layer, t)
	}
}

// HotSet returns the hot set the run would save: its routing counts plus
// Decay × the hot set read at Start. The returned value is a copy.
func (r *Run) HotSet() *HotSet {
	h := r.counts.Clone()
	if r.loaded != nil {
		_ = h.Merge(r.loaded) // same shape: Load checked it
	}
	return h
}

// Save writes HotSet to path ("": the run's Path), refusing the protect
// files (HotSet.Save). It does nothing, and reports false, when no token was
// routed.
func (r *Run) Save(path string, protect ...string) (saved bool, err error) {
	if r.counts.Empty() {
		return false, nil
	}
	if path == "" {
		path = r.path
	}
	if err := r.HotSet().Save(path, protect...); err != nil {
		return false, err
	}
	return true, nil
}

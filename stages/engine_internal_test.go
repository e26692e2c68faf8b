package stages

import (
	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/reader"
)

// cacheOf and lanesOf are the streamed engine's expert cache and reader lanes.
func cacheOf(e *Engine) *cache.Cache  { return e.src.(*streamSource).cache }
func lanesOf(e *Engine) *reader.Lanes { return e.src.(*streamSource).lanes }

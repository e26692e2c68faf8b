// Package buf holds the one helper the pipeline's reusable scratch buffers
// share: Grow, which resizes a slice in place and reallocates only when its
// capacity is too small, so a steady decode step allocates nothing. It keeps
// no state and is safe for concurrent use on different slices.
package buf

// Grow returns s resized to n elements, reallocated (zeroed, the old
// contents dropped) only when cap(s) < n; otherwise s[:n], contents kept.
func Grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

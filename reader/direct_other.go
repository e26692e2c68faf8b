//go:build !linux

package reader

// O_DIRECT is only used on Linux (and Android); elsewhere reads are buffered.
const (
	directSupported = false
	oDirect         = 0
)

//go:build linux

package reader

import "golang.org/x/sys/unix"

const (
	directSupported = true
	oDirect         = unix.O_DIRECT
)

//go:build !unix

package hosttools

import "os/exec"

// setGroup: without process groups, the context kills the process itself.
func setGroup(*exec.Cmd) {}

// killGroup has no group to kill.
func killGroup(*exec.Cmd) {}

package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/kernels"
)

// chooseKernels installs the kernel set (--kernels / PIPE_KERNELS; auto:
// the measured table's for this CPU, else a calibration cached under the
// user cache directory) and logs the choice.
func chooseKernels(force string, log zerolog.Logger) error {
	dir := ""
	if d, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(d, "pipe")
	}
	c, err := kernels.Choose(kernels.ChooseOptions{Force: force, CacheDir: dir,
		Warn: func(m string) { log.Warn().Str("event", "kernels").Msg(m) }})
	if err != nil {
		return fmt.Errorf("--kernels: %w", err)
	}
	ev := log.Debug()
	if c.Source == kernels.SourceCalibrated {
		ev = log.Info() // once per CPU model and binary: worth a line
	}
	ev.Str("event", "kernels").Str("cpu", c.CPU).Str("set", c.Set).Str("source", c.Source).
		Interface("seconds", c.Seconds).Msg("kernel set")
	return nil
}

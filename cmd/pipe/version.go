package main

import (
	"runtime/debug"
	"strings"
)

// versionString is what --version prints: the version stamped with
// -ldflags "-X main.version=…" or else the module version `go install`
// recorded, then the VCS revision (+dirty when the tree was modified), its
// commit time and the Go version, from debug.ReadBuildInfo.
func versionString() string {
	v := version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "pipe " + v
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	var extra []string
	var rev, when string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		extra = append(extra, "rev "+rev)
	}
	if when != "" {
		extra = append(extra, when)
	}
	extra = append(extra, bi.GoVersion)
	return "pipe " + v + " (" + strings.Join(extra, ", ") + ")"
}

package main

import (
	"runtime/debug"
	"strings"
	"time"
)

// versionString is what --version prints (see versionOf).
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(version, bi)
}

// versionOf is the version stamped with -ldflags "-X main.version=…", else
// the module version Go recorded: the release tag for `go install …@vX`,
// a pseudo-version v0.0.0-TIME-REV (+dirty) for `go build` in a git clone.
// A build that recorded a revision but no version (an older Go) gets the
// pseudo-version made from it; one with neither (-buildvcs=false, or a
// source tree without its git directory) says so. The VCS revision, its
// commit time and the Go version follow in parentheses.
func versionOf(stamped string, bi *debug.BuildInfo) string {
	if bi == nil {
		return "pipe " + stamped
	}
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
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := stamped
	switch {
	case v != "dev":
	case bi.Main.Version != "" && bi.Main.Version != "(devel)":
		v = bi.Main.Version
	case rev != "":
		t, _ := time.Parse(time.RFC3339, when)
		v = "v0.0.0-" + t.UTC().Format("20060102150405") + "-" + rev
		if dirty {
			v += "+dirty"
		}
	default:
		v = "v0.0.0-unknown (no version recorded: build with go install …@VERSION, or go build -buildvcs=true in a git clone)"
	}
	var extra []string
	if rev != "" {
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

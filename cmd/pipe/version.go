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

// fingerprint is pipe serve's system_fingerprint (see fingerprintOf).
func fingerprint() string {
	bi, _ := debug.ReadBuildInfo()
	return fingerprintOf(version, bi)
}

// build is what a binary knows of its build: the version (see versionOf)
// and, when Go recorded them, the VCS revision (12 digits, +dirty), its
// commit time and the Go version.
type build struct {
	v, rev, when, goVersion string
}

// buildOf reads the version stamped with -ldflags "-X main.version=…", else
// the module version Go recorded: the release tag for `go install …@vX`,
// a pseudo-version v0.0.0-TIME-REV (+dirty) for `go build` in a git clone.
// A build that recorded a revision but no version (an older Go) gets the
// pseudo-version made from it; one with neither (-buildvcs=false, or a
// source tree without its git directory) says so. bi nil: the stamp alone.
func buildOf(stamped string, bi *debug.BuildInfo) build {
	if bi == nil {
		return build{v: stamped}
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
	if rev != "" && dirty {
		rev += "+dirty"
	}
	return build{v: v, rev: rev, when: when, goVersion: bi.GoVersion}
}

// versionOf is --version's line: "pipe VERSION", then the VCS revision, its
// commit time and the Go version in parentheses (see buildOf).
func versionOf(stamped string, bi *debug.BuildInfo) string {
	b := buildOf(stamped, bi)
	if bi == nil {
		return "pipe " + b.v
	}
	var extra []string
	if b.rev != "" {
		extra = append(extra, "rev "+b.rev)
	}
	if b.when != "" {
		extra = append(extra, b.when)
	}
	extra = append(extra, b.goVersion)
	return "pipe " + b.v + " (" + strings.Join(extra, ", ") + ")"
}

// fingerprintOf is the build as llama-server's system_fingerprint names one,
// b<build>-<commit> (clients and llama.cpp's tests check the leading b), in
// pipe's terms: "b", the version without its "v" and, when the version does
// not already end with it, "-" and the revision; "b0-unknown" (llama-server's
// for a build that recorded nothing) when the build recorded neither.
func fingerprintOf(stamped string, bi *debug.BuildInfo) string {
	b := buildOf(stamped, bi)
	v := b.v
	if strings.HasPrefix(v, "v0.0.0-unknown") {
		v = "0-unknown"
	}
	if b.rev != "" && !strings.HasSuffix(v, b.rev) {
		v += "-" + b.rev
	}
	return "b" + strings.TrimPrefix(v, "v")
}

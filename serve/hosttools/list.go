package hosttools

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The listing's bounds (llama-server's SERVER_TOOL_LIST_ENTRIES_TIMEOUT and
// SERVER_TOOL_GIT_LS_FILES_MAX_OUTPUT).
const (
	listTimeout   = 15 * time.Second
	gitListMaxOut = 8 << 20
)

// junkDirs are listed but never walked into: they can be enormous.
var junkDirs = []string{".git", ".svn", ".hg", "node_modules", "__pycache__",
	".venv", "venv", "dist", "build", "target", ".cache", ".idea", ".vscode"}

// listKind is what a listing returns.
type listKind int

const (
	listFiles listKind = iota
	listDirs
	listAll
)

type entry struct {
	rel   string // '/'-separated, relative to the base
	isDir bool
}

// listing is list's answer: err when base is no directory, truncated when
// the walk could not see everything (time, an unreadable directory).
type listing struct {
	entries   []entry
	err       string
	truncated bool
}

// list lists base (absolute) to maxDepth (0: unlimited, 1: its children):
// files through `git ls-files` (which honours .gitignore) when base is in
// a git work tree, else and for directories a walk that does not follow
// links or enter junkDirs, within listTimeout.
func list(ctx context.Context, base string, maxDepth int, kind listKind) listing {
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		return listing{err: "path does not exist or is not a directory"}
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	if kind == listFiles {
		res := run(ctx, []string{"git", "-C", base, "ls-files", "--cached", "--others", "--exclude-standard"}, "", gitListMaxOut, listTimeout, nil)
		if res.exitCode == 0 && !res.timedOut {
			return listing{entries: gitEntries(base, res.output, maxDepth)}
		}
	}
	var out listing
	out.entries, out.truncated = walk(ctx, base, maxDepth, kind)
	return out
}

// gitEntries are git ls-files' lines that are regular files within maxDepth.
func gitEntries(base, output string, maxDepth int) []entry {
	var out []entry
	for _, line := range strings.Split(output, "\n") {
		line = strings.ReplaceAll(strings.TrimSuffix(line, "\r"), `\`, "/")
		if line == "" || maxDepth > 0 && depth(line) > maxDepth {
			continue
		}
		if st, err := os.Stat(filepath.Join(base, filepath.FromSlash(line))); err == nil && st.Mode().IsRegular() {
			out = append(out, entry{rel: line})
		}
	}
	return out
}

// depth of a relative path: "a/b/c" is 3.
func depth(rel string) int { return 1 + strings.Count(rel, "/") }

// walk is llama-server's list_entries_fallback, depth first, stopping at
// ctx's end (truncated).
func walk(ctx context.Context, base string, maxDepth int, kind listKind) ([]entry, bool) {
	type dir struct {
		path, rel string
		depth     int
	}
	var out []entry
	truncated := false
	stack := []dir{{path: base}}
	for len(stack) > 0 {
		if ctx.Err() != nil {
			return out, true
		}
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ents, err := os.ReadDir(d.path)
		if err != nil {
			truncated = true
		}
		for _, e := range ents {
			rel := e.Name()
			if d.rel != "" {
				rel = d.rel + "/" + e.Name()
			}
			switch t := e.Type(); {
			case t.IsDir():
				if kind != listFiles {
					out = append(out, entry{rel: rel, isDir: true})
				}
				if !slices.Contains(junkDirs, e.Name()) && (maxDepth == 0 || d.depth+1 < maxDepth) {
					stack = append(stack, dir{filepath.Join(d.path, e.Name()), rel, d.depth + 1})
				}
			case t&fs.ModeSymlink != 0:
				// a link is listed as what it points to, never walked
				st, err := os.Stat(filepath.Join(d.path, e.Name()))
				if err == nil && (st.IsDir() && kind != listFiles || st.Mode().IsRegular() && kind != listDirs) {
					out = append(out, entry{rel: rel, isDir: st.IsDir()})
				}
			case t.IsRegular():
				if kind != listDirs {
					out = append(out, entry{rel: rel})
				}
			}
		}
	}
	return out, truncated
}

// pathGlobMatch is llama-server's path_glob_match: a pattern without '/'
// matches the base name at any depth; one with '/' the whole relative path,
// anchored with "**/" unless it starts with "**" or "/".
func pathGlobMatch(pattern, rel string) bool {
	if !strings.Contains(pattern, "/") {
		return globMatch(pattern, rel[strings.LastIndexByte(rel, '/')+1:])
	}
	if pattern == "**" || strings.HasPrefix(pattern, "**/") || strings.HasPrefix(pattern, "/") {
		return globMatch(pattern, rel)
	}
	return globMatch("**/"+pattern, rel)
}

// globMatch is llama.cpp's glob_match: "**" matches across '/', '*' and
// '?' within a path component, [abc], [a-z] and [!…] one byte. Failed
// (pattern, text) positions are remembered, so no pattern is exponential.
func globMatch(pattern, s string) bool {
	g := globber{p: pattern, s: s, failed: map[[2]int]bool{}}
	return g.match(0, 0)
}

type globber struct {
	p, s   string
	failed map[[2]int]bool
}

func (g *globber) match(pi, si int) bool {
	key := [2]int{pi, si}
	if g.failed[key] {
		return false
	}
	ok := g.step(pi, si)
	if !ok {
		g.failed[key] = true
	}
	return ok
}

func (g *globber) step(pi, si int) bool {
	p, s := g.p, g.s
	switch {
	case pi == len(p):
		return si == len(s)
	case strings.HasPrefix(p[pi:], "**"):
		return g.match(pi+2, si) || si < len(s) && g.match(pi, si+1)
	case p[pi] == '*':
		for ; si < len(s) && s[si] != '/'; si++ {
			if g.match(pi+1, si) {
				return true
			}
		}
		return g.match(pi+1, si)
	case p[pi] == '?':
		return si < len(s) && s[si] != '/' && g.match(pi+1, si+1)
	case p[pi] == '[':
		end := classEnd(p, pi+1)
		if end < 0 {
			return si < len(s) && s[si] == '[' && g.match(pi+1, si+1)
		}
		return si < len(s) && classMatch(s[si], p[pi+1:end]) && g.match(end+1, si+1)
	}
	return si < len(s) && p[pi] == s[si] && g.match(pi+1, si+1)
}

// classEnd is the index of the ']' that closes a class opening at start
// (a first ']' or '-' is literal), or -1.
func classEnd(p string, start int) int {
	i := start
	if i < len(p) && (p[i] == ']' || p[i] == '-') {
		i++
	}
	for i < len(p) && p[i] != ']' {
		i++
	}
	if i >= len(p) {
		return -1
	}
	return i
}

// classMatch is llama.cpp's glob_class_match over a class's inside.
func classMatch(c byte, class string) bool {
	neg := false
	if strings.HasPrefix(class, "!") {
		neg, class = true, class[1:]
	}
	if class != "" && (class[0] == ']' || class[0] == '-') {
		if class[0] == c {
			return !neg
		}
		class = class[1:]
	}
	for i := 0; i < len(class); i++ {
		if i+2 < len(class) && class[i+1] == '-' {
			if c >= class[i] && c <= class[i+2] {
				return !neg
			}
			i += 2
			continue
		}
		if class[i] == c {
			return !neg
		}
	}
	return neg
}

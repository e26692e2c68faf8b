package hosttools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The searches' limits (llama-server's SERVER_TOOL_FILE_SEARCH_MAX_RESULTS
// and SERVER_TOOL_GREP_SEARCH_MAX_RESULTS; grepMaxFile is pipe's).
const (
	globMaxResults = 100
	grepMaxResults = 100
	grepMaxFile    = 16 << 20
)

func globSearchTool() *Tool {
	return &Tool{Name: "file_glob_search", Display: "File search",
		desc: "Recursively search for files matching a glob pattern under a directory. " +
			"Automatically skips files ignored by .gitignore (when the directory is inside a git repo) " +
			"and common junk directories (.git, node_modules, build, dist, etc.) otherwise. " +
			"A pattern with no '/' (e.g. \"*.cpp\") matches the file's basename at any depth. " +
			"A pattern containing '/' matches the full relative path; unless already anchored with " +
			"\"**/\" or a leading '/', it is automatically prefixed with \"**/\". " +
			"Use type=\"dir\" or \"all\" to also list directories; directory entries are suffixed with '/' in the output. " +
			"Note: directory listings do not apply .gitignore filtering.",
		props: []prop{
			{"path", "string", "Base directory to search in"},
			{"include", "string", "Glob pattern for files to include (e.g. \"*.cpp\" or \"src/**/*.cpp\"). Default: **"},
			{"exclude", "string", "Glob pattern for files to exclude"},
			{"type", "string", "Entry type to return: \"file\" (default), \"dir\" or \"all\""},
			{"max_depth", "integer", "Maximum depth to descend into subdirectories (default: 0 = unlimited; 1 = direct children only)"},
			{"limit", "integer", fmt.Sprintf("Maximum number of results to return, capped at %d (default %d)", globMaxResults, globMaxResults)},
		},
		req: []string{"path"}, run: globSearch}
}

// globArgs are file_glob_search's parameters.
type globArgs struct {
	path, include, exclude, typ string
	depth, limit                int
}

func readGlobArgs(p params) (a globArgs, err error) {
	if a.path, err = p.str("path", true, ""); err != nil {
		return a, err
	}
	if a.include, err = p.str("include", false, "**"); err != nil {
		return a, err
	}
	if a.exclude, err = p.str("exclude", false, ""); err != nil {
		return a, err
	}
	if a.typ, err = p.str("type", false, "file"); err != nil {
		return a, err
	}
	if a.depth, err = p.integer("max_depth", 0); err != nil {
		return a, err
	}
	a.limit, err = p.integer("limit", globMaxResults)
	return a, err
}

func globSearch(ctx context.Context, c *call) (map[string]any, error) {
	a, err := readGlobArgs(c.p)
	if err != nil {
		return nil, err
	}
	if a.limit < 1 {
		return fail("invalid limit: %d (expected 1 or more)", a.limit), nil
	}
	kind, ok := map[string]listKind{"file": listFiles, "dir": listDirs, "all": listAll}[a.typ]
	if !ok {
		return fail(`invalid type: %s (expected "file", "dir" or "all")`, a.typ), nil
	}
	base := resolve(c.cwd, a.path)
	l := list(ctx, base, max(0, a.depth), kind)
	if l.err != "" {
		return fail("%s: %s", l.err, a.path), nil
	}
	var found []entry
	for _, e := range l.entries {
		if pathGlobMatch(a.include, e.rel) && (a.exclude == "" || !pathGlobMatch(a.exclude, e.rel)) {
			found = append(found, e)
		}
	}
	shown := min(len(found), a.limit, globMaxResults)
	var b strings.Builder
	entries := []map[string]any{}
	for _, e := range found[:shown] {
		typ, slash := "file", ""
		if e.isDir {
			typ, slash = "dir", "/"
		}
		b.WriteString(e.rel + slash + "\n")
		entries = append(entries, map[string]any{"path": e.rel, "type": typ})
	}
	fmt.Fprintf(&b, "\n---\nTotal matches: %d\n", len(found))
	if len(found) > shown {
		fmt.Fprintf(&b, "[%d results limit reached (%d total matches). Refine the glob pattern to narrow the search.]\n", shown, len(found))
	}
	if l.truncated {
		b.WriteString("[results truncated: time budget or unreadable directory]\n")
	}
	return map[string]any{"plain_text_response": b.String(), "entries": entries, "base": filepath.ToSlash(base)}, nil
}

func grepSearchTool() *Tool {
	return &Tool{Name: "grep_search", Display: "Grep search",
		desc: "Search for a pattern in files under a path. Returns matching lines with file paths " +
			"(and, unless searching a single file, paths relative to the given directory). " +
			"Automatically skips files ignored by .gitignore (when the directory is inside a git repo) " +
			"and common junk directories (.git, node_modules, build, dist, etc.) otherwise. " +
			"include/exclude: a pattern with no '/' matches the basename at any depth; a pattern " +
			"containing '/' matches the full relative path (auto-anchored with \"**/\" unless already anchored).",
		props: []prop{
			{"path", "string", "File or directory to search in"},
			{"pattern", "string", "Pattern to search for (regular expression unless literal is true)"},
			{"include", "string", "Glob pattern to filter files (default: **)"},
			{"exclude", "string", "Glob pattern to exclude files"},
			{"return_line_numbers", "boolean", "If true, include line numbers in results"},
			{"literal", "boolean", "Treat pattern as a literal string instead of a regular expression (default: false)"},
			{"ignore_case", "boolean", "Case-insensitive search (default: false)"},
			{"context_lines", "integer", "Number of lines of context to show before and after each match (default: 0)"},
		},
		req: []string{"path", "pattern"}, run: grepSearch}
}

// grepArgs are grep_search's parameters.
type grepArgs struct {
	path, pattern, include, exclude string
	lineNos, literal, icase         bool
	context                         int
}

func readGrepArgs(p params) (a grepArgs, err error) {
	for _, s := range []struct {
		name string
		req  bool
		def  string
		to   *string
	}{{"path", true, "", &a.path}, {"pattern", true, "", &a.pattern}, {"include", false, "**", &a.include}, {"exclude", false, "", &a.exclude}} {
		if *s.to, err = p.str(s.name, s.req, s.def); err != nil {
			return a, err
		}
	}
	for _, s := range []struct {
		name string
		to   *bool
	}{{"return_line_numbers", &a.lineNos}, {"literal", &a.literal}, {"ignore_case", &a.icase}} {
		if *s.to, err = p.boolean(s.name, false); err != nil {
			return a, err
		}
	}
	a.context, err = p.integer("context_lines", 0)
	a.context = max(0, a.context)
	return a, err
}

// grepFile is a file to search: its path and the name the output gives it.
type grepFile struct{ abs, show string }

func grepSearch(ctx context.Context, c *call) (map[string]any, error) {
	a, err := readGrepArgs(c.p)
	if err != nil {
		return nil, err
	}
	src := a.pattern
	if a.literal {
		src = regexp.QuoteMeta(src)
	}
	if a.icase {
		src = "(?i)" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return fail("invalid regex: %v", err), nil
	}
	files, msg := grepFiles(ctx, c.cwd, a)
	if msg != "" {
		return fail("%s", msg), nil
	}
	g := grepper{re: re, a: a}
	for _, f := range files {
		if g.total >= grepMaxResults || ctx.Err() != nil {
			break
		}
		g.file(f)
	}
	fmt.Fprintf(&g.out, "\n---\nTotal matches: %d\n", g.total)
	if g.limited {
		fmt.Fprintf(&g.out, "[%d matches limit reached. Narrow the path/pattern/include to see more.]\n", grepMaxResults)
	}
	if g.skipped > 0 {
		fmt.Fprintf(&g.out, "[%d files over %d bytes not searched]\n", g.skipped, grepMaxFile)
	}
	return map[string]any{"plain_text_response": g.out.String()}, nil
}

// grepFiles are the files a grep searches: the path itself, or the files
// under it that include and exclude select.
func grepFiles(ctx context.Context, cwd string, a grepArgs) ([]grepFile, string) {
	abs := resolve(cwd, a.path)
	st, err := os.Stat(abs)
	switch {
	case err != nil:
		return nil, "path does not exist: " + a.path
	case st.Mode().IsRegular():
		return []grepFile{{abs, a.path}}, ""
	case !st.IsDir():
		return nil, "path does not exist: " + a.path
	}
	l := list(ctx, abs, 0, listFiles)
	if l.err != "" {
		return nil, l.err + ": " + a.path
	}
	var out []grepFile
	for _, e := range l.entries {
		if pathGlobMatch(a.include, e.rel) && (a.exclude == "" || !pathGlobMatch(a.exclude, e.rel)) {
			out = append(out, grepFile{filepath.Join(abs, filepath.FromSlash(e.rel)), e.rel})
		}
	}
	return out, ""
}

// grepper collects a grep's output.
type grepper struct {
	re             *regexp.Regexp
	a              grepArgs
	out            strings.Builder
	total, skipped int
	limited        bool
}

// file searches one file (unreadable files are passed over, as
// llama-server's; files over grepMaxFile are counted in skipped).
func (g *grepper) file(f grepFile) {
	if st, err := os.Stat(f.abs); err == nil && st.Size() > grepMaxFile {
		g.skipped++
		return
	}
	content, err := readCapped(f.abs, grepMaxFile)
	if err != nil {
		return
	}
	lines := strings.Split(content, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // std::getline yields no empty last line
	}
	showNum := g.a.lineNos || g.a.context > 0
	for i, line := range lines {
		if g.total >= grepMaxResults {
			g.limited = true
			return
		}
		if !g.re.MatchString(line) {
			continue
		}
		for j := max(0, i-g.a.context); j <= min(len(lines)-1, i+g.a.context); j++ {
			sep := "-"
			if j == i {
				sep = ":"
			}
			g.out.WriteString(f.show + sep)
			if showNum {
				fmt.Fprintf(&g.out, "%d%s", j+1, sep)
			}
			g.out.WriteString(lines[j] + "\n")
		}
		if g.a.context > 0 {
			g.out.WriteString("--\n")
		}
		g.total++
	}
}

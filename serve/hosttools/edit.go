package hosttools

import (
	"context"
	"io"
	"os"
	"sort"
	"strings"
)

// editMaxBytes bounds the file edit_file reads (it is rewritten whole).
const editMaxBytes = 64 << 20

func editFileTool() *Tool {
	return &Tool{Name: "edit_file", Display: "Edit file", Write: true,
		desc: "Edit a file using exact text replacement. Each edits[].old_text must be unique in the file " +
			"and is matched against the original content, not incrementally. Merge nearby changes into " +
			"one edit instead of overlapping edits. Use write_file to replace the whole file.",
		props: []prop{
			{"path", "string", "Path to the file to edit"},
			{"edits", "array", "One or more exact text replacements to apply"},
		},
		req: []string{"path", "edits"}, run: editFile}
}

type editReq struct {
	Old *string `json:"old_text"`
	New *string `json:"new_text"`
}

// matched is an edit found in the base content.
type matched struct {
	edit, at, n int
	repl        string
}

func editFile(_ context.Context, c *call) (map[string]any, error) {
	path, err := c.p.str("path", true, "")
	if err != nil {
		return nil, err
	}
	var edits []editReq
	if ok, err := c.p.get("edits", &edits); err != nil || !ok || len(edits) == 0 {
		if err != nil {
			return nil, err
		}
		return fail(`"edits" must be a non-empty array`), nil
	}
	for i, e := range edits {
		if e.Old == nil || e.New == nil {
			return nil, errParamf("params.edits[%d]: old_text and new_text are required", i)
		}
		if *e.Old == "" {
			return fail("edits[%d].old_text must not be empty", i), nil
		}
	}
	full := resolve(c.cwd, path)
	orig, err := readCapped(full, editMaxBytes)
	if err != nil {
		return fail("failed to open file: %s", path), nil
	}
	out, msg := applyEdits(orig, edits, path)
	if msg != "" {
		return fail("%s", msg), nil
	}
	if err := os.WriteFile(full, []byte(out), 0o644); err != nil {
		return fail("failed to write file: %s", path), nil
	}
	return map[string]any{"result": "file edited successfully", "path": path, "edits_applied": len(edits)}, nil
}

// readCapped reads a file of at most max bytes.
func readCapped(path string, max int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = io.ErrShortBuffer
	}
	return string(b), err
}

// applyEdits is llama-server's edit_file: every old_text matched in the
// original (exactly, else after fuzzy normalisation, which then applies to
// all), unique and not overlapping another; the new content, or why not.
func applyEdits(orig string, edits []editReq, path string) (string, string) {
	fuzzy := false
	normOrig := normalizeFuzzy(orig)
	for i, e := range edits {
		if strings.Contains(orig, *e.Old) {
			continue
		}
		if !strings.Contains(normOrig, normalizeFuzzy(*e.Old)) {
			return "", sprintf("could not find edits[%d].old_text in %s, it must match the file's current content exactly", i, path)
		}
		fuzzy = true
	}
	base := orig
	if fuzzy {
		base = normOrig
	}
	var ms []matched
	for i, e := range edits {
		needle := *e.Old
		if fuzzy {
			needle = normalizeFuzzy(needle)
		}
		if n := countNonOverlapping(normOrig, normalizeFuzzy(*e.Old)); n > 1 {
			return "", sprintf("found %d occurrences of edits[%d].old_text in %s, it must be unique", n, i, path)
		}
		ms = append(ms, matched{edit: i, at: strings.Index(base, needle), n: len(needle), repl: *e.New})
	}
	sort.SliceStable(ms, func(a, b int) bool { return ms[a].at < ms[b].at })
	for i := 1; i < len(ms); i++ {
		if ms[i-1].at+ms[i-1].n > ms[i].at {
			return "", sprintf("edits[%d] and edits[%d] overlap in %s; merge them into one edit or target disjoint regions", ms[i-1].edit, ms[i].edit, path)
		}
	}
	var out string
	if fuzzy {
		out = replacePreservingLines(orig, base, ms)
	} else {
		out = replaceAll(base, ms, 0)
	}
	if out == orig {
		return "", "no changes made: the replacement(s) produced identical content"
	}
	return out, ""
}

// replaceAll applies replacements (ascending, disjoint) to s, whose first
// byte is at offset in the base content.
func replaceAll(s string, ms []matched, offset int) string {
	for i := len(ms) - 1; i >= 0; i-- {
		at := ms[i].at - offset
		s = s[:at] + ms[i].repl + s[at+ms[i].n:]
	}
	return s
}

// countNonOverlapping counts needle's non-overlapping occurrences.
func countNonOverlapping(s, needle string) int {
	if needle == "" {
		return 0
	}
	return strings.Count(s, needle)
}

// fuzzyReplacer maps smart quotes, dashes and special spaces to ASCII
// (llama-server's normalize_line_for_fuzzy_match).
var fuzzyReplacer = strings.NewReplacer(
	"\u2018", "'", "\u2019", "'", "\u201a", "'", "\u201b", "'",
	"\u201c", `"`, "\u201d", `"`, "\u201e", `"`, "\u201f", `"`,
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-", "\u2212", "-",
	"\u00a0", " ", "\u2002", " ", "\u2003", " ", "\u2004", " ", "\u2005", " ", "\u2006", " ",
	"\u2007", " ", "\u2008", " ", "\u2009", " ", "\u200a", " ", "\u202f", " ", "\u205f", " ", "\u3000", " ",
)

// normalizeFuzzy strips each line's trailing spaces, tabs and CRs and
// replaces the look-alike characters; lines keep their count and order.
func normalizeFuzzy(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = fuzzyReplacer.Replace(strings.TrimRight(l, " \t\r"))
	}
	return strings.Join(lines, "\n")
}

// splitKeepNL splits s into lines that keep their "\n".
func splitKeepNL(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return append(out, s)
		}
		out, s = append(out, s[:i+1]), s[i+1:]
	}
	return out
}

// span is a line's byte range in the base content.
type span struct{ start, end int }

// replacePreservingLines applies fuzzy matches: the lines they touch come
// from the normalised base with the replacements, the others verbatim from
// the original (llama-server's apply_replacements_preserving_unchanged_lines).
func replacePreservingLines(orig, base string, ms []matched) string {
	origLines := splitKeepNL(orig)
	var spans []span
	off := 0
	for _, l := range splitKeepNL(base) {
		spans = append(spans, span{off, off + len(l)})
		off += len(l)
	}
	type group struct {
		start, end int
		reps       []matched
	}
	var groups []group
	for _, m := range ms {
		s, e := lineRange(spans, m.at, m.n)
		if len(groups) > 0 && s < groups[len(groups)-1].end {
			g := &groups[len(groups)-1]
			g.end, g.reps = max(g.end, e), append(g.reps, m)
			continue
		}
		groups = append(groups, group{s, e, []matched{m}})
	}
	var b strings.Builder
	next := 0
	for _, g := range groups {
		for i := next; i < g.start && i < len(origLines); i++ {
			b.WriteString(origLines[i])
		}
		from, to := spans[g.start].start, spans[g.end-1].end
		b.WriteString(replaceAll(base[from:to], g.reps, from))
		next = g.end
	}
	for i := next; i < len(origLines); i++ {
		b.WriteString(origLines[i])
	}
	return b.String()
}

// lineRange is the lines [start, end) a replacement's bytes touch.
func lineRange(spans []span, at, n int) (int, int) {
	s := 0
	for i, sp := range spans {
		if at >= sp.start && at < sp.end {
			s = i
			break
		}
	}
	e := s
	for e < len(spans)-1 && spans[e].end < at+n {
		e++
	}
	return s, e + 1
}

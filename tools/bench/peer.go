package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// ErrBadPeer reports a malformed --peer or --peer-regex.
var ErrBadPeer = errors.New("bad --peer")

// ErrPeerOutput reports a peer run whose output gives no tok/s.
var ErrPeerOutput = errors.New("no tok/s in the peer's output")

// Peer is another engine's command line that bench runs beside pipe's
// configurations, interleaved, under the same cap: its tok/s comes from its
// own output (ParsePeerOutput).
type Peer struct {
	Name  string         `json:"name"`
	Args  []string       `json:"args"`            // the program and its arguments, placeholders unexpanded
	Regex *regexp.Regexp `json:"regex,omitempty"` // nil: the built-in parsers
}

// Placeholders are the names a peer's command line may use in braces; bench
// replaces them per run (Options.Model, N, Prompt, and the run's output
// prefix in OutDir, for a peer's own CSV or log files).
var Placeholders = []string{"model", "n", "prompt", "out"}

var placeholderRE = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_-]*)\}`)

// ParsePeer parses "NAME=COMMAND LINE": NAME labels the peer's rows, the
// command line is split into arguments by SplitArgs (no shell runs it).
func ParsePeer(s string) (Peer, error) {
	name, line, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t/") {
		return Peer{}, fmt.Errorf("%w %q: want NAME='program arg …' (NAME without spaces or slashes)", ErrBadPeer, s)
	}
	args, err := SplitArgs(line)
	if err != nil {
		return Peer{}, fmt.Errorf("%w %s: %w", ErrBadPeer, name, err)
	}
	if len(args) == 0 {
		return Peer{}, fmt.Errorf("%w %s: empty command line", ErrBadPeer, name)
	}
	for _, a := range args {
		for _, m := range placeholderRE.FindAllStringSubmatch(a, -1) {
			if !isPlaceholder(m[1]) {
				return Peer{}, fmt.Errorf("%w %s: unknown placeholder {%s} (known: {%s})", ErrBadPeer, name, m[1], strings.Join(Placeholders, "} {"))
			}
		}
	}
	return Peer{Name: name, Args: args}, nil
}

func isPlaceholder(s string) bool {
	for _, p := range Placeholders {
		if p == s {
			return true
		}
	}
	return false
}

// SetRegex sets the peer's tok/s pattern, whose first group is tok/s.
func (p *Peer) SetRegex(expr string) error {
	re, err := regexp.Compile(expr)
	if err != nil {
		return fmt.Errorf("%w %s: --peer-regex: %w", ErrBadPeer, p.Name, err)
	}
	if re.NumSubexp() < 1 {
		return fmt.Errorf("%w %s: --peer-regex %q has no group (its first group is the tok/s)", ErrBadPeer, p.Name, expr)
	}
	p.Regex = re
	return nil
}

// Uses reports whether the command line uses placeholder name.
func (p *Peer) Uses(name string) bool {
	for _, a := range p.Args {
		if strings.Contains(a, "{"+name+"}") {
			return true
		}
	}
	return false
}

// Expand returns the command line with each {name} replaced by vals[name];
// a value can hold spaces, it stays one argument.
func (p *Peer) Expand(vals map[string]string) []string {
	out := make([]string, len(p.Args))
	for i, a := range p.Args {
		out[i] = placeholderRE.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := vals[m[1:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	return out
}

// SplitArgs splits a command line into arguments as a POSIX shell would,
// without running one: whitespace separates; '…' is literal; "…" keeps
// spaces, with \" \\ \$ \` escaped; a backslash outside quotes escapes the
// next character. No variables, globs or redirections.
func SplitArgs(s string) ([]string, error) {
	var (
		args  []string
		cur   strings.Builder
		inArg bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		case c == '\'':
			inArg = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inArg = true
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '"' {
					closed = true
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if !closed {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
		case c == '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf("trailing \\ in %q", s)
			}
			inArg = true
			i++
			cur.WriteByte(s[i])
		default:
			inArg = true
			cur.WriteByte(c)
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}

// PeerTokS is the decode rate a peer printed.
type PeerTokS struct {
	TokS   float64 `json:"tok_s"`
	Tokens int     `json:"tokens"` // tokens the rate is over (0 when the output does not say)
	Source string  `json:"source"` // which parser read it
}

// The line formats of the engines the built-in parsers read.
var (
	// bmoe-cli (BigMoeOnEdge cli/main.cpp): "generation: %d tokens, %.3f s/token (%.3f tok/s)".
	bmoeRE = regexp.MustCompile(`(?m)^generation: (\d+) tokens, [0-9.eE+-]+ s/token \(([0-9.eE+-]+|nan|inf|-?nan) tok/s\)`)
	// llama.cpp's perf print (llama-completion, llama-cli -no-cnv, …):
	// "…:        eval time = %10.2f ms / %5d runs   (%8.2f ms per token, %8.2f tokens per second)".
	llamaEvalRE = regexp.MustCompile(`(?m)(?:^|[^t] )eval time =\s*[0-9.]+ ms /\s*(\d+) (?:runs|tokens)\s*\(\s*\S+ ms per token,\s*(\S+) tokens per second\)`)
	// llama-cli's conversation footer: "[ Prompt: %.1f t/s | Generation: %.1f t/s ]".
	llamaCLIRE = regexp.MustCompile(`\[ Prompt: [0-9.]+ t/s \| Generation: ([0-9.]+) t/s \]`)
)

// ParsePeerOutput finds the peer's decode tok/s in its stdout and stderr.
// With re (--peer-regex) only re is tried: its first group, last match.
// Otherwise the built-in parsers, in this order: bmoe-cli's "generation:"
// line; llama-bench's tg test (-o json, -o jsonl or its default markdown
// table; avg_ts); llama.cpp's perf "eval time" line; llama-cli's
// "Generation: … t/s". A line format takes its last match. A rate that is
// not a positive number is an error, never a silent 0.
func ParsePeerOutput(stdout, stderr []byte, re *regexp.Regexp) (PeerTokS, error) {
	all := append(append(append([]byte(nil), stdout...), '\n'), stderr...)
	if re != nil {
		m := lastMatch(re, all)
		if m == nil {
			return PeerTokS{}, fmt.Errorf("%w: --peer-regex %q matches nothing", ErrPeerOutput, re.String())
		}
		return rate(PeerTokS{Source: "--peer-regex"}, m[1], "")
	}
	if m := lastMatch(bmoeRE, all); m != nil {
		return rate(PeerTokS{Source: "bmoe-cli generation"}, m[2], m[1])
	}
	if r, ok, err := llamaBench(stdout); ok || err != nil {
		return r, err
	}
	if m := lastMatch(llamaEvalRE, all); m != nil {
		return rate(PeerTokS{Source: "llama.cpp eval time"}, m[2], m[1])
	}
	if m := lastMatch(llamaCLIRE, all); m != nil {
		return rate(PeerTokS{Source: "llama-cli generation"}, m[1], "")
	}
	return PeerTokS{}, fmt.Errorf("%w: none of bmoe-cli's \"generation: … tok/s\", llama-bench's tg test (-o json), llama.cpp's \"eval time = … tokens per second\" (give --peer-regex for another engine)", ErrPeerOutput)
}

func lastMatch(re *regexp.Regexp, b []byte) []string {
	ms := re.FindAllSubmatch(b, -1)
	if len(ms) == 0 {
		return nil
	}
	m := ms[len(ms)-1]
	out := make([]string, len(m))
	for i := range m {
		out[i] = string(m[i])
	}
	return out
}

// rate fills r from the printed tok/s and token count.
func rate(r PeerTokS, tokS, tokens string) (PeerTokS, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(tokS), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return PeerTokS{}, fmt.Errorf("%w: %s gives %q tok/s, not a positive rate", ErrPeerOutput, r.Source, tokS)
	}
	r.TokS = v
	if tokens != "" {
		r.Tokens, _ = strconv.Atoi(tokens)
	}
	return r, nil
}

// llamaBenchTest is the part of one llama-bench result bench reads.
type llamaBenchTest struct {
	NPrompt int      `json:"n_prompt"`
	NGen    int      `json:"n_gen"`
	NDepth  int      `json:"n_depth"`
	AvgTS   *float64 `json:"avg_ts"`
}

// llamaBench reads llama-bench's stdout: the tg test (n_prompt 0, n_gen >
// 0) of its JSON array, its JSON lines or its markdown table. ok is false
// when stdout is none of these; more than one tg test is an error (the
// table would have to pick one).
func llamaBench(stdout []byte) (PeerTokS, bool, error) {
	var tests []llamaBenchTest
	trim := bytes.TrimSpace(stdout)
	switch {
	case bytes.HasPrefix(trim, []byte("[")):
		if err := json.Unmarshal(trim, &tests); err != nil {
			return PeerTokS{}, true, fmt.Errorf("%w: llama-bench JSON: %w", ErrPeerOutput, err)
		}
	case bytes.HasPrefix(trim, []byte("{")):
		for _, line := range bytes.Split(trim, []byte("\n")) {
			if line = bytes.TrimSpace(line); len(line) == 0 {
				continue
			}
			var t llamaBenchTest
			if err := json.Unmarshal(line, &t); err != nil {
				return PeerTokS{}, true, fmt.Errorf("%w: llama-bench JSON lines: %w", ErrPeerOutput, err)
			}
			tests = append(tests, t)
		}
	default:
		return llamaBenchTable(stdout)
	}
	var tg []llamaBenchTest
	for _, t := range tests {
		if t.NGen > 0 && t.NPrompt == 0 {
			tg = append(tg, t)
		}
	}
	switch {
	case len(tg) == 0:
		return PeerTokS{}, true, fmt.Errorf("%w: llama-bench ran no tg test (n_prompt 0, n_gen > 0): give it -n N", ErrPeerOutput)
	case len(tg) > 1:
		return PeerTokS{}, true, fmt.Errorf("%w: llama-bench ran %d tg tests: give it one -n and one of each other parameter", ErrPeerOutput, len(tg))
	case tg[0].AvgTS == nil:
		return PeerTokS{}, true, fmt.Errorf("%w: llama-bench's tg test has no avg_ts", ErrPeerOutput)
	}
	r, err := rate(PeerTokS{Source: "llama-bench json"}, strconv.FormatFloat(*tg[0].AvgTS, 'g', -1, 64), strconv.Itoa(tg[0].NGen))
	return r, true, err
}

// llamaBenchTable reads llama-bench's default markdown table: the row whose
// test column is tgN, its "t/s" column "avg ± stddev".
func llamaBenchTable(stdout []byte) (PeerTokS, bool, error) {
	testCol, tsCol := -1, -1
	var found []PeerTokS
	for _, line := range strings.Split(string(stdout), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if testCol < 0 {
			for i, c := range cells {
				switch c {
				case "test":
					testCol = i
				case "t/s":
					tsCol = i
				}
			}
			if tsCol < 0 {
				testCol = -1
			}
			continue
		}
		if testCol >= len(cells) || tsCol >= len(cells) || !strings.HasPrefix(cells[testCol], "tg") {
			continue
		}
		avg, _, _ := strings.Cut(cells[tsCol], "±")
		r, err := rate(PeerTokS{Source: "llama-bench table"}, avg, strings.TrimPrefix(cells[testCol], "tg"))
		if err != nil {
			return PeerTokS{}, true, err
		}
		found = append(found, r)
	}
	switch len(found) {
	case 0:
		return PeerTokS{}, false, nil
	case 1:
		return found[0], true, nil
	}
	return PeerTokS{}, true, fmt.Errorf("%w: llama-bench ran %d tg tests: give it one -n and one of each other parameter", ErrPeerOutput, len(found))
}

// tailLines is the last n lines of b, for an error message.
func tailLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

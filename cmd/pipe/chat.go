package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/alecthomas/kong"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/tokenizer"
)

// Interactive chat (`pipe run -i`) as llama-cli behaves: replies run to
// end-of-generation by default (-n -1), Ctrl-C during a reply stops that
// reply and returns to the prompt (Ctrl-C at the prompt ends the session),
// /clear starts a new conversation, a full context says so and keeps the
// session usable, and <think> blocks can be hidden (--reasoning hide).

// replyState is 0 at the prompt, 1 while a reply is generated and 2 once
// Ctrl-C asked that reply to stop. The signal handler and the decoding
// goroutine share it.
var replyState atomic.Int32

// interruptReply stops a running interactive reply; it reports whether
// there was one (then the signal is consumed and the run goes on).
func interruptReply() bool { return replyState.CompareAndSwap(1, 2) }

// chatCommands is the help line printed at the start of a session.
const chatCommands = "chat: Ctrl-C stops a reply, /clear starts over, Ctrl-D or Ctrl-C at the prompt ends"

// AfterApply (a kong hook) gives -i llama-cli's defaults: replies until
// end-of-generation unless -n is given, and -p or -f as the first turn.
// --single-turn (llama.cpp's -st) is one chat turn: the -p or -f prompt
// rendered with the chat template, else -i for one line of stdin.
func (c *RunCmd) AfterApply(kctx *kong.Context) error {
	if !c.Interactive && !c.SingleTurn {
		return nil
	}
	if !flagGiven(kctx.Args, 'n', "n-predict", "predict") {
		c.N = -1
	}
	c.promptTurn = flagGiven(kctx.Args, 'p', "prompt") || flagGiven(kctx.Args, 'f', "file")
	if c.SingleTurn {
		c.Chat = true
		c.Interactive = !c.promptTurn
	}
	return nil
}

// flagGiven reports whether args (up to "--") set the flag with the short
// name short or one of the long names, in any of kong's spellings (-n 5,
// -n5, -n=5, --predict 5, --predict=5). kong's own "set" mark is also true
// for a default.
func flagGiven(args []string, short rune, long ...string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if s, ok := strings.CutPrefix(a, "-"); ok && !strings.HasPrefix(s, "-") && strings.HasPrefix(s, string(short)) {
			return true
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if strings.HasPrefix(a, "--") && slices.Contains(long, name) {
			return true
		}
	}
	return false
}

// chat is the interactive loop.
func (r *runner) chat(sess *decode.Session, so decode.SessionOptions) error {
	ctx := r.g.Ctx
	lines := readLines(ctx, stdin)
	r.status(chatCommands)
	first := ""
	if r.c.promptTurn {
		first = r.c.Prompt
	}
	for {
		var line string
		if first != "" {
			line, first = first, ""
		} else {
			r.prompt()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case l, ok := <-lines:
				if !ok {
					return nil
				}
				if errors.Is(l.err, errPromptLimit) && r.c.SingleTurn {
					return fmt.Errorf("%w: stdin: a line %w", errFlag, l.err)
				}
				if errors.Is(l.err, errPromptLimit) {
					r.status(fmt.Sprintf("turn skipped: a line %v", l.err))
					continue
				}
				if l.err != nil {
					return fmt.Errorf("stdin: %w", l.err)
				}
				line = l.text
			}
		}
		line = strings.TrimSpace(line)
		switch line {
		case "":
			continue
		case "/clear":
			s, err := r.m.NewSession(so)
			if err != nil {
				return err
			}
			sess = s
			r.status("conversation cleared")
			continue
		}
		if err := r.fitTurn(sess, len(line)); err != nil {
			if r.c.SingleTurn {
				return fmt.Errorf("%w: %w", errFlag, err)
			}
			r.status(err.Error())
			continue
		}
		if err := r.reply(sess, line); err != nil || r.c.SingleTurn {
			return err
		}
	}
}

// fitTurn refuses, before it is tokenized, a turn of n bytes that cannot
// fit the session's context even after /clear.
func (r *runner) fitTurn(sess *decode.Session, n int) error {
	nCtx := sess.Ctx()
	if nCtx == 0 {
		nCtx = decode.DefaultCtx // Chat's size for an unsized session
	}
	if err := r.m.FitText(n, nCtx); err != nil {
		return fmt.Errorf("turn skipped: %w (-c %d)", err, nCtx)
	}
	return nil
}

// reply generates one reply; a full context is reported, not fatal.
func (r *runner) reply(sess *decode.Session, line string) error {
	r.think = newThinkFilter(r.c.Reasoning == "hide")
	r.reverse.reset()
	replyState.Store(1)
	res, err := sess.Chat(r.g.Ctx, line, r.genOptions(), r.chatPrint)
	stopped := replyState.Swap(0) == 2
	r.tm.add(res)
	if errors.Is(err, model.ErrContextFull) {
		r.status(fmt.Sprintf("the context is full (-c %d): /clear starts a new conversation", sess.Ctx()))
		return nil
	}
	// A turn the chat template refuses or blows up on (a limit,
	// raise_exception), or renders past the context, is skipped: the
	// conversation is as it was before the line.
	if (errors.Is(err, tokenizer.ErrTemplate) || errors.Is(err, decode.ErrTooLong)) && r.g.Ctx.Err() == nil && !r.c.SingleTurn {
		r.status("turn skipped: " + err.Error())
		return nil
	}
	if err != nil {
		return err
	}
	werr := r.out.write(r.think.flush()+"\n", "the end of a reply")
	r.g.Status.Release()
	if werr != nil {
		return werr
	}
	if stopped {
		r.status("reply stopped")
	}
	if !r.g.JSONLog {
		var one timings
		one.add(res)
		r.say(one.line(math.NaN()))
	}
	return r.g.Ctx.Err()
}

// chatPrint prints a reply's token unless Ctrl-C stopped the reply.
func (r *runner) chatPrint(t decode.Token) error {
	if replyState.Load() == 2 {
		return decode.ErrStop
	}
	text := t.Text
	t.Text = r.think.add(text)
	return r.print(t)
}

// prompt shows "> " when stdin is a conversation with a person, after every
// log line logged so far (the load's, the last reply's timings), so that no
// log line lands between the prompt and what the person types.
func (r *runner) prompt() {
	if !r.g.JSONLog {
		if r.g.SyncLog != nil {
			r.g.SyncLog()
		}
		fmt.Fprint(r.g.Stderr, "> ")
	}
}

// status tells the user something about the session: a plain line on a
// console log, an event on a JSON one.
func (r *runner) status(msg string) {
	if r.g.JSONLog {
		r.g.Log.Info().Str("event", "chat").Msg(msg)
		return
	}
	r.say("[" + msg + "]")
}

// say writes a line for the person at the terminal on stderr.
func (r *runner) say(line string) {
	fmt.Fprintln(r.g.Status.Writer(r.g.Stderr), line)
}

// chatLine is one line of stdin, or why there is none.
type chatLine struct {
	text string
	err  error // errPromptLimit: the line was skipped; else a read error (the last)
}

// readLines reads stdin line by line on its own goroutine, so the loop can
// wait for a line or for the run's end at once. A line longer than
// maxPromptBytes is read past and reported as errPromptLimit; a read error
// is sent and ends the goroutine, as EOF does (it may outlive the loop while
// blocked on a terminal, which the process's exit ends).
func readLines(ctx context.Context, in io.Reader) <-chan chatLine {
	ch := make(chan chatLine)
	go func() {
		defer close(ch)
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			text, err := readLine(br, maxPromptBytes)
			if errors.Is(err, io.EOF) && text == "" {
				return
			}
			if errors.Is(err, io.EOF) {
				err = nil // a last line without a newline
			}
			select {
			case ch <- chatLine{text, err}:
			case <-ctx.Done():
				return
			}
			if err != nil && !errors.Is(err, errPromptLimit) {
				return
			}
		}
	}()
	return ch
}

// readLine reads up to and without the next newline; past limit bytes it
// reads on to the newline and returns errPromptLimit.
func readLine(br *bufio.Reader, limit int) (string, error) {
	var line []byte
	over := false
	for {
		frag, err := br.ReadSlice('\n')
		if !over && len(line)+len(frag) > limit+1 {
			over, line = true, nil
		}
		if !over {
			line = append(line, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if over && (err == nil || errors.Is(err, io.EOF)) {
			return "", errPromptLimit
		}
		return strings.TrimSuffix(string(line), "\n"), err
	}
}

// thinkFilter drops <think>…</think> blocks (and the whitespace after one)
// from streamed text when hide is set; tags may be split across tokens.
type thinkFilter struct {
	hide    bool
	in      bool   // inside a think block
	pending string // a tail that may be the start of a tag
	trim    bool   // drop leading whitespace (just after a block)
}

func newThinkFilter(hide bool) *thinkFilter { return &thinkFilter{hide: hide} }

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

func (f *thinkFilter) add(s string) string {
	if f == nil || !f.hide {
		return s
	}
	s = f.pending + s
	f.pending = ""
	var out strings.Builder
	for s != "" {
		tag := thinkOpen
		if f.in {
			tag = thinkClose
		}
		if i := strings.Index(s, tag); i >= 0 {
			if !f.in {
				f.emit(&out, s[:i])
			}
			s, f.in = s[i+len(tag):], !f.in
			f.trim = !f.in
			continue
		}
		keep := overlapSuffix(s, tag)
		if !f.in {
			f.emit(&out, s[:len(s)-keep])
		}
		f.pending = s[len(s)-keep:]
		break
	}
	return out.String()
}

// flush returns held-back text at the end of a reply.
func (f *thinkFilter) flush() string {
	if f == nil || f.in {
		return ""
	}
	s := f.pending
	f.pending = ""
	return s
}

func (f *thinkFilter) emit(out *strings.Builder, s string) {
	if f.trim {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return
		}
		f.trim = false
	}
	out.WriteString(s)
}

// overlapSuffix is the length of the longest suffix of s that is a proper
// prefix of tag.
func overlapSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}

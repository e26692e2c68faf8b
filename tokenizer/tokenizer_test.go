package tokenizer

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pipe-engine/pipe/gguf"
)

// pretokens runs one pre-tokenizer on text and returns the pieces.
func pretokens(split splitter, text string) []string {
	c := decodeCodepoints(text, nil)
	f := make([]uint8, len(c))
	for i, r := range c {
		f[i] = cptFlags(r)
	}
	var out []string
	start := 0
	for _, e := range split(c, f, nil) {
		out = append(out, string(c[start:e]))
		start = e
	}
	return out
}

func TestSplitQwen2(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"I'm 123", []string{"I", "'m", " ", "1", "2", "3"}},
		{"Don'T WE'LL", []string{"Don", "'T", " WE", "'LL"}},
		{"a  b", []string{"a", " ", " b"}},
		{"x   \n\n y", []string{"x", "   \n\n", " y"}},
		{"end   ", []string{"end", "   "}},
		{"!!!\n\nabc", []string{"!!!\n\n", "abc"}},
		{" ?! x", []string{" ?!", " x"}},
		{"東京 in", []string{"東京", " in"}},
		{"naïve", []string{"naïve"}},
		// a combining mark is not \p{L}: it ends the word
		{"e\u0301t", []string{"e", "\u0301t"}},
		// NBSP is whitespace, and whitespace can prefix a word
		{"\u00a0x", []string{"\u00a0x"}},
		{"\r\nx", []string{"\r\n", "x"}},
		{"$5", []string{"$", "5"}},
		{"", nil},
	} {
		if got := pretokens(splitQwen2, c.in); !slices.Equal(got, c.want) {
			t.Errorf("qwen2 %q: got %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSplitGPT4o(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"HelloWorld", []string{"Hello", "World"}},
		{"HELLO world", []string{"HELLO", " world"}},
		{"camelCaseX", []string{"camel", "Case", "X"}},
		{"12345", []string{"123", "45"}},
		{"they're here", []string{"they're", " here"}},
		{"path/to/x\n", []string{"path", "/to", "/x", "\n"}},
		{"a//\nb", []string{"a", "//\n", "b"}},
		{"ab  ", []string{"ab", "  "}},
		{"東京", []string{"東京"}},
		{"e\u0301t", []string{"e", "\u0301t"}},
	} {
		if got := pretokens(splitGPT4o, c.in); !slices.Equal(got, c.want) {
			t.Errorf("gpt-4o %q: got %q, want %q", c.in, got, c.want)
		}
	}
}

func TestDecodeCodepointsLikeLlamaCpp(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []rune
	}{
		{"a\u00e9\u6771\U0001F600", []rune{'a', 0xe9, 0x6771, 0x1F600}},
		{"\xff", []rune{0xFFFD}},
		{"\xc3", []rune{0xFFFD}},
		{"\xc3a", []rune{0xFFFD, 'a'}},
		{"\xc0\x80", []rune{0}},              // overlong: accepted
		{"\xed\xa0\x80", []rune{0xD800}},     // surrogate: accepted
		{"\xf7\xbf\xbf\xbf", []rune{0xFFFD}}, // above U+10FFFF
		{"\x80\x80", []rune{0xFFFD, 0xFFFD}}, // stray continuation bytes
		{"\xe6\x9d", []rune{0xFFFD, 0xFFFD}}, // truncated 3-byte sequence
		{"\xf8\x88\x80\x80\x80", []rune{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}},
	} {
		if got := decodeCodepoints(c.in, nil); !slices.Equal(got, c.want) {
			t.Errorf("%q: got %U, want %U", c.in, got, c.want)
		}
	}
}

func TestByteTable(t *testing.T) {
	seen := map[string]bool{}
	for b := 0; b < 256; b++ {
		s := byteToUnicode[b]
		if seen[s] {
			t.Fatalf("byte %d maps to %q twice", b, s)
		}
		seen[s] = true
		if got := decodeByteLevel(nil, s); len(got) != 1 || got[0] != byte(b) {
			t.Errorf("byte %d: round trip %x", b, got)
		}
	}
	if byteToUnicode[' '] != "Ġ" || byteToUnicode['\n'] != "Ċ" || byteToUnicode['a'] != "a" {
		t.Errorf("GPT-2 table: space %q newline %q", byteToUnicode[' '], byteToUnicode['\n'])
	}
	// A code point outside the table gives llama.cpp's marker.
	if got := string(decodeByteLevel(nil, "x€")); got != "x[UNK_BYTE_0xe282acx€]" {
		t.Errorf("unknown code point: %q", got)
	}
}

func TestSpecialTokens(t *testing.T) {
	tk := qwen3(t)
	imStart, _ := tk.ID("<|im_start|>")
	think, _ := tk.ID("<think>")
	if imStart != 151644 || think != 151667 {
		t.Fatalf("ids: %d %d", imStart, think)
	}
	// CONTROL: only with parseSpecial.
	if got := tk.Encode("<|im_start|>", false, true); !slices.Equal(got, []int32{imStart}) {
		t.Errorf("parse_special: %v", got)
	}
	if got := tk.Encode("<|im_start|>", false, false); slices.Contains(got, imStart) {
		t.Errorf("without parse_special: %v", got)
	}
	// USER_DEFINED: always.
	if got := tk.Encode("a<think>b", false, false); len(got) != 3 || got[1] != think {
		t.Errorf("user-defined: %v", got)
	}
	// Pieces: CONTROL only with special; USER_DEFINED always; UNUSED never.
	if p := string(tk.Piece(nil, imStart, false)); p != "" {
		t.Errorf("control piece without special: %q", p)
	}
	if p := string(tk.Piece(nil, imStart, true)); p != "<|im_start|>" {
		t.Errorf("control piece: %q", p)
	}
	if p := string(tk.Piece(nil, think, false)); p != "<think>" {
		t.Errorf("user-defined piece: %q", p)
	}
	pad, _ := tk.ID("[PAD151669]")
	if p := tk.Piece(nil, pad, true); len(p) != 0 {
		t.Errorf("unused piece: %q", p)
	}
	if p := tk.Piece([]byte("x"), -1, true); string(p) != "x" {
		t.Errorf("out-of-range id changed dst: %q", p)
	}
	if !tk.IsControl(imStart) || tk.IsControl(think) {
		t.Error("IsControl")
	}
	// "</s>" is NORMAL in the file but forced to CONTROL (an EOG name).
	s, _ := tk.ID("</s>")
	if !tk.IsControl(s) || !tk.IsEOG(s) {
		t.Errorf("</s> (%d) should be CONTROL and EOG", s)
	}
	// gpt-oss: <|channel|> is re-flagged USER_DEFINED, <|return|> stays CONTROL.
	g := gptoss(t)
	ch, _ := g.ID("<|channel|>")
	ret, _ := g.ID("<|return|>")
	if got := g.Encode("<|channel|>", false, false); !slices.Equal(got, []int32{ch}) {
		t.Errorf("gpt-oss <|channel|> without parse_special: %v", got)
	}
	if got := g.Encode("<|return|>", false, false); slices.Contains(got, ret) {
		t.Errorf("gpt-oss <|return|> without parse_special: %v", got)
	}
	if g.BOS() != 199998 || g.EOS() != 200002 || g.PAD() != 199999 || g.AddBOS() {
		t.Errorf("gpt-oss specials: bos %d eos %d pad %d addbos %v", g.BOS(), g.EOS(), g.PAD(), g.AddBOS())
	}
	if tk.NVocab() != 151936 || g.NVocab() != 201088 || tk.Pre() != "qwen2" || g.Pre() != "gpt-4o" {
		t.Error("vocab sizes / pre names")
	}
}

func TestStream(t *testing.T) {
	tk := qwen3(t)
	byteTok := func(b byte) int32 {
		id, ok := tk.ID(byteToUnicode[b])
		if !ok {
			t.Fatalf("no token for byte %#x", b)
		}
		return id
	}
	imEnd, _ := tk.ID("<|im_end|>")
	type step struct {
		id   int32
		want string
	}
	for _, c := range []struct {
		name  string
		steps []step
		flush string
	}{
		{"split é", []step{{byteTok(0xC3), ""}, {byteTok(0xA9), "é"}}, ""},
		{"split emoji", []step{{byteTok(0xF0), ""}, {byteTok(0x9F), ""}, {byteTok(0x98), ""}, {byteTok(0x80), "😀"}}, ""},
		{"invalid byte", []step{{byteTok(0xFF), "\uFFFD"}}, ""},
		{"lead then ascii", []step{{byteTok(0xC3), ""}, {byteTok('a'), "\uFFFDa"}}, ""},
		{"bad second byte", []step{{byteTok(0xE0), ""}, {byteTok(0x80), "\uFFFD\uFFFD"}}, ""},
		{"maximal subpart", []step{{byteTok(0xE6), ""}, {byteTok(0x9D), ""}, {byteTok('x'), "\uFFFDx"}}, ""},
		{"truncated at end", []step{{byteTok('o'), "o"}, {byteTok(0xE6), ""}, {byteTok(0x9D), ""}}, "\uFFFD"},
		{"control hidden", []step{{imEnd, ""}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := tk.NewStream(false)
			for i, s := range c.steps {
				if got := st.Add(s.id); got != s.want {
					t.Fatalf("step %d: %q, want %q", i, got, s.want)
				}
			}
			if got := st.Flush(); got != c.flush {
				t.Fatalf("flush %q, want %q", got, c.flush)
			}
			if st.Pending() != 0 {
				t.Fatal("pending after flush")
			}
		})
	}
}

func TestChat(t *testing.T) {
	tk := qwen3(t)
	if tk.ChatFormat() != "chatml" {
		t.Fatalf("format %q", tk.ChatFormat())
	}
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}
	got, err := tk.Chat(msgs, true, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if got != want {
		t.Errorf("chatml: %q", got)
	}
	// The rendered text tokenizes with the special tokens as single ids.
	ids := tk.Encode(got, false, true)
	if ids[0] != 151644 || !slices.Contains(ids, 151667) || !slices.Contains(ids, 151668) {
		t.Errorf("ids %v", ids)
	}
	if got, _ := tk.Chat(msgs[1:], false, false); got != "<|im_start|>user\nHi<|im_end|>\n" {
		t.Errorf("no generation prompt: %q", got)
	}
	// interactive continuation: only the new turn, with the newline the
	// cache lacks after the previous <|im_end|>
	delta, err := tk.ChatDelta(context.Background(), []Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello"}}, Message{Role: "user", Content: "Bye"}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := "\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"; delta != want {
		t.Errorf("delta %q, want %q", delta, want)
	}
	if first, _ := tk.ChatDelta(context.Background(), nil, Message{Role: "user", Content: "Hi"}, true, false); first != "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("first delta %q", first)
	}
	g := gptoss(t)
	if g.ChatFormat() != "harmony" {
		t.Fatalf("gpt-oss format %q", g.ChatFormat())
	}
	got, err = g.Chat([]Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Yo"}, {Role: "user", Content: "Again"}}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|start|>user<|message|>Hi<|end|><|start|>assistant<|message|>Yo<|return|><|start|>user<|message|>Again<|end|><|start|>assistant"; got != want {
		t.Errorf("harmony: %q", got)
	}
	if _, err := g.Chat(msgs, true, true); !errors.Is(err, ErrUnsupportedTemplate) {
		t.Errorf("harmony no-think: %v", err)
	}
	// a template llama.cpp detects as one of its built-ins renders as it
	// does (llama2 here); one it does not know is refused
	llama2 := tinyWithTemplate(t, "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}")
	if got, err := llama2.Chat(msgs, true, false); llama2.ChatFormat() != "llama2" || err != nil || !strings.HasPrefix(got, "[INST] ") {
		t.Errorf("[INST] template: format %q: %q, %v", llama2.ChatFormat(), got, err)
	}
	for _, tmpl := range []string{"", "{% for m in messages %}{{ m.content }}{% endfor %}"} {
		tk2 := tinyWithTemplate(t, tmpl)
		if tk2.ChatFormat() != "" {
			t.Errorf("format %q for %q", tk2.ChatFormat(), tmpl)
		}
		if _, err := tk2.Chat(msgs, true, false); !errors.Is(err, ErrUnsupportedTemplate) {
			t.Errorf("template %q: err %v", tmpl, err)
		}
	}
}

// tinyConfig is a hand-made 260-token vocabulary: the 256 byte tokens, two
// merges and two control tokens.
func tinyConfig() Config {
	var toks []string
	for b := 0; b < 256; b++ {
		toks = append(toks, byteToUnicode[b])
	}
	toks = append(toks, "ab", "abc", "<|im_start|>", "<|im_end|>")
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = int32(TypeNormal)
	}
	types[258], types[259] = int32(TypeControl), int32(TypeControl)
	return Config{Model: "gpt2", Pre: "qwen2", Tokens: toks, Types: types, Merges: []string{"a b", "ab c"},
		BOS: None, EOS: 259, EOT: None, EOM: None, PAD: None}
}

func tinyWithTemplate(t *testing.T, tmpl string) *Tokenizer {
	cfg := tinyConfig()
	cfg.ChatTemplate = tmpl
	tk, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestNewHandMade(t *testing.T) {
	tk := tinyWithTemplate(t, "<|im_start|>")
	if got := tk.Encode("abc abd", false, false); !slices.Equal(got, []int32{257, 32, 256, 100}) {
		// "abc" merges fully; " abd" is a word: ' ' has no merge with 'a'
		t.Errorf("encode: %v", got)
	}
	if !tk.IsEOG(259) || tk.EOT() != 259 {
		t.Errorf("EOG/EOT from <|im_end|>: eog=%v eot=%d", tk.EOGs(), tk.EOT())
	}
	// add_bos / add_eos
	cfg := tinyConfig()
	cfg.BOS, cfg.AddBOS, cfg.AddEOS = 258, true, true
	tk2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := tk2.Encode("ab", true, false); !slices.Equal(got, []int32{258, 256, 259}) {
		t.Errorf("add_special: %v", got)
	}
	if got := tk2.Encode("ab", false, false); !slices.Equal(got, []int32{256}) {
		t.Errorf("no add_special: %v", got)
	}
}

func TestNewErrors(t *testing.T) {
	mod := func(f func(*Config)) Config { c := tinyConfig(); f(&c); return c }
	for _, c := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"spm model", mod(func(c *Config) { c.Model = "llama" }), ErrUnsupported},
		{"unknown pre", mod(func(c *Config) { c.Pre = "falcon" }), ErrUnsupported},
		{"no tokens", mod(func(c *Config) { c.Tokens = nil; c.Types = nil }), ErrInvalid},
		{"short types", mod(func(c *Config) { c.Types = c.Types[:10] }), ErrInvalid},
		{"duplicate", mod(func(c *Config) { c.Tokens = append(slices.Clone(c.Tokens), "ab"); c.Types = nil }), ErrInvalid},
		{"add_bos without bos", mod(func(c *Config) { c.AddBOS = true }), ErrInvalid},
		{"add_eos without eos", mod(func(c *Config) { c.AddEOS = true; c.EOS = None }), ErrInvalid},
	} {
		if _, err := New(c.cfg); !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
	// An out-of-range BOS or EOS is refused naming its key (issue 35:
	// llama.cpp ignores it, and generation then never stops at EOS);
	// another out-of-range special id is ignored, as llama.cpp does.
	for _, c := range []struct {
		key string
		cfg Config
	}{{KeyBOS, mod(func(c *Config) { c.BOS = 99999 })}, {KeyEOS, mod(func(c *Config) { c.EOS = -7 })}} {
		if _, err := New(c.cfg); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("out-of-range %s: %v", c.key, err)
		}
	}
	tk, err := New(mod(func(c *Config) { c.EOT = 99999; c.PAD = -7 }))
	if err != nil || tk.EOT() == 99999 || tk.PAD() != None {
		t.Errorf("out-of-range eot, pad: %v eot %d pad %d", err, tk.EOT(), tk.PAD())
	}
	// Malformed merges are skipped, not fatal.
	if _, err := New(mod(func(c *Config) { c.Merges = []string{"", " ", "ab", "a ", "a b"} })); err != nil {
		t.Errorf("malformed merges: %v", err)
	}
}

func TestFromMetadata(t *testing.T) {
	base := tinyConfig()
	kv := map[string]any{
		KeyModel: "gpt2", KeyPre: "qwen2", KeyTokens: base.Tokens, KeyMerges: base.Merges,
		KeyTokenType: base.Types, KeyEOS: uint32(259), KeyAddBOS: false, KeyChatTemplate: "<|im_start|>",
	}
	get := func(m map[string]any) func(string) (any, bool) {
		return func(k string) (any, bool) { v, ok := m[k]; return v, ok }
	}
	cfg, err := FromMetadata(get(kv))
	if err != nil {
		t.Fatal(err)
	}
	// bos defaults to 11 for BPE vocabularies, as llama.cpp
	if cfg.EOS != 259 || cfg.BOS != 11 || cfg.PAD != None || cfg.ChatTemplate != "<|im_start|>" {
		t.Errorf("cfg: eos %d bos %d pad %d", cfg.EOS, cfg.BOS, cfg.PAD)
	}
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key string
		val any
	}{
		{KeyModel, nil}, {KeyTokens, nil}, {KeyModel, 3}, {KeyTokens, "x"}, {KeyTokenType, "x"},
		{KeyEOS, "x"}, {KeyAddBOS, 1}, {KeyMerges, nil},
		{KeyEOS, uint32(len(base.Tokens))}, {KeyBOS, uint64(1) << 40}, {KeyBOS, int32(-2)},
	} {
		m := map[string]any{}
		for k, v := range kv {
			m[k] = v
		}
		if c.val == nil {
			delete(m, c.key)
		} else {
			m[c.key] = c.val
		}
		if _, err := FromMetadata(get(m)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s=%v: error %v, want ErrInvalid naming the key", c.key, c.val, err)
		}
	}
}

func TestConcurrentEncode(t *testing.T) {
	tk := qwen3(t)
	text := "Hello world! 東京 in 2024 — ¿qué tal? <think>ok</think>"
	want := tk.Encode(text, false, true)
	done := make(chan []int32)
	for range 8 {
		go func() { done <- tk.Encode(text, false, true) }()
	}
	for range 8 {
		if got := <-done; !slices.Equal(got, want) {
			t.Errorf("concurrent encode differs: %v", got)
		}
	}
}

// FuzzRoundTrip: for valid UTF-8 without special-token parsing, decoding the
// ids gives the input back; any input (valid or not) must not panic, and a
// stream over the ids yields valid UTF-8.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", "Hello world", "東京 in 2024", "a\u0301\u00a0 \r\n\t", "<|im_start|>x<think>", "\xff\xc3", "emoji 😀👍🏽"} {
		f.Add(s)
	}
	tk := qwen3(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tk.Encode(s, false, false)
		st := tk.NewStream(true)
		var b strings.Builder
		for _, id := range ids {
			if id < 0 || int(id) >= tk.NVocab() {
				t.Fatalf("id %d out of range", id)
			}
			b.WriteString(st.Add(id))
		}
		b.WriteString(st.Flush())
		if !utf8.ValidString(b.String()) {
			t.Fatalf("stream gave invalid UTF-8 for %q", s)
		}
		if utf8.ValidString(s) {
			if got := tk.Decode(ids, true); got != s {
				t.Fatalf("round trip %q -> %v -> %q", s, ids, got)
			}
			if b.String() != s {
				t.Fatalf("stream %q, want %q", b.String(), s)
			}
		}
	})
}

// TestStreamMatchesPythonReplace: the stream's output equals Python's
// bytes.decode("utf-8", "replace") (vectors produced with CPython 3), fed
// one byte token at a time.
func TestStreamMatchesPythonReplace(t *testing.T) {
	tk := qwen3(t)
	for _, c := range []struct{ in, want string }{
		{"\xe0\x80\xaf", "\uFFFD\uFFFD\uFFFD"},
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xf0\x80\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xf0\x9f\x98", "\uFFFD"},
		{"\xc0\xaf", "\uFFFD\uFFFD"},
		{"a\xe2\x82\xacb", "a€b"},
		{"\xe2\x82\xe2\x82\xac", "\uFFFD€"},
		{"\xf1\x80\x80", "\uFFFD"},
		{"\xff\xfe", "\uFFFD\uFFFD"},
		{"\xf0\x9f\x98\x80\x80", "😀\uFFFD"},
	} {
		st := tk.NewStream(true)
		var b strings.Builder
		for i := 0; i < len(c.in); i++ {
			id, ok := tk.ID(byteToUnicode[c.in[i]])
			if !ok {
				t.Fatalf("no byte token %#x", c.in[i])
			}
			b.WriteString(st.Add(id))
		}
		b.WriteString(st.Flush())
		if b.String() != c.want {
			t.Errorf("%x: %q, want %q", c.in, b.String(), c.want)
		}
	}
}

// TestGemma4SyntheticVocab: the gemma4 tokenizer model (SPM-style BPE on
// raw UTF-8, llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4) gives llama.cpp's ids
// on a synthetic vocabulary (testdata/gemma4-vocab/README.md): spaces
// escaped to U+2581, runs of newlines, forced BOS, <0xXX> byte fallback for
// a merged symbol that is not a token and for characters without a token,
// special tokens. The pieces of the ids give the text back.
func TestGemma4SyntheticVocab(t *testing.T) {
	f, err := gguf.Open("../testdata/gemma4-vocab/vocab.gguf")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Pre() != "gemma4" || !tk.AddBOS() || tk.BOS() != 2 {
		t.Errorf("pre %q add_bos %v bos %d", tk.Pre(), tk.AddBOS(), tk.BOS())
	}
	for _, name := range []string{"<eos>", "<turn|>"} {
		if id, _ := tk.ID(name); !tk.IsEOG(id) {
			t.Errorf("%s is not end-of-generation", name)
		}
	}
	raw, err := os.ReadFile("../testdata/gemma4-vocab/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Text         string  `json:"text"`
			AddSpecial   bool    `json:"add_special"`
			ParseSpecial bool    `json:"parse_special"`
			IDs          []int32 `json:"token_ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) < 10 {
		t.Fatalf("%d cases", len(file.Cases))
	}
	for _, c := range file.Cases {
		got := tk.Encode(c.Text, c.AddSpecial, c.ParseSpecial)
		if !slices.Equal(got, c.IDs) {
			t.Errorf("%q\n got %v\nwant %v", c.Text, got, c.IDs)
		}
		if back := tk.Decode(c.IDs[1:], true); back != c.Text {
			t.Errorf("%q: pieces give %q", c.Text, back)
		}
	}
}

// TestGemma4Chat renders what Gemma 4's Jinja template
// (google-gemma-4-31B-it.jinja in llama.cpp's models/templates) gives for
// text turns, without its leading bos_token (BOS is added by tokenization).
func TestGemma4Chat(t *testing.T) {
	tk, err := New(Config{Model: "gemma4", Tokens: []string{"<bos>", "<turn|>", "a"}, Types: []int32{3, 3, 1},
		BOS: 0, EOS: None, EOT: None, EOM: None, PAD: None,
		ChatTemplate: "{{- bos_token -}}{{ '<|turn>' + role + '\\n' }}{{ '<turn|>\\n' }}"})
	if err != nil {
		t.Fatal(err)
	}
	if tk.ChatFormat() != "gemma4" {
		t.Fatalf("format %q", tk.ChatFormat())
	}
	if id, ok := tk.EndOfTurn(); !ok || id != 1 {
		t.Errorf("end of turn %d %v", id, ok)
	}
	got, err := tk.Chat([]Message{
		{Role: "system", Content: " Be brief. "},
		{Role: "user", Content: "Hi there\n"},
		{Role: "assistant", Content: "<|channel>thought\nhmm<channel|>Hello!"},
		{Role: "assistant", Content: "More."},
		{Role: "user", Content: "Weather?"},
	}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|turn>system\nBe brief.<turn|>\n" +
		"<|turn>user\nHi there<turn|>\n" +
		"<|turn>model\nHello!<turn|>\n" +
		"More.<turn|>\n" + // a second assistant turn continues the first
		"<|turn>user\nWeather?<turn|>\n" +
		"<|turn>model\n<|channel>thought\n<channel|>"
	if got != want {
		t.Errorf("chat\n got %q\nwant %q", got, want)
	}
	delta, err := tk.ChatDelta(context.Background(), []Message{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}}, Message{Role: "user", Content: "c"}, true, false)
	if err != nil || delta != "\n<|turn>user\nc<turn|>\n<|turn>model\n<|channel>thought\n<channel|>" {
		t.Errorf("delta %q, %v", delta, err)
	}
}

package tokenizer

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
)

const goldenDir = "../testdata/golden"

var (
	loadMu sync.Mutex
	loaded = map[string]*Tokenizer{}
)

// load opens a GGUF and builds its tokenizer once per test binary.
func load(tb testing.TB, path string) *Tokenizer {
	tb.Helper()
	loadMu.Lock()
	defer loadMu.Unlock()
	if t, ok := loaded[path]; ok {
		return t
	}
	t := fromFile(tb, path)
	loaded[path] = t
	return t
}

// fromFile loads the tokenizer of the GGUF at path (a new one each call).
func fromFile(tb testing.TB, path string) *Tokenizer {
	tb.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	cfg, err := FromGGUF(f)
	if err != nil {
		tb.Fatalf("config %s: %v", path, err)
	}
	t, err := New(cfg)
	if err != nil {
		tb.Fatalf("New %s: %v", path, err)
	}
	return t
}

func qwen3(tb testing.TB) *Tokenizer  { return load(tb, "testdata/qwen3-vocab.gguf") }
func gptoss(tb testing.TB) *Tokenizer { return load(tb, "testdata/gptoss-vocab.gguf") }

// TestVocabInpOut runs the test-tokenizer-0 files (.inp/.out): add_special
// false, parse_special false, llama.cpp's ids.
func TestVocabInpOut(t *testing.T) {
	for _, name := range []string{"qwen3", "gptoss"} {
		t.Run(name, func(t *testing.T) {
			tk := load(t, "testdata/"+name+"-vocab.gguf")
			inp, err := os.ReadFile("testdata/" + name + "-vocab.gguf.inp")
			if err != nil {
				t.Fatal(err)
			}
			out, err := os.ReadFile("testdata/" + name + "-vocab.gguf.out")
			if err != nil {
				t.Fatal(err)
			}
			texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
			texts = texts[:len(texts)-1] // the separator follows the last string too
			lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(texts) != len(lines) || len(texts) != 91 {
				t.Fatalf("%d inputs, %d outputs, want 91", len(texts), len(lines))
			}
			for i, text := range texts {
				var want []int32
				for _, f := range strings.Fields(lines[i]) {
					v, err := strconv.Atoi(f)
					if err != nil {
						t.Fatalf("line %d: %v", i, err)
					}
					want = append(want, int32(v))
				}
				got := tk.Encode(text, false, false)
				if !slices.Equal(got, want) {
					t.Errorf("inp %d %q:\n got %v\nwant %v", i, text, got, want)
				}
				if dec := tk.Decode(got, true); dec != text {
					t.Errorf("inp %d: decode %q, want %q", i, dec, text)
				}
			}
		})
	}
}

type vocabCase struct {
	Vocab        string  `json:"vocab"`
	Text         string  `json:"text"`
	ParseSpecial bool    `json:"parse_special"`
	IDs          []int32 `json:"ids"`
	Decoded      string  `json:"decoded_text"`
}

// TestVocabCases runs every case of tokenizer-cases.json (both vocabs, with
// and without special-token parsing) and checks the ids and the decoded text.
func TestVocabCases(t *testing.T) {
	raw, err := os.ReadFile("testdata/tokenizer-cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []vocabCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) != 206 {
		t.Fatalf("%d cases, want 206", len(cases))
	}
	for i, c := range cases {
		tk := load(t, "testdata/"+c.Vocab+"-vocab.gguf")
		got := tk.Encode(c.Text, true, c.ParseSpecial)
		if !slices.Equal(got, c.IDs) {
			t.Errorf("case %d (%s, parse_special=%v) %q:\n got %v\nwant %v", i, c.Vocab, c.ParseSpecial, c.Text, got, c.IDs)
			continue
		}
		if dec := tk.Decode(c.IDs, true); dec != c.Decoded {
			t.Errorf("case %d: decoded %q, want %q", i, dec, c.Decoded)
		}
	}
}

// TestDisagreementsFollowLlamaCpp checks that where llama.cpp and the HF
// tokenizer disagree, we give llama.cpp's ids (and not HF's).
func TestDisagreementsFollowLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile("testdata/tokenizer-disagreements.json")
	if err != nil {
		t.Fatal(err)
	}
	var ds []struct {
		Vocab        string  `json:"vocab"`
		Text         string  `json:"text"`
		ParseSpecial bool    `json:"parse_special"`
		Llama        []int32 `json:"llama_cpp_ids"`
		HF           []int32 `json:"transformers_js_ids"`
	}
	if err := json.Unmarshal(raw, &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds) != 11 {
		t.Fatalf("%d disagreements, want 11", len(ds))
	}
	for i, d := range ds {
		tk := load(t, "testdata/"+d.Vocab+"-vocab.gguf")
		got := tk.Encode(d.Text, false, d.ParseSpecial)
		if !slices.Equal(got, d.Llama) {
			t.Errorf("disagreement %d %q: got %v, want llama.cpp %v (HF %v)", i, d.Text, got, d.Llama, d.HF)
		}
	}
}

type tinyCases struct {
	ModelFile string `json:"model_file"`
	Cases     []struct {
		Text         string  `json:"text"`
		Hex          string  `json:"text_utf8_hex"`
		ParseSpecial bool    `json:"parse_special"`
		AddSpecial   bool    `json:"add_special"`
		IDs          []int32 `json:"token_ids"`
	} `json:"cases"`
}

// tinyModel maps a golden model_file to a model present in the repo (the
// gpt-oss F32 file is not copied; every tiny gpt-oss variant has the same
// vocabulary).
func tinyModel(modelFile string) string {
	p := filepath.Join(goldenDir, modelFile)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return filepath.Join(goldenDir, strings.Replace(modelFile, "-F32.gguf", "-Q8_0.gguf", 1))
}

// TestTinyVocabs runs testdata/golden/tokenizer/tiny-*-vocab.json against the
// tiny golden models' own vocabularies.
func TestTinyVocabs(t *testing.T) {
	for _, name := range []string{"tiny-qwen3moe", "tiny-gptoss"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(goldenDir, "tokenizer", name+"-vocab.json"))
			if err != nil {
				t.Fatal(err)
			}
			var tc tinyCases
			if err := json.Unmarshal(raw, &tc); err != nil {
				t.Fatal(err)
			}
			if len(tc.Cases) == 0 {
				t.Fatal("no cases")
			}
			tk := load(t, tinyModel(tc.ModelFile))
			for i, c := range tc.Cases {
				b, err := hex.DecodeString(c.Hex)
				if err != nil {
					t.Fatal(err)
				}
				got := tk.Encode(string(b), c.AddSpecial, c.ParseSpecial)
				ids := c.IDs
				if ids == nil {
					ids = []int32{}
				}
				if got == nil {
					got = []int32{}
				}
				if !slices.Equal(got, ids) {
					t.Errorf("case %d %q (parse_special=%v):\n got %v\nwant %v", i, c.Text, c.ParseSpecial, got, ids)
				}
			}
		})
	}
}

type goldenRun struct {
	ModelFile    string  `json:"model_file"`
	PromptFile   string  `json:"prompt_file"`
	Chat         bool    `json:"chat"`
	UserText     string  `json:"user_text"`
	PromptText   string  `json:"prompt_text"`
	PromptTokens []int32 `json:"prompt_tokens"`
	Tokenize     struct {
		AddSpecial   bool `json:"add_special"`
		ParseSpecial bool `json:"parse_special"`
	} `json:"tokenize"`
	PromptPieces    []string `json:"prompt_pieces_hex"`
	GeneratedTokens []int32  `json:"generated_tokens"`
	GeneratedPieces []string `json:"generated_pieces_hex"`
	GeneratedText   string   `json:"generated_text"`
	GeneratedIsEOG  []bool   `json:"generated_is_eog"`
}

func readRun(t *testing.T, path string) goldenRun {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r goldenRun
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r
}

// TestGoldenPrompts tokenizes every prompt file (through Chat for the chat
// prompt) and compares with the prompt tokens of every golden ref run; it
// also checks token pieces and streamed text of the generated tokens.
func TestGoldenPrompts(t *testing.T) {
	runs, err := filepath.Glob(filepath.Join(goldenDir, "runs", "*", "*__ref.json"))
	if err != nil || len(runs) == 0 {
		t.Fatalf("no golden runs: %v", err)
	}
	for _, path := range runs {
		r := readRun(t, path)
		tk := load(t, tinyModel(r.ModelFile))
		raw := []byte(r.UserText) // the gemma4 runs name no prompt_file
		if r.PromptFile != "" {
			if raw, err = os.ReadFile(filepath.Join(goldenDir, r.PromptFile)); err != nil {
				t.Fatal(err)
			}
		}
		text := string(raw)
		if r.Chat {
			text, err = tk.Chat([]Message{{Role: "user", Content: string(raw)}}, true, false)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if text != r.PromptText {
				t.Errorf("%s: chat text %q, want %q", path, text, r.PromptText)
			}
		}
		got := tk.Encode(text, r.Tokenize.AddSpecial, r.Tokenize.ParseSpecial)
		if !slices.Equal(got, r.PromptTokens) {
			t.Errorf("%s: prompt tokens\n got %v\nwant %v", path, got, r.PromptTokens)
		}
		for i, id := range r.PromptTokens {
			if p := hex.EncodeToString(tk.Piece(nil, id, true)); p != r.PromptPieces[i] {
				t.Errorf("%s: prompt piece of %d = %s, want %s", path, id, p, r.PromptPieces[i])
			}
		}
		st := tk.NewStream(true)
		var streamed strings.Builder
		for i, id := range r.GeneratedTokens {
			piece := tk.Piece(nil, id, true)
			if hex.EncodeToString(piece) != r.GeneratedPieces[i] {
				t.Errorf("%s: piece of %d = %x, want %s", path, id, piece, r.GeneratedPieces[i])
			}
			if tk.IsEOG(id) != r.GeneratedIsEOG[i] {
				t.Errorf("%s: IsEOG(%d) = %v", path, id, tk.IsEOG(id))
			}
			streamed.WriteString(st.Add(id))
		}
		streamed.WriteString(st.Flush())
		if streamed.String() != r.GeneratedText {
			t.Errorf("%s: streamed %q, want %q", path, streamed.String(), r.GeneratedText)
		}
	}
}

func TestEOG(t *testing.T) {
	cases := []struct {
		tk   *Tokenizer
		want []int32
		eot  int32
	}{
		// From llama.cpp's load logs (README of the vocab and golden data).
		{qwen3(t), []int32{128247, 151643, 151645, 151662, 151663, 151664}, 151645},
		{gptoss(t), []int32{199999, 200002, 200012}, -2},
		{load(t, tinyModel("models/tiny-qwen3moe-F32.gguf")), []int32{479, 481}, -2},
		{load(t, tinyModel("models/tiny-gptoss-F32.gguf")), []int32{479, 481, 484, 486}, 481},
	}
	for i, c := range cases {
		if got := c.tk.EOGs(); !slices.Equal(got, c.want) {
			t.Errorf("case %d: EOG %v, want %v", i, got, c.want)
		}
		for _, id := range c.want {
			if !c.tk.IsEOG(id) {
				t.Errorf("case %d: IsEOG(%d) false", i, id)
			}
		}
		if c.tk.IsEOG(0) || c.tk.IsEOG(-1) || c.tk.IsEOG(1<<30) {
			t.Errorf("case %d: IsEOG true for a non-EOG id", i)
		}
		if c.eot != -2 && c.tk.EOT() != c.eot {
			t.Errorf("case %d: EOT %d, want %d", i, c.tk.EOT(), c.eot)
		}
	}
}

func loadConfig(tb testing.TB, path string) Config {
	tb.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := FromGGUF(f)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

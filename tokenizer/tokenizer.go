package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pipe-engine/pipe/internal/jinja"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrUnsupported: the tokenizer model or pre-tokenizer type is not implemented.
	ErrUnsupported = errors.New("tokenizer: unsupported")
	// ErrInvalid: the vocabulary metadata is inconsistent (duplicate tokens,
	// array lengths that disagree, ids out of range, malformed merges).
	ErrInvalid = errors.New("tokenizer: invalid vocabulary")
	// ErrUnsupportedTemplate: the chat template is not one of the built-in known ones.
	ErrUnsupportedTemplate = errors.New("tokenizer: unsupported chat template")
)

// TokenType is the GGUF tokenizer.ggml.token_type value (llama_token_type).
type TokenType int32

// Token types as GGUF stores them.
const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

// attr is llama.cpp's llama_token_attr bit set, derived from the token type and
// then adjusted at load time.
type attr uint16

const (
	attrUndefined   attr = 0
	attrUnknown     attr = 1 << 0
	attrUnused      attr = 1 << 1
	attrNormal      attr = 1 << 2
	attrControl     attr = 1 << 3
	attrUserDefined attr = 1 << 4
	attrByte        attr = 1 << 5
)

// None is the id value meaning "no such token" (LLAMA_TOKEN_NULL).
const None int32 = -1

// Config is everything the tokenizer needs, as plain values taken from the
// GGUF metadata (see FromMetadata for the key names).
type Config struct {
	Model  string   // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "gemma4"
	Pre    string   // tokenizer.ggml.pre; "qwen2", "gpt-4o", "gemma4" and aliases
	Tokens []string // tokenizer.ggml.tokens
	Merges []string // tokenizer.ggml.merges, "left right", rank = index
	Types  []int32  // tokenizer.ggml.token_type; nil means all NORMAL

	// Special token ids; None (-1) when absent.
	BOS, EOS, EOT, EOM, PAD int32

	AddBOS bool // tokenizer.ggml.add_bos_token
	AddEOS bool // tokenizer.ggml.add_eos_token

	ChatTemplate string // tokenizer.chat_template (may be empty)
}

type preType int

const (
	preQwen2 preType = iota
	preGPT4o
	// preGemma4 is llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4: SPM-style BPE on
	// raw UTF-8 (spaces escaped to U+2581, words are runs of newlines and of
	// everything else, byte fallback through <0xXX> tokens).
	preGemma4
)

// Tokenizer is a loaded BPE vocabulary, made of one type per job: vocab
// (the tokens, their attributes and pieces, decoding; with specials, the
// special ids and the end-of-generation set), encoder (the pre-tokenizer
// and BPE or SPM-style merges; encode.go) and the chat rendering, whose
// methods are the Tokenizer's own (chat.go, jinja.go). Their methods are
// the Tokenizer's through embedding. It is immutable and safe for
// concurrent use.
type Tokenizer struct {
	vocab
	encoder

	chatTemplate string
	chatFormat   chatFormat
	jinja        *jinjaTemplate // UseJinja's template, rendering in place of the built-in format
	jinjaLimits  jinja.Limits   // SetTemplateLimits': the limits of UseJinja's renders
	llamaName    string         // UseBuiltin's llama.cpp template name, rendering in place of the built-in format
}

// vocab is the tokens: their text and attributes, their pieces and the
// special tokens (specials).
type vocab struct {
	text    []string // token text (byte-level encoded form for NORMAL tokens)
	attrs   []attr
	toID    map[string]int32
	special []int32 // CONTROL|USER_DEFINED|UNKNOWN ids, longest text first
	// token_to_piece(special=true) of every token: arena[pieceOff[i]:pieceOff[i+1]]
	arena    []byte
	pieceOff []uint32

	specials

	maxText int // the longest token text in bytes (MaxTokenBytes)
}

// specials is the special tokens' ids (None when absent), whether encoding
// adds BOS and EOS, and the end-of-generation set.
type specials struct {
	bos, eos, eot, eom, pad int32
	addBOS, addEOS          bool
	eog                     map[int32]struct{}
	eogList                 []int32
}

// encoder turns text into token ids of its vocab: the pre-tokenizer splits
// it into words, BPE merges each word (encode.go).
type encoder struct {
	*vocab
	pre     preType
	preName string

	// merges maps a merge line "left right" (byte-level text) to its rank.
	merges map[string]int32
	// byteTok[b] is the token id whose text is the single raw byte b (or -1),
	// llama.cpp's fallback for merged symbols that are not tokens.
	byteTok [256]int32
}

// New builds a tokenizer from cfg, applying llama.cpp's load-time fix-ups of
// token attributes and its end-of-generation set.
func New(cfg Config) (*Tokenizer, error) {
	if cfg.Model != "gpt2" && cfg.Model != "gemma4" {
		return nil, fmt.Errorf("tokenizer.ggml.model %q: %w (supported: \"gpt2\" byte-level BPE, \"gemma4\")", cfg.Model, ErrUnsupported)
	}
	t := &Tokenizer{}
	t.encoder = encoder{vocab: &t.vocab, preName: cfg.Pre}
	if cfg.Model == "gemma4" { // llama.cpp ignores the file's pre-tokenizer name for it
		t.preName = "gemma4"
	}
	if err := t.choosePre(cfg.Pre); err != nil {
		return nil, err
	}
	if err := t.readTokens(cfg); err != nil {
		return nil, err
	}
	if err := t.readSpecialIDs(cfg); err != nil {
		return nil, err
	}
	t.buildMerges(cfg.Merges)
	t.fixupSpecial()
	t.buildSpecialCache()
	t.buildPieces()
	t.chatTemplate = cfg.ChatTemplate
	t.chatFormat = detectChatFormat(cfg.ChatTemplate)
	if t.chatFormat == chatNone && cfg.ChatTemplate != "" {
		// as llama.cpp without --jinja: one of its built-in templates,
		// detected from the GGUF's (DetectLlamaTemplate)
		t.llamaName = DetectLlamaTemplate(cfg.ChatTemplate)
	}
	return t, nil
}

// choosePre picks the pre-tokenizer of t.preName; pre is the file's name
// for the error.
func (t *Tokenizer) choosePre(pre string) error {
	switch t.preName {
	case "gemma4", "granite-embed-multi-311m":
		t.pre = preGemma4
	case "qwen2", "deepseek-r1-qwen":
		t.pre = preQwen2
	case "gpt-4o", "llama4":
		t.pre = preGPT4o
	default:
		return fmt.Errorf("tokenizer.ggml.pre %q: %w (supported: qwen2, gpt-4o, gemma4)", pre, ErrUnsupported)
	}
	return nil
}

// readTokens reads the vocabulary's texts and types into t, refusing an
// empty vocabulary, missing types and duplicate texts.
func (t *Tokenizer) readTokens(cfg Config) error {
	n := len(cfg.Tokens)
	if n == 0 {
		return fmt.Errorf("tokenizer.ggml.tokens is empty: %w", ErrInvalid)
	}
	if cfg.Types != nil && len(cfg.Types) < n {
		return fmt.Errorf("tokenizer.ggml.token_type has %d entries for %d tokens: %w", len(cfg.Types), n, ErrInvalid)
	}
	t.text = make([]string, n)
	t.attrs = make([]attr, n)
	t.toID = make(map[string]int32, n)
	for i, w := range cfg.Tokens {
		if w == "" {
			w = fmt.Sprintf("[EMPTY_%d]", i)
		}
		t.toID[w] = int32(i)
		if len(t.toID) != i+1 {
			prev := slices.Index(cfg.Tokens, cfg.Tokens[i])
			return fmt.Errorf("duplicate token %q at ids %d and %d: %w", w, prev, i, ErrInvalid)
		}
		t.text[i] = w
		t.maxText = max(t.maxText, len(w))
		t.attrs[i] = attrNormal
		if cfg.Types != nil {
			t.attrs[i] = typeAttr(TokenType(cfg.Types[i]))
		}
	}
	return nil
}

// typeAttr is the attribute of a token of file type ty.
func typeAttr(ty TokenType) attr {
	switch ty {
	case TypeUnknown:
		return attrUnknown
	case TypeUnused:
		return attrUnused
	case TypeNormal:
		return attrNormal
	case TypeControl:
		return attrControl
	case TypeUserDefined:
		return attrUserDefined
	case TypeByte:
		return attrByte
	}
	return attrUndefined
}

// readSpecialIDs sets the special token ids and the add-BOS/EOS flags: an
// out-of-range BOS or EOS is refused, the others are ignored as llama.cpp
// does, and a flag whose token is not set is refused.
func (t *Tokenizer) readSpecialIDs(cfg Config) error {
	n := len(cfg.Tokens)
	for _, p := range []struct {
		key    string
		id     int32
		dst    *int32
		strict bool
	}{{KeyBOS, cfg.BOS, &t.bos, true}, {KeyEOS, cfg.EOS, &t.eos, true}, {KeyEOT, cfg.EOT, &t.eot, false}, {KeyEOM, cfg.EOM, &t.eom, false}, {KeyPAD, cfg.PAD, &t.pad, false}} {
		if p.id < None || p.id >= int32(n) {
			if p.strict {
				// llama.cpp warns and ignores it; then generation can
				// never stop at EOS (issue 35): refused.
				return fmt.Errorf("%s %d is outside the vocabulary (0..%d): %w", p.key, p.id, n-1, ErrInvalid)
			}
			*p.dst = None // llama.cpp warns and ignores an out-of-range id
			continue
		}
		*p.dst = p.id
	}
	t.addBOS, t.addEOS = cfg.AddBOS, cfg.AddEOS
	if t.pre == preGemma4 {
		t.addBOS = true // llama.cpp overrides add_bos_token to true for Gemma4
	}
	if t.addBOS && t.bos == None {
		return fmt.Errorf("tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is not set: %w", ErrInvalid)
	}
	if t.addEOS && t.eos == None {
		return fmt.Errorf("tokenizer.ggml.add_eos_token is true but tokenizer.ggml.eos_token_id is not set: %w", ErrInvalid)
	}
	return nil
}

// MaxTokenBytes is the length in bytes of the longest token text. No token
// covers more bytes of the text it encodes (byte-level and U+2581 spellings
// are at least as long as the bytes they stand for), so a text of n bytes
// has at least n / MaxTokenBytes tokens: enough to refuse a text that cannot
// fit a context before tokenizing it.
func (t *vocab) MaxTokenBytes() int { return t.maxText }

// buildMerges indexes the merge lines by their text: the BPE loop looks up
// "left right" directly, so loading costs one map insert per merge.
func (t *encoder) buildMerges(merges []string) {
	t.merges = make(map[string]int32, len(merges))
	// Backwards, so that for a repeated merge the first rank is the one
	// left (std::map::emplace keeps the first).
	for i := len(merges) - 1; i >= 0; i-- {
		m := merges[i]
		// llama.cpp splits at the first space at position >= 1 and keys
		// the pair (left, right); an empty half can never match a symbol.
		if len(m) < 3 {
			continue
		}
		j := strings.IndexByte(m[1:], ' ')
		if j < 0 || j+2 == len(m) {
			continue
		}
		t.merges[m] = int32(i)
	}
	for b := 0; b < 256; b++ {
		name := string([]byte{byte(b)})
		if t.pre == preGemma4 { // raw UTF-8 BPE falls back to <0xXX> tokens
			name = fmt.Sprintf("<0x%02X>", b)
		}
		if id, ok := t.toID[name]; ok {
			t.byteTok[b] = id
		} else {
			t.byteTok[b] = -1
		}
	}
}

var (
	eotNames = []string{"<|eot_id|>", "<|end|>", "<|im_end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	fimPreNames = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}
	fimSufNames = []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}
	fimMidNames = []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}
	fimPadNames = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}
	fimRepNames = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepNames = []string{"<|file_sep|>"}
	eogNames    = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["}
	alwaysRenderNames = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
)

// findByNames returns the id of the first name in names present in the vocab.
// llama.cpp scans an unordered_map, so when several names are present the
// choice is unspecified there; the name order here is a fixed priority.
func (t *vocab) findByNames(names []string) int32 {
	for _, n := range names {
		if id, ok := t.toID[n]; ok {
			return id
		}
	}
	return None
}

func (t *vocab) forceControl(id int32) {
	if id != None {
		t.attrs[id] |= attrControl
	}
}

// fixupSpecial reproduces llama_vocab::impl::load's text-based special-token
// detection and the end-of-generation set.
func (t *vocab) fixupSpecial() {
	if t.eot == None {
		t.eot = t.findByNames(eotNames)
		t.forceControl(t.eot)
	}
	if t.eom == None {
		t.eom = t.findByNames([]string{"<|eom_id|>"})
		t.forceControl(t.eom)
	}
	for _, names := range [][]string{fimPreNames, fimSufNames, fimMidNames} {
		t.forceControl(t.findByNames(names))
	}
	fimPad, fimRep, fimSep := t.findByNames(fimPadNames), t.findByNames(fimRepNames), t.findByNames(fimSepNames)
	t.eog = make(map[int32]struct{})
	for _, id := range []int32{fimPad, fimRep, fimSep} {
		if id != None {
			t.forceControl(id)
			t.eog[id] = struct{}{}
		}
	}
	for _, n := range eogNames {
		if id, ok := t.toID[n]; ok {
			t.eog[id] = struct{}{}
			t.forceControl(id)
		}
	}
	for _, n := range alwaysRenderNames {
		if id, ok := t.toID[n]; ok {
			t.attrs[id] = attrUserDefined
		}
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id != None {
			t.eog[id] = struct{}{}
		}
	}
	// o200k_harmony / solar-open: <|end|> is not end-of-generation when the
	// EOG set also has <|return|> and <|call|> (or <|calls|> and <|flush|>).
	var hasReturn, hasCall, hasFlush, hasEnd bool
	endID, sID := None, None
	var hasToolResponse bool
	for id := range t.eog {
		switch t.text[id] {
		case "<|return|>":
			hasReturn = true
		case "<|call|>", "<|calls|>":
			hasCall = true
		case "<|flush|>":
			hasFlush = true
		case "<|end|>":
			hasEnd, endID = true, id
		case "<|tool_response>":
			hasToolResponse = true
		case "</s>":
			sID = id
		}
	}
	if (hasReturn && hasCall && hasEnd) || (hasCall && hasFlush && hasEnd) {
		delete(t.eog, endID)
		t.attrs[endID] = attrUserDefined
	}
	if hasToolResponse && sID != None {
		delete(t.eog, sID)
		t.attrs[sID] = attrNormal
	}
	for id := range t.eog {
		t.eogList = append(t.eogList, id)
	}
	sort.Slice(t.eogList, func(i, j int) bool { return t.eogList[i] < t.eogList[j] })
}

func (t *vocab) buildSpecialCache() {
	for id, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special = append(t.special, int32(id))
		}
	}
	sort.SliceStable(t.special, func(i, j int) bool {
		return len(t.text[t.special[i]]) > len(t.text[t.special[j]])
	})
}

func (t *encoder) buildPieces() {
	t.pieceOff = make([]uint32, len(t.text)+1)
	t.arena = make([]byte, 0, len(t.text)*6)
	for id := range t.text {
		t.arena = t.appendPiece(t.arena, int32(id))
		t.pieceOff[id+1] = uint32(len(t.arena))
	}
}

// appendPiece is llama.cpp's token_to_piece for BPE vocabularies with special=true.
func (t *encoder) appendPiece(dst []byte, id int32) []byte {
	a := t.attrs[id]
	txt := t.text[id]
	switch {
	case a&(attrUnknown|attrControl|attrUserDefined) != 0:
		return append(dst, txt...)
	case a&attrNormal != 0:
		if t.pre == preGemma4 { // SPM-style: U+2581 stands for a space
			return append(dst, strings.ReplaceAll(txt, spaceEscape, " ")...)
		}
		return decodeByteLevel(dst, txt)
	case a&attrByte != 0:
		// "<0xXX>" byte tokens
		if len(txt) == 6 && strings.HasPrefix(txt, "<0x") {
			var v byte
			for _, c := range txt[3:5] {
				v <<= 4
				switch {
				case c >= '0' && c <= '9':
					v |= byte(c - '0')
				case c >= 'a' && c <= 'f':
					v |= byte(c-'a') + 10
				case c >= 'A' && c <= 'F':
					v |= byte(c-'A') + 10
				}
			}
			return append(dst, v)
		}
		return dst
	}
	return dst
}

// NVocab is the number of tokens.
func (t *vocab) NVocab() int { return len(t.text) }

// Pre is the pre-tokenizer name the tokenizer was built with.
func (t *encoder) Pre() string { return t.preName }

// BOS, EOS, EOT, EOM and PAD return the special ids, or None.
func (t *specials) BOS() int32 { return t.bos }

// EOS returns the end-of-sequence id, or None.
func (t *specials) EOS() int32 { return t.eos }

// EOT returns the end-of-turn id (from metadata, or detected by name), or None.
func (t *specials) EOT() int32 { return t.eot }

// EOM returns the end-of-message id, or None.
func (t *specials) EOM() int32 { return t.eom }

// PAD returns the padding id, or None.
func (t *specials) PAD() int32 { return t.pad }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *specials) AddBOS() bool { return t.addBOS }

// IsEOG reports whether id ends generation (llama_vocab_is_eog).
func (t *specials) IsEOG(id int32) bool {
	_, ok := t.eog[id]
	return ok
}

// EOGs returns the end-of-generation ids in ascending order.
func (t *specials) EOGs() []int32 { return append([]int32(nil), t.eogList...) }

// TokenText returns the raw vocabulary text of id ("" when out of range).
func (t *vocab) TokenText(id int32) string {
	if id < 0 || int(id) >= len(t.text) {
		return ""
	}
	return t.text[id]
}

// ID returns the id of the token with exactly this vocabulary text.
func (t *vocab) ID(text string) (int32, bool) {
	id, ok := t.toID[text]
	return id, ok
}

// IsControl reports whether id has the CONTROL attribute after load fix-ups
// (such tokens print as nothing when special is false).
func (t *vocab) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.attrs) && t.attrs[id]&attrControl != 0
}

// Piece appends the bytes of token id to dst, as llama.cpp's token_to_piece:
// NORMAL tokens are mapped back through the GPT-2 byte table; CONTROL and
// UNKNOWN tokens give their text only when special is true; USER_DEFINED
// tokens always give their text; UNUSED tokens give nothing. Out-of-range ids
// give nothing.
func (t *vocab) Piece(dst []byte, id int32, special bool) []byte {
	if id < 0 || int(id) >= len(t.text) {
		return dst
	}
	if !special && t.attrs[id]&(attrUnknown|attrControl) != 0 {
		return dst
	}
	return append(dst, t.arena[t.pieceOff[id]:t.pieceOff[id+1]]...)
}

// Decode concatenates the pieces of ids (llama.cpp's token_to_piece, without
// llama_detokenize's clean_spaces, which is off for qwen2 and gpt-4o but on
// for gemma4). The result may hold invalid UTF-8 if ids end in the middle of
// a character.
func (t *vocab) Decode(ids []int32, special bool) string {
	var b []byte
	for _, id := range ids {
		b = t.Piece(b, id, special)
	}
	return string(b)
}

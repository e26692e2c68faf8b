package tokenizer

import (
	"fmt"
	"github.com/pipe-engine/pipe/gguf"
	"math"
)

// GGUF metadata keys read by FromMetadata.
const (
	KeyModel        = "tokenizer.ggml.model"
	KeyPre          = "tokenizer.ggml.pre"
	KeyTokens       = "tokenizer.ggml.tokens"
	KeyMerges       = "tokenizer.ggml.merges"
	KeyTokenType    = "tokenizer.ggml.token_type"
	KeyBOS          = "tokenizer.ggml.bos_token_id"
	KeyEOS          = "tokenizer.ggml.eos_token_id"
	KeyEOT          = "tokenizer.ggml.eot_token_id"
	KeyEOM          = "tokenizer.ggml.eom_token_id"
	KeyPAD          = "tokenizer.ggml.padding_token_id"
	KeyAddBOS       = "tokenizer.ggml.add_bos_token"
	KeyAddEOS       = "tokenizer.ggml.add_eos_token"
	KeyChatTemplate = "tokenizer.chat_template"
)

// FromMetadata builds a Config from GGUF metadata through get, which returns
// the decoded value of a key and whether it exists. Accepted value types:
// string; []string; []int32 (or any integer slice) for token_type; any Go
// integer type for ids; bool. Missing ids get llama.cpp's defaults for BPE
// vocabularies (bos = eos = 11 when that id exists, others none).
func FromMetadata(get func(key string) (any, bool)) (Config, error) {
	cfg := Config{BOS: None, EOS: None, EOT: None, EOM: None, PAD: None}
	var err error
	str := func(key string, required bool) string {
		v, ok := get(key)
		if !ok {
			if required && err == nil {
				err = fmt.Errorf("metadata key %s is missing: %w", key, ErrInvalid)
			}
			return ""
		}
		s, ok := v.(string)
		if !ok && err == nil {
			err = fmt.Errorf("metadata key %s has type %T, want string: %w", key, v, ErrInvalid)
		}
		return s
	}
	cfg.Model = str(KeyModel, true)
	cfg.Pre = str(KeyPre, false)
	cfg.ChatTemplate = str(KeyChatTemplate, false)
	strs := func(key string, required bool) []string {
		v, ok := get(key)
		if !ok {
			if required && err == nil {
				err = fmt.Errorf("metadata key %s is missing: %w", key, ErrInvalid)
			}
			return nil
		}
		s, ok := v.([]string)
		if !ok && err == nil {
			err = fmt.Errorf("metadata key %s has type %T, want []string: %w", key, v, ErrInvalid)
		}
		return s
	}
	cfg.Tokens = strs(KeyTokens, true)
	cfg.Merges = strs(KeyMerges, cfg.Model == "gpt2" || cfg.Model == "gemma4")
	if v, ok := get(KeyTokenType); ok {
		types, terr := toInt32s(v)
		if terr != nil && err == nil {
			err = fmt.Errorf("metadata key %s: %w", KeyTokenType, terr)
		}
		cfg.Types = types
	}
	if err != nil {
		return cfg, err
	}
	n := int64(len(cfg.Tokens))
	if cfg.Model == "gpt2" && n > 11 {
		cfg.BOS, cfg.EOS = 11, 11
	}
	for _, p := range []struct {
		key string
		dst *int32
	}{{KeyBOS, &cfg.BOS}, {KeyEOS, &cfg.EOS}, {KeyEOT, &cfg.EOT}, {KeyEOM, &cfg.EOM}, {KeyPAD, &cfg.PAD}} {
		v, ok := get(p.key)
		if !ok {
			continue
		}
		id, ok := toInt64(v)
		if !ok {
			return cfg, fmt.Errorf("metadata key %s has type %T, want an integer: %w", p.key, v, ErrInvalid)
		}
		switch {
		case id >= 0 && id < n:
			*p.dst = int32(id)
		case p.key == KeyBOS || p.key == KeyEOS:
			// llama.cpp keeps the default; then generation can never
			// stop at EOS (issue 35): refused.
			return cfg, fmt.Errorf("metadata key %s: id %d is outside the vocabulary (0..%d): %w", p.key, id, n-1, ErrInvalid)
		}
		// llama.cpp keeps the default for another out-of-range id.
	}
	for _, p := range []struct {
		key string
		dst *bool
	}{{KeyAddBOS, &cfg.AddBOS}, {KeyAddEOS, &cfg.AddEOS}} {
		v, ok := get(p.key)
		if !ok {
			continue
		}
		b, ok := v.(bool)
		if !ok {
			return cfg, fmt.Errorf("metadata key %s has type %T, want bool: %w", p.key, v, ErrInvalid)
		}
		*p.dst = b
	}
	return cfg, nil
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint:
		return int64(min(uint64(x), math.MaxInt64)), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(min(x, math.MaxInt64)), true
	}
	return 0, false
}

func toInt32s(v any) ([]int32, error) {
	switch x := v.(type) {
	case []int32:
		return x, nil
	case []any:
		out := make([]int32, len(x))
		for i, e := range x {
			n, ok := toInt64(e)
			if !ok {
				return nil, fmt.Errorf("element %d has type %T: %w", i, e, ErrInvalid)
			}
			out[i] = int32(n)
		}
		return out, nil
	case []int64:
		out := make([]int32, len(x))
		for i, e := range x {
			out[i] = int32(e)
		}
		return out, nil
	case []uint32:
		out := make([]int32, len(x))
		for i, e := range x {
			out[i] = int32(e)
		}
		return out, nil
	}
	return nil, fmt.Errorf("type %T, want []int32: %w", v, ErrInvalid)
}

// FromGGUF builds a Config from an opened GGUF file's metadata.
func FromGGUF(f *gguf.File) (Config, error) {
	cfg, err := FromMetadata(func(key string) (any, bool) {
		v, ok := f.Get(key)
		if !ok {
			return nil, false
		}
		return v.Any(), true
	})
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", f.Path, err)
	}
	return cfg, nil
}

package gen

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownPreset reports a --preset name gen does not define.
var ErrUnknownPreset = errors.New("unknown preset")

// ErrBadOptions reports options that cannot describe a model (zero layers, a
// vocabulary too small for the built-in tokenizer, …).
var ErrBadOptions = errors.New("bad generator options")

// Preset is the hyper-parameter set of one model shape. Field names follow
// llama.cpp's hparams; values come from the models' public configs.
type Preset struct {
	Name        string // the --preset name
	Arch        string // general.architecture
	ModelName   string // general.name
	Description string // what the shape is copied from

	NLayer      int
	NEmbd       int
	NHead       int
	NHeadKV     int // KV heads (of the sliding-window layers for gemma4)
	HeadDim     int // key/value length (of the sliding-window layers for gemma4)
	NExpert     int
	NExpertUsed int
	NFFExp      int // expert FFN width
	NFF         int // dense FFN width (feed_forward_length; olmoe's expert width)
	NFFShExp    int // shared expert width (expert_shared_feed_forward_length)
	NCtxTrain   int
	RopeBase    float32
	RMSEps      float32
	Vocab       int // vocabulary size (token_embd/output rows) with the built-in tokenizer

	DefaultQuant string // file type used when --quant is not given

	// CopyHead: layer 0 gets the previous-token copy head and the routers
	// read the routing dimensions (the qwen3moe presets: the token-to-token
	// expert reuse of the real Qwen3 traces, see weights.go).
	CopyHead bool
	// NoAnchors: the residual stream gets no anchor dimensions (gpt-oss:
	// its router bias carries the experts' popularity instead).
	NoAnchors bool

	// gpt-oss: sliding window on even layers, YaRN.
	SlidingWindow int
	YarnFactor    float32
	YarnOrigCtx   int

	// gemma4: every SWAPeriod-th layer (il % SWAPeriod == SWAPeriod-1) is full
	// attention with HeadDimFull/NHeadKVFull; KEqV full layers have no attn_v.
	// RopePartialFull is the full layers' partial_rotary_factor ("proportional"
	// RoPE: rope_freqs leaves the other pairs unrotated); 0 means 1.
	SWAPeriod       int
	NHeadKVFull     int
	HeadDimFull     int
	RopePartialFull float64
	RopeBaseSWA     float32
	FinalSoftcap    float32
	KEqV            bool
	// ScaledEmbed: the model multiplies its embeddings by √n_embd
	// (gemma4), so token_embd is written 1/√n_embd smaller.
	ScaledEmbed bool

	// deepseek2: latent attention (a KVLoraRank latent plus NRot rotated
	// dims cached per position; query heads of NoPE + NRot, value heads of
	// ValueLen; a QLoraRank query bottleneck when > 0), LeadingDense dense
	// layers of NFF, NShared shared experts, and the gating: GatingFunc (1
	// softmax, 2 sigmoid), WeightsNorm, WeightsScale, an exp_probs_b
	// selection bias (ProbsBias), ExpertGroups of which ExpertGroupsUsed
	// compete; YarnLogMul is rope.scaling.yarn_log_multiplier. NHeadKV is 1
	// and HeadDim KVLoraRank + NRot (the cached row).
	KVLoraRank, QLoraRank, NoPE, NRot, ValueLen int
	LeadingDense, NShared                       int
	GatingFunc                                  int
	WeightsNorm                                 bool
	WeightsScale                                float32
	ProbsBias                                   bool
	ExpertGroups, ExpertGroupsUsed              int
	YarnLogMul                                  float32

	// qwen35moe: the recurrent layers and the other hybrid shapes.
	Hybrid HybridGeom

	// Tokenizer, when set, is the real model's special tokens and chat
	// template (a real-shape preset's official ones); nil: the family's
	// Vocab.
	Tokenizer *VocabSpec
}

// HybridGeom is a hybrid preset's recurrent-layer geometry and its other
// qwen35moe- and lfm2moe-only shapes.
type HybridGeom struct {
	AttnLayers []int // lfm2moe: the attention layers (the others convolve)
	// OwnOutput: lfm2moe writes an output.weight (LFM2 ties it to
	// token_embd; with random weights a tied head scores the last token
	// highest, so a tiny model would repeat it forever).
	OwnOutput    bool
	ConvKernel   int    // ssm.conv_kernel; lfm2moe: shortconv.l_cache
	StateSize    int    // ssm.state_size: key and value head width
	KeyHeads     int    // ssm.group_count
	ValueHeads   int    // ssm.time_step_rank
	AttnInterval int    // full_attention_interval
	NRot         int    // rope.dimension_count
	Sections     [4]int // rope.dimension_sections
	NFFShExp     int    // expert_shared_feed_forward_length
}

// Presets returns every preset (the built-in ones and the registered
// families'), sorted by name.
func Presets() []Preset {
	famMu.Lock()
	defer famMu.Unlock()
	return allPresetsLocked()
}

// PresetNames returns the preset names, sorted.
func PresetNames() []string {
	var names []string
	for _, p := range Presets() {
		names = append(names, p.Name)
	}
	return names
}

// LookupPreset returns the preset called name.
func LookupPreset(name string) (Preset, error) {
	famMu.Lock()
	p, ok := lookupPresetLocked(name)
	famMu.Unlock()
	if ok {
		return p, nil
	}
	return Preset{}, fmt.Errorf("%w %q (have %s)", ErrUnknownPreset, name, strings.Join(PresetNames(), ", "))
}

func (p *Preset) validate() error {
	if p.NLayer <= 0 || p.NEmbd <= 0 || p.NHead <= 0 || p.NHeadKV <= 0 || p.HeadDim <= 0 ||
		p.NExpert <= 0 || p.NExpertUsed <= 0 || p.NExpertUsed > p.NExpert || p.NFFExp <= 0 || p.Vocab <= 0 {
		return fmt.Errorf("%w: preset %q has a zero or inconsistent dimension", ErrBadOptions, p.Name)
	}
	f, ok := familyOf(p.Arch)
	if !ok {
		return fmt.Errorf("%w: architecture %q (no family registered)", ErrBadOptions, p.Arch)
	}
	return f.CheckPreset(p)
}

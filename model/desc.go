package model

// desc.go: the metadata-only description of a model file. Describe reads
// nothing but the GGUF header (hyper-parameters and tensor infos) and splits
// the file into expert byte ranges (streamed by the reader lanes into the
// expert cache) and dense byte ranges (kept resident). It is pure bookkeeping:
// no tensor data is read and nothing here depends on an architecture's math.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/quant"
)

// Proj names one projection of a routed expert.
type Proj int

// The expert projections, in the order Desc.Experts lists them.
const (
	ProjGate   Proj = iota // ffn_gate_exps
	ProjUp                 // ffn_up_exps
	ProjGateUp             // ffn_gate_up_exps (gate and up fused, e.g. gemma4)
	ProjDown               // ffn_down_exps
	numProj
)

var projNames = [numProj]string{"gate", "up", "gate_up", "down"}

// String returns "gate", "up", "gate_up" or "down".
func (p Proj) String() string {
	if p >= 0 && p < numProj {
		return projNames[p]
	}
	return "proj(" + strconv.Itoa(int(p)) + ")"
}

// TensorName returns the GGUF name of layer's expert tensor for p.
func (p Proj) TensorName(layer int) string {
	return fmt.Sprintf("blk.%d.ffn_%s_exps.weight", layer, p)
}

// Range is a byte range of one shard file (the reader's Range too).
type Range = gguf.Range

// ExpertSlice is one projection of one expert: a whole [Cols × Rows] matrix
// of Type, stored contiguously at Range.
type ExpertSlice struct {
	Proj   Proj
	Tensor string // the *_exps tensor it lives in
	Type   quant.Type
	Cols   int // ne[0]: input dimension
	Rows   int // ne[1]: output dimension
	Range
}

// ExpertSlices are the byte ranges of one expert, one per projection, in
// Proj order (gate, up, down — or gate_up, down; up, down when ungated).
type ExpertSlices []ExpertSlice

// Bytes returns the total bytes of the expert.
func (s ExpertSlices) Bytes() int64 {
	var n int64
	for _, x := range s {
		n += x.Len
	}
	return n
}

// Get returns the slice of projection p.
func (s ExpertSlices) Get(p Proj) (ExpertSlice, bool) {
	for _, x := range s {
		if x.Proj == p {
			return x, true
		}
	}
	return ExpertSlice{}, false
}

// HParams are the hyper-parameters read from the metadata. Integer fields are
// 0 and strings "" when the key is absent (unless a default is noted).
type HParams struct {
	NLayer      int `json:"n_layer"`       // block_count
	NEmbd       int `json:"n_embd"`        // embedding_length
	NHead       int `json:"n_head"`        // attention.head_count (max over layers when per-layer)
	NHeadKV     int `json:"n_head_kv"`     // attention.head_count_kv (default NHead; max over layers when per-layer)
	HeadDim     int `json:"head_dim"`      // attention.key_length (default NEmbd/NHead)
	HeadDimV    int `json:"head_dim_v"`    // attention.value_length (default HeadDim)
	NExpert     int `json:"n_expert"`      // expert_count
	NExpertUsed int `json:"n_expert_used"` // expert_used_count (k)
	NFFExp      int `json:"n_ff_exp"`      // expert_feed_forward_length (default feed_forward_length)
	NFF         int `json:"n_ff"`          // feed_forward_length (dense FFN; informational for pure MoE)
	NFFShExp    int `json:"n_ff_shexp"`    // expert_shared_feed_forward_length (qwen2moe)
	NCtxTrain   int `json:"n_ctx_train"`   // context_length
	NVocab      int `json:"n_vocab"`       // length of tokenizer.ggml.tokens, else token_embd.weight ne[1]
	NRot        int `json:"n_rot"`         // rope.dimension_count (default HeadDim)

	RMSEps       float32 `json:"rms_eps"`        // attention.layer_norm_rms_epsilon
	RopeFreqBase float32 `json:"rope_freq_base"` // rope.freq_base (default 10000)
	// RopeScaleLinear is llama.cpp's "ropescale": rope.scaling.factor, else
	// the old rope.scale_linear; 0 when absent. freq_scale = 1/RopeScaleLinear.
	RopeScaleLinear    float32 `json:"rope_scale"`
	RopeScalingType    string  `json:"rope_scaling_type"`           // rope.scaling.type ("none", "linear", "yarn" …)
	RopeScalingOrigCtx int     `json:"rope_scaling_orig_ctx"`       // rope.scaling.original_context_length
	RopeScalingAttn    float32 `json:"rope_scaling_attn_factor"`    // rope.scaling.attn_factor
	RopeYarnLogMul     float32 `json:"rope_yarn_log_mul,omitempty"` // rope.scaling.yarn_log_multiplier, as stored
	SlidingWindow      int     `json:"sliding_window"`              // attention.sliding_window
	// SlidingWindowPattern is attention.sliding_window_pattern when stored as
	// a per-layer array (gemma4): true = the layer uses the sliding window.
	SlidingWindowPattern []bool  `json:"sliding_window_pattern,omitempty"`
	FinalLogitSoftcap    float32 `json:"final_logit_softcap"` // final_logit_softcapping (gemma)
	SWA                  SWAGeom `json:"swa"`
	SharedKVLayers       int     `json:"shared_kv_layers,omitempty"`     // attention.shared_kv_layers (gemma4)
	EmbdPerLayer         int     `json:"n_embd_per_layer,omitempty"`     // embedding_length_per_layer_input (gemma4)
	HeadCountKVLayers    []int   `json:"head_count_kv_layers,omitempty"` // per-layer head_count_kv when stored as an array
	HeadCountLayers      []int   `json:"head_count_layers,omitempty"`    // per-layer head_count when stored as an array
	// RopeSections is rope.dimension_sections (multi-section RoPE, qwen35moe).
	RopeSections []int   `json:"rope_sections,omitempty"`
	SSM          SSMGeom `json:"ssm,omitzero"`
	MoE          MoEGeom `json:"moe,omitzero"`
	MLA          MLAGeom `json:"mla,omitzero"`
}

// MoEGeom are the MoE keys beyond expert_count and expert_used_count
// (deepseek2 and its kin). Fields are 0 when the key is absent.
type MoEGeom struct {
	LeadingDense int     `json:"leading_dense,omitempty"` // leading_dense_block_count: layers before the first MoE one
	NShared      int     `json:"n_shared,omitempty"`      // expert_shared_count
	WeightsScale float32 `json:"weights_scale,omitempty"` // expert_weights_scale
	WeightsNorm  bool    `json:"weights_norm,omitempty"`  // expert_weights_norm
	GatingFunc   int     `json:"gating_func,omitempty"`   // expert_gating_func: 1 softmax, 2 sigmoid (llama.cpp's enum)
	Groups       int     `json:"groups,omitempty"`        // expert_group_count
	GroupsUsed   int     `json:"groups_used,omitempty"`   // expert_group_used_count
}

// MLAGeom is multi-head latent attention's geometry (deepseek2). Fields are
// 0 when the key is absent.
type MLAGeom struct {
	QLoraRank  int `json:"q_lora_rank,omitempty"`  // attention.q_lora_rank (0: a plain Q projection)
	KVLoraRank int `json:"kv_lora_rank,omitempty"` // attention.kv_lora_rank: the cached latent's width
	KeyLength  int `json:"key_length,omitempty"`   // attention.key_length_mla: a query head's width
	ValLength  int `json:"value_length,omitempty"` // attention.value_length_mla: a value head's width
}

// KVRow is the floats one position holds in one attention layer's KV
// cache: the latent and its rotated key part with latent attention (K
// only: the value is the latent's leading part), else K and V rows of the
// KV heads (of n_embd when the width is unknown).
func (h *HParams) KVRow() int {
	if h.MLA.KVLoraRank > 0 {
		return h.MLA.KVLoraRank + h.NRot
	}
	kv := h.NHeadKV * h.HeadDim
	if kv == 0 {
		kv = h.NEmbd
	}
	return 2 * kv
}

// SSMGeom is the recurrent (linear-attention / state-space) layers'
// geometry: the ssm.* keys. Fields are 0 when the keys are absent.
type SSMGeom struct {
	ConvKernel   int `json:"conv_kernel,omitempty"`    // ssm.conv_kernel (d_conv)
	InnerSize    int `json:"inner_size,omitempty"`     // ssm.inner_size (d_inner)
	StateSize    int `json:"state_size,omitempty"`     // ssm.state_size (d_state: the head width)
	TimeStepRank int `json:"time_step_rank,omitempty"` // ssm.time_step_rank (value heads of a gated delta-net)
	GroupCount   int `json:"group_count,omitempty"`    // ssm.group_count (key heads of a gated delta-net)
	// FullAttentionInterval is full_attention_interval: every n-th layer
	// (il % n == n-1) is full attention, the others recurrent (0: absent).
	FullAttentionInterval int `json:"full_attention_interval,omitempty"`
	// Recurrent is attention.recurrent_layers when stored (true: recurrent).
	Recurrent []bool `json:"recurrent_layers,omitempty"`
}

// IsRecurrent reports whether layer il is a recurrent layer, as llama.cpp's
// hparams.is_recr: attention.recurrent_layers when the file has it, else
// every layer but each full_attention_interval-th (4 when absent) for a
// file with SSM geometry; no layer of a file without.
func (g *SSMGeom) IsRecurrent(il int) bool {
	if g.Recurrent != nil {
		return il >= 0 && il < len(g.Recurrent) && g.Recurrent[il]
	}
	if g.StateSize == 0 {
		return false
	}
	n := g.FullAttentionInterval
	if n == 0 {
		n = 4
	}
	return (il+1)%n != 0
}

// IsRecurrent reports whether layer il keeps a recurrent state instead of
// KV rows: a delta-net layer (SSMGeom.IsRecurrent). A family with other
// recurrent layers says so itself (its Family.StateBytes and InspectRows).
func (h *HParams) IsRecurrent(il int) bool {
	return h.SSM.IsRecurrent(il)
}

// RecurrentLayers is the number of the model's layers that keep a
// recurrent state instead of KV rows.
func (h *HParams) RecurrentLayers() int {
	n := 0
	for il := 0; il < h.NLayer; il++ {
		if h.IsRecurrent(il) {
			n++
		}
	}
	return n
}

// RecurrentFloats is the floats of state one recurrent layer keeps per
// sequence: SSMGeom.StateFloats.
func (h *HParams) RecurrentFloats() int {
	return h.SSM.StateFloats()
}

// ConvChannels is the channels of a recurrent layer's short convolution:
// d_inner + 2·n_group·d_state (the mixed q, k and v of a delta-net).
func (g *SSMGeom) ConvChannels() int { return g.InnerSize + 2*g.GroupCount*g.StateSize }

// StateFloats is the floats of recurrent state a recurrent layer keeps per
// sequence, as llama.cpp's n_embd_r + n_embd_s: the convolution's last
// d_conv-1 inputs per channel and the d_state × d_inner state.
func (g *SSMGeom) StateFloats() int {
	return max(g.ConvKernel-1, 0)*g.ConvChannels() + g.StateSize*g.InnerSize
}

// SWAGeom is the sliding-window layers' own geometry (gemma4). Fields are
// 0 when the key is absent: the architecture applies llama.cpp's defaults.
type SWAGeom struct {
	HeadDim      int     `json:"head_dim,omitempty"`       // attention.key_length_swa
	HeadDimV     int     `json:"head_dim_v,omitempty"`     // attention.value_length_swa
	NRot         int     `json:"n_rot,omitempty"`          // rope.dimension_count_swa
	RopeFreqBase float32 `json:"rope_freq_base,omitempty"` // rope.freq_base_swa
}

// Desc describes a model file from its metadata alone.
type Desc struct {
	Arch      string // general.architecture
	Name      string // general.name
	Supported bool   // an architecture is registered under Arch (see Runnable)
	HParams   HParams
	// FamilyHP is the family's own hyper-parameters: what its
	// Family.ReadHParams returned (nil for most families).
	FamilyHP any

	File    *gguf.File
	Tensors map[string]*gguf.TensorInfo // name → info (points into File.Tensors)

	// Experts[layer][expert] are the byte ranges of that expert; nil for a
	// layer without routed experts.
	Experts [][]ExpertSlices
	// ExpertBytes[layer] is the bytes of one expert of the layer (0 without experts).
	ExpertBytes []int64
	// Dense is the complement of the expert tensors within each shard's tensor
	// data ([data offset, end of the last tensor)), merged and sorted by
	// (shard, offset). It includes the alignment padding between tensors.
	Dense []Range

	DenseBytes       int64 // Σ len(Dense): what a dense loader reads
	DenseTensorBytes int64 // Σ sizes of the non-expert tensors (without padding)
	ExpertTotalBytes int64 // Σ sizes of the expert tensors
	WorkingSet       int64 // Σ over layers of NExpertUsed × ExpertBytes[layer]: one token's expert bytes
}

// Limits on metadata counts, so a hostile header cannot make Describe allocate
// without bound.
const (
	maxLayers  = 1 << 14
	maxExperts = 1 << 14
)

// Tensor returns the tensor called name.
func (d *Desc) Tensor(name string) (*gguf.TensorInfo, bool) {
	ti, ok := d.Tensors[name]
	return ti, ok
}

// ExpertTensor returns layer's expert weight tensor for projection p.
func (d *Desc) ExpertTensor(layer int, p Proj) (*gguf.TensorInfo, bool) {
	return d.Tensor(p.TensorName(layer))
}

// IsExpertTensor reports whether name is a routed-expert weight tensor
// (blk.N.ffn_{gate,up,gate_up,down}_exps.weight) and returns its layer and projection.
func IsExpertTensor(name string) (layer int, p Proj, ok bool) {
	rest, found := strings.CutPrefix(name, "blk.")
	if !found {
		return 0, 0, false
	}
	num, tail, found := strings.Cut(rest, ".")
	if !found || num == "" || len(num) > 6 {
		return 0, 0, false
	}
	l, err := strconv.Atoi(num)
	if err != nil || l < 0 || strconv.Itoa(l) != num {
		return 0, 0, false
	}
	for q := Proj(0); q < numProj; q++ {
		if tail == "ffn_"+projNames[q]+"_exps.weight" {
			return l, q, true
		}
	}
	return 0, 0, false
}

// Describe builds the description of f from its metadata. The required
// hyper-parameters are enforced for registered architectures only; any
// other is described (tensor split included) with Supported false. Only
// inconsistent metadata is an error (ErrBadModel).
func Describe(f *gguf.File) (*Desc, error) {
	if f == nil {
		return nil, fmt.Errorf("model: Describe(nil): %w", ErrBadModel)
	}
	d := &Desc{File: f, Tensors: make(map[string]*gguf.TensorInfo, len(f.Tensors))}
	for i := range f.Tensors {
		d.Tensors[f.Tensors[i].Name] = &f.Tensors[i]
	}
	arch, err := f.GetString(gguf.KeyArchitecture)
	if err != nil {
		return nil, fmt.Errorf("model: %w: %w", ErrBadModel, err)
	}
	d.Arch = arch
	d.Name, _ = f.GetString("general.name")
	d.Supported = Runnable(arch)
	if err := d.readHParams(d.Supported); err != nil {
		return nil, err
	}
	if err := d.split(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Desc) bad(format string, args ...any) error {
	return fmt.Errorf("model: %s: %w: "+format, append([]any{d.File.Path, ErrBadModel}, args...)...)
}

// readHParams reads the hyper-parameter keys: the common ones, those of
// the shared pieces several families build on (readSharedKeys), llama.cpp's
// defaults, then the family's own keys (Family.ReadHParams). Required
// keys are only enforced when known (a registered architecture).
func (d *Desc) readHParams(known bool) error {
	r := newMetaReader(d, known)
	h := &d.HParams
	readCommonKeys(r, h)
	readSharedKeys(r, h)
	if err := r.Err(); err != nil {
		return err
	}
	h.applyDefaults()
	if toks, ok := d.File.Get("tokenizer.ggml.tokens"); ok && toks.Type == gguf.TypeArray {
		h.NVocab = toks.Len()
	} else if te, ok := d.Tensors["token_embd.weight"]; ok && len(te.Dims) >= 2 && te.Dims[1] <= math.MaxInt32 {
		h.NVocab = int(te.Dims[1])
	}
	if f, ok := Lookup(d.Arch); ok {
		own, err := f.ReadHParams(r, h)
		if err == nil {
			err = r.Err()
		}
		if err != nil {
			return err
		}
		d.FamilyHP = own
	}
	if known {
		return d.checkHParams()
	}
	return nil
}

// readCommonKeys reads the keys every family has or shares: the decoder's
// shape, the experts, RoPE and its scaling, the norm epsilon.
func readCommonKeys(r *MetaReader, h *HParams) {
	h.NLayer = r.Int("block_count", true, maxLayers)
	h.NEmbd = r.Int("embedding_length", true, MaxDim)
	h.NHead, h.HeadCountLayers = r.Ints("attention.head_count", true, MaxDim)
	h.NHeadKV, h.HeadCountKVLayers = r.Ints("attention.head_count_kv", false, MaxDim)
	h.HeadDim = r.Int("attention.key_length", false, MaxDim)
	h.HeadDimV = r.Int("attention.value_length", false, MaxDim)
	h.NExpert = r.Int("expert_count", true, maxExperts)
	h.NExpertUsed = r.Int("expert_used_count", true, maxExperts)
	h.NFF = r.Int("feed_forward_length", false, MaxDim)
	h.NFFExp = r.Int("expert_feed_forward_length", false, MaxDim)
	h.NFFShExp = r.Int("expert_shared_feed_forward_length", false, MaxDim)
	h.NCtxTrain = r.Int("context_length", false, MaxDim)
	h.NRot = r.Int("rope.dimension_count", false, MaxDim)
	h.RopeScalingOrigCtx = r.Int("rope.scaling.original_context_length", false, MaxDim)
	const eps, base, factor = 1, 1e12, 1e6 // bounds far beyond any real model's
	h.RMSEps = r.Float("attention.layer_norm_rms_epsilon", eps)
	h.RopeFreqBase = r.Float("rope.freq_base", base)
	r.refuseZeroRopeBase("rope.freq_base", h.RopeFreqBase)
	h.RopeScaleLinear = r.Float("rope.scaling.factor", factor)
	if h.RopeScaleLinear == 0 {
		h.RopeScaleLinear = r.Float("rope.scale_linear", factor)
	}
	h.RopeScalingAttn = r.Float("rope.scaling.attn_factor", factor)
	h.RopeScalingType = r.String("rope.scaling.type")
}

// readSharedKeys reads the keys of the pieces several families build on
// (their fields in HParams): sliding windows and their own geometry, the
// recurrent mixers' ssm.* keys, multi-section RoPE, the MoE routing keys
// and the latent attention's. A key only one family reads belongs in that
// family's ReadHParams.
func readSharedKeys(r *MetaReader, h *HParams) {
	const big, base, factor = MaxDim, 1e12, 1e6
	h.SlidingWindow = r.Int("attention.sliding_window", false, big)
	h.SWA.HeadDim = r.Int("attention.key_length_swa", false, big)
	h.SWA.HeadDimV = r.Int("attention.value_length_swa", false, big)
	h.SWA.NRot = r.Int("rope.dimension_count_swa", false, big)
	h.SharedKVLayers = r.Int("attention.shared_kv_layers", false, maxLayers)
	h.EmbdPerLayer = r.Int("embedding_length_per_layer_input", false, big)
	_, h.RopeSections = r.Ints("rope.dimension_sections", false, big)
	h.SSM.ConvKernel = r.Int("ssm.conv_kernel", false, big)
	h.SSM.InnerSize = r.Int("ssm.inner_size", false, big)
	h.SSM.StateSize = r.Int("ssm.state_size", false, big)
	h.SSM.TimeStepRank = r.Int("ssm.time_step_rank", false, big)
	h.SSM.GroupCount = r.Int("ssm.group_count", false, big)
	h.SSM.FullAttentionInterval = r.Int("full_attention_interval", false, maxLayers)
	h.MoE.LeadingDense = r.Int("leading_dense_block_count", false, maxLayers)
	h.MoE.NShared = r.Int("expert_shared_count", false, maxExperts)
	h.MoE.GatingFunc = r.Int("expert_gating_func", false, 16)
	h.MoE.Groups = r.Int("expert_group_count", false, maxExperts)
	h.MoE.GroupsUsed = r.Int("expert_group_used_count", false, maxExperts)
	h.MoE.WeightsScale = r.Float("expert_weights_scale", factor)
	h.MoE.WeightsNorm = r.Bool("expert_weights_norm")
	h.RopeYarnLogMul = r.Float("rope.scaling.yarn_log_multiplier", factor)
	h.MLA.QLoraRank = r.Int("attention.q_lora_rank", false, big)
	h.MLA.KVLoraRank = r.Int("attention.kv_lora_rank", false, big)
	h.MLA.KeyLength = r.Int("attention.key_length_mla", false, big)
	h.MLA.ValLength = r.Int("attention.value_length_mla", false, big)
	h.SWA.RopeFreqBase = r.Float("rope.freq_base_swa", base)
	r.refuseZeroRopeBase("rope.freq_base_swa", h.SWA.RopeFreqBase)
	h.FinalLogitSoftcap = r.Float("final_logit_softcapping", factor)
	h.SlidingWindowPattern = r.Bools("attention.sliding_window_pattern")
	h.SSM.Recurrent = r.Bools("attention.recurrent_layers")
}

// applyDefaults fills the absent common keys as llama.cpp does.
func (h *HParams) applyDefaults() {
	if h.NHeadKV == 0 {
		h.NHeadKV = h.NHead
	}
	if h.HeadDim == 0 && h.NHead > 0 {
		h.HeadDim = h.NEmbd / h.NHead
	}
	if h.HeadDimV == 0 {
		h.HeadDimV = h.HeadDim
	}
	if h.NRot == 0 {
		h.NRot = h.HeadDim
	}
	if h.NFFExp == 0 {
		h.NFFExp = h.NFF
	}
	if h.RopeFreqBase == 0 {
		h.RopeFreqBase = 10000
	}
}

// checkHParams refuses the common hyper-parameters of a registered
// architecture that cannot describe a model.
func (d *Desc) checkHParams() error {
	h := &d.HParams
	pre := d.Arch + "."
	switch {
	case h.NLayer == 0:
		return d.bad("%sblock_count is 0", pre)
	case h.NExpert == 0:
		return d.bad("%sexpert_count is 0", pre)
	case h.NExpertUsed == 0 || h.NExpertUsed > h.NExpert:
		return d.bad("%sexpert_used_count %d is not in [1, expert_count %d]", pre, h.NExpertUsed, h.NExpert)
	case h.NHeadKV > h.NHead:
		return d.bad("%sattention.head_count_kv %d > head_count %d", pre, h.NHeadKV, h.NHead)
	case h.NHeadKV > 0 && len(h.HeadCountLayers) == 0 && len(h.HeadCountKVLayers) == 0 && h.NHead%h.NHeadKV != 0:
		return d.bad("%sattention.head_count %d is not a multiple of attention.head_count_kv %d (each K/V head serves a whole group of query heads)", pre, h.NHead, h.NHeadKV)
	}
	return nil
}

// Value is gguf.Value (alias to keep the hyper-parameter reader short).
type Value = gguf.Value

// split computes the expert ranges and the dense complement.
func (d *Desc) split() error {
	byLayer, isExpert, nLayer, err := d.expertTensorsByLayer()
	if err != nil {
		return err
	}
	if d.HParams.NLayer == 0 {
		d.HParams.NLayer = nLayer
	}
	d.Experts = make([][]ExpertSlices, nLayer)
	d.ExpertBytes = make([]int64, nLayer)
	for l := 0; l < nLayer; l++ {
		if err := d.sliceLayerExperts(l, byLayer[l]); err != nil {
			return err
		}
	}
	return d.splitDense(isExpert)
}

// expertTensor is one routed-expert tensor of a layer and the projection it
// holds.
type expertTensor struct {
	ti   *gguf.TensorInfo
	proj Proj
}

// expertTensorsByLayer checks the routed-expert tensors of the file and
// groups them by layer. It also marks which of f.Tensors are expert tensors
// and returns the number of layers: block_count, or the expert tensors' own
// layer numbers when the architecture is unknown.
func (d *Desc) expertTensorsByLayer() (map[int][]expertTensor, []bool, int, error) {
	h := &d.HParams
	f := d.File
	nLayer := h.NLayer
	byLayer := map[int][]expertTensor{}
	isExpert := make([]bool, len(f.Tensors))
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		l, p, ok := IsExpertTensor(ti.Name)
		if !ok {
			continue
		}
		if err := d.checkExpertTensor(ti, l); err != nil {
			return nil, nil, 0, err
		}
		byLayer[l] = append(byLayer[l], expertTensor{ti, p})
		isExpert[i] = true
		if l+1 > nLayer {
			nLayer = l + 1
		}
	}
	return byLayer, isExpert, nLayer, nil
}

// checkExpertTensor refuses an expert tensor of layer l whose layer or
// shape does not fit the hyper-parameters or the engine's bounds.
func (d *Desc) checkExpertTensor(ti *gguf.TensorInfo, l int) error {
	h := &d.HParams
	if l >= maxLayers {
		return d.bad("tensor %s: layer %d out of range", ti.Name, l)
	}
	if h.NLayer > 0 && l >= h.NLayer {
		return d.bad("tensor %s: layer %d but block_count is %d", ti.Name, l, h.NLayer)
	}
	if len(ti.Dims) != 3 {
		return d.bad("expert tensor %s has shape %v, want 3 dimensions [cols, rows, n_expert]", ti.Name, ti.Dims)
	}
	ne2 := ti.Dims[2]
	if h.NExpert > 0 && ne2 != uint64(h.NExpert) {
		return d.bad("expert tensor %s has %d experts, expert_count is %d", ti.Name, ne2, h.NExpert)
	}
	if ne2 > maxExperts || ti.Dims[0] > math.MaxInt32 || ti.Dims[1] > math.MaxInt32 {
		return d.bad("expert tensor %s has shape %v out of range", ti.Name, ti.Dims)
	}
	return nil
}

// sliceLayerExperts checks that layer l's expert tensors fs form a whole
// FFN (gate+up+down, gate_up+down, or up+down for an ungated expert such
// as nemotron_h_moe's squared-ReLU ones; one expert count) and cuts them into
// one ExpertSlices per expert, in projection order. A layer without expert
// tensors is left empty.
func (d *Desc) sliceLayerExperts(l int, fs []expertTensor) error {
	if len(fs) == 0 {
		return nil
	}
	sort.Slice(fs, func(a, b int) bool { return fs[a].proj < fs[b].proj })
	var has [numProj]bool
	for _, x := range fs {
		has[x.proj] = true
	}
	if !has[ProjDown] || !(has[ProjGateUp] || has[ProjUp]) || (has[ProjGateUp] && (has[ProjGate] || has[ProjUp])) {
		var names []string
		for _, x := range fs {
			names = append(names, x.ti.Name)
		}
		return d.bad("layer %d has expert tensors %v, want gate+up+down, gate_up+down or up+down", l, names)
	}
	nExp := int(fs[0].ti.Dims[2])
	for _, x := range fs[1:] {
		if int(x.ti.Dims[2]) != nExp {
			return d.bad("layer %d: %s has %d experts, %s has %d", l, fs[0].ti.Name, nExp, x.ti.Name, x.ti.Dims[2])
		}
	}
	d.Experts[l] = make([]ExpertSlices, nExp)
	for e := 0; e < nExp; e++ {
		s := make(ExpertSlices, len(fs))
		for j, x := range fs {
			nb2 := int64(x.ti.Strides[2])
			s[j] = ExpertSlice{
				Proj: x.proj, Tensor: x.ti.Name, Type: x.ti.Type,
				Cols: int(x.ti.Dims[0]), Rows: int(x.ti.Dims[1]),
				Range: Range{Shard: x.ti.Shard, Off: int64(x.ti.Offset) + int64(e)*nb2, Len: nb2},
			}
		}
		d.Experts[l][e] = s
	}
	d.ExpertBytes[l] = d.Experts[l][0].Bytes()
	d.WorkingSet += int64(d.HParams.NExpertUsed) * d.ExpertBytes[l]
	return nil
}

// span is a byte interval [off, end) of one shard.
type span struct{ off, end int64 }

// splitDense computes the dense ranges: per shard, [data offset, end of
// last tensor) minus the expert tensors (isExpert, indexed like
// f.Tensors). It also totals the expert and dense tensor bytes.
func (d *Desc) splitDense(isExpert []bool) error {
	f := d.File
	experts := make([][]span, len(f.Shards))
	ends := make([]int64, len(f.Shards))
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Shard < 0 || ti.Shard >= len(f.Shards) {
			return d.bad("tensor %s: shard %d of %d", ti.Name, ti.Shard, len(f.Shards))
		}
		end := int64(ti.Offset + ti.Size)
		ends[ti.Shard] = max64(ends[ti.Shard], end)
		if isExpert[i] {
			d.ExpertTotalBytes += int64(ti.Size)
			experts[ti.Shard] = append(experts[ti.Shard], span{int64(ti.Offset), end})
		} else {
			d.DenseTensorBytes += int64(ti.Size)
		}
	}
	for s := range f.Shards {
		if ends[s] == 0 {
			continue
		}
		d.Dense = append(d.Dense, denseGaps(s, int64(f.Shards[s].DataOffset), ends[s], experts[s])...)
	}
	for _, r := range d.Dense {
		d.DenseBytes += r.Len
	}
	return nil
}

// denseGaps returns the ranges of shard s between its data offset start and
// end that no expert span covers, in file order. It sorts ex.
func denseGaps(s int, start, end int64, ex []span) []Range {
	var out []Range
	sort.Slice(ex, func(a, b int) bool { return ex[a].off < ex[b].off })
	cur := start
	for _, x := range ex {
		if x.off > cur {
			out = append(out, Range{Shard: s, Off: cur, Len: x.off - cur})
		}
		cur = max64(cur, x.end)
	}
	if end > cur {
		out = append(out, Range{Shard: s, Off: cur, Len: end - cur})
	}
	return out
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// ExpertShape is the number of experts of every layer (0 for a layer
// without routed experts).
func (d *Desc) ExpertShape() []int {
	s := make([]int, len(d.Experts))
	for i, exps := range d.Experts {
		s[i] = len(exps)
	}
	return s
}

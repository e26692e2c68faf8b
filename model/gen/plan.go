package gen

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pipe-engine/pipe/quant"
)

// ErrUnsupportedQuant reports a --quant file type gen cannot produce (unknown
// name, or a type whose quantizer quant does not implement).
var ErrUnsupportedQuant = errors.New("unsupported quantization")

// FileType is a llama.cpp "ftype" (llama_ftype): a quantization mix.
type FileType struct {
	Name    string     // as llama-quantize spells it: "Q4_K_M"
	ID      uint32     // llama_ftype, stored as general.file_type
	Default quant.Type // the type of every weight no rule moves elsewhere
}

var fileTypes = []FileType{
	{"F32", 0, quant.F32},
	{"F16", 1, quant.F16},
	{"Q4_0", 2, quant.Q4_0},
	{"Q8_0", 7, quant.Q8_0},
	{"Q4_K_S", 14, quant.Q4_K},
	{"Q4_K_M", 15, quant.Q4_K},
	{"Q5_K_S", 16, quant.Q5_K},
	{"Q5_K_M", 17, quant.Q5_K},
	{"Q6_K", 18, quant.Q6_K},
	{"BF16", 32, quant.BF16},
	{"MXFP4_MOE", 38, quant.MXFP4},
}

// FileTypeNames lists the --quant values gen accepts.
func FileTypeNames() []string {
	var s []string
	for _, f := range fileTypes {
		s = append(s, f.Name)
	}
	return s
}

// ParseFileType returns the file type called name (case-insensitive; "MXFP4" is
// MXFP4_MOE).
func ParseFileType(name string) (FileType, error) {
	n := strings.ToUpper(strings.TrimSpace(name))
	if n == "MXFP4" {
		n = "MXFP4_MOE"
	}
	for _, f := range fileTypes {
		if f.Name == n {
			return f, nil
		}
	}
	return FileType{}, fmt.Errorf("%w: --quant %q (have %s)", ErrUnsupportedQuant, name, strings.Join(FileTypeNames(), ", "))
}

// Role says what a tensor is, which sets its initial distribution.
type Role int

// Tensor roles.
const (
	RoleEmbed     Role = iota // token_embd
	RoleOutput                // output (lm head)
	RoleNorm                  // RMSNorm gains: 1 + 0.1·N(0,1)
	RoleProj                  // attention / dense FFN projections: N(0, 0.02)
	RoleProjOut               // projections writing into the residual stream (attn_output, ffn_down)
	RoleExpert                // expert gate/up
	RoleExpertOut             // expert down
	RoleRouter                // ffn_gate_inp: N(0, 0.1) plus the popularity component
	RoleBias                  // biases: N(0, 0.02)
	RoleSink                  // gpt-oss attention sinks: N(0, 1)
	RoleRopeFreqs             // gemma4 proportional-RoPE frequency factors
	RoleScale                 // gemma4 scalar/vector scales: 1
	RoleConv                  // short-convolution taps (ssm_conv1d): N(0, 1/K)
	RoleSSMA                  // delta-net decay rates (ssm_a = -exp(A_log)): -exp(N(0, 0.5²))
	RoleExpertIDs             // hash routing (ffn_gate_tid2eid): n_expert_used distinct expert ids a token, I32
)

// TensorSpec is one tensor of the plan.
type TensorSpec struct {
	Name  string
	Layer int      // -1 for tensors outside blk.N
	Dims  []uint64 // ggml order, ne0 fastest
	Role  Role
	Type  quant.Type
}

// Elements returns the number of elements.
func (t *TensorSpec) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Rows is the number of ne0-long rows.
func (t *TensorSpec) Rows() uint64 { return t.Elements() / t.Dims[0] }

// Bytes is the tensor's data size.
func (t *TensorSpec) Bytes() uint64 {
	rs, err := t.Type.RowSize(int64(t.Dims[0]))
	if err != nil {
		return 0
	}
	return uint64(rs) * t.Rows()
}

// Plan is the full description of a file to generate: hyper-parameters, file
// type, and every tensor in file order with its type.
type Plan struct {
	Preset   Preset
	FileType FileType
	Tensors  []TensorSpec
}

// TotalBytes is the sum of the tensors' data sizes (the file is this plus the
// header and alignment padding).
func (p *Plan) TotalBytes() uint64 {
	var n uint64
	for i := range p.Tensors {
		n += p.Tensors[i].Bytes()
	}
	return n
}

// NewPlan builds the tensor list of preset p with vocab tokens, in
// llama-quantize's order, with the types of file type ft.
func NewPlan(p Preset, ft FileType, vocab int) (*Plan, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	if vocab <= 0 {
		return nil, fmt.Errorf("%w: vocabulary size %d", ErrBadOptions, vocab)
	}
	f, _ := familyOf(p.Arch) // validate refused an unregistered one
	ts := f.Tensors(&p, vocab)
	sort.SliceStable(ts, func(i, j int) bool { return weightNameLess(ts[i].Name, ts[j].Name) })
	if err := assignTypes(&p, ft, ts); err != nil {
		return nil, err
	}
	return &Plan{Preset: p, FileType: ft, Tensors: ts}, nil
}

// weightNameLess is llama_model_loader's weight_name_comparer: tensors outside
// blocks first, then by block number, then by name.
func weightNameLess(a, b string) bool {
	la, lb := layerOf(a), layerOf(b)
	if la != lb {
		return la < lb
	}
	return a < b
}

// layerOf parses "blk.N." like sscanf("blk.%d."); -1 when absent.
func layerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 {
		return -1
	}
	n, err := strconv.Atoi(rest[:i])
	if err != nil {
		return -1
	}
	return n
}

func u(xs ...int) []uint64 {
	out := make([]uint64, len(xs))
	for i, x := range xs {
		out[i] = uint64(x)
	}
	return out
}

func blk(il int, name string) string { return "blk." + strconv.Itoa(il) + "." + name }

// headTensors are the embeddings, the output norm and an untied output.
func headTensors(p *Preset, vocab int) []TensorSpec {
	E := p.NEmbd
	return []TensorSpec{
		{Name: "token_embd.weight", Layer: -1, Dims: u(E, vocab), Role: RoleEmbed},
		{Name: "output_norm.weight", Layer: -1, Dims: u(E), Role: RoleNorm},
		{Name: "output.weight", Layer: -1, Dims: u(E, vocab), Role: RoleOutput},
	}
}

// routedBlock is block il's attention (norm, Q/K/V/output projections) and
// routed FFN (norm, router, gate/up/down experts) without extras.
func routedBlock(p *Preset, il int) []TensorSpec {
	E, hd := p.NEmbd, p.HeadDim
	return []TensorSpec{
		{Name: blk(il, "attn_norm.weight"), Layer: il, Dims: u(E), Role: RoleNorm},
		{Name: blk(il, "attn_q.weight"), Layer: il, Dims: u(E, hd*p.NHead), Role: RoleProj},
		{Name: blk(il, "attn_k.weight"), Layer: il, Dims: u(E, hd*p.NHeadKV), Role: RoleProj},
		{Name: blk(il, "attn_v.weight"), Layer: il, Dims: u(E, hd*p.NHeadKV), Role: RoleProj},
		{Name: blk(il, "attn_output.weight"), Layer: il, Dims: u(hd*p.NHead, E), Role: RoleProjOut},
		{Name: blk(il, "ffn_norm.weight"), Layer: il, Dims: u(E), Role: RoleNorm},
		{Name: blk(il, "ffn_gate_inp.weight"), Layer: il, Dims: u(E, p.NExpert), Role: RoleRouter},
		{Name: blk(il, "ffn_gate_exps.weight"), Layer: il, Dims: u(E, p.NFFExp, p.NExpert), Role: RoleExpert},
		{Name: blk(il, "ffn_up_exps.weight"), Layer: il, Dims: u(E, p.NFFExp, p.NExpert), Role: RoleExpert},
		{Name: blk(il, "ffn_down_exps.weight"), Layer: il, Dims: u(p.NFFExp, E, p.NExpert), Role: RoleExpertOut},
	}
}

// category is llama-quant.cpp's tensor_category.
type category int

const (
	catOther category = iota
	catTokenEmbd
	catOutput
	catAttnQ
	catAttnK
	catAttnV
	catAttnOut
	catFFNUp
	catFFNGate
	catFFNDown
)

func categoryOf(name string) category {
	switch {
	case name == "output.weight":
		return catOutput
	case name == "token_embd.weight":
		return catTokenEmbd
	case strings.Contains(name, "attn_v.weight"), strings.Contains(name, "attn_qkv.weight"):
		// llama-quant's ATTENTION_QKV takes attn_v's rules
		return catAttnV
	case strings.Contains(name, "attn_k.weight"):
		return catAttnK
	case strings.Contains(name, "attn_q.weight"):
		return catAttnQ
	case strings.Contains(name, "attn_output.weight"):
		return catAttnOut
	case strings.Contains(name, "ffn_up"):
		return catFFNUp
	case strings.Contains(name, "ffn_gate"):
		return catFFNGate
	case strings.Contains(name, "ffn_down"):
		return catFFNDown
	}
	return catOther
}

// allowsQuantization is llama-quant.cpp's tensor_allows_quantization for the
// tensors gen writes.
func allowsQuantization(t *TensorSpec) bool {
	if len(t.Dims) < 2 {
		return false
	}
	n := t.Name
	return strings.HasSuffix(n, "weight") &&
		!strings.Contains(n, "_norm.weight") &&
		!strings.Contains(n, "ffn_gate_inp.weight") &&
		!strings.Contains(n, "ssm_conv1d") &&
		!strings.Contains(n, "shortconv.conv.weight")
}

// useMoreBits is llama-quant.cpp's use_more_bits.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

func isQuantized(t quant.Type) bool {
	switch t {
	case quant.F32, quant.F16, quant.BF16, quant.F64, quant.I8, quant.I16, quant.I32, quant.I64:
		return false
	}
	return true
}

// assignTypes sets every tensor's type the way llama-quantize's
// llama_tensor_get_type does for file type ft (no imatrix, no overrides), from
// an F32 source. ts must already be in file order: the attn_v counter advances
// in that order, as in llama-quantize.
func assignTypes(p *Preset, ft FileType, ts []TensorSpec) error {
	nAttnV := 0
	tied := true
	for i := range ts {
		switch categoryOf(ts[i].Name) {
		case catAttnV:
			nAttnV++
		case catOutput:
			tied = false
		}
	}
	iAttnV := 0
	for i := range ts {
		t := &ts[i]
		if t.Role == RoleExpertIDs {
			t.Type = quant.I32
			continue
		}
		if !allowsQuantization(t) {
			t.Type = quant.F32
			continue
		}
		nt := ft.Default
		if isQuantized(nt) {
			nt = mixType(p, ft, t, nt, tied, &iAttnV, nAttnV)
			var err error
			if nt, err = fallbackType(t, nt); err != nil {
				return err
			}
		}
		if isQuantized(nt) && !quant.CanQuantize(nt) {
			return fmt.Errorf("%w: %s needs %s for %s, which quant cannot quantize", ErrUnsupportedQuant, ft.Name, nt, t.Name)
		}
		t.Type = nt
	}
	return nil
}

// mixType is the subset of llama_tensor_get_type_impl reachable from the file
// types gen offers.
func mixType(p *Preset, ft FileType, t *TensorSpec, nt quant.Type, tied bool, iAttnV *int, nAttnV int) quant.Type {
	cat := categoryOf(t.Name)
	nExpert := p.NExpert
	switch {
	case cat == catOutput || (tied && cat == catTokenEmbd):
		nx := int(t.Dims[0])
		switch {
		case ft.Name == "MXFP4_MOE":
			nt = quant.Q8_0
		case nx%nt.BlockSize() != 0:
			nt = quant.Q8_0
		case nt != quant.Q8_0:
			nt = quant.Q6_K
		}
	case ft.Name == "MXFP4_MOE":
		if len(t.Dims) > 2 && t.Dims[2] > 1 {
			nt = quant.MXFP4
		} else {
			nt = quant.Q8_0
		}
	case cat == catTokenEmbd:
		// no rule for the file types gen offers
	case cat == catAttnV:
		switch {
		case (ft.Name == "Q4_K_M" || ft.Name == "Q5_K_M") && useMoreBits(*iAttnV, nAttnV):
			nt = quant.Q6_K
		case ft.Name == "Q4_K_S" && *iAttnV < 4:
			nt = quant.Q5_K
		}
		if nExpert == 8 {
			nt = quant.Q8_0
		}
		*iAttnV++
	case cat == catAttnK:
		if nExpert == 8 {
			nt = quant.Q8_0
		}
	case cat == catFFNDown:
		il, n := t.Layer, p.NLayer
		switch {
		case ft.Name == "Q4_K_M":
			if useMoreBits(il, n) {
				nt = quant.Q6_K
			}
		case ft.Name == "Q5_K_M" && useMoreBits(il, n):
			nt = quant.Q6_K
		case ft.Name == "Q4_K_S" && il < n/8:
			nt = quant.Q5_K
		}
	case cat == catAttnOut:
		if nExpert == 8 && (ft.Name == "Q4_K_S" || ft.Name == "Q4_K_M") {
			nt = quant.Q5_K
		}
	}
	return nt
}

// fallbackType is llama-quant.cpp's tensor_type_fallback: a row length that is
// not a whole number of blocks moves to a type with smaller blocks.
func fallbackType(t *TensorSpec, nt quant.Type) (quant.Type, error) {
	ncols := int(t.Dims[0])
	if ncols%nt.BlockSize() == 0 {
		return nt, nil
	}
	var rt quant.Type
	switch nt {
	case quant.Q2_K, quant.Q3_K, quant.TQ1_0, quant.TQ2_0:
		rt = quant.Q4_0
	case quant.Q4_K:
		rt = quant.Q5_0
	case quant.Q5_K:
		rt = quant.Q5_1
	case quant.Q6_K:
		rt = quant.Q8_0
	default:
		return 0, fmt.Errorf("%w: no fallback for %s on %s (%d columns)", ErrUnsupportedQuant, nt, t.Name, ncols)
	}
	if ncols%rt.BlockSize() != 0 {
		rt = quant.F16
	}
	return rt, nil
}

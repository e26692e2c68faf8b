package tokenizer

import (
	"fmt"
	"slices"
	"strings"
)

// llama.cpp's built-in chat templates (src/llama-chat.cpp at 3f545becc):
// the names --chat-template accepts in llama-cli and llama-server, and the
// text llm_chat_apply_template writes for each, ported byte for byte.
// Each renders plain text turns; add is llama.cpp's add_ass (the
// generation prompt).

// llamaRender writes one built-in template's prompt.
type llamaRender func(b *strings.Builder, msgs []Message, add bool)

// llamaTemplates are llama.cpp's LLM_CHAT_TEMPLATES, by name.
var llamaTemplates = map[string]llamaRender{
	"chatml":            renderChatML,
	"llama2":            llama2(false, false, false),
	"llama2-sys":        llama2(true, false, false),
	"llama2-sys-bos":    llama2(true, true, false),
	"llama2-sys-strip":  llama2(true, false, true),
	"mistral-v1":        mistralV1V3(" ", " ", false),
	"mistral-v3":        mistralV1V3("", " ", true),
	"mistral-v3-tekken": mistralV1V3("", "", false),
	"mistral-v7":        mistralV7(" "),
	"mistral-v7-tekken": mistralV7(""),
	"phi3":              perRole("<|", "|>\n", "<|end|>\n", "<|assistant|>\n", false),
	"phi4":              perRole("<|im_start|>", "<|im_sep|>", "<|im_end|>", "<|im_start|>assistant<|im_sep|>", false),
	"falcon3":           perRole("<|", "|>\n", "\n", "<|assistant|>\n", false),
	"zephyr":            perRole("<|", "|>\n", "<|endoftext|>\n", "<|assistant|>\n", false),
	"monarch":           renderMonarch,
	"gemma":             renderGemma,
	"orion":             renderOrion,
	"openchat":          renderOpenChat,
	"vicuna":            vicuna(false),
	"vicuna-orca":       vicuna(true),
	"deepseek":          byRole(map[string][2]string{"system": {"", ""}, "user": {"### Instruction:\n", "\n"}, "assistant": {"### Response:\n", "\n<|EOT|>\n"}}, "### Response:\n", false),
	"deepseek2":         byRole(map[string][2]string{"system": {"", "\n\n"}, "user": {"User: ", "\n\n"}, "assistant": {"Assistant: ", "<｜end▁of▁sentence｜>"}}, "Assistant:", false),
	"deepseek3":         byRole(map[string][2]string{"system": {"", "\n\n"}, "user": {"<｜User｜>", ""}, "assistant": {"<｜Assistant｜>", "<｜end▁of▁sentence｜>"}}, "<｜Assistant｜>", false),
	"deepseek-ocr": func(b *strings.Builder, msgs []Message, _ bool) {
		forEach(msgs, func(m Message) { b.WriteString(m.Content) })
	},
	"command-r": byRole(map[string][2]string{
		"system":    {"<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
		"user":      {"<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
		"assistant": {"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"}}, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", true),
	"llama3":   perRole("<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", "<|start_header_id|>assistant<|end_header_id|>\n\n", true),
	"chatglm3": prefixed("[gMASK]sop", perRole("<|", "|>\n ", "", "<|assistant|>", false)),
	"chatglm4": prefixed("[gMASK]<sop>", perRole("<|", "|>\n", "", "<|assistant|>\n", false)),
	"glmedge":  perRole("<|", "|>\n", "", "<|assistant|>", false),
	"minicpm":  renderMiniCPM,
	"exaone3": byRole(map[string][2]string{"system": {"[|system|]", "[|endofturn|]\n"}, "user": {"[|user|]", "\n"},
		"assistant": {"[|assistant|]", "[|endofturn|]\n"}}, "[|assistant|]", true),
	"exaone4": byRole(map[string][2]string{"system": {"[|system|]", "[|endofturn|]\n"}, "user": {"[|user|]", "\n"},
		"assistant": {"[|assistant|]", "[|endofturn|]\n"}, "tool": {"[|tool|]", "[|endofturn|]\n"}}, "[|assistant|]", true),
	"exaone-moe": byRole(map[string][2]string{"system": {"<|system|>\n", "<|endofturn|>\n"}, "user": {"<|user|>\n", "<|endofturn|>\n"},
		"assistant": {"<|assistant|>\n", "<|endofturn|>\n"}, "tool": {"<|tool|>\n", "<|endofturn|>\n"}}, "<|assistant|>\n", true),
	"rwkv-world":     renderRWKV,
	"granite":        renderGranite3,
	"granite-4.0":    renderGranite4,
	"granite-4.1":    renderGranite4,
	"gigachat":       renderGigaChat,
	"megrez":         perRole("<|role_start|>", "<|role_end|>", "<|turn_end|>", "<|role_start|>assistant<|role_end|>", false),
	"yandex":         byRole(map[string][2]string{"user": {" Пользователь: ", "\n\n"}, "assistant": {" Ассистент: ", "\n\n"}}, " Ассистент:[SEP]", false),
	"bailing":        bailing(""),
	"bailing-think":  bailing("<think>"),
	"bailing2":       renderBailing2,
	"llama4":         perRole("<|header_start|>", "<|header_end|>\n\n", "<|eot|>", "<|header_start|>assistant<|header_end|>\n\n", true),
	"smolvlm":        renderSmolVLM,
	"hunyuan-moe":    renderHunyuanMoE,
	"gpt-oss":        renderHarmony,
	"hunyuan-dense":  renderHunyuanDense,
	"hunyuan-vl":     renderHunyuanVL,
	"kimi-k2":        renderKimiK2,
	"seed_oss":       renderSeedOSS,
	"grok-2":         renderGrok2,
	"pangu-embedded": renderPangu,
	"solar-open":     perRole("<|begin|>", "<|content|>", "<|end|>", "<|begin|>assistant", false),
	// dots1 has no name in llama.cpp; its template is only detected.
	"dots1": byRoleDefault(map[string][2]string{"system": {"<|system|>", "<|endofsystem|>"}, "user": {"<|userprompt|>", "<|endofuserprompt|>"}},
		[2]string{"<|response|>", "<|endofresponse|>"}, "<|response|>"),
}

// LlamaTemplateNames are the names of llama.cpp's built-in chat templates,
// sorted (llama_chat_builtin_templates).
func LlamaTemplateNames() []string {
	names := make([]string, 0, len(llamaTemplates))
	for n := range llamaTemplates {
		if n != "dots1" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// RenderLlamaTemplate renders msgs with llama.cpp's built-in template name
// exactly as llm_chat_apply_template does.
func RenderLlamaTemplate(name string, msgs []Message, addGenerationPrompt bool) (string, error) {
	r, ok := llamaTemplates[name]
	if !ok {
		return "", fmt.Errorf("chat template %q: not one of llama.cpp's built-in names: %w", name, ErrUnsupportedTemplate)
	}
	var b strings.Builder
	r(&b, msgs, addGenerationPrompt)
	return b.String(), nil
}

// trimSpace is llama-chat.cpp's trim: ASCII whitespace (isspace) only.
func trimSpace(s string) string { return strings.Trim(s, " \t\n\v\f\r") }

func forEach(msgs []Message, f func(Message)) {
	for _, m := range msgs {
		f(m)
	}
}

func maybeTrim(s string, trim bool) string {
	if trim {
		return trimSpace(s)
	}
	return s
}

// perRole writes open+role+mid+content+end per message, then gen.
func perRole(open, mid, end, gen string, trim bool) llamaRender {
	return func(b *strings.Builder, msgs []Message, add bool) {
		for _, m := range msgs {
			b.WriteString(open + m.Role + mid + maybeTrim(m.Content, trim) + end)
		}
		if add {
			b.WriteString(gen)
		}
	}
}

// byRole writes a role's prefix+content+suffix (other roles: nothing), then
// gen.
func byRole(roles map[string][2]string, gen string, trim bool) llamaRender {
	return func(b *strings.Builder, msgs []Message, add bool) {
		for _, m := range msgs {
			if r, ok := roles[m.Role]; ok {
				b.WriteString(r[0] + maybeTrim(m.Content, trim) + r[1])
			}
		}
		if add {
			b.WriteString(gen)
		}
	}
}

// byRoleDefault is byRole with every other role written as other.
func byRoleDefault(roles map[string][2]string, other [2]string, gen string) llamaRender {
	return func(b *strings.Builder, msgs []Message, add bool) {
		for _, m := range msgs {
			r, ok := roles[m.Role]
			if !ok {
				r = other
			}
			b.WriteString(r[0] + m.Content + r[1])
		}
		if add {
			b.WriteString(gen)
		}
	}
}

func prefixed(prefix string, r llamaRender) llamaRender {
	return func(b *strings.Builder, msgs []Message, add bool) {
		b.WriteString(prefix)
		r(b, msgs, add)
	}
}

func renderChatML(b *strings.Builder, msgs []Message, add bool) {
	perRole("<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n", false)(b, msgs, add)
}

func renderHarmony(b *strings.Builder, msgs []Message, add bool) {
	for _, m := range msgs {
		end := "<|end|>"
		if m.Role == "assistant" {
			end = "<|return|>"
		}
		b.WriteString("<|start|>" + m.Role + "<|message|>" + m.Content + end)
	}
	if add {
		b.WriteString("<|start|>assistant")
	}
}

func mistralV7(space string) llamaRender {
	return func(b *strings.Builder, msgs []Message, _ bool) {
		for _, m := range msgs {
			switch m.Role {
			case "system":
				b.WriteString("[SYSTEM_PROMPT]" + space + m.Content + "[/SYSTEM_PROMPT]")
			case "user":
				b.WriteString("[INST]" + space + m.Content + "[/INST]")
			default:
				b.WriteString(space + m.Content + "</s>")
			}
		}
	}
}

func mistralV1V3(leading, trailing string, trimAssistant bool) llamaRender {
	return func(b *strings.Builder, msgs []Message, _ bool) {
		inside := false
		for _, m := range msgs {
			if !inside {
				b.WriteString(leading + "[INST]" + trailing)
				inside = true
			}
			switch m.Role {
			case "system":
				b.WriteString(m.Content + "\n\n")
			case "user":
				b.WriteString(m.Content + leading + "[/INST]")
			default:
				b.WriteString(trailing + maybeTrim(m.Content, trimAssistant) + "</s>")
				inside = false
			}
		}
	}
}

func llama2(system, bosInside, strip bool) llamaRender {
	return func(b *strings.Builder, msgs []Message, _ bool) {
		inside := true
		b.WriteString("[INST] ")
		for _, m := range msgs {
			content := maybeTrim(m.Content, strip)
			if !inside {
				inside = true
				if bosInside {
					b.WriteString("<s>")
				}
				b.WriteString("[INST] ")
			}
			switch {
			case m.Role == "system" && system:
				b.WriteString("<<SYS>>\n" + content + "\n<</SYS>>\n\n")
			case m.Role == "system":
				b.WriteString(content + "\n")
			case m.Role == "user":
				b.WriteString(content + " [/INST]")
			default:
				b.WriteString(content + "</s>")
				inside = false
			}
		}
	}
}

func renderMonarch(b *strings.Builder, msgs []Message, add bool) {
	for i, m := range msgs {
		if i > 0 {
			b.WriteString("<s>")
		}
		b.WriteString(m.Role + "\n" + m.Content + "</s>\n")
	}
	if add {
		b.WriteString("<s>assistant\n")
	}
}

func renderGemma(b *strings.Builder, msgs []Message, add bool) {
	system := ""
	for _, m := range msgs {
		if m.Role == "system" {
			system += trimSpace(m.Content)
			continue
		}
		role := m.Role
		if role == "assistant" {
			role = "model"
		}
		b.WriteString("<start_of_turn>" + role + "\n")
		if system != "" && role != "model" {
			b.WriteString(system + "\n\n")
			system = ""
		}
		b.WriteString(trimSpace(m.Content) + "<end_of_turn>\n")
	}
	if add {
		b.WriteString("<start_of_turn>model\n")
	}
}

func renderOrion(b *strings.Builder, msgs []Message, _ bool) {
	system := ""
	for _, m := range msgs {
		switch m.Role {
		case "system":
			system += m.Content
		case "user":
			b.WriteString("Human: ")
			if system != "" {
				b.WriteString(system + "\n\n")
				system = ""
			}
			b.WriteString(m.Content + "\n\nAssistant: </s>")
		default:
			b.WriteString(m.Content + "</s>")
		}
	}
}

func renderOpenChat(b *strings.Builder, msgs []Message, add bool) {
	for _, m := range msgs {
		if m.Role == "system" {
			b.WriteString(m.Content + "<|end_of_turn|>")
			continue
		}
		role := m.Role
		if role != "" && role[0] >= 'a' && role[0] <= 'z' {
			role = string(role[0]-'a'+'A') + role[1:]
		}
		b.WriteString("GPT4 Correct " + role + ": " + m.Content + "<|end_of_turn|>")
	}
	if add {
		b.WriteString("GPT4 Correct Assistant:")
	}
}

func vicuna(orca bool) llamaRender {
	return func(b *strings.Builder, msgs []Message, add bool) {
		for _, m := range msgs {
			switch {
			case m.Role == "system" && orca:
				b.WriteString("SYSTEM: " + m.Content + "\n")
			case m.Role == "system":
				b.WriteString(m.Content + "\n\n")
			case m.Role == "user":
				b.WriteString("USER: " + m.Content + "\n")
			case m.Role == "assistant":
				b.WriteString("ASSISTANT: " + m.Content + "</s>\n")
			}
		}
		if add {
			b.WriteString("ASSISTANT:")
		}
	}
}

func renderMiniCPM(b *strings.Builder, msgs []Message, _ bool) {
	for _, m := range msgs {
		if m.Role == "user" {
			b.WriteString("<用户>" + trimSpace(m.Content) + "<AI>")
		} else {
			b.WriteString(trimSpace(m.Content))
		}
	}
}

func renderRWKV(b *strings.Builder, msgs []Message, _ bool) {
	for i, m := range msgs {
		switch m.Role {
		case "system":
			b.WriteString("System: " + trimSpace(m.Content) + "\n\n")
		case "user":
			b.WriteString("User: " + trimSpace(m.Content) + "\n\n")
			if i == len(msgs)-1 {
				b.WriteString("Assistant:")
			}
		case "assistant":
			b.WriteString("Assistant: " + trimSpace(m.Content) + "\n\n")
		}
	}
}

func renderGranite3(b *strings.Builder, msgs []Message, add bool) {
	for _, m := range msgs {
		b.WriteString("<|start_of_role|>" + m.Role + "<|end_of_role|>")
		if m.Role == "assistant_tool_call" {
			b.WriteString("<|tool_call|>")
		}
		b.WriteString(m.Content + "<|end_of_text|>\n")
	}
	if add {
		b.WriteString("<|start_of_role|>assistant<|end_of_role|>")
	}
}

func renderGranite4(b *strings.Builder, msgs []Message, add bool) {
	for _, m := range msgs {
		if m.Role == "assistant_tool_call" {
			b.WriteString("<|start_of_role|>assistant<|end_of_role|><|tool_call|>")
		} else {
			b.WriteString("<|start_of_role|>" + m.Role + "<|end_of_role|>")
		}
		b.WriteString(m.Content + "<|end_of_text|>\n")
	}
	if add {
		b.WriteString("<|start_of_role|>assistant<|end_of_role|>")
	}
}

func renderGigaChat(b *strings.Builder, msgs []Message, add bool) {
	b.WriteString("<s>")
	if len(msgs) > 0 && msgs[0].Role == "system" {
		b.WriteString(msgs[0].Content + "<|message_sep|>")
		msgs = msgs[1:]
	}
	for _, m := range msgs {
		switch m.Role {
		case "user":
			b.WriteString("user<|role_sep|>" + m.Content + "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>")
		case "assistant":
			b.WriteString("assistant<|role_sep|>" + m.Content + "<|message_sep|>")
		}
	}
	if add {
		b.WriteString("assistant<|role_sep|>")
	}
}

// bailingRole is Ling's role name: HUMAN for user, else the role in upper
// case (ASCII, as ::toupper).
func bailingRole(role string) string {
	if role == "user" {
		return "HUMAN"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}, role)
}

func bailing(think string) llamaRender {
	return func(b *strings.Builder, msgs []Message, add bool) {
		for _, m := range msgs {
			b.WriteString("<role>" + bailingRole(m.Role) + "</role>" + m.Content)
		}
		if add {
			b.WriteString("<role>ASSISTANT</role>" + think)
		}
	}
}

func renderBailing2(b *strings.Builder, msgs []Message, add bool) {
	if len(msgs) == 0 || msgs[0].Role != "system" {
		b.WriteString("<role>SYSTEM</role>detailed thinking off<|role_end|>")
	}
	for _, m := range msgs {
		b.WriteString("<role>" + bailingRole(m.Role) + "</role>" + m.Content + "<|role_end|>")
	}
	if add {
		b.WriteString("<role>ASSISTANT</role>")
	}
}

func renderSmolVLM(b *strings.Builder, msgs []Message, add bool) {
	b.WriteString("<|im_start|>")
	for _, m := range msgs {
		switch m.Role {
		case "system":
			b.WriteString(m.Content + "\n\n")
		case "user":
			b.WriteString("User: " + m.Content + "<end_of_utterance>\n")
		default:
			b.WriteString("Assistant: " + m.Content + "<end_of_utterance>\n")
		}
	}
	if add {
		b.WriteString("Assistant:")
	}
}

func renderHunyuanMoE(b *strings.Builder, msgs []Message, _ bool) {
	for _, m := range msgs {
		switch m.Role {
		case "system":
			b.WriteString("<|startoftext|>" + m.Content + "<|extra_4|>")
		case "assistant":
			b.WriteString(m.Content + "<|eos|>")
		default:
			b.WriteString("<|startoftext|>" + m.Content + "<|extra_0|>")
		}
	}
}

func renderHunyuanDense(b *strings.Builder, msgs []Message, _ bool) {
	for i, m := range msgs {
		if i == 0 && m.Role == "system" {
			b.WriteString(m.Content + "<｜hy_place▁holder▁no▁3｜>")
		}
		switch m.Role {
		case "assistant":
			b.WriteString("<｜hy_Assistant｜>" + m.Content + "<｜hy_place▁holder▁no▁2｜>")
		case "user":
			b.WriteString("<｜hy_User｜>" + m.Content + "<｜hy_Assistant｜>")
		}
	}
}

func renderHunyuanVL(b *strings.Builder, msgs []Message, _ bool) {
	b.WriteString("<｜hy_begin▁of▁sentence｜>")
	for i, m := range msgs {
		switch {
		case i == 0 && m.Role == "system":
			b.WriteString(m.Content + "<｜hy_place▁holder▁no▁3｜>")
		case m.Role == "user":
			b.WriteString(m.Content + "<｜hy_User｜>")
		case m.Role == "assistant":
			b.WriteString(m.Content + "<｜hy_Assistant｜>")
		}
	}
}

func renderKimiK2(b *strings.Builder, msgs []Message, add bool) {
	heads := map[string]string{"system": "<|im_system|>system<|im_middle|>", "user": "<|im_user|>user<|im_middle|>",
		"assistant": "<|im_assistant|>assistant<|im_middle|>", "tool": "<|im_system|>tool<|im_middle|>"}
	for _, m := range msgs {
		b.WriteString(heads[m.Role] + m.Content + "<|im_end|>")
	}
	if add {
		b.WriteString("<|im_assistant|>assistant<|im_middle|>")
	}
}

func renderSeedOSS(b *strings.Builder, msgs []Message, add bool) {
	for _, m := range msgs {
		b.WriteString("<seed:bos>" + m.Role + "\n" + maybeTrim(m.Content, m.Role == "assistant") + "<seed:eos>")
	}
	if add {
		b.WriteString("<seed:bos>assistant\n")
	}
}

func renderGrok2(b *strings.Builder, msgs []Message, add bool) {
	for _, m := range msgs {
		switch m.Role {
		case "system":
			b.WriteString("System: " + trimSpace(m.Content) + "<|separator|>\n\n")
		case "user":
			b.WriteString("Human: " + trimSpace(m.Content) + "<|separator|>\n\n")
		case "assistant":
			b.WriteString("Assistant: " + m.Content + "<|separator|>\n\n")
		}
	}
	if add {
		b.WriteString("Assistant:")
	}
}

func renderPangu(b *strings.Builder, msgs []Message, add bool) {
	names := map[string]string{"system": "系统", "user": "用户", "assistant": "助手", "tool": "工具", "function": "方法"}
	for i, m := range msgs {
		if i == 0 && m.Role != "system" {
			b.WriteString("[unused9]系统：[unused10]")
		}
		if n, ok := names[m.Role]; ok {
			b.WriteString("[unused9]" + n + "：" + m.Content + "[unused10]")
		}
	}
	if add {
		b.WriteString("[unused9]助手：")
	}
}

// DetectLlamaTemplate is llama.cpp's llm_chat_detect_template: a built-in
// name given as is, else the built-in template whose markers tmpl holds,
// else "".
func DetectLlamaTemplate(tmpl string) string {
	if _, ok := llamaTemplates[tmpl]; ok && tmpl != "dots1" {
		return tmpl
	}
	has := func(s string) bool { return strings.Contains(tmpl, s) }
	switch {
	case has("<|im_start|>"):
		switch {
		case has("<|im_sep|>"):
			return "phi4"
		case has("<end_of_utterance>"):
			return "smolvlm"
		}
		return "chatml"
	case strings.HasPrefix(tmpl, "mistral") || has("[INST]"):
		return detectMistral(has)
	case has("<|assistant|>") && has("<|end|>"):
		return "phi3"
	case has("[gMASK]<sop>"):
		return "chatglm4"
	case has("<|assistant|>") && has("<|user|>"):
		switch {
		case has("<|tool_declare|>"):
			return "exaone-moe"
		case has("</s>"):
			return "falcon3"
		}
		return "glmedge"
	}
	return detectByMarkers(has)
}

// detectMistral tells llama.cpp's [INST] templates apart.
func detectMistral(has func(string) bool) string {
	switch {
	case has("[SYSTEM_PROMPT]"):
		return "mistral-v7"
	case has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]"):
		switch {
		case has(" [INST]"):
			return "mistral-v1"
		case has(`"[INST]"`):
			return "mistral-v3-tekken"
		}
		return "mistral-v3"
	case has("content.strip()"):
		return "llama2-sys-strip"
	case has("bos_token + '[INST]"):
		return "llama2-sys-bos"
	case has("<<SYS>>"):
		return "llama2-sys"
	}
	return "llama2"
}

// llamaMarkers are the rest of llm_chat_detect_template's checks, in its
// order: the first whose markers the template all holds names it.
var llamaMarkers = []struct {
	name    string
	markers []string
}{
	{"glmedge", []string{"<|{{ item['role'] }}|>", "<|begin_of_image|>"}},
	{"zephyr", []string{"<|user|>", "<|endoftext|>"}},
	{"monarch", []string{"bos_token + message['role']"}},
	{"gemma", []string{"<start_of_turn>"}},
	{"orion", []string{`'\n\nAssistant: ' + eos_token`}},
	{"openchat", []string{"GPT4 Correct "}},
	{"vicuna-orca", []string{"USER: ", "ASSISTANT: ", "SYSTEM: "}},
	{"vicuna", []string{"USER: ", "ASSISTANT: "}},
	{"deepseek", []string{"### Instruction:", "<|EOT|>"}},
	{"command-r", []string{"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"}},
	{"llama3", []string{"<|start_header_id|>", "<|end_header_id|>"}},
	{"chatglm3", []string{"[gMASK]sop"}},
	{"minicpm", []string{"<用户>"}},
	{"deepseek2", []string{"'Assistant: ' + message['content'] + eos_token"}},
	{"deepseek3", []string{"<｜Assistant｜>", "<｜User｜>", "<｜end▁of▁sentence｜>"}},
	{"exaone4", []string{"[|system|]", "[|assistant|]", "[|endofturn|]", "[|tool|]"}},
	{"exaone3", []string{"[|system|]", "[|assistant|]", "[|endofturn|]"}},
	{"rwkv-world", []string{"rwkv-world"}},
	{"rwkv-world", []string{`{{- 'User: ' + message['content']|trim + '\n\n' -}}`}},
	{"granite-4.0", []string{"<|start_of_role|>", "<tool_call>", "g4_default_system_message"}},
	{"granite-4.0", []string{"<|start_of_role|>", "<tools>", "g4_default_system_message"}},
	{"granite-4.1", []string{"<|start_of_role|>", "<tool_call>"}},
	{"granite-4.1", []string{"<|start_of_role|>", "<tools>"}},
	{"granite", []string{"<|start_of_role|>"}},
	{"gigachat", []string{"message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"}},
	{"megrez", []string{"<|role_start|>"}},
	{"yandex", []string{" Ассистент:"}},
	{"bailing", []string{"<role>ASSISTANT</role>", "'HUMAN'"}},
	{"bailing-think", []string{"<role>ASSISTANT</role>", `"HUMAN"`, "<think>"}},
	{"bailing2", []string{"<role>ASSISTANT</role>", "<role>HUMAN</role>", "<|role_end|>"}},
	{"llama4", []string{"<|header_start|>", "<|header_end|>"}},
	{"dots1", []string{"<|endofuserprompt|>"}},
	{"hunyuan-moe", []string{"<|extra_0|>", "<|extra_4|>"}},
	{"gpt-oss", []string{"<|start|>", "<|channel|>"}},
	{"hunyuan-vl", []string{"<｜hy_Assistant｜>", "<｜hy_begin▁of▁sentence｜>"}},
	{"hunyuan-dense", []string{"<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁3｜>"}},
	{"kimi-k2", []string{"<|im_assistant|>assistant<|im_middle|>"}},
	{"seed_oss", []string{"<seed:bos>"}},
	{"grok-2", []string{"'Assistant: '  + message['content'] + '<|separator|>"}},
	{"pangu-embedded", []string{"[unused9]系统：[unused10]"}},
	{"solar-open", []string{"<|begin|>", "<|end|>", "<|content|>"}},
}

func detectByMarkers(has func(string) bool) string {
	for _, m := range llamaMarkers {
		if !slices.ContainsFunc(m.markers, func(s string) bool { return !has(s) }) {
			return m.name
		}
	}
	return ""
}

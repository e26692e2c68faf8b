package main

import (
	"strings"
)

// Every llama-cli and llama-server flag (llama.cpp's common/arg.cpp, the
// options of its cli, completion and server programs), and what pipe does
// with it: supports it (under its name or through translateArgs), accepts
// and ignores it (it would change nothing pipe does), or refuses it by name
// with why. README.md's table is generated from this one
// (TestReadmeLlamaTable), and a test checks every row against the parser.

// llamaStatus is what pipe does with a llama.cpp flag.
type llamaStatus int

const (
	llamaSupported llamaStatus = iota
	llamaAccepted              // accepted and ignored
	llamaRefused
)

// llamaFlag is a row: llama.cpp's spellings of one option, and pipe's
// equivalent (supported) or why not (accepted, refused).
type llamaFlag struct {
	names  string // space-separated
	status llamaStatus
	what   string
}

const (
	cpuHint      = "pipe has one pool of -t threads; pin it with --cpus LIST"
	specHint     = "pipe has no speculative decoding (no draft model, no lookup decoding)"
	kvHint       = "pipe keeps one KV cache of -c tokens per session and reuses a shared prefix; there is nothing else to manage"
	samplerHint  = "pipe's sampler has temperature, top-k, top-p, min-p and the repeat, frequency and presence penalties"
	ropeHint     = "pipe takes RoPE and context-extension parameters from the GGUF"
	textOnlyHint = "pipe runs text models only"
	adapterHint  = "pipe loads no adapters (LoRA, control vectors)"
	oneModelHint = "pipe serve serves one model for its lifetime"
	embedHint    = "pipe computes embeddings (--embedding), not rankings: it has no reranker head"
	presetHint   = "llama.cpp's presets download a model; pipe does not download: pass -m"
	chatInHint   = "-i renders each turn with the model's chat template"
	templateHint = "pipe serve always parses the reply (reasoning_format, tool calls) and continues an assistant's last message, as llama-server's defaults do"
	reasonHint   = "pipe serve has --reasoning on|off|auto and --reasoning-budget, pipe run --reasoning show|hide and --no-think; templates take no effort or preserve arguments"
	httpHint     = "pipe serve's HTTP server has fixed limits and no such option"
	toolsHint    = "pipe serve has llama-server's built-in --tools but no MCP servers or agent mode"
)

var llamaTable = []llamaFlag{
	// what pipe does under llama.cpp's names
	{"-h --help", llamaSupported, "the same"},
	{"--usage", llamaSupported, "--help"},
	{"--version", llamaSupported, "the same (the module version or Go's pseudo-version)"},
	{"-m --model", llamaSupported, "the same (run, serve)"},
	{"-p --prompt", llamaSupported, "the same"},
	{"-f --file", llamaSupported, "the same: the prompt from a file (- = stdin)"},
	{"-e --escape --no-escape", llamaSupported, "the same"},
	{"-sys --system-prompt", llamaSupported, "--system; renders the chat template (--chat implied) or says why it cannot"},
	{"-n --predict --n-predict", llamaSupported, "the same (run; serve: the default of a request that sets no limit); -n -1 after a space works"},
	{"-c --ctx-size", llamaSupported, "the same"},
	{"-t --threads", llamaSupported, "the same"},
	{"-s --seed", llamaSupported, "the same (-1 = random)"},
	{"--temp --temperature", llamaSupported, "the same"},
	{"--top-k --top-p --min-p", llamaSupported, "the same"},
	{"--repeat-penalty --repeat-last-n", llamaSupported, "the same (--repeat-last-n -1 = the whole history)"},
	{"--presence-penalty --frequency-penalty", llamaSupported, "the same"},
	{"--ignore-eos", llamaSupported, "the same"},
	{"-i --interactive -cnv --conversation", llamaSupported, "-i: chat turn by turn"},
	{"-no-cnv --no-conversation", llamaSupported, "--interactive=false (pipe run is one-shot by default)"},
	{"-if --interactive-first", llamaSupported, "-i (without -p it waits for the first line)"},
	{"-st --single-turn", llamaSupported, "the same: one chat turn (-p/-f, else one line of stdin), then exit"},
	{"-r --reverse-prompt", llamaSupported, "the same: run stops the reply once its text holds it; serve stops every reply there, as a stop sequence (repeatable)"},
	{"--display-prompt --no-display-prompt", llamaSupported, "--echo (off by default)"},
	{"-ctk --cache-type-k -ctv --cache-type-v", llamaSupported, "f16 or f32, one type for K and V (--kv-type); quantized types are refused"},
	{"-ndio --no-direct-io", llamaSupported, "--no-odirect"},
	{"-v --verbose --log-verbose", llamaSupported, "--log-level debug (serve: and --verbose-answers, __verbose in every answer not streamed, as llama-server's)"},
	{"--log-disable", llamaSupported, "--log-level error"},
	{"--host --port --api-key", llamaSupported, "the same (serve)"},
	{"-a --alias", llamaSupported, "the same (serve): comma-separated names, the first in sorted order is the model's id"},
	{"--tags", llamaSupported, "the same (serve): listed in /v1/models"},
	{"--no-ui --no-webui", llamaSupported, "the same (serve): no chat page at /"},
	{"--cors-origins --cors-methods --cors-headers --cors-credentials --no-cors-credentials", llamaSupported, "the same (serve), but a keyless server's default origins are 'localhost', not '*', and a request from an origin not allowed is refused (403)"},
	{"--metrics", llamaSupported, "the same (serve; without it /metrics is 501)"},
	{"--slots --no-slots", llamaSupported, "the same (serve: --no-slots answers /slots with 501); /slots shows no prompt text"},
	{"--jinja --no-jinja", llamaSupported, "the same: the GGUF's tokenizer.chat_template run as Jinja (internal/jinja, a bounded fork of github.com/ardanlabs/jinja) instead of the built-in ChatML, harmony or Gemma 4 renderer; on by default in serve, as llama-server's (a model without a template, or one that does not compile, keeps the built-in renderer), off in run, as llama-cli's"},
	{"--chat-template --chat-template-file", llamaSupported, "the same: llama.cpp's built-in names (llama3, chatml, mistral-v7, command-r, deepseek3, phi3, gemma, zephyr, vicuna, … all 54, rendered byte for byte as llama.cpp's llm_chat_apply_template), pipe's harmony and gemma4, a Jinja file or Jinja source"},

	// accepted, changing nothing pipe does
	{"--warmup --no-warmup", llamaAccepted, "pipe makes no warm-up pass; its first token's time is the real one"},
	{"-co --color", llamaAccepted, "pipe prints the generated text plain; log colours follow the terminal"},
	{"--log-colors", llamaAccepted, "log colours follow the terminal (none off one)"},
	{"--log-timestamps --no-log-timestamps --log-prefix --no-log-prefix", llamaAccepted, "every log line carries its time and level"},
	{"--perf --no-perf --show-timings --no-show-timings", llamaAccepted, "pipe always logs its timings and run summary"},
	{"-dio --direct-io", llamaAccepted, "O_DIRECT is pipe's default (--no-odirect turns it off)"},
	{"--offline", llamaAccepted, "pipe never goes online"},
	{"--simple-io", llamaAccepted, "pipe reads stdin line by line already"},
	{"--ui --webui", llamaAccepted, "pipe serve always serves its chat page at /"},
	{"--cache-prompt", llamaAccepted, "pipe serve reuses the KV of a shared prefix by default"},

	// refused, by name, with why
	{"-hf -hfr --hf-repo -hff --hf-file -hft --hf-token -mu --model-url -dr --docker-repo", llamaRefused, downloadHnt},
	{"-hfd -hfrd --hf-repo-draft --spec-draft-hf", llamaRefused, downloadHnt},
	{"-cl --cache-list", llamaRefused, "pipe keeps no download cache"},
	{"--embd-gemma-default --fim-qwen-1.5b-default --fim-qwen-3b-default --fim-qwen-7b-default --fim-qwen-7b-spec --fim-qwen-14b-spec --fim-qwen-30b-default --gpt-oss-20b-default --gpt-oss-120b-default --vision-gemma-4b-default --vision-gemma-12b-default --spec-default", llamaRefused, presetHint},
	{"-ngl --gpu-layers --n-gpu-layers -sm --split-mode -ts --tensor-split -mg --main-gpu -dev --device --list-devices --rpc", llamaRefused, gpuHint},
	{"-kvo --kv-offload -nkvo --no-kv-offload --op-offload --no-op-offload --no-host --repack -nr --no-repack", llamaRefused, gpuHint},
	{"-fit --fit -fitt --fit-target -fitc --fit-ctx", llamaRefused, "pipe sizes its expert cache to the memory it has (--cache-mb auto, --cache-floor-mb)"},
	{"-ot --override-tensor -cmoe --cpu-moe -ncmoe --n-cpu-moe", llamaRefused, expertHint},
	{"-b --batch-size", llamaSupported, "serve: the prompt tokens the one session feeds at a time, a return_progress event after each (default 2048; -ub at most this)"},
	{"-ub --ubatch-size", llamaSupported, "serve: the most prompt tokens a slot feeds per step beside the decoding slots (default 512)"},
	{"-np --parallel", llamaSupported, "serve: N slots decoded together, -c split among them (default 1)"},
	{"-sps --slot-prompt-similarity", llamaSupported, "the same (serve; default 0.1, 0 = least recently used slot)"},
	{"-bs --backend-sampling", llamaAccepted, "it moves llama.cpp's sampling onto the compute backend, output unchanged; pipe samples on the CPU after each pass"},
	{"-cb --cont-batching", llamaAccepted, "what pipe serve does: slots join and leave between steps"},
	{"-kvu --kv-unified -no-kvu --no-kv-unified", llamaSupported, "serve: the --parallel slots share one pool of -c positions, each may fill all of it (default: -c split among them)"},
	{"-nocb --no-cont-batching", llamaRefused, parallelHnt},
	{"--mlock", llamaRefused, mlockHint},
	{"--mmap --no-mmap", llamaRefused, noMmapHint},
	{"-lm --load-mode", llamaRefused, "pipe's --dense-weights (anon, warm, mmap) and --moe-stream choose how weights load"},
	{"--numa", llamaRefused, "pipe has no NUMA placement; pin with --cpus"},
	{"-fa --flash-attn", llamaRefused, "pipe's attention has one CPU implementation; there is no flash-attention switch"},
	{"-tb --threads-batch -C --cpu-mask -Cr --cpu-range --cpu-strict --prio --poll -Cb --cpu-mask-batch -Crb --cpu-range-batch --cpu-strict-batch --prio-batch --poll-batch", llamaRefused, cpuHint},
	{"-lcs --lookup-cache-static -lcd --lookup-cache-dynamic", llamaRefused, specHint},
	{"-td --threads-draft --spec-draft-threads -tbd --threads-batch-draft --spec-draft-threads-batch -Cd --cpu-mask-draft --spec-draft-cpu-mask -Crd --cpu-range-draft --spec-draft-cpu-range --cpu-strict-draft --spec-draft-cpu-strict --prio-draft --spec-draft-prio --poll-draft --spec-draft-poll -Cbd --cpu-mask-batch-draft --spec-draft-cpu-mask-batch --cpu-strict-batch-draft --spec-draft-cpu-strict-batch --prio-batch-draft --spec-draft-prio-batch --poll-batch-draft --spec-draft-poll-batch", llamaRefused, specHint},
	{"-ctkd --cache-type-k-draft --spec-draft-type-k -ctvd --cache-type-v-draft --spec-draft-type-v -otd --override-tensor-draft --spec-draft-override-tensor -cmoed --cpu-moe-draft --spec-draft-cpu-moe -ncmoed --n-cpu-moe-draft --spec-draft-n-cpu-moe --spec-draft-ncmoe", llamaRefused, specHint},
	{"--spec-draft-n-max --spec-draft-n-min --spec-draft-p-split --draft-p-split --spec-draft-p-min --draft-p-min --spec-draft-backend-sampling --no-spec-draft-backend-sampling -devd --device-draft --spec-draft-device -ngld --gpu-layers-draft --n-gpu-layers-draft --spec-draft-ngl -md --model-draft --spec-draft-model --spec-type --draft --draft-n --draft-max --draft-min --draft-n-min", llamaRefused, specHint},
	{"--spec-ngram-mod-n-min --spec-ngram-mod-n-max --spec-ngram-mod-n-match --spec-ngram-simple-size-n --spec-ngram-simple-size-m --spec-ngram-simple-min-hits --spec-ngram-map-k-size-n --spec-ngram-map-k-size-m --spec-ngram-map-k-min-hits --spec-ngram-map-k4v-size-n --spec-ngram-map-k4v-size-m --spec-ngram-map-k4v-min-hits --spec-ngram-size-n --spec-ngram-size-m --spec-ngram-min-hits", llamaRefused, specHint},
	{"--swa-full -ctxcp --ctx-checkpoints --swa-checkpoints -cms --checkpoint-min-step -cram --cache-ram --cache-idle-slots --no-cache-idle-slots -dt --defrag-thold --cache-reuse", llamaRefused, kvHint},
	{"--context-shift --no-context-shift", llamaSupported, "the same (serve): the kept tail's KV is recomputed, not re-roped"},
	{"--keep", llamaSupported, "the same (serve, with --context-shift)"},
	{"--prompt-cache --prompt-cache-all --prompt-cache-ro", llamaRefused, "pipe run saves no KV to disk; pipe serve reuses the KV of a shared prefix in memory"},
	{"--no-cache-prompt", llamaRefused, "send \"cache_prompt\": false with the request (/completion)"},
	{"-sysf --system-prompt-file", llamaRefused, "pass the file's text: -sys \"$(cat FILE)\""},
	{"-bf --binary-file", llamaRefused, "pipe reads text prompts only (-p, -f)"},
	{"-ptc --print-token-count", llamaRefused, "pipe's --progress line and run summary count the tokens"},
	{"--verbose-prompt", llamaRefused, "--echo prints the rendered prompt; --tokens-out its ids"},
	{"-sp --special", llamaRefused, "pipe prints no special tokens' text"},
	{"-mli --multiline-input --in-prefix-bos --in-prefix --in-suffix", llamaRefused, chatInHint},
	{"--spm-infill", llamaRefused, "pipe has no infill mode"},
	{"--samplers --sampler-seq --sampling-seq --top-nsigma --top-n-sigma --xtc-probability --xtc-threshold --typical --typical-p", llamaRefused, samplerHint},
	{"--dry-multiplier --dry-base --dry-allowed-length --dry-penalty-last-n --dry-sequence-breaker --adaptive-target --adaptive-decay --dynatemp-range --dynatemp-exp --mirostat --mirostat-lr --mirostat-ent -l --logit-bias", llamaRefused, samplerHint},
	{"--grammar --grammar-file -j --json-schema -jf --json-schema-file", llamaRefused, "pipe has no server-wide grammar; pipe serve takes grammar, json_schema and response_format per request"},
	{"--embedding --embeddings --pooling --embd-normalize", llamaSupported, "the same (serve): /v1/embeddings, /embeddings, /embedding; --pooling none, mean, cls or last (rank refused)"},
	{"--rerank --reranking", llamaRefused, embedHint},
	{"--rope-scaling --rope-scale --rope-freq-base --rope-freq-scale --yarn-orig-ctx --yarn-ext-factor --yarn-attn-factor --yarn-beta-slow --yarn-beta-fast -gan --grp-attn-n -gaw --grp-attn-w", llamaRefused, ropeHint},
	{"-mm --mmproj -mmu --mmproj-url --mmproj-auto --no-mmproj --no-mmproj-auto --mmproj-offload --no-mmproj-offload --image --audio --video --image-min-tokens --image-max-tokens --mtmd-batch-max-tokens", llamaRefused, textOnlyHint},
	{"--check-tensors", llamaRefused, "pipe inspect shows a model's tensors; loading checks their sizes and offsets"},
	{"--override-kv", llamaRefused, "pipe reads the GGUF's metadata as it is (--n-expert-used overrides k)"},
	{"--lora --lora-scaled --control-vector --control-vector-scaled --control-vector-layer-range --lora-init-without-apply", llamaRefused, adapterHint},
	{"-o --output --output-file", llamaRefused, "pipe run writes the text on stdout (--csv, --route-trace, --tokens-out write the rest)"},
	{"--models-dir --models-preset --models-max --models-autoload --no-models-autoload --sleep-idle-seconds", llamaRefused, oneModelHint},
	{"--slot-save-path", llamaSupported, "the same (serve): POST /slots/{id}?action=save|restore|erase; llama-server's file header and token list, pipe's own KV and recurrent state after them"},
	{"--reuse-port --path --api-prefix -to --timeout --sse-ping-interval --threads-http", llamaRefused, httpHint},
	{"--api-key-file", llamaRefused, "set PIPE_API_KEY from the file: PIPE_API_KEY=$(cat FILE)"},
	{"--ssl-key-file --ssl-cert-file", llamaRefused, "pipe serve speaks plain HTTP; put a TLS proxy in front of it"},
	{"--ui-config --webui-config --ui-config-file --webui-config-file", llamaRefused, "pipe serve's chat page has no settings file"},
	{"--ui-mcp-proxy --webui-mcp-proxy --no-ui-mcp-proxy --no-webui-mcp-proxy", llamaSupported, "the same (serve, off by default): GET/POST /cors-proxy?url=… forwards only the x-llama-server-proxy-header-* headers; bounded in time and size"},
	{"--tools", llamaSupported, "the same (serve, off by default): llama-server's seven built-in tools at GET/POST /tools, run on the host (they read, write and run shell commands: never on a server others can reach); CORS origins default to localhost"},
	{"--media-path", llamaSupported, "the same (serve): file:// media URLs name files under it (confined); pipe runs text models, so the part is then refused as llama-server refuses it without a vision model"},
	{"--tools-runtime", llamaRefused, "pipe serve runs --tools on the host only; it has no docker, podman or ssh isolate"},
	{"--mcp-servers-config --mcp-servers-json -ag --agent -no-ag --no-agent", llamaRefused, toolsHint},
	{"--props", llamaRefused, "pipe serve's /props is read-only"},
	{"--server-base --completion-bash", llamaRefused, "pipe has no such mode"},
	{"--chat-template-kwargs", llamaSupported, "the same, for serve: a JSON object of template variables under each request's chat_template_kwargs (enable_thinking switches thinking)"},
	{"--skip-chat-parsing --no-skip-chat-parsing --prefill-assistant --no-prefill-assistant", llamaRefused, templateHint},
	{"--reasoning-format", llamaSupported, "the same, for serve: none, deepseek, deepseek-legacy or auto (the default): a chat's leading <think>…</think> comes back as reasoning_content, in the message and the stream's deltas; a request's reasoning_format wins"},
	{"-rea --reasoning", llamaSupported, "the same, for serve: on, off or auto (the default); off renders chats with enable_thinking false"},
	{"--reasoning-budget --reasoning-budget-message", llamaSupported, "the same, for serve: the most tokens of a chat's reasoning before the message and </think> are forced (-1: no limit); a request's reasoning_budget_tokens and reasoning_budget_message win"},
	{"--reasoning-effort --reasoning-preserve --no-reasoning-preserve", llamaRefused, reasonHint},
	{"--log-file --log-prompts-dir", llamaRefused, "redirect stderr (it is JSON lines off a terminal)"},
	{"-lv --verbosity --log-verbosity", llamaRefused, "--log-level debug, info, warn or error"},
}

// llamaRefusals maps every refused spelling to why (translateArgs).
var llamaRefusals = func() map[string]string {
	m := map[string]string{}
	for _, f := range llamaTable {
		if f.status == llamaRefused {
			for _, n := range strings.Fields(f.names) {
				m[n] = f.what
			}
		}
	}
	return m
}()

// llamaIgnored are the accepted spellings, with the values one of them may
// take after a space (dropped with it).
var llamaIgnored = func() map[string][]string {
	m := map[string][]string{}
	for _, f := range llamaTable {
		if f.status == llamaAccepted {
			for _, n := range strings.Fields(f.names) {
				m[n] = nil
			}
		}
	}
	for _, n := range []string{"-co", "--color", "--log-colors"} {
		m[n] = []string{"on", "off", "auto"}
	}
	return m
}()

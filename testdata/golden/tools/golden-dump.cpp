// golden-dump: one golden run of a GGUF model through llama.cpp's llama.h,
// in the format of testdata/golden/README.md (section 4: the run JSON;
// section 5: intermediate tensors of the prompt pass).
//
// For a model and a prompt it
//   1. tokenizes the prompt (add_special=true; a chat prompt goes through the
//      model's chat template with add_generation_prompt and is tokenized with
//      parse_special=true),
//   2. decodes it (config ref/lcppdefault: one llama_decode for the whole
//      prompt; refseq: one call per token), then greedily generates -n tokens
//      one llama_decode call each (argmax, lowest id wins ties, never stops at
//      EOG), keeping every full logits row: the free-running run, whose tokens
//      are also what a teacher-forced comparison feeds back,
//   3. in a fresh context decodes the prompt once more with logits for every
//      position (refseq: the rows of the sequential pass) -> prompt_logits,
//   4. with --tensors DIR, in a third fresh context decodes the prompt in one
//      batch with an eval callback that writes every non-view graph node
//      (float32, F16 converted; int32 as is) and an index.json.
//
// Written for this repository; it uses only llama.h and ggml.h.
// Build: testdata/golden/tools/build.sh (see testdata/golden/tools/README.md).

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Args {
    std::string model, model_file, prompt_file, prompt_id, out, tensors, keep = ".*";
    std::string config = "ref", commit, build, sha256;
    bool chat = false;
    int n_gen = 32, threads = 1, n_ctx = 512;
};

[[noreturn]] void die(const std::string & msg) {
    fprintf(stderr, "golden-dump: %s\n", msg.c_str());
    exit(1);
}

void usage() {
    fprintf(stderr,
            "usage: golden-dump -m MODEL.gguf --prompt-file FILE --prompt-id ID -o RUN.json\n"
            "         [--chat] [-n 32] [-t 1] [--ctx 512] [--config ref|refseq|lcppdefault]\n"
            "         [--tensors DIR [--keep REGEX]] [--model-file REL] [--sha256 HEX]\n"
            "         [--commit ID] [--build TEXT]\n");
    exit(2);
}

Args parse(int argc, char ** argv) {
    Args a;
    for (int i = 1; i < argc; i++) {
        std::string k = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) {
                die("flag " + k + " needs a value");
            }
            return argv[++i];
        };
        if (k == "-m") a.model = val();
        else if (k == "--model-file") a.model_file = val();
        else if (k == "--prompt-file") a.prompt_file = val();
        else if (k == "--prompt-id") a.prompt_id = val();
        else if (k == "-o") a.out = val();
        else if (k == "--chat") a.chat = true;
        else if (k == "-n") a.n_gen = std::stoi(val());
        else if (k == "-t") a.threads = std::stoi(val());
        else if (k == "--ctx") a.n_ctx = std::stoi(val());
        else if (k == "--config") a.config = val();
        else if (k == "--tensors") a.tensors = val();
        else if (k == "--keep") a.keep = val();
        else if (k == "--sha256") a.sha256 = val();
        else if (k == "--commit") a.commit = val();
        else if (k == "--build") a.build = val();
        else usage();
    }
    if (a.model.empty() || a.prompt_file.empty() || a.prompt_id.empty() || a.out.empty()) usage();
    if (a.config != "ref" && a.config != "refseq" && a.config != "lcppdefault") die("--config: " + a.config);
    if (a.model_file.empty()) a.model_file = a.model;
    return a;
}

std::string read_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) die("cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// ---- JSON output ----------------------------------------------------------

std::string hex(const std::string & s) {
    static const char * d = "0123456789abcdef";
    std::string o;
    for (unsigned char c : s) {
        o += d[c >> 4];
        o += d[c & 15];
    }
    return o;
}

// utf8_lossy decodes s as UTF-8, each maximal ill-formed subpart becoming
// one U+FFFD (Unicode's "substitution of maximal subparts", as Python's
// errors="replace" and WHATWG decode): a lead byte and the continuation
// bytes that can still follow it count as one, any other bad byte as one.
std::u32string utf8_lossy(const std::string & s) {
    std::u32string o;
    size_t i = 0;
    while (i < s.size()) {
        unsigned char c = s[i];
        if (c < 0x80) {
            o += c;
            i++;
            continue;
        }
        int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        char32_t cp = n == 2 ? c & 31 : n == 3 ? c & 15 : c & 7;
        size_t j = i + 1;
        for (int k = 1; n > 0 && k < n && j < s.size(); k++, j++) {
            unsigned char cc = s[j];
            if (cc < (k == 1 ? lo : 0x80) || cc > (k == 1 ? hi : 0xBF)) {
                break;
            }
            cp = cp << 6 | (cc & 63);
        }
        if (n == 0 || j - i < (size_t) n) {
            o += U'\uFFFD';
            i = n == 0 ? i + 1 : j;
            continue;
        }
        o += cp;
        i = j;
    }
    return o;
}

// jstr is s as a JSON string literal, non-ASCII escaped as \uXXXX.
std::string jstr(const std::string & s) {
    std::string o = "\"";
    char buf[16];
    for (char32_t c : utf8_lossy(s)) {
        if (c == '"') o += "\\\"";
        else if (c == '\\') o += "\\\\";
        else if (c == '\n') o += "\\n";
        else if (c == '\t') o += "\\t";
        else if (c == '\r') o += "\\r";
        else if (c >= 0x20 && c < 0x7f) o += (char) c;
        else if (c < 0x10000) {
            snprintf(buf, sizeof buf, "\\u%04x", (unsigned) c);
            o += buf;
        } else {
            char32_t v = c - 0x10000;
            snprintf(buf, sizeof buf, "\\u%04x\\u%04x", (unsigned) (0xD800 + (v >> 10)), (unsigned) (0xDC00 + (v & 0x3FF)));
            o += buf;
        }
    }
    return o + "\"";
}

std::string jfloat(double v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

template <typename T, typename F> std::string jlist(const std::vector<T> & v, F f) {
    std::string o = "[";
    for (size_t i = 0; i < v.size(); i++) o += (i ? ", " : "") + f(v[i]);
    return o + "]";
}

std::string base64(const void * data, size_t n) {
    static const char * tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char * p = (const unsigned char *) data;
    std::string o;
    o.reserve((n + 2) / 3 * 4);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = p[i] << 16 | (i + 1 < n ? p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        o += tbl[v >> 18 & 63];
        o += tbl[v >> 12 & 63];
        o += i + 1 < n ? tbl[v >> 6 & 63] : '=';
        o += i + 2 < n ? tbl[v & 63] : '=';
    }
    return o;
}

// jmatrix is a row-major float32 matrix in the run format (README section 4).
std::string jmatrix(const std::vector<float> & m, size_t rows, size_t cols) {
    static_assert(sizeof(float) == 4, "float32");
    return "{\"shape\": [" + std::to_string(rows) + ", " + std::to_string(cols) +
           "], \"dtype\": \"float32\", \"byte_order\": \"little\", \"order\": \"row-major\", "
           "\"encoding\": \"base64\", \"data\": \"" + base64(m.data(), m.size() * 4) + "\"}";
}

// ---- llama.cpp --------------------------------------------------------------

struct Ctx {
    llama_context * ctx;
    explicit Ctx(llama_model * model, const Args & a, ggml_backend_sched_eval_callback cb = nullptr, void * ud = nullptr) {
        llama_context_params p = llama_context_default_params();
        p.n_ctx = a.n_ctx;
        p.n_batch = a.n_ctx;
        p.n_ubatch = a.n_ctx;
        p.n_seq_max = 1;
        p.n_threads = a.threads;
        p.n_threads_batch = a.threads;
        p.no_perf = true;
        if (a.config != "lcppdefault") {
            p.type_k = GGML_TYPE_F32;
            p.type_v = GGML_TYPE_F32;
            p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        }
        p.cb_eval = cb;
        p.cb_eval_user_data = ud;
        ctx = llama_init_from_model(model, p);
        if (!ctx) die("llama_init_from_model failed");
    }
    ~Ctx() { llama_free(ctx); }
    Ctx(const Ctx &) = delete;
    Ctx & operator=(const Ctx &) = delete;
};

// decode feeds toks at positions pos0.. in one llama_decode call, asking for
// logits at every position (all) or only the last.
void decode(llama_context * ctx, const std::vector<llama_token> & toks, int pos0, bool all) {
    llama_batch b = llama_batch_init((int32_t) toks.size(), 0, 1);
    for (size_t i = 0; i < toks.size(); i++) {
        b.token[i] = toks[i];
        b.pos[i] = pos0 + (int) i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = all || i + 1 == toks.size();
    }
    b.n_tokens = (int32_t) toks.size();
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    if (rc != 0) die("llama_decode returned " + std::to_string(rc));
}

std::vector<float> logits_row(llama_context * ctx, int i, int n_vocab) {
    const float * l = llama_get_logits_ith(ctx, i);
    if (!l) die("no logits for output " + std::to_string(i));
    return std::vector<float>(l, l + n_vocab);
}

// prompt_pass decodes the prompt (one batch, or one call per token for
// refseq) and returns the logits of every position, row-major.
std::vector<float> prompt_pass(llama_context * ctx, const std::vector<llama_token> & toks, int n_vocab, bool seq) {
    std::vector<float> out;
    if (seq) {
        for (size_t i = 0; i < toks.size(); i++) {
            decode(ctx, {toks[i]}, (int) i, true);
            auto r = logits_row(ctx, -1, n_vocab);
            out.insert(out.end(), r.begin(), r.end());
        }
        return out;
    }
    decode(ctx, toks, 0, true);
    for (size_t i = 0; i < toks.size(); i++) {
        auto r = logits_row(ctx, (int) i, n_vocab);
        out.insert(out.end(), r.begin(), r.end());
    }
    return out;
}

std::string piece(const llama_vocab * vocab, llama_token t) {
    char buf[256];
    int n = llama_token_to_piece(vocab, t, buf, sizeof buf, 0, true);
    if (n < 0) die("token_to_piece " + std::to_string(t));
    return std::string(buf, n);
}

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool parse_special) {
    int n = -llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, true, parse_special);
    std::vector<llama_token> t(n);
    if (llama_tokenize(vocab, text.data(), (int32_t) text.size(), t.data(), n, true, parse_special) != n) die("tokenize");
    return t;
}

std::string apply_chat(const llama_model * model, const std::string & user) {
    const char * tmpl = llama_model_chat_template(model, nullptr);
    if (!tmpl) die("--chat: the model has no chat template");
    llama_chat_message msg = {"user", user.c_str()};
    std::vector<char> buf(4 * user.size() + 4096);
    int n = llama_chat_apply_template(tmpl, &msg, 1, true, buf.data(), (int32_t) buf.size());
    if (n < 0) die("llama_chat_apply_template failed (template not supported without jinja?)");
    if ((size_t) n > buf.size()) {
        buf.resize(n);
        n = llama_chat_apply_template(tmpl, &msg, 1, true, buf.data(), (int32_t) buf.size());
    }
    return std::string(buf.data(), n);
}

int argmax(const std::vector<float> & v, size_t off, size_t n) {
    size_t b = 0;
    for (size_t i = 1; i < n; i++)
        if (v[off + i] > v[off + b]) b = i;
    return (int) b;
}

// ---- tensor dump (eval callback) ---------------------------------------------

struct Dump {
    std::string dir;
    std::regex keep;
    int seq = 0;
    std::vector<std::string> index;
    std::vector<uint8_t> buf;
};

// is_view reports whether t is a pure view, permute or reshape (not dumped).
bool is_view(const ggml_tensor * t) {
    switch (t->op) {
        case GGML_OP_NONE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
        case GGML_OP_RESHAPE:
            return true;
        default:
            return false;
    }
}

std::string file_safe(const char * name) {
    std::string s = name;
    for (char & c : s)
        if (!isalnum((unsigned char) c) && c != '-' && c != '_' && c != '.') c = '_';
    return s;
}

// value reads element i0..i3 of t (host memory) as float (or int32 bits).
void gather(const ggml_tensor * t, const uint8_t * data, std::vector<uint8_t> & out) {
    const bool f16 = t->type == GGML_TYPE_F16;
    out.resize(ggml_nelements(t) * 4);
    uint8_t * o = out.data();
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const uint8_t * p = data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                    if (f16) {
                        float f = ggml_fp16_to_fp32(*(const ggml_fp16_t *) p);
                        memcpy(o, &f, 4);
                    } else {
                        memcpy(o, p, 4);
                    }
                    o += 4;
                }
}

bool dump_cb(ggml_tensor * t, bool ask, void * ud) {
    Dump * d = (Dump *) ud;
    const bool typed = t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16 || t->type == GGML_TYPE_I32;
    if (ask) return typed && !is_view(t);
    if (!typed || is_view(t)) return true;
    const bool i32 = t->type == GGML_TYPE_I32;
    char fname[512];
    snprintf(fname, sizeof fname, "%05d_%s.%s", d->seq, file_safe(t->name).c_str(), i32 ? "i32" : "f32");
    const char * src_type = t->src[0] ? ggml_type_name(t->src[0]->type) : ggml_type_name(t->type);
    std::string e = "{\"seq\": " + std::to_string(d->seq) + ", \"name\": " + jstr(t->name) + ", \"op\": " +
                    jstr(ggml_op_desc(t)) + ", \"src_type\": " + jstr(src_type) + ", \"ne\": [" + std::to_string(t->ne[0]) + ", " +
                    std::to_string(t->ne[1]) + ", " + std::to_string(t->ne[2]) + ", " + std::to_string(t->ne[3]) +
                    "], \"file\": " + jstr(fname) + ", \"dtype\": " + (i32 ? "\"int32\"" : "\"float32\"") + "}";
    d->index.push_back(e);
    d->seq++;
    if (!std::regex_match(std::string(t->name), d->keep)) return true;
    std::vector<uint8_t> raw;
    const uint8_t * data = (const uint8_t *) t->data;
    if (!t->buffer || !ggml_backend_buffer_is_host(t->buffer)) {
        raw.resize(ggml_nbytes(t));
        ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
        data = raw.data();
    }
    gather(t, data, d->buf);
    std::string path = d->dir + "/" + fname;
    FILE * f = fopen(path.c_str(), "wb");
    if (!f || fwrite(d->buf.data(), 1, d->buf.size(), f) != d->buf.size() || fclose(f) != 0) die("cannot write " + path);
    return true;
}

}  // namespace

int main(int argc, char ** argv) {
    Args a = parse(argc, argv);
    const std::string user = read_file(a.prompt_file);

    llama_log_set([](ggml_log_level lvl, const char * text, void *) {
        if (lvl >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
    }, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(a.model.c_str(), mp);
    if (!model) die("cannot load " + a.model);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int V = llama_vocab_n_tokens(vocab);

    const std::string text = a.chat ? apply_chat(model, user) : user;
    const std::vector<llama_token> prompt = tokenize(vocab, text, a.chat);
    if (prompt.empty() || (int) prompt.size() + a.n_gen > a.n_ctx) die("prompt of " + std::to_string(prompt.size()) + " tokens does not fit");
    const bool seq = a.config == "refseq";

    // 1. free-running greedy generation
    std::vector<float> logits, seq_prompt_logits;
    std::vector<llama_token> gen;
    {
        Ctx c(model, a);
        if (seq) {
            seq_prompt_logits = prompt_pass(c.ctx, prompt, V, true);
            logits.assign(seq_prompt_logits.end() - V, seq_prompt_logits.end());
        } else {
            decode(c.ctx, prompt, 0, false);
            logits = logits_row(c.ctx, -1, V);
        }
        for (int i = 0; i < a.n_gen; i++) {
            llama_token t = argmax(logits, (size_t) i * V, V);
            gen.push_back(t);
            if (i + 1 == a.n_gen) break;
            decode(c.ctx, {t}, (int) (prompt.size() + i), false);
            auto r = logits_row(c.ctx, -1, V);
            logits.insert(logits.end(), r.begin(), r.end());
        }
    }
    // 2. logits at every prompt position
    std::vector<float> prompt_logits = seq_prompt_logits;
    if (!seq) {
        Ctx c(model, a);
        prompt_logits = prompt_pass(c.ctx, prompt, V, false);
    }
    // 3. intermediate tensors of a single-batch prompt pass
    if (!a.tensors.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(a.tensors, ec);
        if (ec) die("cannot create " + a.tensors + ": " + ec.message());
        Dump d;
        d.dir = a.tensors;
        d.keep = std::regex(a.keep);
        Ctx c(model, a, dump_cb, &d);
        decode(c.ctx, prompt, 0, false);
        std::string ix = "[\n";
        for (size_t i = 0; i < d.index.size(); i++) ix += d.index[i] + (i + 1 < d.index.size() ? ",\n" : "\n");
        ix += "]\n";
        std::string path = a.tensors + "/index.json";
        std::ofstream f(path, std::ios::binary);
        if (!(f << ix)) die("cannot write " + path);
    }

    // the run file
    std::vector<std::string> ppieces, gpieces;
    for (auto t : prompt) ppieces.push_back(piece(vocab, t));
    std::string gtext;
    std::vector<std::string> steps;
    std::vector<bool> eog;
    for (int i = 0; i < a.n_gen; i++) {
        gpieces.push_back(piece(vocab, gen[i]));
        gtext += gpieces.back();
        eog.push_back(llama_vocab_is_eog(vocab, gen[i]));
        std::vector<int> ord(V);
        for (int j = 0; j < V; j++) ord[j] = j;
        const float * row = logits.data() + (size_t) i * V;
        std::partial_sort(ord.begin(), ord.begin() + 5, ord.end(), [&](int x, int y) { return row[x] > row[y] || (row[x] == row[y] && x < y); });
        std::string top5 = "[";
        for (int k = 0; k < 5 && k < V; k++) top5 += std::string(k ? ", " : "") + "[" + std::to_string(ord[k]) + ", " + jfloat(row[ord[k]]) + "]";
        steps.push_back("{\"step\": " + std::to_string(i) + ", \"argmax\": " + std::to_string(gen[i]) + ", \"margin_top1_top2\": " +
                        jfloat(row[ord[0]] - row[ord[1]]) + ", \"top5\": " + top5 + "]}");
    }
    auto ids = [](llama_token t) { return std::to_string(t); };
    auto hx = [](const std::string & s) { return jstr(hex(s)); };
    const bool lcpp = a.config == "lcppdefault";
    std::ostringstream o;
    o << "{\n\"format_version\": 1,\n"
      << "\"model_file\": " << jstr(a.model_file) << ",\n";
    if (!a.sha256.empty()) o << "\"model_sha256\": " << jstr(a.sha256) << ",\n";
    if (!a.commit.empty()) o << "\"llama_cpp_commit\": " << jstr(a.commit) << ",\n";
    o << "\"llama_cpp_build\": " << jstr(a.build.empty() ? "CPU" : a.build) << ",\n"
      << "\"prompt_id\": " << jstr(a.prompt_id) << ",\n"
      << "\"prompt_file\": " << jstr("prompts/" + a.prompt_id + ".txt") << ",\n"
      << "\"config\": " << jstr(a.config) << ",\n"
      << "\"chat\": " << (a.chat ? "true" : "false") << ",\n"
      << "\"user_text\": " << jstr(user) << ",\n"
      << "\"prompt_text\": " << jstr(text) << ",\n"
      << "\"tokenize\": {\"add_special\": true, \"parse_special\": " << (a.chat ? "true" : "false") << "},\n"
      << "\"settings\": {\"n_ctx\": " << a.n_ctx << ", \"n_batch\": " << a.n_ctx << ", \"n_ubatch\": " << a.n_ctx
      << ", \"n_threads\": " << a.threads << ", \"kv_cache_type\": \"" << (lcpp ? "f16" : "f32") << "\", \"flash_attn\": "
      << (lcpp ? "\"auto\"" : "false") << ", \"n_gpu_layers\": 0, \"prompt_processing\": \"" << (seq ? "one token per llama_decode" : "one batch")
      << "\"},\n"
      << "\"sampling\": \"greedy: argmax over the full logits row, lowest token id wins exact ties; never stops early\",\n"
      << "\"n_vocab\": " << V << ",\n"
      << "\"prompt_tokens\": " << jlist(prompt, ids) << ",\n"
      << "\"prompt_pieces_hex\": " << jlist(ppieces, hx) << ",\n"
      << "\"prompt_pieces\": " << jlist(ppieces, jstr) << ",\n"
      << "\"generated_tokens\": " << jlist(gen, ids) << ",\n"
      << "\"generated_pieces_hex\": " << jlist(gpieces, hx) << ",\n"
      << "\"generated_pieces\": " << jlist(gpieces, jstr) << ",\n"
      << "\"generated_text\": " << jstr(gtext) << ",\n"
      << "\"generated_is_eog\": " << jlist(eog, [](bool b) { return std::string(b ? "true" : "false"); }) << ",\n"
      << "\"steps\": [" ;
    for (size_t i = 0; i < steps.size(); i++) o << (i ? ", " : "") << steps[i];
    o << "],\n"
      << "\"logits\": " << jmatrix(logits, a.n_gen, V) << ",\n"
      << "\"prompt_logits\": " << jmatrix(prompt_logits, prompt.size(), V);
    if (!a.tensors.empty()) o << ",\n\"intermediate_tensors_dir\": " << jstr(a.tensors);
    o << "\n}\n";
    std::ofstream f(a.out, std::ios::binary);
    if (!(f << o.str())) die("cannot write " + a.out);

    llama_model_free(model);
    llama_backend_free();
    return 0;
}

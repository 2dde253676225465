// llama_driver: run llama.cpp (libllama) on a GGUF and print what it computes, as JSON.
//
// A reference tool for titan's GGUF fixtures (tools/make_gguf_fixtures.py), not part of titan:
// titan never links it. Build with tools/build_llama_driver.sh.
//
// Usage:
//   llama_driver [--kv-f16] [--threads N] MODEL.gguf N_PREDICT PROMPT [PROMPT ...]
//   llama_driver [--kv-f16] [--threads N] MODEL.gguf N_PREDICT --prompts-file PROMPTS.json
//   llama_driver [--kv-f16] [--threads N] MODEL.gguf N_PREDICT --ids 1,2,3,...
// PROMPTS.json is a JSON array of strings. --ids (repeatable) evaluates those token ids as given (no
// tokenization; "text" is null in the output); id prompts come after the text prompts.
//
// For each prompt, on a fresh (cleared) context memory:
//   ids     llama_tokenize(vocab, text, add_special = true, parse_special = false); whether that adds
//           a BOS / EOS is the GGUF's tokenizer.ggml.add_bos_token / add_eos_token (llama_vocab_get_add_bos)
//   logits  one llama_decode of the whole prompt with logits requested for every position:
//           n_prompt rows of n_vocab floats (llama_get_logits_ith)
//   greedy  N_PREDICT tokens, each the argmax (lowest id on a tie) of the last logits, fed back one at a
//           time; decoding does not stop at an end-of-generation token
//   greedy_gap  for each greedy token, its logit minus the next largest (how far from a tie the choice was)
// Context: n_ctx 256, n_batch = n_ubatch = 256, 1 thread (default), CPU only (n_gpu_layers 0), flash
// attention disabled, no weight repacking (use_extra_bufts false), K/V cache F32 (F16, llama.cpp's default, with --kv-f16).
//
// Output (stdout): {"llama_version": ..., "add_bos": b, "add_eos": b, "n_vocab": n, "kv_type": "f32"|"f16",
//                   "prompts": [{"text": ..., "ids": [...], "logits": [[...], ...], "greedy": [...],
//                                 "greedy_gap": [...]}, ...]}
// Floats are printed with std::to_chars (the shortest text that reads back to the same float32).
#include "llama.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void quiet_log(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_WARN && level != GGML_LOG_LEVEL_CONT) {
        std::fputs(text, stderr);
    }
}

[[noreturn]] void die(const std::string & msg) {
    std::fprintf(stderr, "llama_driver: %s\n", msg.c_str());
    std::exit(1);
}

// Minimal JSON: an array of strings (the prompts file).
struct JsonReader {
    const std::string & s;
    size_t i = 0;
    void ws() { while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i; }
    void expect(char c) {
        ws();
        if (i >= s.size() || s[i] != c) throw std::runtime_error(std::string("expected '") + c + "'");
        ++i;
    }
    static void put_utf8(std::string & out, uint32_t cp) {
        if (cp < 0x80) {
            out += char(cp);
        } else if (cp < 0x800) {
            out += char(0xC0 | (cp >> 6));
            out += char(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += char(0xE0 | (cp >> 12));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        } else {
            out += char(0xF0 | (cp >> 18));
            out += char(0x80 | ((cp >> 12) & 0x3F));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        }
    }
    uint32_t hex4() {
        if (i + 4 > s.size()) throw std::runtime_error("short \\u escape");
        uint32_t v = uint32_t(std::stoul(s.substr(i, 4), nullptr, 16));
        i += 4;
        return v;
    }
    std::string str() {
        expect('"');
        std::string out;
        while (true) {
            if (i >= s.size()) throw std::runtime_error("unterminated string");
            char c = s[i++];
            if (c == '"') break;
            if (c != '\\') { out += c; continue; }
            if (i >= s.size()) throw std::runtime_error("bad escape");
            char e = s[i++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    uint32_t cp = hex4();
                    if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= s.size() && s[i] == '\\' && s[i + 1] == 'u') {
                        i += 2;
                        uint32_t lo = hex4();
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    }
                    put_utf8(out, cp);
                    break;
                }
                default: throw std::runtime_error("bad escape");
            }
        }
        return out;
    }
    std::vector<std::string> string_array() {
        std::vector<std::string> out;
        expect('[');
        ws();
        if (i < s.size() && s[i] == ']') { ++i; return out; }
        while (true) {
            out.push_back(str());
            ws();
            if (i < s.size() && s[i] == ',') { ++i; continue; }
            expect(']');
            return out;
        }
    }
};

std::string json_string(const std::string & s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += char(c);
                }
        }
    }
    return out + "\"";
}

void put_float(std::string & out, float v) {
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    if (res.ec != std::errc()) die("to_chars failed");
    std::string t(buf, res.ptr);
    if (t == "inf" || t == "-inf" || t == "nan" || t == "-nan") die("non-finite logit " + t);
    out += t;
}

template <typename T> std::string json_ints(const std::vector<T> & v) {
    std::string out = "[";
    for (size_t k = 0; k < v.size(); ++k) {
        if (k) out += ",";
        out += std::to_string(v[k]);
    }
    return out + "]";
}

int argmax(const float * row, int n) {
    int best = 0;
    for (int k = 1; k < n; ++k) {
        if (row[k] > row[best]) best = k;
    }
    return best;
}

// row[best] minus the largest other logit
float top2_gap(const float * row, int n, int best) {
    float second = -INFINITY;
    for (int k = 0; k < n; ++k) {
        if (k != best && row[k] > second) second = row[k];
    }
    return row[best] - second;
}

}  // namespace

int main(int argc, char ** argv) {
    bool kv_f16 = false;
    int threads = 1;
    std::vector<std::string> pos;
    std::string prompts_file;
    std::vector<std::vector<llama_token>> id_prompts;
    for (int a = 1; a < argc; ++a) {
        std::string s = argv[a];
        if (s == "--kv-f16") {
            kv_f16 = true;
        } else if (s == "--threads" && a + 1 < argc) {
            threads = std::atoi(argv[++a]);
        } else if (s == "--ids" && a + 1 < argc) {
            std::vector<llama_token> ids;
            std::stringstream ss(argv[++a]);
            std::string item;
            while (std::getline(ss, item, ',')) ids.push_back(llama_token(std::atoi(item.c_str())));
            if (ids.empty()) die("empty --ids");
            id_prompts.push_back(ids);
        } else if (s == "--prompts-file" && a + 1 < argc) {
            prompts_file = argv[++a];
        } else {
            pos.push_back(s);
        }
    }
    if (pos.size() < 2 || (pos.size() == 2 && prompts_file.empty() && id_prompts.empty())) {
        die("usage: llama_driver [--kv-f16] [--threads N] MODEL.gguf N_PREDICT (PROMPT... | --prompts-file F.json | --ids 1,2,...)");
    }
    const std::string model_path = pos[0];
    const int n_predict = std::atoi(pos[1].c_str());
    std::vector<std::string> prompts(pos.begin() + 2, pos.end());
    if (!prompts_file.empty()) {
        std::ifstream f(prompts_file, std::ios::binary);
        if (!f) die("cannot open " + prompts_file);
        std::stringstream ss;
        ss << f.rdbuf();
        std::string text = ss.str();
        try {
            JsonReader r{text};
            for (auto & p : r.string_array()) prompts.push_back(p);
        } catch (const std::exception & e) {
            die(prompts_file + ": " + e.what());
        }
    }

    llama_log_set(quiet_log, nullptr);
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = false;  // no weight repacking: the plain CPU kernels
    mp.check_tensors = true;
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mp);
    if (!model) die("cannot load " + model_path);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    const int n_ctx = 256;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_ubatch = n_ctx;
    cp.n_seq_max = 1;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = kv_f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    cp.type_v = kv_f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    cp.offload_kqv = false;
    cp.no_perf = true;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) die("cannot create a context");

    std::string out = "{\"llama_version\":" + json_string(llama_version()) +
                      ",\"add_bos\":" + (llama_vocab_get_add_bos(vocab) ? "true" : "false") +
                      ",\"add_eos\":" + (llama_vocab_get_add_eos(vocab) ? "true" : "false") +
                      ",\"n_vocab\":" + std::to_string(n_vocab) + ",\"kv_type\":\"" + (kv_f16 ? "f16" : "f32") +
                      "\",\"prompts\":[";
    const size_t n_text = prompts.size();
    for (size_t p = 0; p < n_text + id_prompts.size(); ++p) {
        const bool is_text = p < n_text;
        const std::string text = is_text ? prompts[p] : std::string();
        std::vector<llama_token> ids;
        int n = 0;
        if (is_text) {
            ids.resize(text.size() + 8);
            n = llama_tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()), true, false);
            if (n < 0) {
                ids.resize(size_t(-n));
                n = llama_tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()), true, false);
            }
            if (n <= 0) die("tokenization failed for prompt " + std::to_string(p));
            ids.resize(size_t(n));
        } else {
            ids = id_prompts[p - n_text];
            n = int(ids.size());
            for (llama_token t : ids) {
                if (t < 0 || t >= n_vocab) die("--ids: token id out of range");
            }
        }
        if (n + n_predict > n_ctx) die("prompt + n_predict exceeds n_ctx");

        llama_memory_clear(llama_get_memory(ctx), true);
        llama_batch batch = llama_batch_init(n, 0, 1);
        batch.n_tokens = n;
        for (int k = 0; k < n; ++k) {
            batch.token[k] = ids[k];
            batch.pos[k] = k;
            batch.n_seq_id[k] = 1;
            batch.seq_id[k][0] = 0;
            batch.logits[k] = 1;
        }
        if (llama_decode(ctx, batch) != 0) die("llama_decode failed on prompt " + std::to_string(p));
        llama_batch_free(batch);

        out += p ? "," : "";
        out += "{\"text\":" + (is_text ? json_string(text) : std::string("null")) + ",\"ids\":" + json_ints(ids) + ",\"logits\":[";
        for (int k = 0; k < n; ++k) {
            const float * row = llama_get_logits_ith(ctx, k);
            if (!row) die("no logits for position " + std::to_string(k));
            out += k ? ",[" : "[";
            for (int v = 0; v < n_vocab; ++v) {
                if (v) out += ",";
                put_float(out, row[v]);
            }
            out += "]";
        }
        out += "]";

        std::vector<int> greedy;
        std::string gaps = "[";
        const float * last = llama_get_logits_ith(ctx, n - 1);
        int next = argmax(last, n_vocab);
        float gap = top2_gap(last, n_vocab, next);
        for (int step = 0; step < n_predict; ++step) {
            greedy.push_back(next);
            if (step) gaps += ",";
            put_float(gaps, gap);
            if (step + 1 == n_predict) break;
            llama_batch one = llama_batch_init(1, 0, 1);
            one.n_tokens = 1;
            one.token[0] = next;
            one.pos[0] = n + step;
            one.n_seq_id[0] = 1;
            one.seq_id[0][0] = 0;
            one.logits[0] = 1;
            if (llama_decode(ctx, one) != 0) die("llama_decode failed while generating");
            llama_batch_free(one);
            last = llama_get_logits_ith(ctx, 0);
            next = argmax(last, n_vocab);
            gap = top2_gap(last, n_vocab, next);
        }
        out += ",\"greedy\":" + json_ints(greedy) + ",\"greedy_gap\":" + gaps + "]}";
    }
    out += "]}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);

    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

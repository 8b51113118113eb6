#include "rules/reference/result_codes.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/input_file.hpp"
#include "core/text.hpp"
#include "core/toml.hpp"
#include "rules/reference/catalogue_blob.hpp"

namespace gpudx {

namespace {

struct TableKind {
    std::string_view table;      // the C type
    std::string_view id_prefix;  // the finding id's first part
};
constexpr TableKind kTables[] = {
    {"CUresult", "cuda"},     {"cudaError_t", "cudart"}, {"nvmlReturn_t", "nvml"},
    {"ncclResult_t", "nccl"}, {"hipError_t", "hip"},     {"hsa_status_t", "hsa"},
};

const TableKind* table_kind(std::string_view table) {
    for (auto& k : kTables)
        if (k.table == table) return &k;
    return nullptr;
}

// Where a node sits in its file: "ORIGIN:LINE".
std::string where(const std::string& origin, const toml::source_region& r) { return toml_where(origin, r); }

Result<ResultCode> read_code(const toml::table& t, const std::string& origin) {
    static const std::set<std::string_view> kKeys = {"name",    "number",    "text",  "layer",   "severity",
                                                      "meaning", "next_step", "since", "removed", "aliases"};
    std::string w = where(origin, t.source());
    for (auto& [key, value] : t)
        if (!kKeys.count(key.str()))
            return fail(fmt::format("{}: unknown key `{}` in a [[code]]", where(origin, key.source()), key.str()), origin);
    ResultCode c;
    c.line = static_cast<int>(t.source().begin.line);
    auto string_of = [&](std::string_view key, bool required) -> Result<std::string> {
        const toml::node* n = t.get(key);
        if (!n) {
            if (required) return fail(fmt::format("{}: a [[code]] needs `{}`", w, key), origin);
            return std::string();
        }
        auto s = n->value<std::string>();
        if (!s) return fail(fmt::format("{}: `{}` must be a string", where(origin, n->source()), key), origin);
        return *s;
    };
    auto name = string_of("name", true);
    if (!name) return std::unexpected(name.error());
    c.name = *name;
    if (c.name.empty()) return fail(fmt::format("{}: `name` is empty", w), origin);
    const toml::node* number = t.get("number");
    if (!number || !number->value<int64_t>())
        return fail(fmt::format("{}: {} needs an integer `number`", w, c.name), origin);
    c.number = *number->value<int64_t>();
    for (auto [key, field] : {std::pair{"text", &c.text}, {"meaning", &c.meaning}, {"next_step", &c.next_step}}) {
        auto v = string_of(key, std::string_view(key) != "text");
        if (!v) return std::unexpected(v.error());
        *field = *v;
    }
    auto layer = string_of("layer", true);
    if (!layer) return std::unexpected(layer.error());
    // The tables' words beside gpudx's layers: "application" is the program's own error, reported in the driver
    // layer (where the program met it) and never above a warning; the fabric is the driver layer's.
    if (*layer == "application") {
        c.layer = Layer::driver;
        c.program_error = true;
    } else if (*layer == "fabric") {
        c.layer = Layer::driver;
    } else if (auto l = parse_layer(*layer)) {
        c.layer = *l;
    } else {
        return fail(fmt::format("{}: {}: unknown layer \"{}\"", w, c.name, *layer), origin);
    }
    auto severity = string_of("severity", true);
    if (!severity) return std::unexpected(severity.error());
    auto s = parse_severity(*severity);
    if (!s) return fail(fmt::format("{}: {}: unknown severity \"{}\"", w, c.name, *severity), origin);
    if (*s != Severity::info) c.severity = c.program_error ? std::min(*s, Severity::warning) : *s;
    if (const toml::node* a = t.get("aliases")) {
        const toml::array* arr = a->as_array();
        if (!arr) return fail(fmt::format("{}: `aliases` must be a list of strings", where(origin, a->source())), origin);
        for (auto& e : *arr) {
            auto v = e.value<std::string>();
            if (!v || v->empty())
                return fail(fmt::format("{}: `aliases` must be a list of strings", where(origin, e.source())), origin);
            c.aliases.push_back(*v);
        }
    }
    return c;
}

// A name's first two bytes as one key (ResultCodeMatcher::name_starts_).
uint16_t name_start(std::string_view name) {
    return static_cast<uint16_t>(static_cast<uint8_t>(name[0]) | static_cast<uint8_t>(name[1]) << 8);
}

// A table, not four comparisons: match() asks it of every byte of every kept line.
constexpr std::array<bool, 256> kWordChars = [] {
    std::array<bool, 256> t{};
    for (int c = 0; c < 256; ++c)
        t[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    return t;
}();

bool is_word_char(char c) { return kWordChars[static_cast<uint8_t>(c)]; }

std::string lowercase(std::string_view s) {
    std::string out(s);
    for (auto& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    return out;
}

// What programs print right before a CUDA code's text: PyTorch's "CUDA error: out of memory", NCCL's "Cuda
// failure 'invalid argument'", "CUDA driver error: ...", "CUDA runtime error: ...". Lower case.
constexpr std::string_view kCudaTextMarkers[] = {"cuda error: ", "cuda error ", "cuda failure ", "cuda driver error",
                                                 "cuda runtime error", "cudaerror: ", "cuda_error: "};

// A number right after `at` (blanks allowed), or -1.
long long number_at(std::string_view s, size_t at) {
    while (at < s.size() && s[at] == ' ') ++at;
    size_t end = at;
    while (end < s.size() && end - at < 6 && s[end] >= '0' && s[end] <= '9') ++end;
    if (end == at || (end < s.size() && is_word_char(s[end]))) return -1;
    return std::stoll(std::string(s.substr(at, end - at)));
}

const ResultCode* cuda_code_numbered(const std::vector<ResultCodeTable>& tables, long long n, const ResultCodeTable** in) {
    // The runtime's table first: programs print cudaError_t far more often, and the node-level codes share numbers.
    for (std::string_view want : {"cudaError_t", "CUresult"})
        for (auto& t : tables)
            if (t.table == want)
                for (auto& c : t.codes)
                    if (c.number == n) {
                        *in = &t;
                        return &c;
                    }
    return nullptr;
}

}  // namespace

Result<ResultCodeTable> parse_result_code_table(std::string_view text, const std::string& origin) {
    auto parsed = parse_toml(text, origin);
    if (!parsed) return std::unexpected(parsed.error());
    const toml::table& root = *parsed;
    for (auto& [key, value] : root)
        if (key.str() != "table" && key.str() != "version" && key.str() != "code")
            return fail(fmt::format("{}: unknown key `{}` (allowed: table, version, code)", where(origin, key.source()),
                                    key.str()),
                        origin);
    ResultCodeTable out;
    out.origin = origin;
    auto table = root["table"].value<std::string>();
    if (!table || !table_kind(*table))
        return fail(fmt::format("{}: `table` must be one of CUresult, cudaError_t, nvmlReturn_t, ncclResult_t, "
                                "hipError_t, hsa_status_t",
                                origin),
                    origin);
    out.table = *table;
    auto version = root["version"].value<std::string>();
    if (!version || version->empty()) return fail(fmt::format("{}: `version` must be a non-empty string", origin), origin);
    out.version = *version;
    const toml::array* codes = root["code"].as_array();
    if (!codes || codes->empty()) return fail(fmt::format("{}: no [[code]] tables", origin), origin);
    std::map<std::string, int> line_of_name;
    std::map<long long, int> line_of_number;
    for (auto& n : *codes) {
        const toml::table* t = n.as_table();
        if (!t) return fail(fmt::format("{}: `code` must be [[code]] tables", where(origin, n.source())), origin);
        auto c = read_code(*t, origin);
        if (!c) return std::unexpected(c.error());
        for (const std::string& name : [&] {
                 auto all = c->aliases;
                 all.push_back(c->name);
                 return all;
             }())
            if (auto [it, fresh] = line_of_name.try_emplace(name, c->line); !fresh)
                return fail(fmt::format("{}:{}: {} is already declared at line {}", origin, c->line, name, it->second),
                            origin);
        if (auto [it, fresh] = line_of_number.try_emplace(c->number, c->line); !fresh)
            return fail(fmt::format("{}:{}: {} has number {}, which line {} already gave another code", origin, c->line,
                                    c->name, c->number, it->second),
                        origin);
        out.codes.push_back(std::move(*c));
    }
    return out;
}

const std::vector<ResultCodeTable>& builtin_result_code_tables() {
    // Parsed and checked by the build (tools/compile_catalogues.cpp); read from the binary on first use.
    // Never destroyed: freeing it at exit would cost a process that used it as much again.
    static const std::vector<ResultCodeTable>& tables = *new std::vector<ResultCodeTable>(read_builtin_result_codes());
    return tables;
}

std::string result_code_id(const ResultCodeTable& table, const ResultCode& code) {
    auto* k = table_kind(table.table);
    return fmt::format("{}.{}", k ? k->id_prefix : std::string_view("code"), code.name);
}

ResultCodeMatcher::ResultCodeMatcher(const std::vector<ResultCodeTable>& tables) : tables_(&tables) {
    for (auto& t : tables)
        for (auto& c : t.codes) {
            by_name_.try_emplace(c.name, ResultCodeMatch{&t, &c, "name"});
            for (auto& a : c.aliases) by_name_.try_emplace(a, ResultCodeMatch{&t, &c, "name"});
        }
    shortest_name_ = by_name_.empty() ? 0 : SIZE_MAX;
    for (auto& [name, match] : by_name_) {
        shortest_name_ = std::min(shortest_name_, name.size());
        longest_name_ = std::max(longest_name_, name.size());
        if (name.size() >= 2) {
            auto key = name_start(name);
            name_starts_.insert(key);
        }
    }
    // The runtime's table first (a text both tables share names the runtime's code): programs print
    // cudaGetErrorString far more often. Texts under 8 characters say too little to name a code by; benign codes
    // are no finding.
    for (std::string_view want : {"cudaError_t", "CUresult"})
        for (auto& t : tables)
            if (t.table == want)
                for (auto& c : t.codes)
                    if (c.severity && c.text.size() >= 8) cuda_texts_.push_back({lowercase(c.text), {&t, &c, "text"}});
}

const ResultCodeMatcher& ResultCodeMatcher::builtin() {
    static const ResultCodeMatcher& m = *new ResultCodeMatcher(builtin_result_code_tables());  // as the tables
    return m;
}

std::vector<ResultCodeMatch> ResultCodeMatcher::match(std::string_view line) const {
    std::vector<ResultCodeMatch> out;
    auto add = [&](ResultCodeMatch m) {
        if (std::none_of(out.begin(), out.end(), [&](auto& o) { return o.code == m.code; })) out.push_back(m);
    };
    // By name: every identifier of the line looked up whole.
    for (size_t i = 0; i < line.size();) {
        if (!is_word_char(line[i])) {
            ++i;
            continue;
        }
        size_t end = i;
        while (end < line.size() && is_word_char(line[end])) ++end;
        // A success or benign code named on the line ("e == cudaSuccess (803 vs. 0)") is no finding and leaves
        // the line to the other forms.
        std::string_view word = line.substr(i, end - i);
        i = end;
        if (word.size() < shortest_name_ || word.size() > longest_name_) continue;
        if (word.size() >= 2) {
            auto key = name_start(word);
            if (!name_starts_.contains(key)) continue;
        }
        if (auto it = by_name_.find(word); it != by_name_.end() && it->second.code->severity) add(it->second);
    }
    if (!out.empty()) return out;
    if (find_ci(line, "cuda") == std::string_view::npos) return out;  // before copying the line
    std::string lower = lowercase(line);
    // By text, after CUDA's own words: the longest confirmed text of the two CUDA tables found after the marker
    // (the first of equal length: the runtime's).
    for (auto marker : kCudaTextMarkers) {
        size_t at = lower.find(marker);
        if (at == std::string::npos) continue;
        std::string_view rest = std::string_view(lower).substr(at + marker.size());
        const CudaText* best = nullptr;
        for (auto& t : cuda_texts_)
            if ((!best || t.lower.size() > best->lower.size()) && rest.find(t.lower) != std::string_view::npos) best = &t;
        if (best) {
            add(best->match);
            return out;
        }
    }
    // By number, where the line speaks of CUDA: "error 802", "error code 802", "(803 vs. 0)", "code=2(".
    for (std::string_view form : {"error ", "error code ", "error: ", "code=", "("}) {
        for (size_t at = lower.find(form); at != std::string::npos; at = lower.find(form, at + 1)) {
            long long n = number_at(lower, at + form.size());
            if (n <= 0) continue;
            if (form == "(" && !std::string_view(lower).substr(at + 1 + std::to_string(n).size()).starts_with(" vs. 0)"))
                continue;
            const ResultCodeTable* t = nullptr;
            if (auto* c = cuda_code_numbered(*tables_, n, &t)) {
                add({t, c, "number"});
                return out;
            }
        }
    }
    return out;
}

std::vector<ResultCodeMatch> match_result_codes(std::string_view line, const std::vector<ResultCodeTable>& tables) {
    if (&tables == &builtin_result_code_tables()) return ResultCodeMatcher::builtin().match(line);
    return ResultCodeMatcher(tables).match(line);
}

Result<std::vector<ResultCodeTable>> result_code_tables_with_site(const std::vector<std::string>& paths) {
    std::vector<ResultCodeTable> out = builtin_result_code_tables();
    for (auto& path : paths) {
        auto text = read_input_file(path, 16u << 20);
        if (!text)
            return fail(fmt::format("{}: cannot read the result-code table: {}", path, text.error().message), path,
                        text.error().sys_errno);
        auto site = parse_result_code_table(*text, path);
        if (!site) return std::unexpected(site.error());
        auto table = std::find_if(out.begin(), out.end(), [&](auto& t) { return t.table == site->table; });
        for (auto& c : site->codes) {
            c.origin = path;
            // A site may say what a code means on its nodes and what to do; what the library calls it and which
            // number it has are the header's facts, and a site file that disagrees has a typo.
            for (auto& known : table->codes) {
                if (known.name == c.name && known.number != c.number)
                    return fail(fmt::format("{}:{}: {} is {} in {} (built-in line {}), not {}", path, c.line, c.name,
                                            known.number, site->table, known.line, c.number),
                                path);
                if (known.number == c.number && known.name != c.name)
                    return fail(fmt::format("{}:{}: {} {} is {} (built-in line {}), not {}", path, c.line, site->table,
                                            c.number, known.name, known.line, c.name),
                                path);
            }
            auto same = std::find_if(table->codes.begin(), table->codes.end(), [&](auto& k) { return k.name == c.name; });
            if (same != table->codes.end()) *same = c;
            else table->codes.push_back(c);
        }
        table->version = fmt::format("site {} ({}) over built-in {}", site->version, path, table->version);
    }
    return out;
}

std::vector<std::string> result_code_gate_words() {
    return {"CUDA", "NVML_", "nccl", "hipError", "HSA_STATUS_"};
}

ResultCodeScan::ResultCodeScan(const std::vector<ResultCodeTable>* tables) : tables_(tables) {}
ResultCodeScan::~ResultCodeScan() = default;

bool ResultCodeScan::add(const std::string& text) {
    if (!matcher_) {
        if (tables_ && tables_ != &builtin_result_code_tables()) {
            own_ = std::make_unique<ResultCodeMatcher>(*tables_);
            matcher_ = own_.get();
        } else {
            matcher_ = &ResultCodeMatcher::builtin();
        }
    }
    // A storm repeats one line: the previous line's codes are reused when this one is the same bytes.
    if (last_text_.empty() || text != last_text_) {
        last_matches_ = matcher_->match(text);
        std::erase_if(last_matches_, [](const ResultCodeMatch& m) { return !m.code->severity; });
        last_text_ = text;
    }
    for (auto& m : last_matches_) {
        auto it = std::find_if(seen_.begin(), seen_.end(), [&](auto& s) { return s.match.code == m.code; });
        if (it == seen_.end()) {
            seen_.push_back({m, 0, text, {}});
            it = seen_.end() - 1;
        }
        ++it->count;
        it->last = text;
    }
    return !last_matches_.empty();
}

void ResultCodeScan::findings(const std::string& source, std::vector<Finding>& out) const {
    for (auto& s : seen_) {
        const ResultCode& c = *s.match.code;
        Finding f;
        f.id = result_code_id(*s.match.table, c);
        f.layer = c.layer;
        f.severity = *c.severity;
        f.message = fmt::format("{} {} ({}{}){}: {}", s.match.table->table, c.name, c.number,
                                c.text.empty() ? "" : ", \"" + c.text + "\"",
                                s.count > 1 ? fmt::format(", {} times", s.count) : "",
                                c.program_error ? "the program's own error, not known to be the node's: " + c.meaning
                                                : c.meaning);
        f.evidence.push_back({source, s.last});
        if (s.count > 1 && s.first != s.last) f.evidence.push_back({source, s.first});
        f.evidence.push_back({fmt::format("{} table {}", s.match.table->table, s.match.table->version),
                              fmt::format("{} by its {} ({}, line {})", c.name, s.match.how,
                                          c.origin.empty() ? s.match.table->origin : c.origin, c.line)});
        f.next_step = c.next_step;
        out.push_back(std::move(f));
    }
}

}  // namespace gpudx

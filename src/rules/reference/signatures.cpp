#include "rules/reference/signatures.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "core/input_file.hpp"
#include "core/key_set_16.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "core/toml.hpp"
#include "rules/reference/catalogue_blob.hpp"
#include "rules/engine/check_context.hpp"
#include "rules/reference/xid_policy.hpp"

namespace gpudx {

namespace {

// A template's first literal is what the prefilter looks for: shorter ones would keep half the log.
constexpr size_t kMinGateBytes = 4;
constexpr size_t kMaxFieldValues = 6;
constexpr size_t kMaxTextField = 200;

// ---------------------------------------------------------------------------------------------
// Templates.

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_name_char(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' || c == '.' ||
           c == '+' || c == '/';
}

std::optional<FieldType> parse_field_type(std::string_view s) {
    if (s == "version") return FieldType::version;
    if (s == "int") return FieldType::integer;
    if (s == "hex") return FieldType::hex;
    if (s == "pci") return FieldType::pci;
    if (s == "name") return FieldType::name;
    if (s == "text") return FieldType::text;
    if (s == "cuda_version") return FieldType::cuda_version;
    return std::nullopt;
}

// Blanks in the literal stand for any run of blanks in the text. Returns the end of the match at `pos`.
std::optional<size_t> literal_at(std::string_view text, size_t pos, std::string_view lit) {
    size_t i = pos, k = 0;
    while (k < lit.size()) {
        if (is_blank(lit[k])) {
            if (i >= text.size() || !is_blank(text[i])) return std::nullopt;
            while (k < lit.size() && is_blank(lit[k])) ++k;
            while (i < text.size() && is_blank(text[i])) ++i;
            continue;
        }
        if (i >= text.size() || text[i] != lit[k]) return std::nullopt;
        ++i, ++k;
    }
    return i;
}

struct Span {
    size_t begin, end;
};

// The part of a literal a match must hold exactly: after its leading blanks, up to its next blank.
std::string_view first_chunk(std::string_view lit) {
    size_t lead = 0;
    while (lead < lit.size() && is_blank(lit[lead])) ++lead;
    std::string_view body = lit.substr(lead);
    return body.substr(0, static_cast<size_t>(std::find_if(body.begin(), body.end(), is_blank) - body.begin()));
}

std::optional<Span> find_literal(std::string_view text, size_t from, std::string_view lit) {
    size_t lead = 0;
    while (lead < lit.size() && is_blank(lit[lead])) ++lead;
    std::string_view chunk = first_chunk(lit);
    if (chunk.empty()) return std::nullopt;
    for (size_t p = text.find(chunk, from); p != std::string_view::npos; p = text.find(chunk, p + 1)) {
        size_t start = p;
        if (lead > 0) {
            if (start == 0 || !is_blank(text[start - 1])) continue;
            while (start > from && is_blank(text[start - 1])) --start;
            if (start < from) continue;
        }
        if (auto end = literal_at(text, start, lit)) return Span{start, *end};
    }
    return std::nullopt;
}

// A typed field read forward from `pos`: its value and where it ends; nullopt when nothing of that type is there.
std::optional<std::pair<std::string, size_t>> read_field(std::string_view text, size_t pos, FieldType type) {
    size_t i = pos;
    auto take = [&](auto pred) {
        while (i < text.size() && pred(text[i])) ++i;
    };
    switch (type) {
        case FieldType::version: {
            take([](char c) { return is_digit(c) || c == '.'; });
            while (i > pos && text[i - 1] == '.') --i;  // "510.73.05.  Please": the sentence's full stop
            if (i == pos || !is_digit(text[pos])) return std::nullopt;
            break;
        }
        case FieldType::integer: {
            if (i < text.size() && text[i] == '-') ++i;
            size_t digits = i;
            take(is_digit);
            if (i == digits) return std::nullopt;
            break;
        }
        case FieldType::hex: {
            if (i + 1 < text.size() && text[i] == '0' && (text[i + 1] == 'x' || text[i + 1] == 'X')) i += 2;
            size_t digits = i;
            take(is_hex);
            if (i == digits) return std::nullopt;
            break;
        }
        case FieldType::pci: {
            take([](char c) { return is_hex(c) || c == ':' || c == '.'; });
            while (i > pos && (text[i - 1] == ':' || text[i - 1] == '.')) --i;
            auto a = PciAddress::parse(text.substr(pos, i - pos));
            if (!a) return std::nullopt;
            return std::make_pair(a->str(), i);
        }
        case FieldType::cuda_version: {
            // cudaDriverGetVersion's encoding, as PyTorch prints it ("found version 11040"): 1000 * major + 10 * minor.
            take(is_digit);
            if (i == pos || i - pos > 6) return std::nullopt;
            auto v = parse_uint(text.substr(pos, i - pos));
            if (!v || *v < 1000) return std::nullopt;
            return std::make_pair(fmt::format("{}.{}", *v / 1000, (*v % 1000) / 10), i);
        }
        case FieldType::name: {
            take(is_name_char);
            while (i > pos && text[i - 1] == '.') --i;
            if (i == pos) return std::nullopt;
            break;
        }
        case FieldType::text:
        case FieldType::skip: return std::nullopt;  // read up to the next literal by the matcher
    }
    return std::make_pair(std::string(text.substr(pos, i - pos)), i);
}

// The field before a template's first literal, read backwards from `end`: "{module:name}: Unknown symbol",
// "{pci:pci}: Unable to change power state".
std::optional<std::string> read_field_before(std::string_view text, size_t end, FieldType type) {
    size_t i = end;
    if (type == FieldType::pci) {
        while (i > 0 && (is_hex(text[i - 1]) || text[i - 1] == ':' || text[i - 1] == '.')) --i;
        auto v = read_field(text, i, FieldType::pci);
        if (!v || v->second != end) return std::nullopt;
        return v->first;
    }
    while (i > 0 && is_name_char(text[i - 1])) --i;
    if (i == end) return std::nullopt;
    return std::string(text.substr(i, end - i));
}

std::optional<SignatureMatch> match_template(const SignatureTemplate& t, std::string_view text, size_t first_limit) {
    const auto& parts = t.parts;
    size_t first = parts[0].literal ? 0 : 1;  // the parser guarantees a literal at 0 or 1
    for (size_t from = 0;;) {
        auto hit = find_literal(text, from, parts[first].text);
        if (!hit || hit->begin >= first_limit) return std::nullopt;
        from = hit->begin + 1;
        SignatureMatch m;
        if (first == 1) {
            auto v = read_field_before(text, hit->begin, parts[0].type);
            if (!v) continue;
            m.fields[parts[0].field] = *v;
        }
        size_t cur = hit->end;
        bool ok = true;
        for (size_t k = first + 1; k < parts.size() && ok; ++k) {
            const auto& p = parts[k];
            if (p.literal) {
                auto end = literal_at(text, cur, p.text);
                if (!end) ok = false;
                else cur = *end;
            } else if (p.type == FieldType::text || p.type == FieldType::skip) {
                if (k + 1 == parts.size()) {
                    if (p.type == FieldType::text) {
                        auto v = trim(text.substr(cur, kMaxTextField));
                        if (v.empty()) ok = false;
                        else m.fields[p.field] = std::string(v);
                    }
                    cur = text.size();
                    continue;
                }
                auto next = find_literal(text, cur, parts[k + 1].text);
                if (!next) {
                    ok = false;
                    continue;
                }
                if (p.type == FieldType::text)
                    m.fields[p.field] = std::string(trim(text.substr(cur, next->begin - cur)).substr(0, kMaxTextField));
                cur = next->end;
                ++k;  // the literal is matched
            } else {
                auto v = read_field(text, cur, p.type);
                if (!v) ok = false;
                else {
                    m.fields[p.field] = v->first;
                    cur = v->second;
                }
            }
        }
        if (ok) return m;
    }
}

Result<SignatureTemplate> parse_template(std::string_view src, const std::string& where_) {
    SignatureTemplate t;
    t.source = std::string(src);
    size_t i = 0;
    auto append_literal = [&](std::string_view text) {
        if (t.parts.empty() || !t.parts.back().literal) t.parts.push_back(TemplatePart{});
        t.parts.back().text += text;
    };
    while (i < src.size()) {
        size_t open = src.find('{', i);
        if (open != i) {
            size_t end = open == std::string_view::npos ? src.size() : open;
            append_literal(src.substr(i, end - i));
            i = end;
            continue;
        }
        if (src.substr(open).starts_with("{{")) {  // a literal brace
            append_literal("{");
            i = open + 2;
            continue;
        }
        size_t close = src.find('}', open);
        if (close == std::string_view::npos)
            return fail(fmt::format("{}: template \"{}\": `{{` without `}}`", where_, src));
        std::string_view spec = src.substr(open + 1, close - open - 1);
        TemplatePart f;
        f.literal = false;
        if (spec == "...") {
            f.type = FieldType::skip;
        } else {
            size_t colon = spec.find(':');
            std::string_view name = spec.substr(0, colon);
            std::string_view type = colon == std::string_view::npos ? std::string_view("text") : spec.substr(colon + 1);
            auto ft = parse_field_type(type);
            if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return is_name_char(c) && c != '.'; }))
                return fail(fmt::format("{}: template \"{}\": field `{{{}}}` needs a name (`{{code:int}}`)", where_, src, spec));
            if (!ft)
                return fail(fmt::format("{}: template \"{}\": field type `{}` is not version, int, hex, pci, name, text or "
                                        "cuda_version",
                                        where_, src, type));
            f.field = std::string(name);
            f.type = *ft;
        }
        // A typed field ends by itself, so {...} may follow it ("pasid:{pasid:int}{...}for process"); any other
        // two fields need a literal between them to know where the first ends.
        bool typed_then_skip = f.type == FieldType::skip && !t.parts.empty() && !t.parts.back().literal &&
                               t.parts.back().type != FieldType::text && t.parts.back().type != FieldType::skip;
        if (!t.parts.empty() && !t.parts.back().literal && !typed_then_skip)
            return fail(fmt::format("{}: template \"{}\": two fields in a row need a literal between them", where_, src));
        t.parts.push_back(std::move(f));
        i = close + 1;
    }
    size_t first = !t.parts.empty() && t.parts[0].literal ? 0 : 1;
    bool leading_ok = first == 0 || (t.parts.size() > 1 && t.parts[1].literal &&
                                     (t.parts[0].type == FieldType::name || t.parts[0].type == FieldType::pci));
    if (t.parts.size() <= first || !leading_ok)
        return fail(fmt::format("{}: template \"{}\" must start with a literal (or one {{x:name}} or {{x:pci}} "
                                "before it)",
                                where_, src));
    for (size_t k = 0; k + 1 < t.parts.size(); ++k)
        if (!t.parts[k].literal && (t.parts[k].type == FieldType::text || t.parts[k].type == FieldType::skip) &&
            !t.parts[k + 1].literal)
            return fail(fmt::format("{}: template \"{}\": a text field must be followed by a literal", where_, src));
    // The prefilter finds the gate as written with single blanks; the matcher allows runs of them.
    std::string gate;
    for (char c : trim(t.parts[first].text)) {
        if (is_blank(c) && !gate.empty() && gate.back() == ' ') continue;
        gate += is_blank(c) ? ' ' : c;
    }
    if (gate.size() < kMinGateBytes)
        return fail(fmt::format("{}: template \"{}\": its first literal \"{}\" is shorter than {} characters; the "
                                "kernel-log scan looks for it in every line",
                                where_, src, gate, kMinGateBytes));
    t.gate = std::move(gate);
    return t;
}

// ---------------------------------------------------------------------------------------------
// Multi-line messages.

bool is_continuation(std::string_view line) {
    return trim(line).starts_with("NVRM:") && !line.starts_with("NVRM: API mismatch");
}

std::string_view continuation_body(std::string_view line) {
    auto t = trim(line);
    t.remove_prefix(5);
    return trim(t);
}

// A driver's device prefix ("amdgpu 0000:c6:00.0: amdgpu: ": the driver, the PCI address, and the driver's own
// tag when one follows), which dev_printk repeats on every line of a message it prints over several lines; empty
// when the line does not start with one.
std::string_view device_prefix(std::string_view line) {
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0 || !std::all_of(line.begin(), line.begin() + sp, is_name_char)) return {};
    size_t colon = line.find(": ", sp + 1);
    if (colon == std::string_view::npos || !PciAddress::parse(line.substr(sp + 1, colon - sp - 1))) return {};
    size_t end = colon + 2;
    size_t tag = line.find(": ", end);
    if (tag != std::string_view::npos && tag > end && std::all_of(line.begin() + end, line.begin() + tag, is_name_char))
        end = tag + 2;
    return line.substr(0, end);
}

// The message starting at lines[i], over at most `count` lines: NVRM prints each line of a long message with
// its own "NVRM: " prefix (indented, or with the same time, in dmesg and the journal); a device's driver (amdgpu's
// page faults) repeats its device prefix and indents what follows it ("amdgpu 0000:c6:00.0: amdgpu:   in page").
std::string joined_message(const std::vector<std::string_view>& lines, size_t i, unsigned count, size_t& used) {
    std::string s(lines[i]);
    used = 1;
    if (count <= 1) return s;
    if (s.find("NVRM:") != std::string::npos) {
        while (used < count && i + used < lines.size() && is_continuation(lines[i + used])) {
            s += ' ';
            s += continuation_body(lines[i + used]);
            ++used;
        }
        return s;
    }
    std::string_view prefix = device_prefix(lines[i]);
    if (prefix.empty()) return s;
    while (used < count && i + used < lines.size()) {
        std::string_view next = lines[i + used];
        if (!next.starts_with(prefix) || next.size() == prefix.size() || !is_blank(next[prefix.size()])) break;
        s += ' ';
        s += trim(next.substr(prefix.size()));
        ++used;
    }
    return s;
}

// rsyslog writes a message's newlines as "#012": one logical line per part.
void split_rsyslog(std::string_view text, std::vector<std::string_view>& out) {
    size_t from = 0;
    for (size_t at = text.find("#012"); at != std::string_view::npos; at = text.find("#012", from)) {
        out.push_back(text.substr(from, at - from));
        from = at + 4;
    }
    out.push_back(text.substr(from));
}

// Which signatures may match at a line: a template's first literal must begin in the line itself (match_template's
// first_limit), so the literal's first chunk is in that line, exactly (and a multi-line message's whole first
// literal, gate_chunk). The chunks are filed under their first two bytes; one pass over a line's positions finds
// the signatures worth matching there, instead of every signature joining and matching every line (a kernel log
// keeps up to 10,000 lines, the catalogue has over a hundred).
class SignatureCandidates {
public:
    explicit SignatureCandidates(const SignatureCatalogue& catalogue) : count_(catalogue.signatures.size()) {
        literal_chunks_.resize(count_);
        for (size_t s = 0; s < count_; ++s) {
            const Signature& sig = catalogue.signatures[s];
            for (auto& t : sig.templates) {
                std::string_view chunk = gate_chunk(t, sig.lines);
                if (chunk.size() < 2) {
                    always_.push_back(s);  // too short to file: tried at every line
                    continue;
                }
                uint32_t id = chunk_id(chunk);
                if (gates_.size() <= id) gates_.resize(id + 1);
                if (std::find(gates_[id].begin(), gates_[id].end(), s) == gates_[id].end())
                    gates_[id].push_back(static_cast<uint32_t>(s));
            }
            // A one-line signature's template matches only a line that holds every chunk of every literal it has
            // (the blanks between chunks match any run of blanks): a line lacking one of them is passed without
            // joining or matching. Multi-line signatures find their later literals in the lines joined after this
            // one.
            if (sig.lines > 1) continue;
            for (auto& t : sig.templates) {
                TemplateChunks chunks;
                for (auto& part : t.parts)
                    if (part.literal)
                        for (auto& c : split_blanks(part.text)) {
                            if (c.size() == 1) chunks.bytes.push_back(c[0]);
                            else chunks.ids.push_back(chunk_id(c));
                        }
                literal_chunks_[s].push_back(std::move(chunks));
            }
        }
        // The chunks filed under their first two bytes: the entries of one pair are contiguous, from
        // first_entry_[pair] to first_entry_[pair + 1].
        std::vector<uint32_t> order(chunk_texts_.size());
        for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
            return pair_key(chunk_texts_[a]) < pair_key(chunk_texts_[b]);
        });
        first_entry_.assign(65537, 0);
        for (uint32_t id : order) {
            std::string_view text = chunk_texts_[id];
            uint16_t key = pair_key(text);
            present_.insert(key);
            ++first_entry_[key + 1u];
            Entry e;
            e.id = id;
            e.size = static_cast<uint32_t>(text.size());
            size_t head = std::min<size_t>(text.size(), 8);
            std::memcpy(&e.head, text.data(), head);
            unsigned char mask[8] = {};
            std::memset(mask, 0xff, head);
            std::memcpy(&e.head_mask, mask, 8);
            entries_.push_back(e);
        }
        for (size_t k = 1; k < first_entry_.size(); ++k) first_entry_[k] += first_entry_[k - 1];
        found_.resize((chunk_texts_.size() + 63) / 64);
        gates_.resize(chunk_texts_.size());
    }

    // Sets out[s] for every signature s that may match at `line` (out is resized to the catalogue's size).
    // One pass over the line's positions finds every chunk it holds: the gates' and the one-line signatures'
    // literals' together, each compared 8 bytes at once. Only the signatures whose gates were found are looked at.
    void mark(std::string_view line, std::vector<char>& out) const {
        out.assign(count_, 0);
        for (uint32_t id : found_list_) found_[id >> 6] = 0;
        found_list_.clear();
        const char* p = line.data();
        const size_t n = line.size();
        for (size_t at = 0; at + 1 < n; ++at) {
            uint16_t key = pair_key(line.substr(at));
            if (!present_.contains(key)) [[likely]]
                continue;
            uint64_t word = 0;
            std::memcpy(&word, p + at, std::min<size_t>(n - at, 8));
            for (uint32_t e = first_entry_[key], end = first_entry_[key + 1u]; e < end; ++e) {
                const Entry& c = entries_[e];
                if ((word & c.head_mask) != c.head || c.size > n - at || has(c.id)) continue;
                if (c.size > 8 && std::memcmp(p + at + 8, chunk_texts_[c.id].data() + 8, c.size - 8) != 0) continue;
                found_[c.id >> 6] |= uint64_t{1} << (c.id & 63);
                found_list_.push_back(c.id);
            }
        }
        candidates_.clear();
        for (size_t s : always_)
            if (!out[s]) out[s] = 1, candidates_.push_back(s);
        for (uint32_t id : found_list_)
            for (uint32_t s : gates_[id])
                if (!out[s]) out[s] = 1, candidates_.push_back(s);
        for (uint32_t s : candidates_)
            if (!literal_chunks_[s].empty() && !any_template_may_match(s, line)) out[s] = 0;
    }

private:
    // The chunk a line must hold for template t to match there: a one-line signature's first chunk (every chunk
    // of its literals is looked for besides, literal_chunks_), a multi-line signature's longest chunk of its first
    // literal. A multi-line signature is matched with its lines joined, and a first chunk such as ":" (": amdgpu: ["
    // after {pci:pci}) or "NVRM:" ("NVRM: The NVIDIA GPU") would have it joined and tried at nearly every kept
    // line. The first literal is in the first line: the scanner keeps a line by it (SignatureTemplate::gate), and
    // a message's later lines are printed after it.
    static std::string_view gate_chunk(const SignatureTemplate& t, unsigned lines) {
        size_t first = !t.parts.empty() && t.parts[0].literal ? 0 : 1;
        if (first >= t.parts.size()) return {};
        std::string_view chunk = first_chunk(t.parts[first].text);
        if (lines <= 1) return chunk;
        for (auto c : split_blanks(t.parts[first].text))
            if (c.size() > chunk.size()) chunk = c;
        return chunk;
    }
    // A text's first two bytes as one number (in the machine's byte order, as the 8-byte heads).
    static uint16_t pair_key(std::string_view text) {
        uint16_t key;
        std::memcpy(&key, text.data(), 2);
        return key;
    }
    static std::vector<std::string_view> split_blanks(std::string_view text) {
        std::vector<std::string_view> out;
        for (size_t i = 0; i < text.size();) {
            while (i < text.size() && is_blank(text[i])) ++i;
            size_t start = i;
            while (i < text.size() && !is_blank(text[i])) ++i;
            if (i > start) out.push_back(text.substr(start, i - start));
        }
        return out;
    }
    // The chunks are views of the catalogue's template texts: the index lives no longer than its catalogue.
    uint32_t chunk_id(std::string_view chunk) {
        auto [it, inserted] = chunk_ids_.try_emplace(chunk, static_cast<uint32_t>(chunk_texts_.size()));
        if (inserted) chunk_texts_.push_back(chunk);
        return it->second;
    }
    bool has(uint32_t id) const { return found_[id >> 6] >> (id & 63) & 1; }
    bool any_template_may_match(size_t s, std::string_view line) const {
        for (auto& t : literal_chunks_[s])
            if (std::all_of(t.ids.begin(), t.ids.end(), [&](uint32_t id) { return has(id); }) &&
                std::all_of(t.bytes.begin(), t.bytes.end(), [&](char b) { return line.find(b) != std::string_view::npos; }))
                return true;
        return false;
    }
    struct Entry {
        uint64_t head = 0, head_mask = 0;  // the chunk's first (up to) 8 bytes, and which bytes of a word they are
        uint32_t size = 0;
        uint32_t id = 0;
    };
    struct TemplateChunks {
        std::vector<uint32_t> ids;   // chunks of two bytes or more
        std::vector<char> bytes;  // one-byte chunks
    };
    size_t count_;
    KeySet16 present_;  // the first two bytes of every chunk
    std::unordered_map<std::string_view, uint32_t> chunk_ids_;
    std::vector<std::string_view> chunk_texts_;
    std::vector<Entry> entries_;          // sorted by their first two bytes
    std::vector<uint32_t> first_entry_;   // per pair of bytes, its first entry
    mutable std::vector<uint64_t> found_;  // per chunk: found in the line being marked
    mutable std::vector<uint32_t> found_list_;  // the chunks found there, in the order found
    mutable std::vector<uint32_t> candidates_;  // the signatures marked there
    std::vector<std::vector<uint32_t>> gates_;  // per chunk: the signatures it is the gate_chunk of
    std::vector<size_t> always_;
    // Per signature, per template: the chunks of its literals; none for a multi-line signature (not checked).
    std::vector<std::vector<TemplateChunks>> literal_chunks_;
};

// The candidate index of a catalogue. The built-in one's is built once per thread and kept: the UUID pass and the
// findings pass of every text ask for it, and building it is most of what `explain` costs on a short text. Per
// thread because mark() keeps its scratch in the index. A site catalogue's is built for the caller (`own`).
const SignatureCandidates& candidates_for(const SignatureCatalogue& catalogue, std::unique_ptr<SignatureCandidates>& own) {
    if (&catalogue == &builtin_signature_catalogue()) {
        thread_local const SignatureCandidates builtin(catalogue);
        return builtin;
    }
    own = std::make_unique<SignatureCandidates>(catalogue);
    return *own;
}

// candidates_for, asked for at the first line that needs it: a text with no line to try builds no index.
class LazyCandidates {
public:
    explicit LazyCandidates(const SignatureCatalogue& catalogue) : catalogue_(catalogue) {}
    void mark(std::string_view line, std::vector<char>& out) {
        if (!index_) index_ = &candidates_for(catalogue_, own_);
        index_->mark(line, out);
    }

private:
    const SignatureCatalogue& catalogue_;
    std::unique_ptr<SignatureCandidates> own_;
    const SignatureCandidates* index_ = nullptr;
};

std::optional<SignatureMatch> match_lines(const Signature& sig, const std::vector<std::string_view>& lines, size_t i,
                                          size_t& used) {
    // A one-line signature is matched on the line itself: only a message joined over several lines is copied.
    std::string built;
    std::string_view joined = lines[i];
    used = 1;
    if (sig.lines > 1) joined = built = joined_message(lines, i, sig.lines, used);
    for (auto& u : sig.unless)
        if (joined.find(u) != std::string_view::npos) return std::nullopt;
    for (auto& t : sig.templates)
        if (auto m = match_template(t, joined, lines[i].size())) return m;
    return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// The TOML.

// Where a node sits in its file: "ORIGIN:LINE".
std::string where(const std::string& origin, const toml::source_region& r) { return toml_where(origin, r); }

Result<std::vector<std::string>> string_list(const toml::table& t, std::string_view key, const std::string& w) {
    std::vector<std::string> out;
    const toml::node* n = t.get(key);
    if (!n) return out;
    if (auto s = n->value<std::string>()) {
        out.push_back(*s);
        return out;
    }
    const toml::array* a = n->as_array();
    if (!a) return fail(fmt::format("{}: `{}` must be a string or a list of strings", w, key));
    for (auto& e : *a) {
        auto s = e.value<std::string>();
        if (!s) return fail(fmt::format("{}: `{}` must hold strings only", w, key));
        out.push_back(*s);
    }
    return out;
}

std::set<std::string> captured_fields(const Signature& s) {
    std::set<std::string> f;
    for (auto& t : s.templates)
        for (auto& p : t.parts)
            if (!p.literal && p.type != FieldType::skip) f.insert(p.field);
    return f;
}

// The {name} placeholders of a message or next step.
std::vector<std::string> placeholders(std::string_view text) {
    std::vector<std::string> out;
    for (size_t at = text.find('{'); at != std::string_view::npos; at = text.find('{', at + 1)) {
        size_t end = text.find('}', at);
        if (end == std::string_view::npos) break;
        out.emplace_back(text.substr(at + 1, end - at - 1));
    }
    return out;
}

Result<Signature> read_signature(const toml::table& t, const std::string& origin) {
    std::string w = where(origin, t.source());
    static constexpr std::string_view kKeys[] = {"id",      "layer", "severity", "vendor",    "summary",
                                                 "meaning", "match", "unless",   "lines",     "group_by",
                                                 "message", "next_step", "suppressed_by", "check", "examples"};
    for (auto&& [key, node] : t)
        if (std::find(std::begin(kKeys), std::end(kKeys), key.str()) == std::end(kKeys))
            return fail(fmt::format("{}: unknown key `{}` in a [[signature]] (allowed: id, layer, severity, vendor, "
                                    "summary, meaning, match, unless, lines, group_by, message, next_step, "
                                    "suppressed_by, check, examples)",
                                    where(origin, key.source()), key.str()));
    Signature s;
    s.origin = origin;
    auto str = [&](std::string_view key, bool required) -> Result<std::string> {
        const toml::node* n = t.get(key);
        if (!n) {
            if (required) return fail(fmt::format("{}: a [[signature]] needs `{}`", w, key));
            return std::string();
        }
        auto v = n->value<std::string>();
        if (!v || (required && v->empty()))
            return fail(fmt::format("{}: `{}` must be a non-empty string", where(origin, n->source()), key));
        return *v;
    };
    auto id = str("id", true);
    if (!id) return std::unexpected(id.error());
    s.id = *id;
    w = fmt::format("{} ({})", w, s.id);
    auto layer = str("layer", true);
    if (!layer) return std::unexpected(layer.error());
    auto l = parse_layer(*layer);
    if (!l) return fail(fmt::format("{}: layer \"{}\" is not one of pcie, module, kernel_log, libraries, devices, "
                                    "driver, container, allocation", w, *layer));
    s.layer = *l;
    auto sev = str("severity", true);
    if (!sev) return std::unexpected(sev.error());
    if (*sev != "ignore") {
        auto p = parse_severity(*sev);
        if (!p) return fail(fmt::format("{}: severity \"{}\" is not info, warning, error or ignore", w, *sev));
        s.severity = *p;
    }
    for (auto [key, dst, required] : {std::tuple{"vendor", &s.vendor, false}, {"summary", &s.summary, true},
                                      {"meaning", &s.meaning, true}, {"message", &s.message, s.severity.has_value()},
                                      {"next_step", &s.next_step, s.severity.has_value()}, {"check", &s.check, false}}) {
        auto v = str(key, required);
        if (!v) return std::unexpected(v.error());
        *dst = *v;
    }
    if (!s.check.empty() && s.check != "api_mismatch" && s.check != "cuda_driver" && s.check != "xid_cause")
        return fail(fmt::format("{}: check \"{}\" is not api_mismatch, cuda_driver or xid_cause", w, s.check));
    auto matches = string_list(t, "match", w);
    if (!matches) return std::unexpected(matches.error());
    if (matches->empty()) return fail(fmt::format("{}: a [[signature]] needs `match` (one template or a list)", w));
    for (auto& m : *matches) {
        auto tp = parse_template(m, w);
        if (!tp) return std::unexpected(tp.error());
        s.templates.push_back(std::move(*tp));
    }
    for (auto [key, dst] : {std::pair{"unless", &s.unless}, {"group_by", &s.group_by},
                            {"suppressed_by", &s.suppressed_by}, {"examples", &s.examples}}) {
        auto v = string_list(t, key, w);
        if (!v) return std::unexpected(v.error());
        *dst = std::move(*v);
    }
    if (const toml::node* n = t.get("lines")) {
        auto v = n->value<int64_t>();
        if (!v || *v < 1 || *v > 16) return fail(fmt::format("{}: `lines` must be a number from 1 to 16", w));
        s.lines = static_cast<unsigned>(*v);
    }
    auto fields = captured_fields(s);
    if (s.group_by.empty() && fields.count("pci")) s.group_by = {"pci"};
    for (auto& g : s.group_by)
        if (!fields.count(g)) return fail(fmt::format("{}: group_by names `{}`, which no template captures", w, g));
    for (auto* text : {&s.message, &s.next_step})
        for (auto& p : placeholders(*text))
            if (p != "gpu" && !fields.count(p))
                return fail(fmt::format("{}: `{{{}}}` in the message or next step is not a captured field", w, p));
    if (s.examples.empty()) return fail(fmt::format("{}: a [[signature]] needs at least one real example line", w));
    for (auto& ex : s.examples) {
        std::vector<std::string_view> lines;
        for (auto& part : split(ex, '\n')) split_rsyslog(part, lines);
        size_t used = 0;
        if (!match_lines(s, lines, 0, used))
            return fail(fmt::format("{}: example \"{}\" does not match the signature's own templates", w, ex));
    }
    return s;
}

Result<SignatureCatalogue> parse_catalogue(std::string_view text, const std::string& origin) {
    auto parsed = parse_toml(text, origin);
    if (!parsed) return std::unexpected(parsed.error());
    const toml::table& root = *parsed;
    for (auto&& [key, node] : root)
        if (key != "version" && key != "signature")
            return fail(fmt::format("{}: unknown key `{}` (allowed: version, signature)", where(origin, key.source()),
                                    key.str()),
                        origin);
    SignatureCatalogue c;
    const toml::node* version = root.get("version");
    auto v = version ? version->value<std::string>() : std::nullopt;
    if (!v || v->empty())
        return fail(fmt::format("{}: no `version = \"...\"`; a catalogue must say which version it is", origin), origin);
    c.version = *v;
    if (const toml::node* sigs = root.get("signature")) {
        const toml::array* a = sigs->as_array();
        if (!a) return fail(fmt::format("{}: `signature` must be [[signature]] tables", where(origin, sigs->source())), origin);
        std::set<std::string> ids;
        for (auto& n : *a) {
            const toml::table* t = n.as_table();
            if (!t) return fail(fmt::format("{}: `signature` must be [[signature]] tables", where(origin, n.source())), origin);
            auto s = read_signature(*t, origin);
            if (!s) return fail(s.error().message, origin);
            // One id may come from several signatures (variants), but with one layer and severity.
            for (auto& other : c.signatures)
                if (other.id == s->id && (other.layer != s->layer || other.severity != s->severity))
                    return fail(fmt::format("{}: id {} is declared twice with a different layer or severity",
                                            where(origin, t->source()), s->id),
                                origin);
            c.signatures.push_back(std::move(*s));
        }
    }
    return c;
}

// ---------------------------------------------------------------------------------------------
// Findings.

struct Occurrence {
    const Signature* sig = nullptr;
    std::map<std::string, std::vector<std::string>> values;  // distinct, in order seen
    std::string pci;
    uint64_t count = 0;
    KernelLogLine first, last;
};

std::string when(const KernelLogLine& l) {
    if (!l.wall_time.empty()) return l.wall_time;
    if (l.monotonic_s) return fmt::format("{:.6f} s after boot", *l.monotonic_s);
    return {};
}

std::string occurrences_text(const Occurrence& o) {
    std::string first = when(o.first), last = when(o.last);
    if (o.count == 1) return first.empty() ? std::string() : "at " + first;
    if (first.empty()) return fmt::format("{} times", o.count);
    return fmt::format("{} times, first at {}, last at {}", o.count, first, last);
}

std::string value_text(const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < kMaxFieldValues; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > kMaxFieldValues) s += fmt::format(" and {} more", v.size() - kMaxFieldValues);
    return s.empty() ? "(not stated)" : s;
}

std::string render(std::string_view tmpl, const Occurrence& o, const std::string& gpu) {
    std::string out;
    size_t i = 0;
    while (i < tmpl.size()) {
        size_t open = tmpl.find('{', i);
        size_t close = open == std::string_view::npos ? open : tmpl.find('}', open);
        if (close == std::string_view::npos) {
            out += tmpl.substr(i);
            break;
        }
        out += tmpl.substr(i, open - i);
        std::string name(tmpl.substr(open + 1, close - open - 1));
        if (name == "gpu") {
            out += gpu;
        } else {
            auto it = o.values.find(name);
            out += it == o.values.end() ? std::string("(not stated)") : value_text(it->second);
        }
        i = close + 1;
    }
    return out;
}

const ResolvedLibrary* library(const Snapshot& s, std::string_view soname_prefix) {
    for (auto& l : s.libraries.libraries)
        if (l.soname.starts_with(soname_prefix) && l.chosen) return &l;
    return nullptr;
}

std::string first_value(const Occurrence& o, const std::string& field) {
    auto it = o.values.find(field);
    return it == o.values.end() || it->second.empty() ? std::string() : it->second.front();
}

// The node's own facts about an API mismatch: the module loaded now and the libcuda the loader picks.
void check_api_mismatch(const CheckContext& ctx, const Occurrence& o, Finding& f) {
    const auto& s = ctx.snapshot;
    std::optional<std::string> module_now;
    if (s.collected(Collector::module) && s.module.nvidia_driver_version) module_now = *s.module.nvidia_driver_version;
    const ResolvedLibrary* libcuda = s.collected(Collector::libraries) ? library(s, "libcuda.so.1") : nullptr;
    std::string lib_now = libcuda && !libcuda->chosen->version.empty() ? libcuda->chosen->version : std::string();
    if (module_now) f.evidence.push_back({"/proc/driver/nvidia/version", *module_now});
    if (!lib_now.empty()) f.evidence.push_back({libcuda->chosen->path, "resolves to " + libcuda->chosen->real_path});
    if (module_now && !lib_now.empty()) {
        if (*module_now == lib_now) {
            f.severity = Severity::info;
            f.message += fmt::format("; on this node the module and libcuda now agree ({}): the mismatch is over "
                                     "(the text is from before a reboot or reinstall)",
                                     lib_now);
        } else {
            f.severity = Severity::error;
            f.message += fmt::format("; confirmed on this node: kernel module {}, the loader picks libcuda {} ({})",
                                     *module_now, lib_now, libcuda->chosen->path);
        }
    } else if (module_now) {
        // The loader's libcuda version is unknown (a capture without the file): the module alone still says
        // whether it is the version the text's client had.
        if (*module_now == first_value(o, "client_version")) {
            f.severity = Severity::info;
            f.message += fmt::format("; this node's module is now {}, the client's version: the mismatch is over",
                                     *module_now);
        } else if (*module_now == first_value(o, "module_version")) {
            f.message += fmt::format("; this node's module is still {}", *module_now);
        } else {
            f.message += fmt::format("; this node's module is now {}", *module_now);
        }
    }
}

// "insufficient driver": which CUDA the driver supports and which runtime the loader picks, from the node.
void check_cuda_driver(const CheckContext& ctx, Finding& f) {
    const auto& s = ctx.snapshot;
    std::optional<int> driver_cuda = s.cuda.driver_version ? s.cuda.driver_version : s.nvml.cuda_driver_version;
    const ResolvedLibrary* cudart = s.collected(Collector::libraries) ? library(s, "libcudart.so") : nullptr;
    std::vector<std::string> facts;
    if (driver_cuda)
        facts.push_back(fmt::format("the driver supports CUDA {}.{}", *driver_cuda / 1000, (*driver_cuda % 1000) / 10));
    if (s.collected(Collector::module) && s.module.nvidia_driver_version)
        facts.push_back(fmt::format("kernel module {}", *s.module.nvidia_driver_version));
    if (cudart && !cudart->chosen->version.empty())
        facts.push_back(fmt::format("the loader picks CUDA runtime {} ({})", cudart->chosen->version, cudart->chosen->path));
    if (facts.empty()) return;
    std::string joined;
    for (auto& x : facts) joined += (joined.empty() ? "" : ", ") + x;
    f.message += "; on this node: " + joined;
    if (driver_cuda) f.evidence.push_back({"cuDriverGetVersion", std::to_string(*driver_cuda)});
    if (cudart) f.evidence.push_back({cudart->chosen->path, cudart->chosen->version});
}

// An Xid that names an earlier one as its cause takes the cause's severity and meaning from the policy.
void check_xid_cause(const CheckContext& ctx, const Occurrence& o, Finding& f) {
    const XidPolicy& policy = ctx.options.xid_policy ? *ctx.options.xid_policy : builtin_xid_policy();
    auto cause = parse_uint(first_value(o, "cause"));
    if (!cause || *cause > 100000) return;
    int code = static_cast<int>(*cause);
    const XidRule& r = policy.rule(code);
    f.severity = r.severity;
    f.message += fmt::format("; Xid {}: {}", code, policy.knows(code) ? r.meaning : "not in the Xid policy");
    f.evidence.push_back({"xid policy " + policy.version, fmt::format("{} {}", code, to_string(r.severity))});
    f.next_step += " " + r.action;
}

}  // namespace

const SignatureCatalogue& builtin_signature_catalogue() {
    // Parsed and checked by the build (tools/compile_catalogues.cpp); read from the binary on first use.
    // Never destroyed: freeing it at exit would cost a process that used it as much again.
    static const SignatureCatalogue& catalogue = *new SignatureCatalogue(read_builtin_signatures());
    return catalogue;
}

Result<SignatureCatalogue> parse_signature_catalogue(std::string_view text, const std::string& origin) {
    return parse_catalogue(text, origin);
}

Result<SignatureCatalogue> load_signature_catalogue_file(const std::string& path) {
    auto text = read_input_file(path, 16u << 20);
    if (!text)
        return fail(fmt::format("{}: cannot read the signature catalogue: {}", path, text.error().message), path,
                    text.error().sys_errno);
    auto site = parse_catalogue(*text, path);
    if (!site) return site;
    SignatureCatalogue merged = builtin_signature_catalogue();
    std::set<std::string> replaced;
    for (auto& s : site->signatures) replaced.insert(s.id);
    std::erase_if(merged.signatures, [&](const Signature& s) { return replaced.count(s.id) > 0; });
    // Site signatures first: a site's more specific wording wins over a built-in one on the same line.
    merged.signatures.insert(merged.signatures.begin(), site->signatures.begin(), site->signatures.end());
    merged.version = fmt::format("{} ({}) over built-in {}", site->version, path, merged.version);
    return merged;
}

std::optional<SignatureMatch> match_signature(const Signature& sig, std::string_view text) {
    std::vector<std::string_view> lines;
    for (auto& part : split(text, '\n')) split_rsyslog(part, lines);
    size_t used = 0;
    return match_lines(sig, lines, 0, used);
}

std::vector<std::string> catalogue_gate_words(const SignatureCatalogue& catalogue) {
    std::vector<std::string> out;
    for (auto& s : catalogue.signatures)
        for (auto& t : s.templates)
            if (std::find(out.begin(), out.end(), t.gate) == out.end()) out.push_back(t.gate);
    return out;
}

// The signatures that may name a UUID, worked out at the first line holding "GPU-": a text without one never needs
// them.
struct GpuUuidsInText::Matcher {
    explicit Matcher(const SignatureCatalogue& catalogue) : candidates(catalogue) {
        const auto& sigs = catalogue.signatures;
        names_uuid.resize(sigs.size());
        for (size_t s = 0; s < sigs.size(); ++s) {
            auto fields = captured_fields(sigs[s]);
            names_uuid[s] = fields.count("pci") && fields.count("uuid");
        }
        any = std::find(names_uuid.begin(), names_uuid.end(), 1) != names_uuid.end();
    }
    std::vector<char> names_uuid;
    bool any = false;
    LazyCandidates candidates;
    std::vector<char> may_match;
};

GpuUuidsInText::GpuUuidsInText(const SignatureCatalogue& catalogue) : catalogue_(catalogue) {}
GpuUuidsInText::~GpuUuidsInText() = default;

void GpuUuidsInText::add(const KernelLogLine& l) {
    // A UUID is kept only when it starts with "GPU-", and a field's value is read from the line: most of a long
    // text's kept lines are passed here without looking further.
    if (l.text.find("GPU-") == std::string::npos) return;
    if (!matcher_) matcher_ = std::make_unique<Matcher>(catalogue_);
    // Only a signature that captures both a pci and a uuid field names a GPU's UUID: at a line only the signatures
    // that may match are tried, in order (the first that matches takes the line, as in SignatureScan).
    Matcher& m = *matcher_;
    if (!m.any) return;
    const auto& sigs = catalogue_.signatures;
    m.candidates.mark(l.text, m.may_match);
    // A signature after the last one that may name a UUID here cannot: the line is passed when that one is.
    size_t last_naming = sigs.size();
    for (size_t s = sigs.size(); s-- > 0;)
        if (m.may_match[s] && m.names_uuid[s]) {
            last_naming = s;
            break;
        }
    if (last_naming == sigs.size()) return;
    for (size_t s = 0; s <= last_naming; ++s) {
        if (!m.may_match[s]) continue;
        auto match = match_signature(sigs[s], l.text);
        if (!match) continue;
        auto p = match->fields.find("pci"), u = match->fields.find("uuid");
        if (p != match->fields.end() && u != match->fields.end() && u->second.starts_with("GPU-"))
            found_[p->second] = u->second;
        break;
    }
}

std::vector<SignatureDeclaration> signature_declarations(const SignatureCatalogue& catalogue) {
    std::vector<SignatureDeclaration> out;
    for (auto& s : catalogue.signatures) {
        if (!s.severity) continue;
        if (std::any_of(out.begin(), out.end(), [&](auto& d) { return d.id == s.id; })) continue;
        out.push_back({s.id, s.layer, *s.severity, s.summary});
    }
    return out;
}

// The kept lines not yet done (a logical line of theirs not yet matched), oldest first, and their logical lines
// (rsyslog's #012 split apart) from the first one not yet matched on.
struct SignatureScan::State {
    State(const SignatureCatalogue& c, Done d) : catalogue(c), done(std::move(d)), candidates(c) {
        for (auto& s : c.signatures) lookahead = std::max<size_t>(lookahead, s.lines);
    }
    const SignatureCatalogue& catalogue;
    Done done;
    LazyCandidates candidates;
    std::vector<char> may_match;
    size_t lookahead = 1;  // the most logical lines one signature joins: a line is matched once they have come

    struct Pending {
        std::optional<KernelLogLine> own;  // an added line, held here (a deque's elements stay where they are)
        const KernelLogLine* line = nullptr;  // it, or the caller's borrowed line
        bool recognised = false;
    };
    std::deque<Pending> pending;
    uint64_t first_pending = 0;  // the sequence number of pending.front()
    uint64_t added = 0;
    std::vector<std::string_view> logical;  // views into the pending lines
    std::vector<uint64_t> origin;           // per logical line, its kept line's sequence number
    size_t next = 0;                        // the first logical line not yet matched

    std::map<std::string, std::string> uuid_of;  // "NVRM: GPU at PCI:...: GPU-..." in the text itself
    std::vector<Occurrence> occ;
    std::map<std::string, size_t> index;

    // After a line was put at the back of `pending`.
    void pushed() {
        split_rsyslog(pending.back().line->text, logical);
        origin.resize(logical.size(), added++);
        match(false);
    }

    void match(bool at_end) {
        while (next < logical.size() && (at_end || logical.size() - next >= lookahead)) next += match_at(next);
        // A kept line is done once none of its logical lines is left to match.
        uint64_t done_below = next < logical.size() ? origin[next] : added;
        for (; first_pending < done_below; ++first_pending) {
            done(*pending.front().line, pending.front().recognised);
            pending.pop_front();
        }
        // The matched logical lines point into lines that may be gone: dropped in batches, so that dropping stays
        // amortised O(1).
        if (next >= 1024 && next * 2 >= logical.size()) {
            logical.erase(logical.begin(), logical.begin() + static_cast<std::ptrdiff_t>(next));
            origin.erase(origin.begin(), origin.begin() + static_cast<std::ptrdiff_t>(next));
            next = 0;
        }
    }

    // What the signatures made of a logical line: the one that matched and what it read, or none.
    struct Outcome {
        const Signature* sig = nullptr;
        SignatureMatch match;
    };
    // The previous outcome, reused when the logical lines it was read from are the same bytes as the ones here (a
    // storm repeats one message line after line): a signature reads at most `lookahead` lines from where it starts,
    // so the outcome is theirs alone.
    std::vector<std::string> memo_window;
    std::optional<std::pair<Outcome, size_t>> memo;  // and how many lines it joined

    bool same_window(size_t i) const {
        size_t n = std::min(lookahead, logical.size() - i);
        if (n != memo_window.size()) return false;
        for (size_t k = 0; k < n; ++k)
            if (logical[i + k] != memo_window[k]) return false;
        return true;
    }

    // Tries the signatures at logical line i; how many lines the one that matched joined (1 when none did).
    size_t match_at(size_t i) {
        if (!memo || !same_window(i)) memo = find_at(i);
        apply(i, memo->second, memo->first);
        return memo->second;
    }

    std::pair<Outcome, size_t> find_at(size_t i) {
        size_t n = std::min(lookahead, logical.size() - i);
        memo_window.resize(n);
        for (size_t k = 0; k < n; ++k) memo_window[k].assign(logical[i + k]);
        candidates.mark(logical[i], may_match);
        for (size_t s = 0; s < catalogue.signatures.size(); ++s) {
            if (!may_match[s]) continue;
            const Signature& sig = catalogue.signatures[s];
            size_t used = 0;
            auto m = match_lines(sig, logical, i, used);
            if (!m) continue;
            return {Outcome{&sig, std::move(*m)}, used};
        }
        return {Outcome{}, 1};
    }

    // The outcome at logical line i, joined over `used` lines: its lines recognised, an occurrence counted.
    void apply(size_t i, size_t used, const Outcome& outcome) {
        if (!outcome.sig) return;
        const Signature& sig = *outcome.sig;
        const auto& fields = outcome.match.fields;
        for (size_t k = i; k < i + used; ++k) pending[origin[k] - first_pending].recognised = true;
        if (auto p = fields.find("pci"), q = fields.find("uuid");
            p != fields.end() && q != fields.end() && q->second.starts_with("GPU-"))
            uuid_of[p->second] = q->second;
        if (!sig.severity) return;
        std::string key = sig.id;
        for (auto& g : sig.group_by) {
            auto v = fields.find(g);
            key += '\x1f' + (v != fields.end() ? v->second : std::string());
        }
        const KernelLogLine& line = *pending[origin[i] - first_pending].line;
        auto [it, inserted] = index.try_emplace(key, occ.size());
        if (inserted) {
            occ.push_back({});
            occ.back().sig = &sig;
            occ.back().first = line;
        }
        auto& o = occ[it->second];
        ++o.count;
        o.last = line;
        if (auto p = fields.find("pci"); p != fields.end() && o.pci.empty()) o.pci = p->second;
        for (auto& [name, value] : fields) {
            auto& vs = o.values[name];
            if (std::find(vs.begin(), vs.end(), value) == vs.end()) vs.push_back(value);
        }
    }
};

SignatureScan::SignatureScan(const SignatureCatalogue& catalogue, Done done)
    : state_(std::make_unique<State>(catalogue, std::move(done))) {}
SignatureScan::~SignatureScan() = default;

void SignatureScan::add(KernelLogLine line) {
    State::Pending& p = state_->pending.emplace_back();
    p.own = std::move(line);
    p.line = &*p.own;
    state_->pushed();
}

void SignatureScan::add_borrowed(const KernelLogLine& line) {
    state_->pending.push_back({std::nullopt, &line});
    state_->pushed();
}

void SignatureScan::finish() { state_->match(true); }

void SignatureScan::findings(const CheckContext& ctx, const std::string& source, std::vector<Finding>& out) const {
    const State& st = *state_;
    std::vector<Finding> found;
    for (auto& o : st.occ) {
        const Signature& sig = *o.sig;
        Finding f;
        f.id = sig.id;
        f.layer = sig.layer;
        f.severity = *sig.severity;
        std::string gpu_text = "a GPU the text does not name";
        if (!o.pci.empty()) {
            GpuRef g = ctx.gpu(o.pci);
            if (auto u = st.uuid_of.find(o.pci); g.uuid.empty() && u != st.uuid_of.end()) g.uuid = u->second;
            f.subjects.push_back(g);
            gpu_text = describe(g);
        }
        f.message = render(sig.message, o, gpu_text);
        if (auto when_text = occurrences_text(o); !when_text.empty()) f.message += " (" + when_text + ")";
        f.evidence.push_back({source, o.last.text});
        if (o.count > 1 && o.first.text != o.last.text) f.evidence.push_back({source, o.first.text});
        f.evidence.push_back({"signature catalogue " + st.catalogue.version, sig.id + " (" + sig.origin + ")"});
        f.next_step = render(sig.next_step, o, o.pci.empty() ? std::string("the GPU") : describe(f.subjects.front()));
        if (sig.check == "api_mismatch") check_api_mismatch(ctx, o, f);
        else if (sig.check == "cuda_driver") check_cuda_driver(ctx, f);
        else if (sig.check == "xid_cause") check_xid_cause(ctx, o, f);
        found.push_back(std::move(f));
    }
    // A finding another one explains better on the same GPU ("rm_init_adapter failed" beside the
    // "RmInitAdapter failed! (0x62:...)" that carries the code) is left out.
    // The parser's own findings (already in `out`) count too: "could not insert 'nvidia': Key was rejected"
    // beside module.signature_refused.
    std::vector<bool> redundant(found.size(), false);
    for (size_t i = 0; i < found.size(); ++i) {
        const auto& by = st.occ[i].sig->suppressed_by;
        auto explains = [&](const Finding& other) {
            return &other != &found[i] && std::find(by.begin(), by.end(), other.id) != by.end() &&
                   other.subjects == found[i].subjects;
        };
        redundant[i] = std::any_of(found.begin(), found.end(), explains) || std::any_of(out.begin(), out.end(), explains);
    }
    for (size_t i = 0; i < found.size(); ++i)
        if (!redundant[i]) out.push_back(std::move(found[i]));
}

bool is_unrecognised_driver_line(const KernelLogLine& l) {
    bool driver_line = l.topic == LogTopic::nvrm || l.topic == LogTopic::amdgpu || l.topic == LogTopic::kfd;
    return driver_line && l.text.find("fallen off the bus") == std::string::npos;  // the parser's own rule
}

}  // namespace gpudx

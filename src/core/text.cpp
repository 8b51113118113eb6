#include "core/text.hpp"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace gpudx {

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    size_t start = 0;
    for (;;) {
        size_t pos = s.find(sep, start);
        if (pos == std::string_view::npos) {
            out.push_back(s.substr(start));
            return out;
        }
        out.push_back(s.substr(start, pos - start));
        start = pos + 1;
    }
}

std::vector<std::string_view> split_ws(std::string_view s) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        size_t start = i;
        while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (i > start) out.push_back(s.substr(start, i - start));
    }
    return out;
}

std::vector<std::string_view> split_lines(std::string_view s) {
    auto lines = split(s, '\n');
    if (!lines.empty() && lines.back().empty()) lines.pop_back();
    for (auto& l : lines)
        if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    return lines;
}

std::string to_lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::optional<uint64_t> parse_uint(std::string_view s, int base) {
    s = trim(s);
    if (base == 0) {
        if (s.starts_with("0x") || s.starts_with("0X")) {
            s.remove_prefix(2);
            base = 16;
        } else {
            base = 10;
        }
    } else if (base == 16 && (s.starts_with("0x") || s.starts_with("0X"))) {
        s.remove_prefix(2);
    }
    if (s.empty()) return std::nullopt;
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
}

std::optional<int64_t> parse_int(std::string_view s, int base) {
    s = trim(s);
    if (s.empty()) return std::nullopt;
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
}

std::optional<double> parse_double(std::string_view s) {
    s = trim(s);
    if (s.empty()) return std::nullopt;
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
}

std::vector<std::pair<std::string, std::string>> parse_key_values(std::string_view text, char sep) {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto line : split_lines(text)) {
        auto pos = line.find(sep);
        if (pos == std::string_view::npos) continue;
        auto key = trim(line.substr(0, pos));
        if (key.empty()) continue;
        out.emplace_back(std::string(key), std::string(trim(line.substr(pos + 1))));
    }
    return out;
}

namespace {

// Length of the well-formed UTF-8 sequence starting at s[i] (Unicode, table 3-7), or 0. Overlong forms,
// surrogates (U+D800..U+DFFF) and code points past U+10FFFF are not well formed: JSON writers refuse them.
size_t utf8_sequence_length(std::string_view s, size_t i) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
    unsigned char c = byte(0);
    if (c < 0x80) return 1;
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
    else if (c == 0xED) len = 3, hi = 0x9F;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return 0;
    if (i + len > s.size() || byte(1) < lo || byte(1) > hi) return 0;
    for (size_t k = 2; k < len; ++k)
        if ((byte(k) & 0xC0) != 0x80) return 0;
    return len;
}

}  // namespace

namespace {

// Where the first byte at or after `i` that is not ASCII sits (s.size() when none): 8 bytes at a time, since
// nearly every kernel-log line is ASCII.
size_t next_non_ascii(std::string_view s, size_t i) {
    for (; i + 8 <= s.size(); i += 8) {
        uint64_t word;
        std::memcpy(&word, s.data() + i, 8);
        if (word & 0x8080808080808080ull) break;
    }
    while (i < s.size() && static_cast<unsigned char>(s[i]) < 0x80) ++i;
    return i;
}

}  // namespace

std::string sanitize_utf8(std::string_view s) {
    size_t i = next_non_ascii(s, 0);
    if (i == s.size()) return std::string(s);
    std::string out;
    out.reserve(s.size() + 8);
    out.append(s.substr(0, i));
    while (i < s.size()) {
        if (size_t len = utf8_sequence_length(s, i); len > 0) {
            out.append(s.substr(i, len));
            i += len;
        } else {
            out += "\xEF\xBF\xBD";
            ++i;
        }
    }
    return out;
}

namespace {

// Length of the colour sequence (SGR: ESC '[' then digits and ';' then 'm') starting at s[i], or 0.
size_t colour_sequence_length(std::string_view s, size_t i) {
    if (s.substr(i, 2) != "\033[") return 0;
    size_t k = i + 2;
    while (k < s.size() && (std::isdigit(static_cast<unsigned char>(s[k])) || s[k] == ';')) ++k;
    return k < s.size() && s[k] == 'm' ? k + 1 - i : 0;
}

struct KeptControls {
    bool newlines = false;
    bool colours = false;
};

std::string replace_controls(std::string_view s, KeptControls keep) {
    std::string in = sanitize_utf8(s);
    std::string out;
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        auto u = static_cast<unsigned char>(in[i]);
        // C1 controls U+0080..U+009F, two bytes in UTF-8: U+009B (CSI) acts like ESC [ on many terminals.
        if (u == 0xC2 && i + 1 < in.size() && static_cast<unsigned char>(in[i + 1]) <= 0x9F) {
            out += '?';
            ++i;
        } else if (u == '\n' && keep.newlines) {
            out += '\n';
        } else if (size_t len = keep.colours ? colour_sequence_length(in, i) : 0; len > 0) {
            out.append(in, i, len);
            i += len - 1;
        } else if (u < 0x20 || u == 0x7f) {
            out += '?';
        } else {
            out += in[i];
        }
    }
    return out;
}

}  // namespace

std::string strip_control(std::string_view s) { return replace_controls(s, {}); }

std::string strip_terminal_controls(std::string_view text, bool keep_colours) {
    return replace_controls(text, {.newlines = true, .colours = keep_colours});
}

std::string fit(std::string_view text, size_t n) {
    if (text.size() <= n) return std::string(text);
    size_t cut = n >= 3 ? n - 3 : 0;  // "…" is three bytes
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    return std::string(text.substr(0, cut)) + "\xE2\x80\xA6";
}

std::string join_strings(const std::vector<std::string>& items, std::string_view sep) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += sep;
        out += items[i];
    }
    return out;
}

std::string format_gib(uint64_t bytes, int decimals) {
    return fmt::format("{:.{}f} GiB", static_cast<double>(bytes) / (1ull << 30), decimals);
}

}  // namespace gpudx

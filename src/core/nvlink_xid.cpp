#include "core/nvlink_xid.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "core/text.hpp"

namespace gpudx {

// Prefixed: this file may share a unity-build unit with text.cpp and the kernel-log lexer.
namespace {

bool nl_is_digit(char c) { return c >= '0' && c <= '9'; }
bool nl_is_hex(char c) { return nl_is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool nl_is_alnum(char c) { return nl_is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char nl_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

bool nl_starts_with_ci(std::string_view s, std::string_view lower_prefix) {
    if (s.size() < lower_prefix.size()) return false;
    for (size_t i = 0; i < lower_prefix.size(); ++i)
        if (nl_lower(s[i]) != lower_prefix[i]) return false;
    return true;
}

// Up to max digits at s[i]: how many were read, 0 when none.
size_t nl_read_digits(std::string_view s, size_t i, uint64_t& value, size_t max) {
    size_t n = 0;
    value = 0;
    while (i + n < s.size() && n < max && nl_is_digit(s[i + n])) value = value * 10 + static_cast<uint64_t>(s[i + n++] - '0');
    return n;
}

// A signed decimal ("13", "-1") at the start of s; its length, 0 when none.
size_t nl_read_signed(std::string_view s, int& value) {
    size_t i = s.starts_with("-") ? 1 : 0;
    uint64_t v = 0;
    size_t n = nl_read_digits(s, i, v, 6);
    if (n == 0) return 0;
    value = static_cast<int>(v) * (i == 1 ? -1 : 1);
    return i + n;
}

std::optional<uint32_t> nl_hex_word(std::string_view w) {
    if (!nl_starts_with_ci(w, "0x") || w.size() < 3 || w.size() > 10) return std::nullopt;
    uint32_t v = 0;
    for (char c : w.substr(2)) {
        if (!nl_is_hex(c)) return std::nullopt;
        v = v * 16 + static_cast<uint32_t>(nl_is_digit(c) ? c - '0' : nl_lower(c) - 'a' + 10);
    }
    return v;
}

}  // namespace

std::optional<NvlinkXidDetail> parse_nvlink_xid(std::string_view m) {
    // "Xid (PCI:...): <code>, ...": the code, then the words after it; the unit comes first, in capitals.
    size_t at = m.find("Xid (");
    if (at == std::string_view::npos) return std::nullopt;
    size_t close = m.find("): ", at);
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view rest = m.substr(close + 3);
    uint64_t code = 0;
    size_t nd = nl_read_digits(rest, 0, code, 4);
    if (nd == 0 || !is_nvlink5_xid(static_cast<int>(code))) return std::nullopt;
    // "<code>, [pid=..., name=..., ]<unit> ...": the fields before the unit are optional.
    for (int field = 0; field < 3; ++field) {
        size_t comma = rest.find(", ");
        if (comma == std::string_view::npos) return std::nullopt;
        rest = rest.substr(comma + 2);
        if (!rest.starts_with("pid=") && !rest.starts_with("name=")) break;
    }
    std::string_view args;
    if (size_t open = rest.find('('); open != std::string_view::npos) {
        size_t end = rest.find(')', open);
        args = rest.substr(open + 1, end == std::string_view::npos ? std::string_view::npos : end - open - 1);
        rest = rest.substr(0, open);
    }
    auto words = split_ws(rest);
    if (words.empty()) return std::nullopt;
    std::string_view unit = words[0];
    if (unit.empty() || !std::all_of(unit.begin(), unit.end(), [](char c) { return (c >= 'A' && c <= 'Z') || nl_is_digit(c) || c == '_'; }))
        return std::nullopt;
    NvlinkXidDetail d;
    size_t us = unit.find('_');
    d.unit = std::string(unit.substr(0, us));
    if (us != std::string_view::npos) d.subunit = std::string(unit.substr(us + 1));
    for (size_t i = 1; i < words.size(); ++i) {
        std::string_view w = words[i];
        if (nl_starts_with_ci(w, "nonfatal") || nl_starts_with_ci(w, "non-fatal")) d.fatal = false;
        else if (nl_starts_with_ci(w, "fatal")) d.fatal = true;
        else if (w.size() > 2 && w.starts_with("XC") && nl_is_digit(w[2])) d.crossbar = std::string(w);
        else if (w.size() > 1 && w[0] == 'i' && nl_is_digit(w[1])) {
            uint64_t v = 0;
            if (nl_read_digits(w, 1, v, 6) == w.size() - 1) d.instance = static_cast<int>(v);
        } else if (nl_starts_with_ci(w, "link") && i + 1 < words.size()) {
            int link = 0;
            if (nl_read_signed(words[i + 1], link) == words[i + 1].size()) d.link = link, ++i;
        }
    }
    auto values = split_ws(args);
    if (values.size() >= 1) d.intrinfo = nl_hex_word(values[0]);
    if (values.size() >= 2) d.error_status = nl_hex_word(values[1]);
    return d;
}

std::string NvlinkXidDetail::describe() const {
    std::string out = !link ? std::string("link not stated") : *link < 0 ? std::string("no single link (Link -1)")
                                                                           : "link " + std::to_string(*link);
    out += ", unit " + unit + (subunit.empty() ? "" : "/" + subunit);
    if (fatal) out += *fatal ? ", Fatal" : ", Nonfatal";
    if (error_status) out += fmt::format(", error status 0x{:08x}", *error_status);
    if (intrinfo) out += fmt::format(" (interrupt info 0x{:08x})", *intrinfo);
    return out;
}

std::string NvlinkXidDetail::key() const {
    std::string out = unit + (subunit.empty() ? "" : "_" + subunit);
    if (fatal) out += *fatal ? " Fatal" : " Nonfatal";
    if (link) out += " Link " + std::to_string(*link);
    return out;
}

std::optional<int> sxid_link(std::string_view m) {
    size_t at = find_ci(m, "sxid (");
    if (at == std::string_view::npos) return std::nullopt;
    for (size_t pos = find_ci(m, "link ", at); pos != std::string_view::npos; pos = find_ci(m, "link ", pos + 1)) {
        if (pos > 0 && nl_is_alnum(m[pos - 1])) continue;
        int link = 0;
        if (nl_read_signed(m.substr(pos + 5), link) > 0 && link >= 0) return link;
    }
    return std::nullopt;
}

}  // namespace gpudx

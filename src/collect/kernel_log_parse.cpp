#include "collect/kernel_log_parse.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <ctime>
#include <map>
#include <tuple>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GPUDX_X86 1
#endif

#include <fmt/format.h>

#include "core/pci_address.hpp"
#include "core/text.hpp"

namespace gpudx {

const char* to_string(KernelLogFormat f) {
    switch (f) {
        case KernelLogFormat::kmsg: return "kmsg";
        case KernelLogFormat::dmesg: return "dmesg";
        case KernelLogFormat::dmesg_t: return "dmesg -T";
        case KernelLogFormat::journal_short: return "journalctl short";
        case KernelLogFormat::journal_iso: return "journalctl short-iso";
        case KernelLogFormat::syslog: return "syslog";
        case KernelLogFormat::unknown: return "unknown";
    }
    return "unknown";
}

namespace {

// ---------------------------------------------------------------------------------------------
// Character helpers (ASCII only: kernel messages are bytes, and locale must not change results).

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_alnum(char c) { return is_digit(c) || is_alpha(c); }
inline bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

// `needle` is lower case.
size_t find_ci(std::string_view hay, std::string_view needle, size_t from = 0) {
    if (needle.empty()) return from <= hay.size() ? from : std::string_view::npos;
    if (hay.size() < needle.size()) return std::string_view::npos;
    const char first = needle[0];
    for (size_t i = from; i + needle.size() <= hay.size(); ++i) {
        if (lower(hay[i]) != first) continue;
        size_t k = 1;
        while (k < needle.size() && lower(hay[i + k]) == needle[k]) ++k;
        if (k == needle.size()) return i;
    }
    return std::string_view::npos;
}

bool contains_ci(std::string_view hay, std::string_view needle) { return find_ci(hay, needle) != std::string_view::npos; }

// A whole word: no letter or digit on either side.
bool contains_word_ci(std::string_view hay, std::string_view needle) {
    for (size_t at = find_ci(hay, needle); at != std::string_view::npos; at = find_ci(hay, needle, at + 1)) {
        bool left = at == 0 || !is_alnum(hay[at - 1]);
        size_t end = at + needle.size();
        bool right = end >= hay.size() || !is_alnum(hay[end]);
        if (left && right) return true;
    }
    return false;
}

bool starts_with_ci(std::string_view s, std::string_view lower_prefix) {
    if (s.size() < lower_prefix.size()) return false;
    for (size_t i = 0; i < lower_prefix.size(); ++i)
        if (lower(s[i]) != lower_prefix[i]) return false;
    return true;
}

// Reads digits at s[i...]; returns the count read (0 when none).
size_t read_digits(std::string_view s, size_t i, uint64_t& value, size_t max_digits = 19) {
    size_t n = 0;
    value = 0;
    while (i + n < s.size() && n < max_digits && is_digit(s[i + n])) value = value * 10 + (s[i + n++] - '0');
    return n;
}

constexpr std::array<std::string_view, 12> kMonths = {"jan", "feb", "mar", "apr", "may", "jun",
                                                      "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 7> kWeekdays = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};

int month_index(std::string_view s) {  // 1..12, 0 when not a month abbreviation
    if (s.size() != 3) return 0;
    for (size_t i = 0; i < kMonths.size(); ++i)
        if (starts_with_ci(s, kMonths[i])) return static_cast<int>(i) + 1;
    return 0;
}

bool is_weekday(std::string_view s) {
    if (s.size() != 3) return false;
    return std::any_of(kWeekdays.begin(), kWeekdays.end(), [&](auto w) { return starts_with_ci(s, w); });
}

// "HH:MM:SS" optionally followed by ".frac"; returns the length consumed, 0 when not a time.
size_t read_clock(std::string_view s, size_t i, int& h, int& m, int& sec) {
    if (i + 8 > s.size()) return 0;
    if (!is_digit(s[i]) || !is_digit(s[i + 1]) || s[i + 2] != ':' || !is_digit(s[i + 3]) || !is_digit(s[i + 4]) ||
        s[i + 5] != ':' || !is_digit(s[i + 6]) || !is_digit(s[i + 7]))
        return 0;
    h = (s[i] - '0') * 10 + (s[i + 1] - '0');
    m = (s[i + 3] - '0') * 10 + (s[i + 4] - '0');
    sec = (s[i + 6] - '0') * 10 + (s[i + 7] - '0');
    if (h > 23 || m > 59 || sec > 60) return 0;
    size_t n = 8;
    if (i + n < s.size() && (s[i + n] == '.' || s[i + n] == ',')) {
        size_t k = n + 1;
        while (i + k < s.size() && is_digit(s[i + k])) ++k;
        if (k > n + 1) n = k;
    }
    return n;
}

// Days since 1970-01-01 for a civil date (Howard Hinnant's algorithm).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

int current_utc_year() {
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    gmtime_r(&t, &tm);
    return tm.tm_year + 1900;
}

// ---------------------------------------------------------------------------------------------
// Line prefixes.

// "[  123.456789]"; returns the length consumed including the bracket, 0 when absent.
size_t read_monotonic_bracket(std::string_view s, size_t i, double& seconds) {
    if (i >= s.size() || s[i] != '[') return 0;
    size_t k = i + 1;
    while (k < s.size() && s[k] == ' ') ++k;
    uint64_t whole = 0;
    size_t nd = read_digits(s, k, whole);
    if (nd == 0) return 0;
    k += nd;
    if (k >= s.size() || s[k] != '.') return 0;
    ++k;
    uint64_t frac = 0;
    size_t nf = read_digits(s, k, frac, 9);
    if (nf == 0) return 0;
    k += nf;
    while (k < s.size() && is_digit(s[k])) ++k;  // more digits than we keep
    if (k >= s.size() || s[k] != ']') return 0;
    double scale = 1;
    for (size_t z = 0; z < nf; ++z) scale *= 10;
    seconds = static_cast<double>(whole) + static_cast<double>(frac) / scale;
    return k + 1 - i;
}

// The message after a prefix: one separating blank dropped, plus a printk caller id ("[    T123] ").
std::string_view message_after(std::string_view s, size_t i) {
    if (i < s.size() && s[i] == ' ') ++i;
    std::string_view rest = s.substr(std::min(i, s.size()));
    if (rest.size() > 3 && rest[0] == '[') {
        size_t k = 1;
        while (k < rest.size() && rest[k] == ' ') ++k;
        if (k < rest.size() && (rest[k] == 'T' || rest[k] == 'C')) {
            size_t d = k + 1;
            while (d < rest.size() && is_digit(rest[d])) ++d;
            if (d > k + 1 && d < rest.size() && rest[d] == ']') {
                rest.remove_prefix(d + 1);
                if (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
            }
        }
    }
    return rest;
}

ParsedLogLine parse_kmsg(std::string_view line) {
    ParsedLogLine p;
    if (!line.empty() && line[0] == ' ') {
        p.recognised = true;
        p.continuation = true;
        return p;
    }
    uint64_t prio = 0, seq = 0, usec = 0;
    size_t i = 0, n = read_digits(line, i, prio);
    if (n == 0 || i + n >= line.size() || line[i + n] != ',') return p;
    i += n + 1;
    n = read_digits(line, i, seq);
    if (n == 0 || i + n >= line.size() || line[i + n] != ',') return p;
    i += n + 1;
    n = read_digits(line, i, usec);
    if (n == 0 || i + n >= line.size() || (line[i + n] != ',' && line[i + n] != ';')) return p;
    i += n;
    size_t semi = line.find(';', i);
    if (semi == std::string_view::npos || semi - i > 64) return p;
    p.recognised = true;
    p.monotonic_s = static_cast<double>(usec) / 1e6;
    p.message = line.substr(semi + 1);
    return p;
}

ParsedLogLine parse_dmesg(std::string_view line) {
    ParsedLogLine p;
    size_t i = 0;
    if (line.size() > 2 && line[0] == '<') {  // dmesg -r: "<6>[    1.0] msg"
        size_t k = 1;
        while (k < line.size() && k < 5 && is_digit(line[k])) ++k;
        if (k > 1 && k < line.size() && line[k] == '>') i = k + 1;
    }
    double t = 0;
    size_t n = read_monotonic_bracket(line, i, t);
    if (n == 0) return p;
    p.recognised = true;
    p.monotonic_s = t;
    p.message = message_after(line, i + n);
    return p;
}

// "[Mon Nov 30 06:28:08 2026] msg"
ParsedLogLine parse_dmesg_t(std::string_view line) {
    ParsedLogLine p;
    if (line.size() < 26 || line[0] != '[') return p;
    size_t close = line.find(']');
    if (close == std::string_view::npos || close > 40) return p;
    std::string_view inside = line.substr(1, close - 1);
    auto tok = split_ws(inside);
    if (tok.size() != 5 || !is_weekday(tok[0]) || month_index(tok[1]) == 0) return p;
    int h, m, s;
    if (read_clock(tok[3], 0, h, m, s) != tok[3].size() || tok[4].size() != 4) return p;
    p.recognised = true;
    p.wall_time = inside;
    p.message = message_after(line, close + 1);
    return p;
}

// After the time of a journal or syslog line: "host ident[pid]: message".
bool parse_host_ident(std::string_view line, size_t i, ParsedLogLine& p) {
    if (i >= line.size() || line[i] != ' ') return false;
    ++i;
    size_t host_end = line.find(' ', i);
    if (host_end == std::string_view::npos || host_end == i) return false;
    size_t ident_start = host_end + 1;
    size_t colon = line.find(": ", ident_start);
    if (colon == std::string_view::npos) {
        if (line.size() > ident_start && line.back() == ':') colon = line.size() - 1;  // empty message
        else return false;
    }
    std::string_view ident = line.substr(ident_start, colon - ident_start);
    if (ident.empty() || ident.find(' ') != std::string_view::npos) return false;
    p.recognised = true;
    p.from_kernel = ident == "kernel";
    std::string_view msg = colon + 2 <= line.size() ? line.substr(colon + 2) : std::string_view{};
    double t = 0;
    size_t n = read_monotonic_bracket(msg, 0, t);  // kern.log: "kernel: [  123.4] msg"
    if (n > 0) {
        p.monotonic_s = t;
        msg = message_after(msg, n);
    }
    p.message = msg;
    return true;
}

// "Nov 30 06:28:08 host kernel: msg" (also "Nov  3 ..." and fractional seconds).
ParsedLogLine parse_short(std::string_view line) {
    ParsedLogLine p;
    if (line.size() < 16 || month_index(line.substr(0, 3)) == 0 || line[3] != ' ') return p;
    size_t i = 4;
    if (line[i] == ' ') ++i;
    uint64_t day = 0;
    size_t n = read_digits(line, i, day, 2);
    if (n == 0 || day < 1 || day > 31 || i + n >= line.size() || line[i + n] != ' ') return p;
    i += n + 1;
    int h, m, s;
    n = read_clock(line, i, h, m, s);
    if (n == 0) return p;
    size_t time_end = i + n;
    if (!parse_host_ident(line, time_end, p)) return {};
    p.wall_time = line.substr(0, time_end);
    return p;
}

// "2026-11-30T06:28:08+0000 host kernel: msg" (and ".123456", "Z", "+00:00").
size_t read_iso_time(std::string_view s, size_t i) {
    if (i + 19 > s.size()) return 0;
    auto d = [&](size_t k) { return is_digit(s[i + k]); };
    if (!(d(0) && d(1) && d(2) && d(3) && s[i + 4] == '-' && d(5) && d(6) && s[i + 7] == '-' && d(8) && d(9) &&
          (s[i + 10] == 'T' || s[i + 10] == ' ')))
        return 0;
    int h, m, sec;
    size_t n = read_clock(s, i + 11, h, m, sec);
    if (n == 0) return 0;
    size_t k = i + 11 + n;
    if (k < s.size() && s[k] == 'Z') return k + 1 - i;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) {
        size_t z = k + 1;
        size_t digits = 0;
        while (z < s.size() && (is_digit(s[z]) || s[z] == ':') && z - k <= 6) {
            if (is_digit(s[z])) ++digits;
            ++z;
        }
        if (digits == 4 || digits == 2) return z - i;
    }
    return k - i;
}

ParsedLogLine parse_iso(std::string_view line) {
    ParsedLogLine p;
    size_t n = read_iso_time(line, 0);
    if (n == 0 || (n > 10 && line[10] == ' ')) return p;  // "2026-11-30 06:28:08" is not a journal prefix
    if (!parse_host_ident(line, n, p)) return {};
    p.wall_time = line.substr(0, n);
    return p;
}

}  // namespace

std::optional<uint64_t> kmsg_sequence(std::string_view record) {
    auto comma = record.find(',');
    if (comma == std::string_view::npos) return std::nullopt;
    auto rest = record.substr(comma + 1);
    auto end = rest.find_first_of(",;");
    if (end == std::string_view::npos || end == 0) return std::nullopt;
    uint64_t seq = 0;
    for (char c : rest.substr(0, end)) {
        if (c < '0' || c > '9') return std::nullopt;
        seq = seq * 10 + static_cast<uint64_t>(c - '0');
    }
    return seq;
}

ParsedLogLine parse_log_line(std::string_view line, KernelLogFormat format) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    switch (format) {
        case KernelLogFormat::kmsg: return parse_kmsg(line);
        case KernelLogFormat::dmesg: return parse_dmesg(line);
        case KernelLogFormat::dmesg_t: return parse_dmesg_t(line);
        case KernelLogFormat::journal_short:
        case KernelLogFormat::syslog: return parse_short(line);
        case KernelLogFormat::journal_iso: return parse_iso(line);
        case KernelLogFormat::unknown: break;
    }
    return {};
}

KernelLogFormat detect_line_format(std::string_view line) {
    if (line.empty()) return KernelLogFormat::unknown;
    char c = line[0];
    if (is_digit(c)) {
        if (parse_kmsg(line).recognised) return KernelLogFormat::kmsg;
        if (parse_iso(line).recognised) return KernelLogFormat::journal_iso;
        return KernelLogFormat::unknown;
    }
    if (c == '[' || c == '<') {
        if (parse_dmesg(line).recognised) return KernelLogFormat::dmesg;
        if (parse_dmesg_t(line).recognised) return KernelLogFormat::dmesg_t;
        return KernelLogFormat::unknown;
    }
    if (is_alpha(c)) {
        auto p = parse_short(line);
        if (p.recognised) return p.monotonic_s ? KernelLogFormat::syslog : KernelLogFormat::journal_short;
    }
    return KernelLogFormat::unknown;
}

KernelLogFormat detect_log_format(std::string_view head) {
    std::map<KernelLogFormat, int> votes;
    int considered = 0;
    size_t pos = 0;
    while (pos < head.size() && considered < 200) {
        size_t nl = head.find('\n', pos);
        std::string_view line = head.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        pos = nl == std::string_view::npos ? head.size() : nl + 1;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (trim(line).empty() || line.starts_with("-- ") || line[0] == ' ') continue;
        ++considered;
        auto f = detect_line_format(line);
        if (f != KernelLogFormat::unknown) ++votes[f];
    }
    // kern.log lines carry "[  1.2]" only for part of their life; one syslog line is enough.
    if (votes.count(KernelLogFormat::syslog)) {
        votes[KernelLogFormat::syslog] += votes[KernelLogFormat::journal_short];
        votes.erase(KernelLogFormat::journal_short);
    }
    KernelLogFormat best = KernelLogFormat::unknown;
    int best_votes = 0;
    for (auto [f, v] : votes)
        if (v > best_votes) best = f, best_votes = v;
    return best;
}

// ---------------------------------------------------------------------------------------------
// Topics and events.

std::string_view classify_topic(std::string_view m) {
    if (contains_word_ci(m, "xid")) return "xid";
    if (contains_word_ci(m, "sxid")) return "sxid";
    if (contains_ci(m, "nvrm")) return "nvrm";
    // "kfd kfd: amdgpu: added device ...": the KFD driver's own line names amdgpu too.
    if (m.starts_with("kfd")) return "kfd";
    if (contains_ci(m, "amdgpu")) return "amdgpu";
    if (contains_word_ci(m, "kfd")) return "kfd";
    if (contains_word_ci(m, "aer") || contains_ci(m, "pcie bus error")) return "aer";
    if (contains_ci(m, "iommu") || contains_ci(m, "dmar") || contains_ci(m, "amd-vi")) return "iommu";
    if (contains_ci(m, "module verification failed") || contains_ci(m, "unsigned module") ||
        contains_ci(m, "key was rejected"))
        return "signature";
    if (contains_ci(m, "lockdown")) return "lockdown";
    if (contains_ci(m, "pcie") || contains_ci(m, "fallen off the bus")) return "pcie";
    return {};
}

namespace {

// "dddd:bb:dd.f" (4 or 8 domain digits) at i; with allow_no_function also "dddd:bb:dd". Returns length.
size_t match_pci_at(std::string_view s, size_t i, bool allow_no_function) {
    size_t k = i;
    while (k < s.size() && is_hex(s[k]) && k - i <= 8) ++k;
    size_t dom = k - i;
    if ((dom != 4 && dom != 8) || k >= s.size() || s[k] != ':') return 0;
    if (k + 6 > s.size() || !is_hex(s[k + 1]) || !is_hex(s[k + 2]) || s[k + 3] != ':' || !is_hex(s[k + 4]) ||
        !is_hex(s[k + 5]))
        return 0;
    k += 6;
    if (k + 1 < s.size() && s[k] == '.' && is_digit(s[k + 1])) {
        k += 2;
    } else if (!allow_no_function) {
        return 0;
    }
    if (k < s.size() && is_alnum(s[k])) return 0;
    return k - i;
}

std::string normalised(std::string_view text) {
    auto a = PciAddress::parse(text);
    return a ? a->str() : std::string();
}

}  // namespace

std::optional<std::string> find_pci_address(std::string_view m) {
    for (size_t i = 0; i < m.size(); ++i) {
        if (!is_hex(m[i]) || (i > 0 && is_alnum(m[i - 1]))) continue;
        bool after_pci_tag = i >= 4 && starts_with_ci(m.substr(i - 4), "pci:");
        size_t n = match_pci_at(m, i, after_pci_tag);
        if (n > 0) {
            auto s = normalised(m.substr(i, n));
            if (!s.empty()) return s;
        }
    }
    return std::nullopt;
}

std::optional<XidEvent> parse_xid(std::string_view m) {
    size_t at = std::string_view::npos;
    size_t bare = std::string_view::npos;  // "NVRM: Xid 13, ...": drivers before the PCI tag name no device
    for (size_t pos = find_ci(m, "xid"); pos != std::string_view::npos; pos = find_ci(m, "xid", pos + 1)) {
        size_t k = pos + 3;
        while (k < m.size() && m[k] == ' ') ++k;
        if (pos > 0 && is_alnum(m[pos - 1])) continue;
        if (k < m.size() && m[k] == '(') {
            at = k;
            break;
        }
        if (k > pos + 3 && k < m.size() && is_digit(m[k]) && bare == std::string_view::npos) {
            size_t d = k;
            while (d < m.size() && is_digit(m[d])) ++d;
            if (d < m.size() && m[d] == ',') bare = k;
        }
    }
    if (at == std::string_view::npos && bare == std::string_view::npos) return std::nullopt;
    XidEvent ev;
    size_t k = bare;
    if (at != std::string_view::npos) {
        size_t close = m.find(')', at);
        if (close == std::string_view::npos) return std::nullopt;
        std::string_view inside = trim(m.substr(at + 1, close - at - 1));
        if (starts_with_ci(inside, "pci:")) inside.remove_prefix(4);
        auto parts = split_ws(inside);
        if (!parts.empty()) ev.pci = normalised(parts[0]);
        for (size_t i = 1; i < parts.size(); ++i) {
            if (starts_with_ci(parts[i], "gpu-i:")) {
                if (auto v = parse_uint(parts[i].substr(6))) ev.gpu_instance = static_cast<int>(*v);
            }
        }
        k = close + 1;
    }
    if (k < m.size() && m[k] == ':') ++k;
    while (k < m.size() && m[k] == ' ') ++k;
    uint64_t code = 0;
    size_t nd = read_digits(m, k, code, 6);
    if (nd == 0) return std::nullopt;
    ev.code = static_cast<int>(code);
    k += nd;
    // ", pid=1234, name=python3, <details>": pid and name are optional and come first.
    std::string_view rest = k < m.size() ? m.substr(k) : std::string_view{};
    for (int field = 0; field < 2; ++field) {
        if (!rest.starts_with(",")) break;
        std::string_view r = rest.substr(1);
        while (!r.empty() && r[0] == ' ') r.remove_prefix(1);
        bool is_pid = r.starts_with("pid=");
        bool is_name = r.starts_with("name=");
        if (!is_pid && !is_name) break;
        r.remove_prefix(is_pid ? 4 : 5);
        size_t end = r.find(", ");
        std::string_view value = trim(r.substr(0, end));
        if (value.size() >= 2 && value.front() == '\'' && value.back() == '\'') value = value.substr(1, value.size() - 2);
        if (is_pid) {
            if (auto v = parse_uint(value); v && *v <= 0x7fffffff) ev.pid = static_cast<int>(*v);
        } else if (value != "<unknown>") {
            ev.process = sanitize_utf8(value);
        }
        rest = end == std::string_view::npos ? std::string_view{} : r.substr(end);
    }
    ev.text = sanitize_utf8(trim(m));
    return ev;
}

std::optional<LogEventKind> parse_sxid(std::string_view m) {
    size_t at = find_ci(m, "sxid (");
    if (at == std::string_view::npos || (at > 0 && is_alnum(m[at - 1]))) return std::nullopt;
    size_t close = m.find(')', at);
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view inside = trim(m.substr(at + 6, close - at - 6));
    if (starts_with_ci(inside, "pci:")) inside.remove_prefix(4);
    size_t k = close + 1;
    if (k < m.size() && m[k] == ':') ++k;
    while (k < m.size() && m[k] == ' ') ++k;
    uint64_t code = 0;
    size_t nd = read_digits(m, k, code, 6);
    if (nd == 0 || code == 0 || code > 99999) return std::nullopt;
    std::string_view rest = trim(m.substr(k + nd));
    if (rest.starts_with(",")) rest = trim(rest.substr(1));
    LogEventKind e;
    e.device = normalised(inside);
    e.code = static_cast<int>(code);
    // The switch's device name before the tag ("nvidia-nvswitch3: SXid ..."), when the line has one.
    std::string_view head = trim(m.substr(0, at));
    if (head.ends_with(":")) head.remove_suffix(1);
    if (size_t sp = head.rfind(' '); sp != std::string_view::npos) head.remove_prefix(sp + 1);
    e.module = std::string(head);
    // The driver writes one report as several lines: "Fatal"/"Non-fatal" with the message, then "Severity N
    // Engine instance ..." and "Data {...}". A report with no severity word at all is still a report.
    if (starts_with_ci(rest, "non-fatal") || starts_with_ci(rest, "nonfatal")) e.kind = "sxid_nonfatal";
    else if (starts_with_ci(rest, "fatal")) e.kind = "sxid_fatal";
    else if (rest.starts_with("Data {") || starts_with_ci(rest, "severity ")) e.kind = "sxid_detail";
    else e.kind = "sxid_unstated";
    return e;
}

std::vector<LogEventKind> classify_events(std::string_view m) {
    std::vector<LogEventKind> out;
    if (auto sxid = parse_sxid(m)) out.push_back(std::move(*sxid));
    // An Xid 79 line says it too, but the driver logs its own "fallen off the bus" line beside it, and
    // the Xid is its own finding: counting both would double the one event.
    if (contains_ci(m, "fallen off the bus") && !parse_xid(m)) {
        LogEventKind e{"fallen_off_bus", {}, {}};
        if (auto a = find_pci_address(m)) e.device = *a;
        out.push_back(std::move(e));
    }
    if (size_t at = find_ci(m, "pcie bus error"); at != std::string_view::npos) {
        size_t sev = find_ci(m, "severity=", at);
        if (sev != std::string_view::npos) {
            std::string_view v = m.substr(sev + 9);
            v = v.substr(0, v.find(", type"));
            std::string kind = starts_with_ci(v, "correct") ? "aer_corrected"
                               : contains_ci(v, "non-fatal") ? "aer_nonfatal"
                               : contains_ci(v, "fatal")     ? "aer_fatal"
                                                             : "aer_nonfatal";
            LogEventKind e{kind, {}, {}};
            if (auto a = find_pci_address(m.substr(0, at))) e.device = *a;
            out.push_back(std::move(e));
        }
    }
    if (contains_ci(m, "dmar") && contains_ci(m, "request device [")) {
        LogEventKind e{"iommu_fault", {}, {}};
        size_t b = find_ci(m, "request device [") + 16;
        size_t end = m.find(']', b);
        if (end != std::string_view::npos) e.device = normalised(m.substr(b, end - b));
        out.push_back(std::move(e));
    } else if (size_t ev = find_ci(m, "amd-vi: event logged ["); ev != std::string_view::npos) {
        std::string_view what = m.substr(ev + 22);
        if (contains_ci(what, "fault") || contains_ci(what, "invalid") || contains_ci(what, "illegal")) {
            LogEventKind e{"iommu_fault", {}, {}};
            if (size_t d = find_ci(what, "device="); d != std::string_view::npos) {
                std::string_view v = what.substr(d + 7);
                e.device = normalised(v.substr(0, v.find_first_of(" ]")));
            }
            if (e.device.empty())
                if (auto a = find_pci_address(m.substr(0, ev))) e.device = *a;
            out.push_back(std::move(e));
        }
    }
    if (size_t at = find_ci(m, "module verification failed"); at != std::string_view::npos) {
        LogEventKind e{"module_unsigned", {}, {}};
        std::string_view head = trim(m.substr(0, at));
        if (head.ends_with(":")) head.remove_suffix(1);
        if (!head.empty() && head.find(' ') == std::string_view::npos) e.module = std::string(head);
        out.push_back(std::move(e));
    } else if ((contains_ci(m, "unsigned module") && (contains_ci(m, "reject") || contains_ci(m, "restrict"))) ||
               contains_ci(m, "key was rejected")) {
        LogEventKind e{"module_refused", {}, {}};
        if (contains_ci(m, "nvidia")) e.module = "nvidia";
        out.push_back(std::move(e));
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Time windows.

std::optional<int64_t> parse_wall_time(std::string_view text, int default_year) {
    text = trim(text);
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
    int64_t offset_s = 0;
    if (size_t n = read_iso_time(text, 0); n > 0 && n == text.size()) {
        y = std::stoi(std::string(text.substr(0, 4)));
        mo = std::stoi(std::string(text.substr(5, 2)));
        d = std::stoi(std::string(text.substr(8, 2)));
        read_clock(text, 11, h, mi, s);
        size_t z = text.find_first_of("+-Z", 19);
        if (z != std::string_view::npos && text[z] != 'Z') {
            std::string digits;
            for (char c : text.substr(z + 1))
                if (is_digit(c)) digits += c;
            int oh = std::stoi(digits.substr(0, 2)), om = digits.size() >= 4 ? std::stoi(digits.substr(2, 2)) : 0;
            offset_s = (oh * 3600 + om * 60) * (text[z] == '-' ? -1 : 1);
        }
    } else if (text.size() == 10 && read_iso_time(std::string(text) + "T00:00:00", 0) == 19) {
        y = std::stoi(std::string(text.substr(0, 4)));
        mo = std::stoi(std::string(text.substr(5, 2)));
        d = std::stoi(std::string(text.substr(8, 2)));
    } else {
        auto tok = split_ws(text);
        size_t t0 = (!tok.empty() && is_weekday(tok[0])) ? 1 : 0;
        if (tok.size() < t0 + 3) return std::nullopt;
        mo = month_index(tok[t0]);
        uint64_t day = 0;
        if (mo == 0 || read_digits(tok[t0 + 1], 0, day, 2) != tok[t0 + 1].size() || day < 1 || day > 31)
            return std::nullopt;
        d = static_cast<int>(day);
        if (read_clock(tok[t0 + 2], 0, h, mi, s) != tok[t0 + 2].size()) return std::nullopt;
        if (tok.size() == t0 + 4) {
            uint64_t year = 0;
            if (read_digits(tok[t0 + 3], 0, year, 4) != 4 || tok[t0 + 3].size() != 4) return std::nullopt;
            y = static_cast<int>(year);
        } else if (tok.size() == t0 + 3) {
            y = default_year;
        } else {
            return std::nullopt;
        }
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31) return std::nullopt;
    return days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 + mi * 60 + s -
           offset_s;
}

Result<SinceSpec> parse_since(std::string_view text) {
    text = trim(text);
    SinceSpec spec;
    if (auto v = parse_double(text); v && *v >= 0) {
        spec.monotonic_s = *v;
        return spec;
    }
    // ISO forms start with the year and dmesg -T ends with it; journal-short has none and means this year.
    auto tok = split_ws(text);
    std::optional<int> year;
    uint64_t y = 0;
    if (text.size() >= 5 && read_digits(text, 0, y, 4) == 4 && text[4] == '-') year = static_cast<int>(y);
    else if (!tok.empty() && tok.back().size() == 4 && read_digits(tok.back(), 0, y, 4) == 4) year = static_cast<int>(y);
    int assumed = year.value_or(current_utc_year());
    if (auto w = parse_wall_time(text, assumed)) {
        spec.wall_s = *w;
        spec.year = assumed;
        return spec;
    }
    return fail(fmt::format("--since {}: not seconds since boot (\"3600\") nor a wall time (\"2026-11-30T06:28:08\", "
                            "\"Mon Nov 30 06:28:08 2026\", \"Nov 30 06:28:08\")",
                            text));
}

// ---------------------------------------------------------------------------------------------
// The prefilter: finds lines that hold one of the topic words anywhere in a buffer, without looking at
// most bytes twice. Each pattern has a two-byte fingerprint (a rare pair inside it); a Teddy-style nibble
// lookup (pshufb) marks positions whose pair belongs to some pattern's bucket, and only those positions
// are verified. Letters are folded with |0x20 in the lookup; verification compares exactly (ASCII,
// case-insensitive), and the grep pattern in bench/kernel_log_vs_grep.sh is the same word list.

namespace {

struct PrefilterPattern {
    std::string text;  // lower case
    uint8_t fingerprint_offset;
    uint8_t bucket;
    bool whole_word;
};

// Buckets group patterns whose fingerprints share a byte, so the nibble tables admit few other pairs.
const PrefilterPattern kBuiltinPatterns[] = {
    {"amdgpu", 2, 0, false},       // dg
    {"dmar", 0, 0, false},         // dm
    {"iommu", 2, 0, false},        // mm
    {"kfd", 0, 1, true},           // kf
    {"lockdown", 3, 1, false},     // kd
    {"pcie", 2, 2, false},         // ie
    {"module verification", 10, 2, false},  // if
    {"unsigned module", 3, 2, false},       // ig
    {"-- boot", 0, 3, false},      // --  (journalctl boot separator)
    {"-- reboot --", 0, 3, false}, // --
    {"amd-vi", 3, 3, false},       // -v
    {"xid", 0, 4, true},           // xi
    {"sxid", 1, 4, true},          // xi (NVSwitch: "nvidia-nvswitch3: SXid (PCI:...)")
    {"linux version", 3, 4, false},  // ux (first line of every boot)
    {"nvrm", 1, 5, false},         // vr
    {"aer", 0, 6, true},           // ae
    {"fallen off the bus", 0, 6, false},  // fa
    {"key was rejected", 9, 7, false},    // ej
};

// How often a byte (folded with |0x20, as the lookup sees it) appears in kernel logs, roughly: letters by
// English frequency, blanks, digits and hex very often, rare punctuation seldom. Only the ranking matters.
double byte_weight(uint8_t c) {
    static constexpr double kLetters[26] = {8.2, 1.5, 2.8, 4.3, 12.7, 2.2, 2.0, 6.1, 7.0, 0.2, 0.8, 4.0, 2.4,
                                            6.7, 7.5, 1.9, 0.1, 6.0, 6.3, 9.1, 2.8, 1.0, 2.4, 0.2, 2.0, 0.1};
    if (c >= 'a' && c <= 'z') return kLetters[c - 'a'];
    if (c == ' ') return 16;
    if (c >= '0' && c <= '9') return 4;
    switch (c) {
        case ':': case '.': case ',': return 2;
        case '-': case '=': case '/': case '(': case ')': return 1;
        case '{': case '}': return 0.8;  // '[' and ']' folded
        default: return c >= 0x80 ? 0.05 : 0.2;
    }
}

// A Teddy-style set: per bucket, the patterns whose fingerprint pair sits in that bucket, and the nibble
// tables that admit those pairs.
class Prefilter {
public:
    explicit Prefilter(const std::vector<std::string>& extra_words) {
        for (auto& p : kBuiltinPatterns) add(p);
        // Words a built-in pattern already finds cost nothing more; the others get the fingerprint and bucket
        // that admit the fewest extra pairs, longest first (they have the most pairs to choose from).
        std::vector<std::string> extras;
        for (auto& w : extra_words) {
            std::string lw;
            for (char c : w) lw += lower(c);
            if (lw.size() < 2 || covered(lw) || std::find(extras.begin(), extras.end(), lw) != extras.end()) continue;
            extras.push_back(std::move(lw));
        }
        std::stable_sort(extras.begin(), extras.end(), [](auto& a, auto& b) { return a.size() > b.size(); });
        for (auto& w : extras) add(place(w));
    }

    alignas(16) uint8_t lo0[16] = {}, hi0[16] = {}, lo1[16] = {}, hi1[16] = {};
    uint8_t pair_buckets[256][2] = {};  // scalar path: bucket bits for byte0 and byte1 separately
    std::vector<PrefilterPattern> buckets[8];

private:
    bool covered(std::string_view w) const {
        for (auto& p : kBuiltinPatterns)
            if (!p.whole_word && w.find(p.text) != std::string_view::npos) return true;
        return false;
    }

    static uint8_t fold(char c) { return static_cast<uint8_t>(static_cast<uint8_t>(c) | 0x20); }

    // The weight of the pairs a bucket admits: every first byte its tables let through times every second.
    double admitted(const uint8_t* l0, const uint8_t* h0, const uint8_t* l1, const uint8_t* h1, uint8_t bit) const {
        double w0 = 0, w1 = 0;
        for (int c = 0; c < 256; c += 1) {
            if (c & 0x20) {
                if (l0[c & 15] & h0[c >> 4] & bit) w0 += byte_weight(static_cast<uint8_t>(c));
                if (l1[c & 15] & h1[c >> 4] & bit) w1 += byte_weight(static_cast<uint8_t>(c));
            }
        }
        return w0 * w1;
    }

    PrefilterPattern place(const std::string& w) const {
        PrefilterPattern best{w, 0, 0, false};
        double best_cost = -1;
        for (size_t off = 0; off + 1 < w.size() && off < 255; ++off) {
            uint8_t c0 = fold(w[off]), c1 = fold(w[off + 1]);
            for (uint8_t b = 0; b < 8; ++b) {
                uint8_t bit = static_cast<uint8_t>(1u << b);
                uint8_t l0[16], h0[16], l1[16], h1[16];
                std::memcpy(l0, lo0, 16), std::memcpy(h0, hi0, 16), std::memcpy(l1, lo1, 16), std::memcpy(h1, hi1, 16);
                double before = admitted(l0, h0, l1, h1, bit);
                l0[c0 & 15] |= bit, h0[c0 >> 4] |= bit, l1[c1 & 15] |= bit, h1[c1 >> 4] |= bit;
                double cost = admitted(l0, h0, l1, h1, bit) - before + 1e-3 * static_cast<double>(buckets[b].size());
                if (best_cost < 0 || cost < best_cost) {
                    best_cost = cost;
                    best.fingerprint_offset = static_cast<uint8_t>(off);
                    best.bucket = b;
                }
            }
        }
        return best;
    }

    void add(const PrefilterPattern& p) {
        uint8_t c0 = fold(p.text[p.fingerprint_offset]), c1 = fold(p.text[p.fingerprint_offset + 1u]);
        uint8_t bit = static_cast<uint8_t>(1u << p.bucket);
        lo0[c0 & 15] |= bit;
        hi0[c0 >> 4] |= bit;
        lo1[c1 & 15] |= bit;
        hi1[c1 >> 4] |= bit;
        for (int c = 0; c < 256; ++c) {
            pair_buckets[c][0] = lo0[c & 15] & hi0[c >> 4];
            pair_buckets[c][1] = lo1[c & 15] & hi1[c >> 4];
        }
        buckets[p.bucket].push_back(p);
    }
};

struct ScanTotals {
    uint64_t newlines = 0;
    uint64_t oversized = 0;
    int64_t last_newline = -1;  // absolute offset
};

struct LineRange {
    size_t begin, end;  // end excludes the newline
};

inline bool pattern_at(const char* p, size_t n, size_t start, const PrefilterPattern& pat) {
    if (start + pat.text.size() > n) return false;
    for (size_t k = 0; k < pat.text.size(); ++k)
        if (lower(p[start + k]) != pat.text[k]) return false;
    if (pat.whole_word) {
        if (start > 0 && is_alnum(p[start - 1])) return false;
        size_t end = start + pat.text.size();
        if (end < n && is_alnum(p[end])) return false;
    }
    return true;
}

// A candidate pair at `pos` whose buckets are `buckets`: does a whole pattern sit there?
inline bool verify_candidate(const Prefilter& pf, const char* p, size_t n, size_t pos, unsigned buckets) {
    while (buckets) {
        unsigned b = static_cast<unsigned>(__builtin_ctz(buckets));
        buckets &= buckets - 1;
        for (auto& pat : pf.buckets[b]) {
            if (pos < pat.fingerprint_offset) continue;
            if (pattern_at(p, n, pos - pat.fingerprint_offset, pat)) return true;
        }
    }
    return false;
}

// Records the line around a verified match and returns where scanning may resume (after its newline).
inline size_t take_line(const char* p, size_t n, size_t pos, std::vector<LineRange>& lines) {
    const void* back = pos > 0 ? memrchr(p, '\n', pos) : nullptr;
    size_t begin = back ? static_cast<size_t>(static_cast<const char*>(back) - p) + 1 : 0;
    const void* fwd = std::memchr(p + pos, '\n', n - pos);
    size_t end = fwd ? static_cast<size_t>(static_cast<const char*>(fwd) - p) : n;
    lines.push_back({begin, end});
    return end + 1;
}

// Lines inside one vector are shorter than the vector, so only the first newline can end a long line.
inline void count_newlines(uint64_t mask, size_t i, int64_t base, size_t max_line, ScanTotals& t) {
    if (!mask) return;
    int64_t first = base + static_cast<int64_t>(i) + __builtin_ctzll(mask);
    if (first - t.last_newline - 1 > static_cast<int64_t>(max_line)) ++t.oversized;
    t.last_newline = base + static_cast<int64_t>(i) + (63 - __builtin_clzll(mask));
    t.newlines += static_cast<uint64_t>(__builtin_popcountll(mask));
}

// Positions [from, n): the part no vector loop covers (and the whole block on other CPUs).
void scan_scalar(const Prefilter& nt, const char* p, size_t n, size_t from, int64_t base, size_t max_line,
                 ScanTotals& t, std::vector<LineRange>& lines, size_t resume) {
    for (size_t i = from; i < n; ++i) {
        auto c = static_cast<uint8_t>(p[i]);
        if (c == '\n') {
            int64_t at = base + static_cast<int64_t>(i);
            if (at - t.last_newline - 1 > static_cast<int64_t>(max_line)) ++t.oversized;
            t.last_newline = at;
            ++t.newlines;
            continue;
        }
        if (i < resume || i + 1 >= n) continue;
        unsigned b = nt.pair_buckets[c | 0x20][0] & nt.pair_buckets[static_cast<uint8_t>(p[i + 1]) | 0x20][1];
        if (b && verify_candidate(nt, p, n, i, b)) resume = take_line(p, n, i, lines);
    }
}

#ifdef GPUDX_X86
__attribute__((target("avx2"))) void scan_avx2(const Prefilter& nt, const char* p, size_t n, int64_t base,
                                               size_t max_line, ScanTotals& t, std::vector<LineRange>& lines) {
    const __m256i lo0 = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(nt.lo0)));
    const __m256i hi0 = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(nt.hi0)));
    const __m256i lo1 = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(nt.lo1)));
    const __m256i hi1 = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(nt.hi1)));
    const __m256i nib = _mm256_set1_epi8(0x0f), fold = _mm256_set1_epi8(0x20), nl = _mm256_set1_epi8('\n');
    const __m256i zero = _mm256_setzero_si256();
    size_t resume = 0, i = 0;
    for (; i + 33 <= n; i += 32) {
        __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
        __m256i v0 = _mm256_or_si256(raw, fold);
        __m256i v1 = _mm256_or_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 1)), fold);
        __m256i r0 = _mm256_and_si256(_mm256_shuffle_epi8(lo0, _mm256_and_si256(v0, nib)),
                                      _mm256_shuffle_epi8(hi0, _mm256_and_si256(_mm256_srli_epi16(v0, 4), nib)));
        __m256i r1 = _mm256_and_si256(_mm256_shuffle_epi8(lo1, _mm256_and_si256(v1, nib)),
                                      _mm256_shuffle_epi8(hi1, _mm256_and_si256(_mm256_srli_epi16(v1, 4), nib)));
        __m256i r = _mm256_and_si256(r0, r1);
        uint32_t cand = ~static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(r, zero)));
        uint32_t nlmask = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(raw, nl)));
        count_newlines(nlmask, i, base, max_line, t);
        if (cand && i + 32 > resume) {
            alignas(32) uint8_t buckets[32];
            _mm256_store_si256(reinterpret_cast<__m256i*>(buckets), r);
            while (cand) {
                unsigned j = static_cast<unsigned>(__builtin_ctz(cand));
                cand &= cand - 1;
                size_t pos = i + j;
                if (pos < resume) continue;
                if (verify_candidate(nt, p, n, pos, buckets[j])) resume = take_line(p, n, pos, lines);
            }
        }
    }
    scan_scalar(nt, p, n, i, base, max_line, t, lines, resume);
}

__attribute__((target("ssse3"))) void scan_ssse3(const Prefilter& nt, const char* p, size_t n, int64_t base,
                                                 size_t max_line, ScanTotals& t, std::vector<LineRange>& lines) {
    const __m128i lo0 = _mm_load_si128(reinterpret_cast<const __m128i*>(nt.lo0));
    const __m128i hi0 = _mm_load_si128(reinterpret_cast<const __m128i*>(nt.hi0));
    const __m128i lo1 = _mm_load_si128(reinterpret_cast<const __m128i*>(nt.lo1));
    const __m128i hi1 = _mm_load_si128(reinterpret_cast<const __m128i*>(nt.hi1));
    const __m128i nib = _mm_set1_epi8(0x0f), fold = _mm_set1_epi8(0x20), nl = _mm_set1_epi8('\n');
    const __m128i zero = _mm_setzero_si128();
    size_t resume = 0, i = 0;
    for (; i + 17 <= n; i += 16) {
        __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
        __m128i v0 = _mm_or_si128(raw, fold);
        __m128i v1 = _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 1)), fold);
        __m128i r0 = _mm_and_si128(_mm_shuffle_epi8(lo0, _mm_and_si128(v0, nib)),
                                   _mm_shuffle_epi8(hi0, _mm_and_si128(_mm_srli_epi16(v0, 4), nib)));
        __m128i r1 = _mm_and_si128(_mm_shuffle_epi8(lo1, _mm_and_si128(v1, nib)),
                                   _mm_shuffle_epi8(hi1, _mm_and_si128(_mm_srli_epi16(v1, 4), nib)));
        __m128i r = _mm_and_si128(r0, r1);
        uint32_t cand = ~static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(r, zero))) & 0xffffu;
        uint32_t nlmask = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(raw, nl)));
        count_newlines(nlmask, i, base, max_line, t);
        if (cand && i + 16 > resume) {
            alignas(16) uint8_t buckets[16];
            _mm_store_si128(reinterpret_cast<__m128i*>(buckets), r);
            while (cand) {
                unsigned j = static_cast<unsigned>(__builtin_ctz(cand));
                cand &= cand - 1;
                size_t pos = i + j;
                if (pos < resume) continue;
                if (verify_candidate(nt, p, n, pos, buckets[j])) resume = take_line(p, n, pos, lines);
            }
        }
    }
    scan_scalar(nt, p, n, i, base, max_line, t, lines, resume);
}
#endif

using BlockScanner = void (*)(const Prefilter&, const char*, size_t, int64_t, size_t, ScanTotals&,
                             std::vector<LineRange>&);

void scan_portable(const Prefilter& nt, const char* p, size_t n, int64_t base, size_t max_line, ScanTotals& t,
                   std::vector<LineRange>& lines) {
    scan_scalar(nt, p, n, 0, base, max_line, t, lines, 0);
}

BlockScanner pick_block_scanner() {
#ifdef GPUDX_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) return scan_avx2;
    if (__builtin_cpu_supports("ssse3")) return scan_ssse3;
#endif
    return scan_portable;
}

constexpr size_t kDetectBytes = 64 * 1024;
constexpr size_t kMaxProcesses = 8;

}  // namespace

// ---------------------------------------------------------------------------------------------
// The scanner.

struct KernelLogScanner::State {
    KernelLogScanOptions options;
    BlockScanner block_scanner = pick_block_scanner();
    std::unique_ptr<Prefilter> prefilter;
    std::vector<std::string> extra_words;  // lower case
    std::optional<SinceSpec> since;
    KernelLogFormat format = KernelLogFormat::unknown;
    bool detecting = true;
    std::string head;       // bytes kept until the format is known
    std::string carry;      // a line not yet ended by a newline
    bool carry_oversized = false;
    int64_t carry_start = 0;
    int64_t offset = 0;  // absolute offset of the next byte
    ScanTotals totals;
    std::vector<LineRange> hits;
    KernelLog log;
    std::map<std::tuple<std::string, std::string, std::string, int>, size_t> tally_index;
    std::optional<double> last_monotonic;
    uint64_t lines_this_boot = 0;
    bool boot_has_lines = false;
    bool warned_since_monotonic = false, warned_since_wall = false;
    std::vector<std::string> notes;

    void scan_block(const char* p, size_t n, int64_t base) {
        hits.clear();
        block_scanner(*prefilter, p, n, base, options.max_line_bytes, totals, hits);
        for (auto& h : hits) {
            if (h.end - h.begin > options.max_line_bytes) continue;  // counted by the block scanner
            process_line(std::string_view(p + h.begin, h.end - h.begin));
        }
    }

    void process(std::string_view data) {
        if (data.empty()) return;
        size_t pos = 0;
        if (!carry.empty() || carry_oversized) {
            const void* nl = std::memchr(data.data(), '\n', data.size());
            if (!nl) {
                append_carry(data);
                offset += static_cast<int64_t>(data.size());
                return;
            }
            size_t k = static_cast<size_t>(static_cast<const char*>(nl) - data.data());
            if (carry_oversized) {
                ++totals.oversized;
                ++totals.newlines;
                totals.last_newline = offset + static_cast<int64_t>(k);
                carry_oversized = false;
            } else {
                carry.append(data.substr(0, k + 1));
                if (carry.size() - 1 > options.max_line_bytes) {
                    ++totals.oversized;
                    ++totals.newlines;
                    totals.last_newline = offset + static_cast<int64_t>(k);
                } else {
                    scan_block(carry.data(), carry.size(), carry_start);
                }
            }
            carry.clear();
            pos = k + 1;
        }
        const void* last = pos < data.size() ? memrchr(data.data() + pos, '\n', data.size() - pos) : nullptr;
        size_t end = last ? static_cast<size_t>(static_cast<const char*>(last) - data.data()) + 1 : pos;
        if (end > pos) scan_block(data.data() + pos, end - pos, offset + static_cast<int64_t>(pos));
        carry_start = offset + static_cast<int64_t>(end);
        append_carry(data.substr(end));
        offset += static_cast<int64_t>(data.size());
    }

    void append_carry(std::string_view tail) {
        if (tail.empty()) return;
        if (carry_oversized) return;
        if (carry.size() + tail.size() > options.max_line_bytes + 1) {
            carry.clear();
            carry.shrink_to_fit();
            carry_oversized = true;
            return;
        }
        carry.append(tail);
    }

    void start_detection_if_ready(bool at_end) {
        if (!detecting) return;
        if (!at_end && head.size() < kDetectBytes) return;
        detecting = false;
        format = detect_log_format(std::string_view(head).substr(0, kDetectBytes));
        // Text pasted from a terminal, `journalctl -o cat`, lines whose time was cut off: a line gpudx
        // cannot date is still a line, so each one is tried against every format and else read whole.
        if (format == KernelLogFormat::unknown && !trim(head).empty())
            notes.push_back("no known time prefix on most lines: every line is read, its time left unknown");
        std::string buffered;
        buffered.swap(head);
        process(buffered);
    }

    void new_boot() {
        if (!boot_has_lines || options.every_boot) return;
        ++log.boots_seen;
        boot_has_lines = false;
        last_monotonic.reset();
        if (since && since->wall_s) return;  // a wall-time window spans boots
        log.lines_dropped += lines_this_boot;
        lines_this_boot = 0;
        log.lines.clear();
        log.xids.clear();
        log.tallies.clear();
        log.lines_over_cap = 0;
        tally_index.clear();
    }

    void tally(const std::string& kind, const std::string& device, const std::string& module, int code,
               const ParsedLogLine& pl, const std::string& text, const std::string& process) {
        auto key = std::make_tuple(kind, device, module, code);
        auto [it, inserted] = tally_index.try_emplace(key, log.tallies.size());
        if (inserted) {
            KernelLogTally t;
            t.kind = kind;
            t.device = device;
            t.module = module;
            t.code = code;
            t.first_monotonic_s = pl.monotonic_s;
            t.first_wall_time = std::string(pl.wall_time);
            t.first_text = text;
            log.tallies.push_back(std::move(t));
        }
        auto& t = log.tallies[it->second];
        ++t.count;
        t.last_monotonic_s = pl.monotonic_s;
        t.last_wall_time = std::string(pl.wall_time);
        t.last_text = text;
        if (!process.empty() && t.processes.size() < kMaxProcesses &&
            std::find(t.processes.begin(), t.processes.end(), process) == t.processes.end())
            t.processes.push_back(process);
    }

    bool outside_window(const ParsedLogLine& pl) {
        if (!since) return false;
        if (since->monotonic_s) {
            if (!pl.monotonic_s) {
                if (!warned_since_monotonic)
                    notes.push_back("--since in seconds since boot needs a log with monotonic times; this one has "
                                    "wall times only, so the current boot is kept");
                warned_since_monotonic = true;
                return false;
            }
            return *pl.monotonic_s < *since->monotonic_s;
        }
        if (pl.wall_time.empty()) {
            if (!warned_since_wall)
                notes.push_back("--since as a wall time needs a log with wall times (dmesg -T, journalctl, syslog); "
                                "this one counts seconds since boot, so the current boot is kept");
            warned_since_wall = true;
            return false;
        }
        auto t = parse_wall_time(pl.wall_time, since->year);
        return t && *t < *since->wall_s;
    }

    void process_line(std::string_view line) {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        ParsedLogLine pl = parse_log_line(line, format);
        if (!pl.recognised) {
            if (line.starts_with("-- ")) {  // journalctl separators
                if (line.starts_with("-- Boot ") || line.starts_with("-- Reboot --")) new_boot();
                return;
            }
            if (auto f = detect_line_format(line); f != KernelLogFormat::unknown) pl = parse_log_line(line, f);
            if (!pl.recognised) pl.message = line;  // an unprefixed line in a saved log still counts
        }
        if (pl.continuation) return;
        if (!pl.from_kernel) {
            // Another program's line in a journal is kept only for a catalogue word ("modprobe: ERROR: could
            // not insert 'nvidia'" from a display manager, nv-fabricmanager failing).
            if (holds_extra_word(pl.message)) keep_catalogue_line(pl);
            return;
        }
        if (pl.message.starts_with("Linux version ")) {
            new_boot();
            if (pl.monotonic_s) last_monotonic = pl.monotonic_s;
            return;
        }
        if (pl.monotonic_s) {
            // dmesg times from different CPUs interleave a little; a restart goes back much further.
            if (last_monotonic && *pl.monotonic_s + 1.0 < *last_monotonic) new_boot();
            last_monotonic = pl.monotonic_s;
        }
        std::string_view topic = classify_topic(pl.message);
        if (topic.empty()) {
            if (holds_extra_word(pl.message)) keep_catalogue_line(pl);
            return;
        }
        auto admitted = admit(pl, topic);
        if (!admitted) return;
        KernelLogLine& kept = *admitted;
        if (topic == "xid") {
            if (auto ev = parse_xid(pl.message)) {
                ev->monotonic_s = pl.monotonic_s;
                ev->wall_time = kept.wall_time;
                if (!kept.wall_time.empty()) ev->wall_s = parse_wall_time(kept.wall_time, current_utc_year());
                tally("xid", ev->pci, {}, ev->code, pl, kept.text, ev->process);
                push_capped(log.xids, std::move(*ev), options.max_kept_xids, nullptr);
            }
        }
        for (auto& e : classify_events(pl.message)) tally(e.kind, e.device, e.module, e.code, pl, kept.text, {});
        push_capped(log.lines, std::move(kept), options.max_kept_lines, &log.lines_over_cap);
    }

    bool holds_extra_word(std::string_view message) const {
        return std::any_of(extra_words.begin(), extra_words.end(), [&](auto& w) { return contains_ci(message, w); });
    }

    void keep_catalogue_line(const ParsedLogLine& pl) {
        if (auto kept = admit(pl, "catalogue"))
            push_capped(log.lines, std::move(*kept), options.max_kept_lines, &log.lines_over_cap);
    }

    // A line that counts for its boot: the line to keep, or nullopt when it falls outside the window (counted
    // as dropped).
    std::optional<KernelLogLine> admit(const ParsedLogLine& pl, std::string_view topic) {
        boot_has_lines = true;
        if (outside_window(pl)) {
            ++log.lines_dropped;
            return std::nullopt;
        }
        ++lines_this_boot;
        KernelLogLine kept;
        kept.monotonic_s = pl.monotonic_s;
        kept.wall_time = std::string(pl.wall_time);
        kept.text = sanitize_utf8(pl.message);
        kept.topic = std::string(topic);
        return kept;
    }

    // Keeps the most recent `cap` entries; the oldest go in halves so pushing stays amortised O(1).
    template <class T>
    static void push_capped(std::vector<T>& v, T&& item, size_t cap, uint64_t* dropped) {
        v.push_back(std::move(item));
        if (cap > 0 && v.size() >= 2 * cap) {
            size_t drop = v.size() - cap;
            v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(drop));
            if (dropped) *dropped += drop;
        }
    }
    template <class T>
    static void trim_to_cap(std::vector<T>& v, size_t cap, uint64_t* dropped) {
        if (cap == 0 || v.size() <= cap) return;
        size_t drop = v.size() - cap;
        v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(drop));
        if (dropped) *dropped += drop;
    }
};

KernelLogScanner::KernelLogScanner(KernelLogScanOptions options) : state_(std::make_unique<State>()) {
    auto& s = *state_;
    s.options = std::move(options);
    s.options.max_line_bytes = std::max(s.options.max_line_bytes, kMinMaxLineBytes);
    s.prefilter = std::make_unique<Prefilter>(s.options.extra_words);
    for (auto& w : s.options.extra_words) {
        std::string lw;
        for (char c : w) lw += lower(c);
        if (!lw.empty()) s.extra_words.push_back(std::move(lw));
    }
    if (!trim(s.options.since).empty()) {
        auto spec = parse_since(s.options.since);
        if (spec) {
            s.since = *spec;
            s.log.window = "since " + std::string(trim(s.options.since));
        } else {
            s.notes.push_back(spec.error().message + "; the current boot is kept");
        }
    }
    if (s.log.window.empty()) s.log.window = s.options.every_boot ? "every boot" : "current boot";
}

KernelLogScanner::~KernelLogScanner() = default;

void KernelLogScanner::set_format(KernelLogFormat format) {
    state_->format = format;
    state_->detecting = false;
}

void KernelLogScanner::feed(std::string_view bytes) {
    auto& s = *state_;
    if (s.detecting) {
        s.head.append(bytes);
        s.start_detection_if_ready(false);
        return;
    }
    s.process(bytes);
}

const std::vector<std::string>& KernelLogScanner::notes() const { return state_->notes; }

Result<KernelLog> KernelLogScanner::finish(std::string source) {
    auto& s = *state_;
    s.start_detection_if_ready(true);
    if (s.carry_oversized) {
        ++s.totals.oversized;
        ++s.totals.newlines;
    } else if (!s.carry.empty()) {
        s.carry.push_back('\n');
        s.scan_block(s.carry.data(), s.carry.size(), s.carry_start);
    }
    s.carry.clear();
    s.carry_oversized = false;
    State::trim_to_cap(s.log.lines, s.options.max_kept_lines, &s.log.lines_over_cap);
    State::trim_to_cap(s.log.xids, s.options.max_kept_xids, nullptr);
    s.log.source = std::move(source);
    s.log.format = s.format;
    s.log.lines_read = s.totals.newlines;
    s.log.lines_skipped = s.totals.oversized;
    if (s.totals.oversized > 0)
        s.notes.push_back(fmt::format("{} line(s) longer than {} bytes skipped", s.totals.oversized,
                                      s.options.max_line_bytes));
    return std::move(s.log);
}

Result<KernelLog> scan_kernel_log(std::string_view text, const KernelLogScanOptions& options, std::string source) {
    KernelLogScanner scanner(options);
    scanner.feed(text);
    return scanner.finish(std::move(source));
}

}  // namespace gpudx

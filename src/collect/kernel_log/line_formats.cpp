// The line formats: the time prefix of each kind of kernel log gpudx reads (raw /dev/kmsg records, dmesg,
// dmesg -T, journalctl -k short and short-iso, syslog's kern.log) split off a line, and the format of a log
// told from its first lines (docs/kernel-log.md).
#include <map>

#include "collect/kernel_log/lexing.hpp"
#include "collect/kernel_log_parse.hpp"
#include "core/text.hpp"

namespace gpudx {

using namespace kernel_log_lexing;

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
// "2026-11-30T06:28:08+0000 host kernel: msg".
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

}  // namespace gpudx

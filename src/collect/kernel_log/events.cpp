// The events of a kept line: the topic gpudx keeps it for, an Xid or SXid report, and the tally kinds it
// counts as (a GPU fallen off the bus, an AER error, an IOMMU fault, a refused or unsigned module), each with
// the PCI address or module the line names.
#include "collect/kernel_log/lexing.hpp"
#include "collect/kernel_log_parse.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"

namespace gpudx {

using namespace kernel_log_lexing;

std::optional<LogTopic> classify_topic(std::string_view m) {
    if (contains_word_ci(m, "xid")) return LogTopic::xid;
    if (contains_word_ci(m, "sxid")) return LogTopic::sxid;
    if (contains_ci(m, "nvrm")) return LogTopic::nvrm;
    // "kfd kfd: amdgpu: added device ...": the KFD driver's own line names amdgpu too.
    if (m.starts_with("kfd")) return LogTopic::kfd;
    if (contains_ci(m, "amdgpu")) return LogTopic::amdgpu;
    if (contains_word_ci(m, "kfd")) return LogTopic::kfd;
    if (contains_word_ci(m, "aer") || contains_ci(m, "pcie bus error")) return LogTopic::aer;
    if (contains_ci(m, "iommu") || contains_ci(m, "dmar") || contains_ci(m, "amd-vi")) return LogTopic::iommu;
    if (contains_ci(m, "module verification failed") || contains_ci(m, "unsigned module") ||
        contains_ci(m, "key was rejected"))
        return LogTopic::signature;
    if (contains_ci(m, "lockdown")) return LogTopic::lockdown;
    if (contains_ci(m, "pcie") || contains_ci(m, "fallen off the bus")) return LogTopic::pcie;
    return std::nullopt;
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
    if (starts_with_ci(rest, "non-fatal") || starts_with_ci(rest, "nonfatal")) e.kind = TallyKind::sxid_nonfatal;
    else if (starts_with_ci(rest, "fatal")) e.kind = TallyKind::sxid_fatal;
    else if (rest.starts_with("Data {") || starts_with_ci(rest, "severity ")) e.kind = TallyKind::sxid_detail;
    else e.kind = TallyKind::sxid_unstated;
    return e;
}

std::vector<LogEventKind> classify_events(std::string_view m) {
    std::vector<LogEventKind> out;
    if (auto sxid = parse_sxid(m)) out.push_back(std::move(*sxid));
    // An Xid 79 line says it too, but the driver logs its own "fallen off the bus" line beside it, and
    // the Xid is its own finding: counting both would double the one event.
    if (contains_ci(m, "fallen off the bus") && !parse_xid(m)) {
        LogEventKind e{TallyKind::fallen_off_bus, {}, {}};
        if (auto a = find_pci_address(m)) e.device = *a;
        out.push_back(std::move(e));
    }
    if (size_t at = find_ci(m, "pcie bus error"); at != std::string_view::npos) {
        size_t sev = find_ci(m, "severity=", at);
        if (sev != std::string_view::npos) {
            std::string_view v = m.substr(sev + 9);
            v = v.substr(0, v.find(", type"));
            TallyKind kind = starts_with_ci(v, "correct")   ? TallyKind::aer_corrected
                             : contains_ci(v, "non-fatal") ? TallyKind::aer_nonfatal
                             : contains_ci(v, "fatal")     ? TallyKind::aer_fatal
                                                           : TallyKind::aer_nonfatal;
            LogEventKind e{kind, {}, {}};
            if (auto a = find_pci_address(m.substr(0, at))) e.device = *a;
            out.push_back(std::move(e));
        }
    }
    if (contains_ci(m, "dmar") && contains_ci(m, "request device [")) {
        LogEventKind e{TallyKind::iommu_fault, {}, {}};
        size_t b = find_ci(m, "request device [") + 16;
        size_t end = m.find(']', b);
        if (end != std::string_view::npos) e.device = normalised(m.substr(b, end - b));
        out.push_back(std::move(e));
    } else if (size_t ev = find_ci(m, "amd-vi: event logged ["); ev != std::string_view::npos) {
        std::string_view what = m.substr(ev + 22);
        if (contains_ci(what, "fault") || contains_ci(what, "invalid") || contains_ci(what, "illegal")) {
            LogEventKind e{TallyKind::iommu_fault, {}, {}};
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
        LogEventKind e{TallyKind::module_unsigned, {}, {}};
        std::string_view head = trim(m.substr(0, at));
        if (head.ends_with(":")) head.remove_suffix(1);
        if (!head.empty() && head.find(' ') == std::string_view::npos) e.module = std::string(head);
        out.push_back(std::move(e));
    } else if ((contains_ci(m, "unsigned module") && (contains_ci(m, "reject") || contains_ci(m, "restrict"))) ||
               contains_ci(m, "key was rejected")) {
        LogEventKind e{TallyKind::module_refused, {}, {}};
        if (contains_ci(m, "nvidia")) e.module = "nvidia";
        out.push_back(std::move(e));
    }
    return out;
}

}  // namespace gpudx

#include "rules/reference/component_lines.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/pci_address.hpp"
#include "core/text.hpp"

namespace gpudx {

namespace {

// A component's name inside a path ("/dev/kfd", ".../nvidia-drm.ko") is a file, not the component speaking.
bool speaks(std::string_view hay, std::string_view needle, bool whole_word) {
    for (size_t at = find_ci(hay, needle); at != std::string_view::npos; at = find_ci(hay, needle, at + 1)) {
        if (at > 0 && hay[at - 1] == '/') continue;
        size_t end = at + needle.size();
        if (whole_word && ((at > 0 && ascii_alnum(hay[at - 1])) || (end < hay.size() && ascii_alnum(hay[end])))) continue;
        return true;
    }
    return false;
}

// `needle` as a whole word: no letter or digit on either side.
bool has_word_ci(std::string_view hay, std::string_view needle) {
    for (size_t at = find_ci(hay, needle); at != std::string_view::npos; at = find_ci(hay, needle, at + 1)) {
        size_t end = at + needle.size();
        if ((at == 0 || !ascii_alnum(hay[at - 1])) && (end >= hay.size() || !ascii_alnum(hay[end]))) return true;
    }
    return false;
}

struct Component {
    std::string_view word;  // lower case, as lines spell it
    std::string_view name;  // what the finding calls it
    bool whole_word;
};
// The companions before NVRM and nvidia: a line "nvidia-peermem: ..." is the peermem module's, not the driver's.
constexpr std::array kComponents{
    Component{"nvidia-nvswitch", "nvidia-nvswitch", false}, Component{"nvidia-peermem", "nvidia-peermem", false},
    Component{"nvidia_peermem", "nvidia-peermem", false},   Component{"nvidia-uvm", "nvidia-uvm", false},
    Component{"nvidia_uvm", "nvidia-uvm", false},           Component{"nvidia-drm", "nvidia-drm", false},
    Component{"nvidia_drm", "nvidia-drm", false},           Component{"nvidia-modeset", "nvidia-modeset", false},
    Component{"nvidia_modeset", "nvidia-modeset", false},   Component{"nvidia-nvlink", "nvidia-nvlink", false},
    Component{"nvidia-fabricmanager", "fabric manager", false}, Component{"nv-fabricmanager", "fabric manager", false},
    Component{"nvrm", "NVRM", true},                        Component{"amdgpu", "amdgpu", false},
    Component{"kfd", "kfd", true},
};

// The nvidia module's own device lines: "nvidia 0000:3b:00.0: ..." and "nvidia: ...". A bare "nvidia" elsewhere
// ("NVIDIA GPU", "nvidia-smi") is a product name, not the component speaking.
bool nvidia_module_line(std::string_view line) {
    for (size_t at = find_ci(line, "nvidia"); at != std::string_view::npos; at = find_ci(line, "nvidia", at + 1)) {
        if (at > 0 && ascii_alnum(line[at - 1])) continue;
        size_t end = at + 6;
        if (end < line.size() && line[end] == ':') return true;
        if (end + 1 < line.size() && line[end] == ' ' && std::isxdigit(static_cast<unsigned char>(line[end + 1])) &&
            line.find(':', end) != std::string_view::npos && PciAddress::parse(line.substr(end + 1, 12)))
            return true;
    }
    return false;
}

// What the kernel-log parser reports by its own rules (rules/families/kernel_log.cpp): those lines are explained
// whatever words they hold.
// Xid and SXid are words ("SXid", "Xid 79"); the rest are phrases found anywhere.
constexpr std::array<std::string_view, 2> kParsersOwnWords{"xid", "sxid"};
constexpr std::array<std::string_view, 11> kParsersOwnPhrases{
    "aer:", "pcie bus error", "error status/mask", "fallen off the bus", "dmar", "iommu", "amd-vi",
    "module verification failed", "lockdown", "key was rejected", "tainting kernel",
};

// An AER report's detail lines, which the device's driver prints under its own name: "nvidia 0000:3b:00.0:
// [12] Timeout" (the error bits the report decodes). The report itself is the parser's.
bool aer_detail_line(std::string_view line) {
    for (size_t open = line.find("   ["); open != std::string_view::npos; open = line.find("   [", open + 1)) {
        size_t i = open + 4;
        while (i < line.size() && line[i] == ' ') ++i;
        size_t digits = i;
        while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
        if (i > digits && i < line.size() && line[i] == ']') return true;
    }
    return false;
}

constexpr std::array<std::string_view, 17> kFailureWords{
    "failed", "failure", "fail",  "fails",  "error", "errors",  "err",       "timeout", "timed out",
    "fault",  "faulted", "hang",  "hung",   "reset", "resets",  "resetting", "stuck",
};

// A negative errno as drivers print it: "error -110", "ret=-22", "(-12)", "returned -5".
std::optional<std::string> negative_errno(std::string_view line) {
    for (size_t i = 1; i + 1 < line.size(); ++i) {
        if (line[i] != '-' || !std::isdigit(static_cast<unsigned char>(line[i + 1]))) continue;
        char before = line[i - 1];
        if (before != ' ' && before != '(' && before != '=' && before != ':') continue;
        size_t end = i + 1;
        while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
        if (end - i - 1 > 4 || (end < line.size() && (ascii_alnum(line[end]) || line[end] == '.'))) continue;
        return std::string(line.substr(i, end - i));
    }
    return std::nullopt;
}

// The first PCI address the line writes: "0000:3b:00.0", NVML's "00000000:3B:00.0", NVRM's "PCI:0000:02:00".
std::string first_pci_address(std::string_view line) {
    for (size_t i = 0; i + 7 <= line.size(); ++i) {
        if (!std::isxdigit(static_cast<unsigned char>(line[i])) ||
            (i > 0 && std::isxdigit(static_cast<unsigned char>(line[i - 1]))))
            continue;
        size_t n = 0;
        while (i + n < line.size() && (std::isxdigit(static_cast<unsigned char>(line[i + n])) || line[i + n] == ':' ||
                                       line[i + n] == '.'))
            ++n;
        if (n < 7) continue;
        std::string_view candidate = line.substr(i, n);
        while (!candidate.empty() && (candidate.back() == ':' || candidate.back() == '.')) candidate.remove_suffix(1);
        if (std::count(candidate.begin(), candidate.end(), ':') >= 2)
            if (auto a = PciAddress::parse(candidate)) return a->str();
        i += n - 1;
    }
    return {};
}

}  // namespace

// Every component's word, and the nvidia module's "nvidia", holds one of these: a line holding none names no
// component, and is passed with three searches instead of one per component.
constexpr std::array<std::string_view, 3> kComponentMarks{"nv", "amdgpu", "kfd"};
static_assert(std::all_of(kComponents.begin(), kComponents.end(), [](const Component& c) {
    return std::any_of(kComponentMarks.begin(), kComponentMarks.end(),
                       [&](std::string_view mark) { return c.word.find(mark) != std::string_view::npos; });
}));

std::optional<ComponentFailureLine> component_failure_line(std::string_view line) {
    if (std::none_of(kComponentMarks.begin(), kComponentMarks.end(),
                     [&](std::string_view mark) { return find_ci(line, mark) != std::string_view::npos; }))
        return std::nullopt;
    // The parser's own lines (an Xid storm's every line) are passed before the components are looked for: a line
    // holding one of these words is never the fallback's, whatever component it names.
    for (auto own : kParsersOwnWords)
        if (has_word_ci(line, own)) return std::nullopt;
    std::string_view component;
    for (auto& c : kComponents)
        if (speaks(line, c.word, c.whole_word)) {
            component = c.name;
            break;
        }
    if (component.empty() && nvidia_module_line(line)) component = "nvidia";
    if (component.empty()) return std::nullopt;
    for (auto own : kParsersOwnPhrases)
        if (find_ci(line, own) != std::string_view::npos) return std::nullopt;
    if (aer_detail_line(line)) return std::nullopt;
    ComponentFailureLine out;
    out.component = std::string(component);
    for (auto w : kFailureWords)
        if (has_word_ci(line, w)) {
            out.word = std::string(w);
            break;
        }
    if (out.word.empty())
        if (auto e = negative_errno(line)) out.word = *e;
    if (out.word.empty()) return std::nullopt;
    out.pci = first_pci_address(line);
    return out;
}

std::vector<std::string> component_gate_words() {
    std::vector<std::string> out;
    for (auto& c : kComponents) out.emplace_back(c.word);
    out.emplace_back("nvidia:");
    out.emplace_back("nvidia 0000:");
    return out;
}

}  // namespace gpudx

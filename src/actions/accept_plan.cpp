// Judging figures against floors, and what to test: the allocation, the GPU pairs, their topology (with the names of
// the memory patterns and peer links), the options.
#include "actions/accept.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "actions/accept_support.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"

namespace gpudx {

using namespace accept_internal;

// ---- names ---------------------------------------------------------------------------------------

const char* to_string(MemoryPattern p) {
    switch (p) {
    case MemoryPattern::walking_ones: return "walking_ones";
    case MemoryPattern::walking_zeros: return "walking_zeros";
    case MemoryPattern::address: return "address";
    case MemoryPattern::random: return "random";
    }
    return "random";
}

const char* to_string(PeerLink l) {
    switch (l) {
    case PeerLink::nvlink: return "nvlink";
    case PeerLink::pcie_switch: return "pcie_switch";
    case PeerLink::pcie_host_bridge: return "pcie_host_bridge";
    case PeerLink::pcie_cross_root: return "pcie_cross_root";
    case PeerLink::unknown: return "unknown";
    }
    return "unknown";
}

// ---- judging -------------------------------------------------------------------------------------

TestStatus judge_floor(double value, std::optional<double> floor) {
    if (!floor) return TestStatus::pass;
    if (!std::isfinite(value) || value < *floor) return TestStatus::fail;
    if (value < *floor * (1.0 + kThresholdWarnMargin)) return TestStatus::warn;
    return TestStatus::pass;
}

TestStatus worse(TestStatus a, TestStatus b) { return status_rank(a) >= status_rank(b) ? a : b; }

void apply_verdict(AcceptReport& report) {
    bool failed = false, not_run = false, warned = false;
    for (auto& t : report.tests) {
        if (!t.required) continue;
        failed |= t.status == TestStatus::fail;
        not_run |= t.status == TestStatus::not_run;
        warned |= t.status == TestStatus::warn;
    }
    if (report.tests.empty()) not_run = true;
    if (failed) {
        report.verdict = "fail";
        report.exit_code = 1;
    } else if (not_run) {
        report.verdict = "fail";
        report.exit_code = 3;
    } else if (warned) {
        report.verdict = "warn";
        report.exit_code = 2;
    } else {
        report.verdict = "pass";
        report.exit_code = 0;
    }
}

// ---- allocation, pairs, topology -----------------------------------------------------------------

std::optional<std::pair<std::string, std::vector<std::string>>> allocation_from_environment(
    const std::map<std::string, std::string>& env) {
    auto entries_of = [](std::string_view v) {
        std::vector<std::string> out;
        for (auto part : split(v, ',')) {
            auto p = trim(part);
            if (!p.empty()) out.emplace_back(p);
        }
        return out;
    };
    for (const char* name : {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
        auto it = env.find(name);
        if (it == env.end()) continue;
        auto l = to_lower(trim(it->second));
        if (l.empty() || l == "all" || l == "none" || l == "void" || l == "nodevfiles") continue;
        auto entries = entries_of(it->second);
        if (!entries.empty()) return std::make_pair(std::string(name), entries);
    }
    return std::nullopt;
}

std::optional<size_t> find_gpu(std::string_view name, const std::vector<AcceptGpu>& gpus) {
    auto n = to_lower(trim(name));
    if (n.empty()) return std::nullopt;
    if (looks_like_uuid(n)) {
        std::optional<size_t> hit;
        for (size_t i = 0; i < gpus.size(); ++i) {
            auto u = to_lower(gpus[i].uuid);
            if (u == n) return i;
            if (u.starts_with(n)) {
                if (hit) return std::nullopt;  // ambiguous prefix
                hit = i;
            }
        }
        return hit;
    }
    if (auto pci = PciAddress::parse(n)) {
        for (size_t i = 0; i < gpus.size(); ++i)
            if (auto g = PciAddress::parse(gpus[i].pci); g && *g == *pci) return i;
        return std::nullopt;
    }
    if (auto ord = parse_uint(n)) {
        for (size_t i = 0; i < gpus.size(); ++i)
            if (static_cast<uint64_t>(gpus[i].ordinal) == *ord) return i;
    }
    return std::nullopt;
}

PairSelection select_pairs(std::string_view spec, const std::vector<AcceptGpu>& gpus) {
    PairSelection sel;
    auto s = to_lower(trim(spec));
    std::set<std::pair<int, int>> seen;
    auto add = [&](int a, int b) {
        if (a == b) return;
        auto p = std::minmax(a, b);
        if (seen.insert(p).second) sel.pairs.push_back(p);
    };
    if (s.empty() || s == "all") {
        for (size_t i = 0; i < gpus.size(); ++i)
            for (size_t k = i + 1; k < gpus.size(); ++k) add(gpus[i].ordinal, gpus[k].ordinal);
        return sel;
    }
    if (s == "none") return sel;
    for (auto part : split(spec, ',')) {
        auto p = trim(part);
        if (p.empty()) continue;
        // A PCI address holds ':' itself, so split at the ':' that leaves two parseable names.
        bool matched = false;
        for (size_t pos = p.find(':'); pos != std::string_view::npos; pos = p.find(':', pos + 1)) {
            auto a = find_gpu(p.substr(0, pos), gpus), b = find_gpu(p.substr(pos + 1), gpus);
            if (a && b) {
                add(gpus[*a].ordinal, gpus[*b].ordinal);
                matched = true;
                break;
            }
        }
        if (!matched) sel.unknown.emplace_back(p);
    }
    return sel;
}

PeerLink classify_pcie_paths(std::string_view a, std::string_view b) {
    auto components = [](std::string_view p) {
        std::vector<std::string_view> out;
        for (auto c : split(p, '/'))
            if (!c.empty()) out.push_back(c);
        return out;
    };
    auto ca = components(a), cb = components(b);
    // /sys/devices/pci<domain>:<bus>/<root port>/<switch up>/<switch down>/<gpu>
    auto root_of = [](const std::vector<std::string_view>& c) -> std::optional<size_t> {
        for (size_t i = 0; i < c.size(); ++i)
            if (c[i].starts_with("pci")) return i;
        return std::nullopt;
    };
    auto ra = root_of(ca), rb = root_of(cb);
    if (!ra || !rb || *ra + 1 >= ca.size() || *rb + 1 >= cb.size()) return PeerLink::unknown;
    if (ca[*ra] != cb[*rb]) return PeerLink::pcie_cross_root;
    // Devices below the host bridge in common, excluding the GPUs themselves.
    size_t common = 0;
    for (size_t i = *ra + 1, k = *rb + 1; i + 1 < ca.size() && k + 1 < cb.size() && ca[i] == cb[k]; ++i, ++k) ++common;
    // A shared root port alone is not a switch; a switch shows as a shared device below the root port.
    return common >= 2 ? PeerLink::pcie_switch : PeerLink::pcie_host_bridge;
}

// ---- options ------------------------------------------------------------------------------------

AcceptOptions default_accept_options(bool long_mode) {
    AcceptOptions o;
    o.long_mode = long_mode;
    if (long_mode) {
        o.memory.patterns = {MemoryPattern::walking_ones, MemoryPattern::walking_zeros, MemoryPattern::address,
                             MemoryPattern::random};
        o.memory.passes = 4;
        o.memory.fraction_of_free = 0.95;
        o.compute_repetitions = 200;
        o.d2d.repetitions = 200;
        o.host.repetitions = 20;
        o.p2p.repetitions = 50;
    }
    return o;
}

}  // namespace gpudx

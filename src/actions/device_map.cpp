#include "actions/device_map.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/pci_address.hpp"
#include "core/text.hpp"

namespace gpudx {
namespace {

bool is_all_digits(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() && to_lower(s.substr(0, prefix.size())) == to_lower(prefix);
}

// Whether a spec can name a GPU at all, whatever the node: a UUID, a PCI address or an index. MIG
// instances are refused here too: no node has one that a restore could remap.
std::optional<std::string> spec_problem(std::string_view spec) {
    if (is_all_digits(spec) || starts_with_nocase(spec, "GPU-") || PciAddress::parse(spec)) return std::nullopt;
    if (starts_with_nocase(spec, "MIG-"))
        return fmt::format("'{}' is a MIG instance; checkpoint restore remaps whole GPUs only", spec);
    return fmt::format("'{}' names no GPU: use a UUID (GPU-…), a PCI address (0000:00:06.0) or an index", spec);
}

std::string known_gpus(const std::vector<CheckpointGpu>& gpus) {
    std::string out;
    for (const auto& g : gpus) out += (out.empty() ? "" : "; ") + describe_gpu(g);
    return out.empty() ? "none" : out;
}

}  // namespace

bool DeviceMapPlan::remaps() const {
    return std::any_of(pairs.begin(), pairs.end(), [](const GpuPair& p) { return p.old_uuid != p.new_uuid; });
}

Result<std::vector<DeviceMapItem>> parse_device_map(std::string_view text) {
    std::vector<DeviceMapItem> items;
    auto tokens = split(text, ',');
    if (trim(text).empty()) return fail("device map is empty; expected OLD=NEW[,OLD=NEW…] or swap:A,B");
    for (size_t i = 0; i < tokens.size(); ++i) {
        auto token = trim(tokens[i]);
        if (token.empty()) return fail(fmt::format("device map '{}': empty item at position {}", text, i + 1));
        if (starts_with_nocase(token, "swap:")) {
            auto first = trim(token.substr(5));
            if (first.empty() || i + 1 >= tokens.size() || trim(tokens[i + 1]).empty() ||
                trim(tokens[i + 1]).find('=') != std::string_view::npos)
                return fail(fmt::format("device map '{}': swap needs two GPUs, as in swap:0,1", text));
            auto second = trim(tokens[++i]);
            for (auto spec : {first, second})
                if (auto problem = spec_problem(spec)) return fail(fmt::format("device map '{}': {}", text, *problem));
            items.push_back({std::string(first), std::string(second)});
            items.push_back({std::string(second), std::string(first)});
            continue;
        }
        auto eq = token.find('=');
        if (eq == std::string_view::npos || token.find('=', eq + 1) != std::string_view::npos)
            return fail(fmt::format("device map '{}': item '{}' is not OLD=NEW", text, token));
        auto old_spec = trim(token.substr(0, eq)), new_spec = trim(token.substr(eq + 1));
        if (old_spec.empty() || new_spec.empty())
            return fail(fmt::format("device map '{}': item '{}' lacks a GPU on one side", text, token));
        for (auto spec : {old_spec, new_spec})
            if (auto problem = spec_problem(spec)) return fail(fmt::format("device map '{}': {}", text, *problem));
        items.push_back({std::string(old_spec), std::string(new_spec)});
    }
    return items;
}

Result<size_t> resolve_gpu(std::string_view spec, const std::vector<CheckpointGpu>& gpus) {
    spec = trim(spec);
    if (is_all_digits(spec)) {
        auto index = parse_uint(spec);
        for (size_t i = 0; i < gpus.size(); ++i)
            if (index && static_cast<uint64_t>(gpus[i].index) == *index) return i;
        return fail(fmt::format("GPU index {} does not exist on this node (GPUs: {})", spec, known_gpus(gpus)));
    }
    if (starts_with_nocase(spec, "GPU-") || starts_with_nocase(spec, "MIG-")) {
        auto wanted = to_lower(spec);
        for (size_t i = 0; i < gpus.size(); ++i)
            if (to_lower(gpus[i].uuid) == wanted) return i;
        if (starts_with_nocase(spec, "MIG-"))
            return fail(fmt::format("'{}' is a MIG instance; checkpoint restore remaps whole GPUs only", spec));
        return fail(fmt::format("no GPU with UUID {} on this node (GPUs: {})", spec, known_gpus(gpus)));
    }
    if (auto address = PciAddress::parse(spec)) {
        for (size_t i = 0; i < gpus.size(); ++i) {
            auto own = PciAddress::parse(gpus[i].pci);
            if (own && *own == *address) return i;
        }
        return fail(fmt::format("no GPU at PCI address {} on this node (GPUs: {})", address->str(), known_gpus(gpus)));
    }
    return fail(*spec_problem(spec));
}

Result<DeviceMapPlan> plan_device_map(std::string_view text, const std::vector<CheckpointGpu>& gpus, const MemoryHeld& held) {
    auto items = parse_device_map(text);
    if (!items) return std::unexpected(items.error());
    if (gpus.empty()) return fail("the driver reports no GPU on this node, so no device map can apply");

    // target[i] = position of the GPU that GPU i's contents go to.
    std::vector<std::optional<size_t>> target(gpus.size());
    for (const auto& item : *items) {
        auto from = resolve_gpu(item.old_spec, gpus);
        if (!from) return fail("device map: " + from.error().message);
        auto to = resolve_gpu(item.new_spec, gpus);
        if (!to) return fail("device map: " + to.error().message);
        if (target[*from] && *target[*from] != *to)
            return fail(fmt::format("device map: {} is mapped twice (to {} and to {})", describe_gpu(gpus[*from]),
                                    describe_gpu(gpus[*target[*from]]), describe_gpu(gpus[*to])));
        target[*from] = *to;
    }
    for (size_t i = 0; i < gpus.size(); ++i)
        if (!target[i]) target[i] = i;

    std::vector<std::optional<size_t>> source_of(gpus.size());
    for (size_t i = 0; i < gpus.size(); ++i) {
        size_t t = *target[i];
        if (source_of[t]) {
            size_t other = *source_of[t];
            return fail(fmt::format(
                "device map is not a permutation: {} would receive both {} and {}; a GPU left out of the map "
                "stays where it is, so map every GPU you move onto (e.g. swap:{},{})",
                describe_gpu(gpus[t]), describe_gpu(gpus[other]), describe_gpu(gpus[i]), gpus[other].index,
                gpus[i].index));
        }
        source_of[t] = i;
    }

    DeviceMapPlan plan;
    for (size_t i = 0; i < gpus.size(); ++i) {
        const auto& from = gpus[i];
        const auto& to = gpus[*target[i]];
        if (from.model != to.model)
            return fail(fmt::format("device map: {} is a {} but {} is a {}; the driver refuses a restore onto a "
                                    "different chip",
                                    describe_gpu(from), from.model.empty() ? "GPU of unknown model" : from.model,
                                    describe_gpu(to), to.model.empty() ? "GPU of unknown model" : to.model));
        plan.pairs.push_back({from.uuid, to.uuid});
    }

    if (!plan.remaps()) return plan;
    if (!held) {
        plan.notes.push_back("free memory on the target GPUs not checked: the memory the processes hold is unknown "
                             "(NVML per-process accounting unavailable)");
        return plan;
    }
    // Every moved process is checkpointed before any restore, so a target has its free memory plus what
    // the moved processes release there.
    auto held_on = [&](const CheckpointGpu& g) {
        auto it = held->find(g.uuid);
        return it == held->end() ? uint64_t{0} : it->second;
    };
    for (size_t t = 0; t < gpus.size(); ++t) {
        size_t s = *source_of[t];
        if (s == t) continue;
        const auto& to = gpus[t];
        uint64_t arriving = held_on(gpus[s]);
        if (!to.free_memory) {
            plan.notes.push_back(fmt::format("free memory on {} not checked: unknown", describe_gpu(to)));
            continue;
        }
        uint64_t room = *to.free_memory + held_on(to);
        if (arriving > room)
            return fail(fmt::format("device map: {} has {} available ({} free + {} released by the moved processes) "
                                    "but {} arrive from {}",
                                    describe_gpu(to), format_gib(room, 2), format_gib(*to.free_memory, 2), format_gib(held_on(to), 2), format_gib(arriving, 2),
                                    describe_gpu(gpus[s])));
    }
    return plan;
}

}  // namespace gpudx

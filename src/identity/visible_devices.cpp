#include "identity/visible_devices.hpp"

#include <algorithm>
#include <cctype>

#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "model/snapshot.hpp"

namespace gpudx {
namespace {

bool starts_with_ci(std::string_view s, std::string_view prefix) {
    if (s.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(s[i])) != std::tolower(static_cast<unsigned char>(prefix[i])))
            return false;
    return true;
}

bool is_uuid_body(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == '-')) return false;
    return true;
}

VisibleEntry classify(std::string_view text) {
    VisibleEntry e;
    e.text = std::string(text);
    if (text.empty()) return e;
    if (auto n = parse_uint(text); n && *n <= 1u << 20) {
        e.type = VisibleEntryType::index;
        e.index = static_cast<unsigned>(*n);
        return e;
    }
    // "MIG-<uuid>" (R470+) or the older "MIG-GPU-<uuid>/<gi>/<ci>".
    if (starts_with_ci(text, "MIG-")) {
        auto body = text.substr(4);
        if (starts_with_ci(body, "GPU-")) {
            auto slash = body.find('/');
            if (slash != std::string_view::npos && is_uuid_body(body.substr(4, slash - 4))) e.type = VisibleEntryType::mig_uuid;
        } else if (is_uuid_body(body)) {
            e.type = VisibleEntryType::mig_uuid;
        }
        return e;
    }
    if (starts_with_ci(text, "GPU-") && is_uuid_body(text.substr(4))) e.type = VisibleEntryType::gpu_uuid;
    return e;
}

std::string lower(std::string_view s) { return to_lower(s); }

}  // namespace

const char* to_string(VisibleDevicesKind k) {
    switch (k) {
        case VisibleDevicesKind::unset: return "unset";
        case VisibleDevicesKind::all: return "all";
        case VisibleDevicesKind::none: return "none";
        case VisibleDevicesKind::void_: return "void";
        case VisibleDevicesKind::empty: return "empty";
        case VisibleDevicesKind::list: return "list";
    }
    return "?";
}

bool VisibleDevices::has_indices() const {
    return std::any_of(entries.begin(), entries.end(), [](auto& e) { return e.type == VisibleEntryType::index; });
}

bool VisibleDevices::has_uuids() const {
    return std::any_of(entries.begin(), entries.end(), [](auto& e) {
        return e.type == VisibleEntryType::gpu_uuid || e.type == VisibleEntryType::mig_uuid;
    });
}

std::vector<VisibleEntry> VisibleDevices::effective() const {
    size_t end = first_invalid ? *first_invalid : entries.size();
    return {entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(end)};
}

VisibleDevices parse_visible_devices(const std::optional<std::string>& value) {
    VisibleDevices v;
    if (!value) return v;
    auto t = trim(*value);
    if (t.empty()) {
        v.kind = VisibleDevicesKind::empty;
        return v;
    }
    auto l = lower(t);
    if (l == "all") { v.kind = VisibleDevicesKind::all; return v; }
    if (l == "none") { v.kind = VisibleDevicesKind::none; return v; }
    if (l == "void") { v.kind = VisibleDevicesKind::void_; return v; }
    v.kind = VisibleDevicesKind::list;
    for (auto part : split(t, ',')) {
        auto e = classify(trim(part));
        if (e.type == VisibleEntryType::invalid && !v.first_invalid) v.first_invalid = v.entries.size();
        v.entries.push_back(std::move(e));
    }
    return v;
}

std::vector<NodeGpu> node_gpus(const Snapshot& s) {
    std::vector<NodeGpu> out;
    for (auto& g : s.module.nvidia_gpus) out.push_back({g.uuid, g.address, 0, g.minor, {}});
    if (out.empty())
        for (auto& d : s.nvml.devices) out.push_back({d.uuid, d.pci, 0, d.minor, {}});
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) {
        auto pa = PciAddress::parse(a.pci), pb = PciAddress::parse(b.pci);
        if (pa && pb) return *pa < *pb;
        return a.pci < b.pci;
    });
    for (size_t i = 0; i < out.size(); ++i) {
        out[i].index = static_cast<unsigned>(i);
        for (auto& d : s.nvml.devices)
            if (normalize_pci(d.pci) == normalize_pci(out[i].pci) || (!d.uuid.empty() && d.uuid == out[i].uuid)) {
                out[i].mig_uuids = d.mig_uuids;
                if (out[i].uuid.empty()) out[i].uuid = d.uuid;
            }
    }
    return out;
}

std::vector<VisibleMatch> match_visible_devices(const VisibleDevices& v, const std::vector<NodeGpu>& gpus,
                                               IndexMeaning indices) {
    std::vector<VisibleMatch> out;
    for (auto& e : v.effective()) {
        VisibleMatch m;
        m.entry = e;
        switch (e.type) {
            case VisibleEntryType::index:
                if (e.index)
                    for (size_t i = 0; i < gpus.size(); ++i)
                        if (indices == IndexMeaning::pci_order ? gpus[i].index == *e.index
                                                               : gpus[i].minor && *gpus[i].minor == *e.index)
                            m.gpus.push_back(i);
                break;
            case VisibleEntryType::gpu_uuid: {
                auto want = lower(e.text);
                for (size_t i = 0; i < gpus.size(); ++i) {
                    auto have = lower(gpus[i].uuid);
                    if (have == want) {
                        m.gpus = {i};
                        break;
                    }
                    if (!have.empty() && have.starts_with(want)) m.gpus.push_back(i);
                }
                break;
            }
            case VisibleEntryType::mig_uuid: {
                auto want = lower(e.text);
                m.mig = true;
                for (size_t i = 0; i < gpus.size(); ++i) {
                    for (auto& mig : gpus[i].mig_uuids)
                        if (lower(mig) == want || lower(mig).starts_with(want)) m.gpus.push_back(i);
                    // Old form names the parent GPU: MIG-GPU-<uuid>/gi/ci.
                    auto slash = want.find('/');
                    if (want.starts_with("mig-gpu-") && slash != std::string::npos &&
                        lower(gpus[i].uuid) == want.substr(4, slash - 4))
                        m.gpus.push_back(i);
                }
                std::sort(m.gpus.begin(), m.gpus.end());
                m.gpus.erase(std::unique(m.gpus.begin(), m.gpus.end()), m.gpus.end());
                break;
            }
            case VisibleEntryType::invalid: break;
        }
        out.push_back(std::move(m));
    }
    return out;
}

namespace {

// Applies one selector to `list` (positions in the node's ROCr order); entries that name nothing go to `unmatched`.
void apply_selector(const std::vector<AmdNodeGpu>& gpus, const std::optional<std::string>& value,
                    std::vector<size_t>& list, std::vector<std::string>& unmatched) {
    auto v = parse_visible_devices(value);
    switch (v.kind) {
        case VisibleDevicesKind::unset: return;
        case VisibleDevicesKind::empty: list.clear(); return;
        case VisibleDevicesKind::all:
        case VisibleDevicesKind::none:
        case VisibleDevicesKind::void_:
            // The container toolkit's words, not indices or UUIDs: ROCm hides every GPU.
            unmatched.push_back(std::string(trim(*value)));
            list.clear();
            return;
        case VisibleDevicesKind::list: break;
    }
    std::vector<size_t> kept;
    for (auto& e : v.entries) {
        std::optional<size_t> hit;
        if (e.type == VisibleEntryType::index && e.index && *e.index < list.size()) {
            hit = list[*e.index];
        } else if (e.type == VisibleEntryType::gpu_uuid) {
            for (auto p : list)
                if (!gpus[p].uuid.empty() && lower(gpus[p].uuid) == lower(e.text)) hit = p;
        }
        if (!hit) {
            unmatched.push_back(e.text);
            break;
        }
        if (std::find(kept.begin(), kept.end(), *hit) == kept.end()) kept.push_back(*hit);
    }
    list = std::move(kept);
}

}  // namespace

AmdSelection select_amd_gpus(const std::vector<AmdNodeGpu>& gpus, const std::optional<std::string>& rocr,
                             const std::optional<std::string>& hip, const std::optional<std::string>& cuda) {
    AmdSelection out;
    std::vector<size_t> list(gpus.size());
    for (size_t i = 0; i < gpus.size(); ++i) list[i] = i;
    apply_selector(gpus, rocr, list, out.rocr_unmatched);
    out.rocr_index.assign(gpus.size(), std::nullopt);
    for (size_t k = 0; k < list.size(); ++k) out.rocr_index[list[k]] = static_cast<unsigned>(k);
    const std::optional<std::string>& selector = hip ? hip : cuda;
    out.hip_variable = hip ? "HIP_VISIBLE_DEVICES" : cuda ? "CUDA_VISIBLE_DEVICES" : "";
    apply_selector(gpus, selector, list, out.hip_unmatched);
    out.hip_index.assign(gpus.size(), std::nullopt);
    for (size_t k = 0; k < list.size(); ++k) out.hip_index[list[k]] = static_cast<unsigned>(k);
    return out;
}

}  // namespace gpudx

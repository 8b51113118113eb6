#include "identity/join.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/json_support.hpp"

#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "identity/visible_devices.hpp"

namespace gpudx {

namespace {

std::string_view strip_uuid_prefix(std::string_view u) {
    if (u.size() > 4 && (u.substr(0, 4) == "GPU-" || u.substr(0, 4) == "MIG-" || u.substr(0, 4) == "gpu-" ||
                         u.substr(0, 4) == "mig-"))
        u.remove_prefix(4);
    return u;
}

std::string opt(const std::optional<unsigned>& v) { return v ? std::to_string(*v) : "-"; }
std::string opt(const std::optional<int>& v) { return v ? std::to_string(*v) : "-"; }
std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

// The AMD GPUs of amdgpu and KFD, by PCI address, with ROCr's and HIP's indices under the job's environment.
template <class RowFn>
void join_amd(const Snapshot& s, IdentityTable& t, RowFn&& row) {
    t.kfd_read = s.module.kfd_topology_listed;
    auto& vars = s.environment.variables;
    auto get = [&](const char* name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end()) return std::nullopt;
        return it->second;
    };
    auto rocr = get("ROCR_VISIBLE_DEVICES"), hip = get("HIP_VISIBLE_DEVICES"), cuda = get("CUDA_VISIBLE_DEVICES");
    t.rocr_visible_devices = rocr;
    t.hip_visible_devices = hip;
    std::vector<const AmdGpu*> enumerated;  // ROCr's order: KFD node order
    for (auto& g : s.module.amd_gpus) {
        if (g.pci.empty()) continue;
        t.amd = true;
        auto& r = row(normalize_pci(g.pci));
        if (r.vendor.empty()) r.vendor = "amd";
        r.amd_uuid = g.uuid;
        r.card = g.card;
        r.render_minor = g.render_minor;
        r.kfd_node = g.kfd_node;
        r.kfd_gpu_id = g.kfd_gpu_id;
        r.rocr_enum_index = g.rocr_index;
        if (r.model.empty()) r.model = !g.product_name.empty() ? g.product_name : g.gfx_target;
        if (g.rocr_index) enumerated.push_back(&g);
    }
    std::sort(enumerated.begin(), enumerated.end(), [](auto* a, auto* b) { return *a->rocr_index < *b->rocr_index; });
    std::vector<AmdNodeGpu> order;
    for (auto* g : enumerated) order.push_back({g->uuid, normalize_pci(g->pci)});
    auto sel = select_amd_gpus(order, rocr, hip, cuda);
    t.hip_selector = sel.hip_variable;
    t.rocr_unmatched = sel.rocr_unmatched;
    t.hip_unmatched = sel.hip_unmatched;
    for (size_t i = 0; i < order.size(); ++i) {
        auto& r = row(order[i].pci);
        r.rocr_index = sel.rocr_index[i];
        r.hip_index = sel.hip_index[i];
    }
}

}  // namespace

bool same_uuid(std::string_view a, std::string_view b) {
    a = strip_uuid_prefix(trim(a));
    b = strip_uuid_prefix(trim(b));
    return !a.empty() && to_lower(a) == to_lower(b);
}

std::string IdentityRow::uuid() const {
    if (!procfs_uuid.empty()) return procfs_uuid;
    if (!nvml_uuid.empty()) return nvml_uuid;
    if (!cuda_uuid.empty()) return cuda_uuid;
    return amd_uuid;
}

const IdentityRow* IdentityTable::by_pci(std::string_view pci) const {
    std::string key = normalize_pci(pci);
    for (auto& r : rows)
        if (r.pci == key) return &r;
    return nullptr;
}

const IdentityRow* IdentityTable::by_uuid(std::string_view uuid) const {
    for (auto& r : rows) {
        if (same_uuid(r.procfs_uuid, uuid) || same_uuid(r.nvml_uuid, uuid) || same_uuid(r.amd_uuid, uuid)) return &r;
        for (auto& m : r.mig_uuids)
            if (same_uuid(m, uuid)) return &r;
    }
    return nullptr;
}

IdentityTable join_identity(const Snapshot& s) {
    IdentityTable t;
    std::map<std::string, IdentityRow> rows;
    auto row = [&](const std::string& pci) -> IdentityRow& {
        auto& r = rows[pci];
        r.pci = pci;
        return r;
    };

    t.pcie_read = !s.pcie.devices.empty();
    for (auto& d : s.pcie.devices) {
        if (!d.is_gpu) continue;
        auto& r = row(normalize_pci(d.address));
        r.on_pcie = true;
        r.vendor = d.vendor_id == 0x10de ? "nvidia" : d.vendor_id == 0x1002 ? "amd" : "";
        r.slot = d.slot;
        r.numa_node = d.numa_node;
        if (!d.device_name.empty()) r.model = d.device_name;
    }
    t.procfs_read = !s.module.nvidia_gpus.empty();
    for (auto& g : s.module.nvidia_gpus) {
        auto& r = row(normalize_pci(g.address));
        r.in_procfs = true;
        r.procfs_uuid = g.uuid;
        r.minor = g.minor;
        if (!g.model.empty()) r.model = g.model;
    }
    t.nvml_read = s.nvml.device_count.has_value();
    for (auto& d : s.nvml.devices) {
        if (d.pci.empty()) continue;
        auto& r = row(normalize_pci(d.pci));
        r.nvml_index = d.index;
        r.nvml_uuid = d.uuid;
        r.nvml_bus_id = d.bus_id;
        r.nvml_minor = d.minor;
        r.mig_uuids = d.mig_uuids;
        if (r.model.empty() || !r.in_procfs) r.model = d.name.empty() ? r.model : d.name;
        if (!r.minor && d.minor) r.minor = d.minor;
    }
    t.cuda_read = s.cuda.caller.device_count.has_value() || s.cuda.caller.init_result.has_value();
    // Empty counts as unset: a view no probe filled.
    auto set_and_not_empty = [](const EnvValue& v) -> std::optional<std::string> {
        if (!v || v->empty()) return std::nullopt;
        return *v;
    };
    t.cuda_visible_devices = set_and_not_empty(s.cuda.caller.cuda_visible_devices);
    t.cuda_device_order = set_and_not_empty(s.cuda.caller.cuda_device_order);
    if (!t.cuda_read) {
        // The CUDA probe did not run: the environment layer still says what the job would use.
        auto& vars = s.environment.variables;
        if (auto it = vars.find("CUDA_VISIBLE_DEVICES"); it != vars.end()) t.cuda_visible_devices = it->second;
        if (auto it = vars.find("CUDA_DEVICE_ORDER"); it != vars.end()) t.cuda_device_order = it->second;
    }
    for (auto& d : s.cuda.caller.devices) {
        if (d.pci.empty()) continue;
        auto& r = row(normalize_pci(d.pci));
        // Two ordinals on one bus id would be a driver bug; keep the first, the check reports both.
        if (r.cuda_ordinal) continue;
        r.cuda_ordinal = d.ordinal;
        r.cuda_uuid = d.uuid;
        r.cuda_bus_id = d.bus_id;
    }

    join_amd(s, t, row);

    bool devices_read = !s.devices.nodes.empty();
    for (auto& [pci, r] : rows) {
        if (r.render_minor && !r.minor) {
            std::string want = fmt::format("/dev/dri/renderD{}", *r.render_minor);
            bool found = false;
            for (auto& n : s.devices.nodes)
                if (n.path == want && n.type != "missing") found = true;
            if (found) r.dev_node = want;
            else if (devices_read) r.dev_node_missing = true;
            continue;
        }
        if (!r.minor) continue;
        std::string want = fmt::format("/dev/nvidia{}", *r.minor);
        bool found = false;
        for (auto& n : s.devices.nodes)
            if (n.path == want && n.type != "missing") found = true;
        if (found) r.dev_node = want;
        else if (devices_read) r.dev_node_missing = true;
    }
    for (auto& [pci, r] : rows) t.rows.push_back(std::move(r));
    std::sort(t.rows.begin(), t.rows.end(), [](const IdentityRow& a, const IdentityRow& b) {
        auto pa = PciAddress::parse(a.pci), pb = PciAddress::parse(b.pci);
        if (pa && pb) return *pa < *pb;
        return a.pci < b.pci;
    });
    return t;
}

nlohmann::json identity_to_json(const IdentityTable& t) {
    nlohmann::json rows = nlohmann::json::array();
    auto nullable = [](const auto& o) { return o ? nlohmann::json(*o) : nlohmann::json(nullptr); };
    for (auto& r : t.rows) {
        rows.push_back({
            {"pci", r.pci},
            {"uuid", r.uuid()},
            {"on_pcie", r.on_pcie},
            {"vendor", r.vendor},
            {"slot", r.slot},
            {"numa_node", nullable(r.numa_node)},
            {"model", r.model},
            {"procfs", {{"present", r.in_procfs}, {"uuid", r.procfs_uuid}, {"minor", nullable(r.minor)}}},
            {"dev_node", r.dev_node.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.dev_node)},
            {"dev_node_missing", r.dev_node_missing},
            {"nvml",
             {{"index", nullable(r.nvml_index)}, {"uuid", r.nvml_uuid}, {"bus_id", r.nvml_bus_id},
              {"minor", nullable(r.nvml_minor)}}},
            {"cuda", {{"ordinal", nullable(r.cuda_ordinal)}, {"uuid", r.cuda_uuid}, {"bus_id", r.cuda_bus_id}}},
            {"mig_uuids", r.mig_uuids},
            {"amd",
             {{"uuid", r.amd_uuid}, {"card", r.card}, {"render_minor", nullable(r.render_minor)},
              {"kfd_node", nullable(r.kfd_node)}, {"kfd_gpu_id", nullable(r.kfd_gpu_id)},
              {"rocr_enum_index", nullable(r.rocr_enum_index)}, {"rocr_index", nullable(r.rocr_index)},
              {"hip_index", nullable(r.hip_index)}}},
        });
    }
    nlohmann::json j = {
        {"cuda_visible_devices", value_or_unset(t.cuda_visible_devices)},
        {"cuda_device_order", value_or_unset(t.cuda_device_order)},
        {"rocr_visible_devices", value_or_unset(t.rocr_visible_devices)},
        {"hip_visible_devices", value_or_unset(t.hip_visible_devices)},
        {"hip_selector", t.hip_selector},
        {"sources",
         {{"pcie", t.pcie_read}, {"procfs", t.procfs_read}, {"nvml", t.nvml_read}, {"cuda", t.cuda_read},
          {"kfd", t.kfd_read}}},
        {"gpus", std::move(rows)}};
    repair_utf8(j);
    return j;
}

std::string render_identity_text(const IdentityTable& t) {
    std::vector<std::vector<std::string>> cells;
    // ROCR and HIP columns only where an AMD GPU is: an NVIDIA node's table stays as it was.
    std::vector<std::string> header = {"PCI", "VENDOR", "SLOT", "NUMA", "MINOR", "DEV", "UUID", "NVML", "CUDA"};
    if (t.amd) header.insert(header.end(), {"ROCR", "HIP"});
    header.push_back("MODEL");
    cells.push_back(header);
    bool flagged = false;
    for (auto& r : t.rows) {
        std::string dev = !r.dev_node.empty() ? r.dev_node : r.dev_node_missing ? "(missing)" : "-";
        std::string cuda = r.cuda_ordinal ? std::to_string(*r.cuda_ordinal) : "-";
        // An ordinal whose UUID is not this GPU's (a stale bus id): flagged here, explained in the findings.
        if (r.cuda_ordinal && !r.cuda_uuid.empty() && !r.uuid().empty() && !same_uuid(r.cuda_uuid, r.uuid())) {
            bool mig = std::any_of(r.mig_uuids.begin(), r.mig_uuids.end(), [&](auto& m) { return same_uuid(m, r.cuda_uuid); });
            if (!mig) {
                cuda += "!";
                flagged = true;
            }
        }
        // MINOR is the NVIDIA device minor (/dev/nvidiaN), or the render minor of an AMD GPU (/dev/dri/renderDN).
        std::string minor = r.minor          ? std::to_string(*r.minor)
                            : r.render_minor ? std::to_string(*r.render_minor)
                                             : std::string("-");
        std::vector<std::string> line = {r.pci, or_dash(r.vendor), or_dash(r.slot),
                                         opt(r.numa_node ? std::optional<int>(*r.numa_node) : std::nullopt), minor,
                                         dev, or_dash(r.uuid()), opt(r.nvml_index), cuda};
        if (t.amd) {
            // "hidden": ROCm enumerates this GPU but the selectors leave it out; "-": ROCm does not enumerate it.
            auto rocm = [&](const std::optional<unsigned>& v) {
                return v ? std::to_string(*v) : r.rocr_enum_index ? std::string("hidden") : std::string("-");
            };
            line.push_back(rocm(r.rocr_index));
            line.push_back(rocm(r.hip_index));
        }
        line.push_back(or_dash(r.model));
        cells.push_back(std::move(line));
    }
    std::vector<size_t> width(cells[0].size(), 0);
    for (auto& row : cells)
        for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    std::string out;
    for (auto& row : cells) {
        std::string line;
        for (size_t i = 0; i < row.size(); ++i) {
            line += row[i];
            if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
        }
        out += strip_control(line) + "\n";
    }
    for (auto& r : t.rows)
        if (!r.mig_uuids.empty())
            for (auto& m : r.mig_uuids) out += fmt::format("  {} MIG {}\n", r.pci, strip_control(m));
    if (flagged) out += "! this CUDA ordinal reports this bus id but another GPU's UUID\n";
    out += fmt::format("CUDA ordinals under CUDA_VISIBLE_DEVICES={} CUDA_DEVICE_ORDER={}\n",
                       strip_control(value_or_unset(t.cuda_visible_devices)),
                       strip_control(value_or_unset(t.cuda_device_order)));
    if (t.amd)
        out += fmt::format("ROCm indices under ROCR_VISIBLE_DEVICES={} HIP_VISIBLE_DEVICES={}{}\n",
                           strip_control(value_or_unset(t.rocr_visible_devices)),
                           strip_control(value_or_unset(t.hip_visible_devices)),
                           t.hip_selector == "CUDA_VISIBLE_DEVICES" ? " (HIP follows CUDA_VISIBLE_DEVICES)" : "");
    return out;
}

std::string render_identity_csv(const IdentityTable& t) {
    auto field = [](std::string s) {
        if (s.find_first_of(",\"\r\n") == std::string::npos) return s;  // RFC 4180: these need quotes
        std::string q = "\"";
        for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
        return q + "\"";
    };
    std::string out =
        "pci,slot,numa_node,minor,dev_node,uuid,procfs_uuid,nvml_index,nvml_uuid,nvml_bus_id,cuda_ordinal,cuda_uuid,"
        "cuda_bus_id,mig_uuids,model,vendor,render_minor,amd_uuid,kfd_node,kfd_gpu_id,rocr_index,hip_index\n";
    for (auto& r : t.rows) {
        std::string migs;
        for (auto& m : r.mig_uuids) migs += (migs.empty() ? "" : ";") + m;
        std::vector<std::string> f = {r.pci,
                                      r.slot,
                                      r.numa_node ? std::to_string(*r.numa_node) : "",
                                      r.minor ? std::to_string(*r.minor) : "",
                                      r.dev_node,
                                      r.uuid(),
                                      r.procfs_uuid,
                                      r.nvml_index ? std::to_string(*r.nvml_index) : "",
                                      r.nvml_uuid,
                                      r.nvml_bus_id,
                                      r.cuda_ordinal ? std::to_string(*r.cuda_ordinal) : "",
                                      r.cuda_uuid,
                                      r.cuda_bus_id,
                                      migs,
                                      r.model,
                                      r.vendor,
                                      r.render_minor ? std::to_string(*r.render_minor) : "",
                                      r.amd_uuid,
                                      r.kfd_node ? std::to_string(*r.kfd_node) : "",
                                      r.kfd_gpu_id ? std::to_string(*r.kfd_gpu_id) : "",
                                      r.rocr_index ? std::to_string(*r.rocr_index) : "",
                                      r.hip_index ? std::to_string(*r.hip_index) : ""};
        for (size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + field(f[i]);
        out += "\n";
    }
    return out;
}

}  // namespace gpudx

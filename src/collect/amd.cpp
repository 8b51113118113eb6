// AMD GPUs as amdgpu and KFD present them in sysfs (docs/amd.md):
//  - /sys/class/drm/cardN and renderDN: links to the PCI device; device/unique_id, vbios_version,
//    product_name and fw_version/*_fw_version (Documentation/gpu/amdgpu/driver-misc.rst);
//  - /sys/class/kfd/kfd/topology/nodes/N/{gpu_id,name,properties} (drivers/gpu/drm/amd/amdkfd/kfd_topology.c).
#include "collect/amd.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>

#include <fmt/format.h>

#include "core/pci_address.hpp"
#include "core/text.hpp"

namespace gpudx {

std::map<std::string, std::string> parse_kfd_properties(std::string_view text) {
    std::map<std::string, std::string> out;
    for (auto line : split_lines(text)) {
        auto w = split_ws(line);
        if (w.size() != 2 || !parse_uint(w[1])) continue;
        out.emplace(sanitize_utf8(w[0]), std::string(w[1]));
    }
    return out;
}

std::string kfd_location_to_pci(uint32_t domain, uint32_t location_id) {
    PciAddress a;
    a.domain = domain;
    a.bus = static_cast<uint8_t>((location_id >> 8) & 0xff);
    a.device = static_cast<uint8_t>((location_id >> 3) & 0x1f);
    a.function = static_cast<uint8_t>(location_id & 0x7);
    return a.str();
}

namespace {

std::optional<uint32_t> prop32(const std::map<std::string, std::string>& p, const char* key) {
    auto it = p.find(key);
    if (it == p.end()) return std::nullopt;
    auto v = parse_uint(it->second);
    if (!v || *v > 0xffffffffu) return std::nullopt;
    return static_cast<uint32_t>(*v);
}

bool all_hex(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

KfdNode kfd_node_from(unsigned node, const std::map<std::string, std::string>& properties,
                      const std::optional<std::string>& gpu_id_text, const std::optional<std::string>& name_text) {
    KfdNode n;
    n.node = node;
    n.properties = properties;
    if (gpu_id_text)
        if (auto v = parse_uint(trim(*gpu_id_text)); v && *v <= 0xffffffffu) n.gpu_id = static_cast<uint32_t>(*v);
    if (name_text) n.name = sanitize_utf8(trim(*name_text));
    n.vendor_id = prop32(properties, "vendor_id");
    n.device_id = prop32(properties, "device_id");
    n.simd_count = prop32(properties, "simd_count");
    n.gfx_target_version = prop32(properties, "gfx_target_version");
    n.drm_render_minor = prop32(properties, "drm_render_minor");
    if (auto it = properties.find("unique_id"); it != properties.end()) n.unique_id = unique_id_from_decimal(it->second);
    // A CPU node has gpu_id 0, no SIMDs and location 0: it has no PCI address of its own.
    bool gpu = n.gpu_id ? *n.gpu_id != 0 : n.simd_count.value_or(0) != 0;
    auto loc = prop32(properties, "location_id");
    if (gpu && loc) n.pci = kfd_location_to_pci(prop32(properties, "domain").value_or(0), *loc);
    // A CPU node's render minor is 0, not a render node.
    if (!gpu) n.drm_render_minor.reset();
    if (n.name.empty() && gpu && n.gfx_target_version) n.name = gfx_name_from_target_version(*n.gfx_target_version);
    return n;
}

std::string unique_id_from_hex(std::string_view text) {
    auto t = trim(text);
    if (t.starts_with("0x") || t.starts_with("0X")) t.remove_prefix(2);
    if (!all_hex(t) || t.size() > 16) return {};
    auto v = parse_uint(t, 16);
    if (!v || *v == 0) return {};
    return fmt::format("{:016x}", *v);
}

std::string unique_id_from_decimal(std::string_view text) {
    auto v = parse_uint(trim(text));
    if (!v || *v == 0) return {};
    return fmt::format("{:016x}", *v);
}

std::string amd_uuid(std::string_view unique_id) {
    if (unique_id.empty()) return {};
    return "GPU-" + std::string(unique_id);
}

std::optional<uint32_t> parse_amd_fw_version(std::string_view text) {
    auto t = trim(text);
    if (!t.starts_with("0x") && !t.starts_with("0X")) return std::nullopt;
    t.remove_prefix(2);
    if (!all_hex(t) || t.size() > 8) return std::nullopt;
    auto v = parse_uint(t, 16);
    if (!v) return std::nullopt;
    return static_cast<uint32_t>(*v);
}

std::optional<uint32_t> drm_index(std::string_view name, std::string_view prefix) {
    if (!name.starts_with(prefix) || name.size() == prefix.size()) return std::nullopt;
    auto rest = name.substr(prefix.size());
    if (rest.size() > 9 || !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
    auto v = parse_uint(rest);
    if (!v) return std::nullopt;
    return static_cast<uint32_t>(*v);
}

std::string gfx_name_from_target_version(uint32_t v) {
    return fmt::format("gfx{}{:x}{:x}", v / 10000, (v / 100) % 100, v % 100);
}

namespace {

constexpr std::string_view kDrm = "/sys/class/drm";
constexpr std::string_view kKfdNodes = "/sys/class/kfd/kfd/topology/nodes";

struct Reader {
    const Root& root;
    std::vector<ReadProblem>& problems;

    // A file's trimmed text; absent is normal (older kernels, consumer boards), unreadable is a problem.
    std::optional<std::string> text(const std::string& path) const {
        auto r = root.read_file(path, 64 * 1024);
        if (r) return sanitize_utf8(trim(*r));
        if (r.error().sys_errno != ENOENT) problems.push_back({path, r.error().message});
        return std::nullopt;
    }

    // The PCI address a DRM entry's `device` link points at; empty for a non-PCI device.
    std::string pci_of(const std::string& entry) const {
        std::string link = std::string(kDrm) + "/" + entry + "/device";
        auto target = root.read_link(link);
        if (!target) return {};
        // The kernel writes "../../../0000:05:00.0"; a link written another way ("../..") is resolved instead.
        auto a = PciAddress::parse(link_basename(*target));
        if (!a)
            if (auto canon = root.canonical(link)) a = PciAddress::parse(link_basename(*canon));
        return a ? a->str() : std::string();
    }
};

AmdGpu& row(std::vector<AmdGpu>& gpus, const std::string& pci) {
    for (auto& g : gpus)
        if (g.pci == pci) return g;
    AmdGpu g;
    g.pci = pci;
    gpus.push_back(std::move(g));
    return gpus.back();
}

void read_drm(const Reader& rd, ModuleLayer& layer) {
    auto names = rd.root.list_dir(kDrm);
    if (!names) {
        if (names.error().sys_errno != ENOENT) rd.problems.push_back({std::string(kDrm), names.error().message});
        return;
    }
    std::map<std::string, uint32_t> render;  // pci -> render minor
    std::vector<std::pair<uint32_t, std::string>> cards;
    for (auto& n : *names) {
        if (auto m = drm_index(n, "renderD")) {
            auto pci = rd.pci_of(n);
            if (!pci.empty()) render.emplace(pci, *m);
        } else if (auto c = drm_index(n, "card")) {
            cards.emplace_back(*c, n);
        }
    }
    std::sort(cards.begin(), cards.end());
    for (auto& [index, name] : cards) {
        std::string dev = std::string(kDrm) + "/" + name + "/device";
        auto driver = rd.root.read_link(dev + "/driver");
        if (!driver || link_basename(*driver) != "amdgpu") continue;  // nvidia-drm, ast, simpledrm ...
        auto pci = rd.pci_of(name);
        if (pci.empty()) continue;
        auto& g = row(layer.amd_gpus, pci);
        if (!g.card.empty()) continue;  // one PCI function, one primary card
        g.card = name;
        if (auto t = rd.text(dev + "/unique_id")) {
            g.unique_id = unique_id_from_hex(*t);
            if (g.unique_id.empty() && !t->empty() && *t != "0000000000000000")
                rd.problems.push_back({dev + "/unique_id", fmt::format("not a 64-bit hex value: '{}'", t->substr(0, 40))});
        }
        if (auto t = rd.text(dev + "/vbios_version")) g.vbios_version = *t;
        if (auto t = rd.text(dev + "/product_name")) g.product_name = *t;
        std::string fw = dev + "/fw_version";
        if (auto files = rd.root.list_dir(fw)) {
            for (auto& f : *files) {
                if (!f.ends_with("_fw_version")) continue;
                auto t = rd.text(fw + "/" + f);
                if (!t) continue;
                if (!parse_amd_fw_version(*t))
                    rd.problems.push_back({fw + "/" + f, fmt::format("not a firmware version (0x%08x): '{}'", t->substr(0, 40))});
                g.firmware[sanitize_utf8(f)] = *t;
            }
        }
    }
    for (auto& [pci, minor] : render) {
        // A render node of another driver (nvidia-drm's, a BMC's) is no AMD GPU.
        bool amd = std::any_of(layer.amd_gpus.begin(), layer.amd_gpus.end(), [&](auto& g) { return g.pci == pci; });
        if (amd) row(layer.amd_gpus, pci).render_minor = minor;
    }
}

void read_kfd(const Reader& rd, ModuleLayer& layer) {
    auto names = rd.root.list_dir(kKfdNodes);
    if (!names) {
        if (names.error().sys_errno != ENOENT) rd.problems.push_back({std::string(kKfdNodes), names.error().message});
        return;
    }
    layer.kfd_topology_listed = true;
    std::vector<unsigned> numbers;
    for (auto& n : *names)
        if (auto v = parse_uint(n); v && *v < 1u << 20) numbers.push_back(static_cast<unsigned>(*v));
    std::sort(numbers.begin(), numbers.end());
    for (unsigned number : numbers) {
        std::string dir = fmt::format("{}/{}", kKfdNodes, number);
        auto props = rd.root.read_file(dir + "/properties", 64 * 1024);
        if (!props) rd.problems.push_back({dir + "/properties", props.error().message});
        auto node = kfd_node_from(number, props ? parse_kfd_properties(*props) : std::map<std::string, std::string>{},
                                  rd.text(dir + "/gpu_id"), rd.text(dir + "/name"));
        layer.kfd_nodes.push_back(std::move(node));
    }
    unsigned rocr = 0;
    for (auto& n : layer.kfd_nodes) {
        if (n.pci.empty()) continue;
        auto& g = row(layer.amd_gpus, n.pci);
        unsigned index = rocr++;
        if (g.in_kfd) continue;  // a second node on one PCI function (a compute partition): the first names it
        g.in_kfd = true;
        g.kfd_node = n.node;
        g.kfd_gpu_id = n.gpu_id;
        g.gfx_target = n.name;
        g.simd_count = n.simd_count;
        g.rocr_index = index;
        if (!g.render_minor) g.render_minor = n.drm_render_minor;
        if (g.unique_id.empty()) g.unique_id = n.unique_id;
    }
}

}  // namespace

void read_amd_gpus(const Root& root, ModuleLayer& layer, std::vector<ReadProblem>& problems) {
    Reader rd{root, problems};
    read_drm(rd, layer);
    read_kfd(rd, layer);
    for (auto& g : layer.amd_gpus) g.uuid = amd_uuid(g.unique_id);
    std::sort(layer.amd_gpus.begin(), layer.amd_gpus.end(), [](const AmdGpu& a, const AmdGpu& b) {
        auto pa = PciAddress::parse(a.pci), pb = PciAddress::parse(b.pci);
        if (pa && pb) return *pa < *pb;
        return a.pci < b.pci;
    });
}

}  // namespace gpudx

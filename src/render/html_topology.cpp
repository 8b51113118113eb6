// The PCIe topology drawn as SVG (render/html.hpp): per root complex, the bridges on the way down to every GPU, NIC
// and NVSwitch, each link with the width and speed it trained at, and those below their maximum marked.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "render/html_parts.hpp"

namespace gpudx::html {
namespace {

enum class NodeKind { root_complex, root_port, switch_port, bridge, gpu, nvswitch, nic, other };

const char* kind_label(NodeKind k) {
    switch (k) {
        case NodeKind::root_complex: return "root complex";
        case NodeKind::root_port: return "root port";
        case NodeKind::switch_port: return "PCIe switch port";
        case NodeKind::bridge: return "bridge";
        case NodeKind::gpu: return "GPU";
        case NodeKind::nvswitch: return "NVSwitch";
        case NodeKind::nic: return "NIC";
        case NodeKind::other: return "device";
    }
    return "device";
}

bool is_bridge(const PciDevice& d) { return d.class_code && (*d.class_code >> 8) == 0x0604; }
bool is_nic(const PciDevice& d) { return d.class_code && (*d.class_code >> 16) == 0x02; }

NodeKind kind_of(const PciDevice& d) {
    if (d.is_gpu) return NodeKind::gpu;
    if (d.is_nvswitch) return NodeKind::nvswitch;
    if (is_nic(d)) return NodeKind::nic;
    if (is_bridge(d)) return d.parent.empty() ? NodeKind::root_port : NodeKind::switch_port;
    return NodeKind::other;
}

std::string link_text(const PcieLink& l) {
    if (!l.width && !l.speed_gts) return "";
    std::string out = l.width ? fmt::format("x{}", *l.width) : std::string("x?");
    if (l.speed_gts) out += fmt::format(" {} GT/s", number(*l.speed_gts));
    return out;
}

// Trained below what both ends can do: fewer lanes or a lower rate than the maximum.
bool degraded(const PciDevice& d) {
    const auto &c = d.link_current, &m = d.link_max;
    if (c.width && m.width && *c.width < *m.width) return true;
    if (c.speed_gts && m.speed_gts && *c.speed_gts + 1e-9 < *m.speed_gts) return true;
    return false;
}

struct TreeNode {
    const PciDevice* dev = nullptr;  // null for the root complex
    std::string label;               // root complex: "0000:00"
    std::vector<size_t> children;
    double x = 0;
    int depth = 0;
};

constexpr double kBoxW = 196, kBoxH = 52, kColW = 212, kRowH = 96, kMargin = 12;

struct Drawing {
    std::vector<TreeNode> nodes;
    double next_leaf = 0;
    int max_depth = 0;

    void place(size_t i, int depth) {
        auto& n = nodes[i];
        n.depth = depth;
        max_depth = std::max(max_depth, depth);
        if (n.children.empty()) {
            n.x = next_leaf++;
            return;
        }
        for (size_t c : n.children) place(c, depth + 1);
        nodes[i].x = (nodes[nodes[i].children.front()].x + nodes[nodes[i].children.back()].x) / 2;
    }
};

}  // namespace

std::string topology_section(const NodePage& page) {
    std::string out = "<section id=\"topology\">\n<h2>Topology</h2>\n";
    if (!page.snapshot) return out + "<p>Not in the input: a saved diagnosis holds no PCIe tree (make the page from a "
                                     "snapshot).</p>\n</section>\n";
    const auto& devices = page.snapshot->pcie.devices;
    if (devices.empty()) return out + "<p>No PCIe device was read.</p>\n</section>\n";
    std::map<std::string, const PciDevice*> by_address;
    for (auto& d : devices) by_address[d.address] = &d;
    std::map<std::string, std::string> uuid_of;
    std::set<std::string> flagged;  // GPUs the identity table or a finding marks
    for (auto& r : page.identity) {
        uuid_of[r.pci] = r.uuid;
        if (!r.disagreements.empty() || !r.findings.empty()) flagged.insert(r.pci);
    }
    auto findings = page.findings();
    for (size_t i = 0; i < findings.size(); ++i)
        if (findings.severity(i) != Severity::info)
            for (size_t k = 0; k < findings.subject_count(i); ++k) flagged.emplace(findings.subject(i, k).pci);
    // NVLink as NVML lists it per GPU: links up of links present; a GPU with a link down is marked.
    std::map<std::string, std::pair<size_t, size_t>> nvlinks;  // pci -> (active, total)
    for (auto& d : page.snapshot->nvml.devices) {
        if (d.nvlinks.empty()) continue;
        size_t active = 0;
        for (auto& l : d.nvlinks) active += l.active;
        nvlinks[d.pci] = {active, d.nvlinks.size()};
        if (active < d.nvlinks.size()) flagged.insert(d.pci);
    }
    auto nvlink_text = [&](const std::string& pci) {
        auto it = nvlinks.find(pci);
        return it == nvlinks.end() ? std::string() : fmt::format("NVLink {}/{} up", it->second.first, it->second.second);
    };

    // What is drawn: GPUs, NVSwitches and NICs, with every bridge on their way up to the root complex.
    std::set<std::string> shown;
    for (auto& d : devices) {
        if (!d.is_gpu && !d.is_nvswitch && !is_nic(d)) continue;
        const PciDevice* cur = &d;
        std::set<std::string> seen;  // a capture with a loop in its parents still ends
        while (cur && seen.insert(cur->address).second) {
            shown.insert(cur->address);
            auto it = by_address.find(cur->parent);
            cur = it == by_address.end() ? nullptr : it->second;
        }
    }
    if (shown.empty()) return out + "<p>No GPU, NIC or NVSwitch on PCIe.</p>\n</section>\n";

    // Root complexes by the domain and bus of their topmost device.
    std::map<std::string, Drawing> complexes;
    std::map<std::string, std::pair<std::string, size_t>> index_of;  // address -> (complex, node)
    auto top_of = [&](const PciDevice& d) {
        const PciDevice* cur = &d;
        std::set<std::string> seen;
        while (seen.insert(cur->address).second) {
            auto it = by_address.find(cur->parent);
            if (it == by_address.end() || !shown.count(it->first)) break;
            cur = it->second;
        }
        return cur;
    };
    for (auto& d : devices) {
        if (!shown.count(d.address)) continue;
        std::string rc = top_of(d)->address.substr(0, 7);
        auto& drawing = complexes[rc];
        if (drawing.nodes.empty()) drawing.nodes.push_back(TreeNode{nullptr, rc, {}, 0, 0});
        index_of[d.address] = {rc, drawing.nodes.size()};
        drawing.nodes.push_back(TreeNode{&d, d.address, {}, 0, 0});
    }
    for (auto& [address, where] : index_of) {
        auto& drawing = complexes[where.first];
        const auto* d = drawing.nodes[where.second].dev;
        auto parent = index_of.find(d->parent);
        size_t p = parent != index_of.end() && parent->second.first == where.first ? parent->second.second : 0;
        if (p == where.second) p = 0;
        drawing.nodes[p].children.push_back(where.second);
    }

    out += "<p>Each root complex with the bridges down to its GPUs, NICs and NVSwitches; on each link the width and rate "
           "it trained at. <span style=\"color:#c62828\">Red, dashed</span>: trained below its maximum. A GPU outlined "
           "in red: a finding or a disagreement names it, or an NVLink of it is down.</p>\n";
    out += "<div class=\"rcs\">\n";
    std::string table = "<table class=\"topology\"><caption class=\"sr\">The drawn topology as a table</caption>\n<tr>"
                        "<th>root complex</th><th>device</th><th>kind</th><th>upstream</th><th>UUID</th><th>link now</th>"
                        "<th>link max</th><th>NVLink</th><th>NUMA</th><th>slot</th><th>driver</th></tr>\n";
    for (auto& [rc, drawing] : complexes) {
        drawing.place(0, 0);
        double width = std::max(1.0, drawing.next_leaf) * kColW + 2 * kMargin;
        double height = (drawing.max_depth + 1) * kRowH + kMargin;
        std::string svg = fmt::format("<div class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" "
                                      "width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
                                      "aria-label=\"PCIe tree of root complex {2}\">\n",
                                      width, height, esc(rc));
        auto cx = [&](const TreeNode& n) { return kMargin + n.x * kColW + kBoxW / 2; };
        auto top = [&](const TreeNode& n) { return kMargin / 2 + n.depth * kRowH; };
        // Links first, so the boxes cover their ends.
        for (auto& n : drawing.nodes)
            for (size_t c : n.children) {
                const auto& child = drawing.nodes[c];
                bool bad = child.dev && degraded(*child.dev);
                double x1 = cx(n), y1 = top(n) + kBoxH, x2 = cx(child), y2 = top(child);
                svg += fmt::format("<path d=\"M{:.1f} {:.1f} V{:.1f} H{:.1f} V{:.1f}\" fill=\"none\" stroke=\"{}\" "
                                   "stroke-width=\"{}\"{}/>\n",
                                   x1, y1, (y1 + y2) / 2, x2, y2, bad ? kRed : "#9e9e9e", bad ? 3 : 2,
                                   bad ? " stroke-dasharray=\"6 4\"" : "");
                std::string label = child.dev ? link_text(child.dev->link_current) : "";
                if (bad) label += " (max " + link_text(child.dev->link_max) + ")";
                if (!label.empty())
                    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" fill=\"{}\">{}</text>\n",
                                       x2 + 4, y2 - 6, bad ? kRed : "#424242", esc(label));
            }
        for (auto& n : drawing.nodes) {
            double x = cx(n) - kBoxW / 2, y = top(n);
            NodeKind k = n.dev ? kind_of(*n.dev) : NodeKind::root_complex;
            bool is_flagged = n.dev && (flagged.count(n.dev->address) || n.dev->config_unreadable);
            const char* fill = k == NodeKind::gpu ? "#e3f2fd" : k == NodeKind::nvswitch ? "#ede7f6"
                               : k == NodeKind::nic ? "#e8f5e9" : k == NodeKind::root_complex ? "#eeeeee" : "#fafafa";
            std::string line1 = kind_label(k), line2 = n.label, line3;
            if (n.dev) {
                if (k == NodeKind::gpu) {
                    line3 = short_id(uuid_of.count(n.dev->address) ? uuid_of[n.dev->address] : "");
                    if (auto nv = nvlink_text(n.dev->address); !nv.empty()) line3 += ", " + nv;
                }
                else line3 = n.dev->device_name.empty() ? n.dev->vendor_name : n.dev->device_name;
                if (n.dev->numa_node && *n.dev->numa_node >= 0 && n.children.empty())
                    line1 += fmt::format(" · NUMA {}", *n.dev->numa_node);
            }
            std::string title = line1 + " " + line2;
            if (k == NodeKind::gpu && uuid_of.count(line2)) title += " " + uuid_of[line2];
            svg += fmt::format("<g><title>{}</title><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" rx=\"5\" "
                               "fill=\"{}\" stroke=\"{}\" stroke-width=\"{}\"/>\n",
                               esc(title), x, y, kBoxW, kBoxH, fill, is_flagged ? kRed : "#616161", is_flagged ? 3 : 1);
            svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" fill=\"#555\">{}</text>\n", x + 6, y + 14,
                               esc(line1));
            svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" font-weight=\"600\">{}</text>\n", x + 6,
                               y + 29, esc(line2));
            if (!line3.empty())
                svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">{}</text>\n", x + 6, y + 44,
                                   esc(line3.size() > 32 ? line3.substr(0, 31) + "…" : line3));
            svg += "</g>\n";
            if (!n.dev) continue;
            const auto& d = *n.dev;
            table += fmt::format(
                "<tr data-pci=\"{}\"><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td>{}</td><td class=\"mono\">{}"
                "</td><td class=\"mono\">{}</td><td class=\"{}\">{}</td><td>{}</td><td class=\"{}\">{}</td><td class=\"num\">"
                "{}</td><td>{}</td><td>{}</td></tr>\n",
                esc(d.address), esc(rc), esc(d.address), kind_label(k), esc(d.parent.empty() ? "—" : d.parent),
                esc(k == NodeKind::gpu && uuid_of.count(d.address) ? uuid_of[d.address] : ""),
                degraded(d) ? "bad" : "", esc(link_text(d.link_current).empty() ? "—" : link_text(d.link_current)),
                esc(link_text(d.link_max).empty() ? "—" : link_text(d.link_max)),
                nvlinks.count(d.address) && nvlinks[d.address].first < nvlinks[d.address].second ? "bad" : "",
                esc(nvlink_text(d.address).empty() ? "—" : nvlink_text(d.address)), d.numa_node && *d.numa_node >= 0 ? std::to_string(*d.numa_node) : "—", esc(d.slot.empty() ? "—" : d.slot),
                esc(d.driver.empty() ? "none" : d.driver));
        }
        out += "<div class=\"rc\"><h3>Root complex " + esc(rc) + "</h3>\n" + svg + "</svg></div></div>\n";
    }
    out += "</div>\n<details open><summary>The same as a table</summary>\n" + table + "</table>\n</details>\n";
    size_t others = devices.size() - shown.size();
    if (others > 0) out += fmt::format("<p>{} other PCIe device(s) not drawn (no GPU, NIC or NVSwitch below them).</p>\n", others);
    return out + "</section>\n";
}

}  // namespace gpudx::html

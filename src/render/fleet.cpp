#include "render/fleet.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/text.hpp"

namespace gpudx {

namespace {

std::string short_divergence(const Finding& f) {
    // The message already carries the values; the id leads so a reader can grep for it.
    return fmt::format("{}: {}", f.id, f.message);
}

std::string bar(size_t n, size_t max, size_t width = 24) {
    if (max == 0) return {};
    size_t len = (n * width + max - 1) / max;
    std::string out;
    for (size_t i = 0; i < len; ++i) out += "\u2588";
    return out;
}

void render_spread(std::string& out, std::string_view title, const VersionCounts& counts, size_t limit) {
    if (counts.empty()) return;
    std::vector<std::pair<std::string, size_t>> rows(counts.begin(), counts.end());
    std::stable_sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second > b.second; });
    size_t max = rows.front().second;
    size_t width = 0;
    for (auto& [v, n] : rows) width = std::max(width, v.size());
    width = std::min<size_t>(width, 40);
    out += fmt::format("  {}:\n", title);
    size_t shown = 0;
    for (auto& [v, n] : rows) {
        if (limit && shown++ == limit) {
            out += fmt::format("    ... {} more\n", rows.size() - limit);
            break;
        }
        out += fmt::format("    {:<{}}  {:>6}  {}\n", strip_control(v), width, n, bar(n, max));
    }
}

}  // namespace

std::string render_fleet_text(const FleetReport& r, const FleetRenderOptions& o) {
    auto paint = [&](const char* code, std::string_view s) {
        return o.color ? fmt::format("\033[{}m{}\033[0m", code, s) : std::string(s);
    };
    std::string out;
    out += fmt::format("gpudx fleet report — {} node(s) from {} file(s), matrix {}\n", r.nodes, r.inputs, r.matrix_path);
    if (!r.skipped.empty()) {
        out += paint("33", fmt::format("Skipped {} file(s):", r.skipped.size())) + "\n";
        size_t shown = 0;
        for (auto& p : r.skipped) {
            if (o.limit && shown++ == o.limit) {
                out += fmt::format("  ... {} more (--format csv lists all)\n", r.skipped.size() - o.limit);
                break;
            }
            out += fmt::format("  {}: {}\n", strip_control(p.file), strip_control(p.reason));
        }
    }
    if (!r.superseded.empty())
        out += fmt::format("{} older snapshot(s) or diagnoses of a host with a newer one were not counted.\n",
                           r.superseded.size());
    out += fmt::format("Health: {} node(s) from saved diagnoses, {} from the rules run on their snapshot", r.health_saved,
                       r.health_computed);
    out += r.health_unknown ? paint("33", fmt::format(", {} unknown", r.health_unknown)) + "\n" : std::string(".\n");

    for (auto& c : r.classes) {
        out += "\n";
        if (c.name == "(unclassified)")
            out += paint("1", fmt::format("Unclassified: {} node(s) fit no class of the matrix", c.nodes)) + "\n";
        else
            out += paint("1", fmt::format("Class {}", c.name)) +
                   fmt::format(" (owner {}, review by {}{}): {} node(s), {} conforming, {} diverging, {} unhealthy\n",
                               c.owner, c.review_by, c.review_overdue ? paint("33", ", REVIEW OVERDUE") : "", c.nodes,
                               c.conforming, c.diverging.size(), c.unhealthy.size());
        if (c.health_only)
            out += fmt::format("  {} node(s) known only from a saved diagnosis: versions unknown, matrix not checked\n",
                               c.health_only);
        if (c.nodes == 0) continue;
        render_spread(out, "Driver", c.drivers, o.limit);
        render_spread(out, "Kernel", c.kernels, o.limit);
        render_spread(out, "VBIOS (per GPU)", c.vbios, o.limit);
        render_spread(out, "CUDA", c.cuda, o.limit);
        if (c.fabric_manager.size() > 1 || !c.fabric_manager.contains("unknown"))
            render_spread(out, "Fabric Manager", c.fabric_manager, o.limit);
        if (!c.divergence_nodes.empty()) {
            out += "  Divergences (nodes):\n";
            for (auto& [id, n] : c.divergence_nodes) out += fmt::format("    {:<32} {:>6}\n", id, n);
        }
        if (!c.missing.empty()) {
            out += paint("31", fmt::format("  Nodes with missing GPUs ({}):", c.missing.size())) + "\n";
            size_t shown = 0;
            for (auto& m : c.missing) {
                if (o.limit && shown++ == o.limit) {
                    out += fmt::format("    ... {} more\n", c.missing.size() - o.limit);
                    break;
                }
                out += fmt::format("    {:<20} {} of {} GPUs  {}\n", strip_control(m.node), m.seen, m.expected,
                                   strip_control(m.file));
            }
        }
        if (!c.finding_nodes.empty()) {
            out += "  Findings (nodes):\n";
            for (auto& [id, n] : c.finding_nodes)
                out += fmt::format("    {:<7} {:<40} {:>6}\n", to_string(n.severity), id, n.nodes);
        }
        if (!c.unhealthy.empty()) {
            out += paint(c.finding_nodes.empty() ? "33" : "31", fmt::format("  Unhealthy nodes ({}):", c.unhealthy.size())) +
                   "\n";
            size_t shown = 0;
            for (auto& u : c.unhealthy) {
                if (o.limit && shown++ == o.limit) {
                    out += fmt::format("    ... {} more (--format csv lists all)\n", c.unhealthy.size() - o.limit);
                    break;
                }
                out += fmt::format("    {}  ({})\n", strip_control(u.node), strip_control(u.file));
                if (u.source == HealthSource::none) out += fmt::format("      - health unknown: {}\n", strip_control(u.error));
                for (auto& f : u.findings)
                    out += fmt::format("      - {} {}\n", to_string(f.severity), strip_control(short_divergence(f)));
            }
        }
        if (!c.diverging.empty()) {
            out += fmt::format("  Diverging nodes ({}):\n", c.diverging.size());
            size_t shown = 0;
            for (auto& d : c.diverging) {
                if (o.limit && shown++ == o.limit) {
                    out += fmt::format("    ... {} more (--format csv lists all)\n", c.diverging.size() - o.limit);
                    break;
                }
                out += fmt::format("    {}  ({})\n", strip_control(d.node), strip_control(d.file));
                for (auto& f : d.findings) out += fmt::format("      - {}\n", strip_control(short_divergence(f)));
            }
        }
    }

    out += "\n";
    if (r.xids_by_code.empty()) {
        out += "Xid: none logged.\n";
    } else {
        out += "Xid by code (events, nodes):\n";
        size_t max = 0;
        for (auto& [code, n] : r.xids_by_code) max = std::max(max, n);
        for (auto& [code, n] : r.xids_by_code)
            out += fmt::format("  Xid {:<4} {:>6} events  {:>5} nodes  {}\n", code, n, r.xid_nodes_by_code.at(code),
                               bar(n, max));
        out += "Xid by node (most first):\n";
        size_t shown = 0;
        for (auto& x : r.xids_by_node) {
            if (o.limit && shown++ == o.limit) {
                out += fmt::format("  ... {} more (--format csv lists all)\n", r.xids_by_node.size() - o.limit);
                break;
            }
            std::string codes;
            for (auto& [code, n] : x.by_code) codes += fmt::format("{}{}x{}", codes.empty() ? "" : ", ", n, code);
            out += fmt::format("  {:<20} {:>4}  {}\n", strip_control(x.node), x.total, codes);
        }
    }
    out += fmt::format("\nExit {}\n", r.exit_code);
    return out;
}

std::string csv_field(std::string_view s) {
    if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    out += '"';
    return out;
}

std::string render_fleet_csv(const FleetReport& r) {
    std::string out;
    auto row = [&](std::initializer_list<std::string_view> fields) {
        bool first = true;
        for (auto f : fields) {
            if (!first) out += ',';
            first = false;
            out += csv_field(f);
        }
        out += "\r\n";  // RFC 4180 line break
    };
    row({"record", "class", "node", "file", "key", "value", "detail"});
    for (auto& p : r.skipped) row({"skipped", "", "", p.file, "reason", "", p.reason});
    for (auto& [old_file, new_file] : r.superseded) row({"superseded", "", "", old_file, "by", new_file, ""});
    for (auto& c : r.classes) {
        row({"class", c.name, "", "", "nodes", std::to_string(c.nodes),
             fmt::format("conforming={} diverging={}", c.conforming, c.diverging.size())});
        if (!c.review_by.empty())
            row({"class", c.name, "", "", "review_by", c.review_by, c.review_overdue ? "overdue" : "ok"});
        auto spread = [&](std::string_view key, const VersionCounts& counts) {
            for (auto& [v, n] : counts) row({"spread", c.name, "", "", key, v, std::to_string(n)});
        };
        spread("driver", c.drivers);
        spread("kernel", c.kernels);
        spread("vbios", c.vbios);
        spread("cuda", c.cuda);
        spread("fabric_manager", c.fabric_manager);
        for (auto& d : c.diverging)
            for (auto& f : d.findings) row({"divergence", c.name, d.node, d.file, f.id, to_string(f.severity), f.message});
        for (auto& m : c.missing)
            row({"missing_gpus", c.name, m.node, m.file, "gpus", std::to_string(m.seen), std::to_string(m.expected)});
        for (auto& u : c.unhealthy) {
            if (u.source == HealthSource::none) row({"health_unknown", c.name, u.node, u.file, "", "", u.error});
            for (auto& f : u.findings) row({"finding", c.name, u.node, u.file, f.id, to_string(f.severity), f.message});
        }
    }
    for (auto& x : r.xids_by_node)
        for (auto& [code, n] : x.by_code)
            row({"xid", x.node_class, x.node, x.file, std::to_string(code), std::to_string(n), ""});
    return out;
}

}  // namespace gpudx

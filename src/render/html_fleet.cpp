// The fleet page (render/html.hpp): nodes by class, a heat map of classes and of the worst nodes against the checks
// they fail, the versions per class, and the findings most nodes share. Every list is aggregated or cut to a bound
// (FleetHtmlOptions), the rest counted, so 10,000 nodes make a page of a few hundred kilobytes.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "render/html_parts.hpp"

namespace gpudx {
namespace {

using html::esc;
using html::number;

struct Check {
    std::string id;
    size_t nodes = 0;
    bool error = false;  // an error finding; otherwise a warning or a divergence from the class
    std::string layer;
};

// Every check some node fails, most nodes first: finding ids of the nodes' health and divergences from the matrix.
std::vector<Check> checks_of(const FleetReport& r) {
    std::map<std::string, Check> by_id;
    for (auto& c : r.classes) {
        for (auto& [id, count] : c.finding_nodes) {
            auto& k = by_id[id];
            k.id = id;
            k.nodes += count.nodes;
            k.error = k.error || count.severity == Severity::error;
            k.layer = to_string(count.layer);
        }
        for (auto& [id, nodes] : c.divergence_nodes) {
            auto& k = by_id[id];
            k.id = id;
            k.nodes += nodes;
            if (k.layer.empty()) k.layer = "matrix";
        }
    }
    std::vector<Check> out;
    for (auto& [id, k] : by_id) out.push_back(k);
    std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.nodes > b.nodes; });
    return out;
}

// Nodes of a class that fail: an error finding, or lost cards.
size_t failing_nodes(const FleetClassReport& c) {
    std::set<std::string> nodes;
    for (auto& u : c.unhealthy)
        for (auto& f : u.findings)
            if (f.severity == Severity::error) nodes.insert(u.node);
    for (auto& m : c.missing) nodes.insert(m.node);
    return nodes.size();
}

std::string heat_colour(double fraction, bool error) {
    double t = std::clamp(fraction, 0.0, 1.0);
    if (t <= 0) return "#f5f5f5";
    t = 0.25 + 0.75 * t;  // one node in ten thousand still shows
    int r0 = error ? 198 : 178, g0 = error ? 40 : 106, b0 = error ? 40 : 0;
    return fmt::format("#{:02x}{:02x}{:02x}", static_cast<int>(255 - t * (255 - r0)), static_cast<int>(255 - t * (255 - g0)),
                       static_cast<int>(255 - t * (255 - b0)));
}

std::string summary_section(const FleetReport& r) {
    size_t conforming = 0, drifted = 0, failing = 0, unknown = 0;
    for (auto& c : r.classes) {
        conforming += c.conforming;
        drifted += c.diverging.size();
        failing += failing_nodes(c);
        unknown += c.health_unknown;
    }
    const char* v = r.exit_code == 0 ? "pass" : r.exit_code == 1 ? "fail" : "warn";
    std::string out = fmt::format(
        "<header>\n<h1>gpudx fleet — {} node(s)</h1>\n<p class=\"verdict v-{}\" id=\"verdict\"><span class=\"badge s-{}\">{}"
        "</span> {} conforming, {} drifted from their class, {} failing, {} of unknown health; {} file(s) skipped (exit {})"
        "</p>\n",
        r.nodes, v, v, r.exit_code == 0 ? "all conform" : r.exit_code == 1 ? "failing" : "drift", conforming, drifted,
        failing, unknown, r.skipped.size(), r.exit_code);
    out += fmt::format("<dl class=\"meta\"><dt>matrix</dt><dd>{}</dd><dt>generated</dt><dd>{}</dd><dt>inputs</dt><dd>{} "
                       "file(s), {} node(s) read in {:.2f} s</dd><dt>health from</dt><dd>{} saved diagnoses, {} computed "
                       "from snapshots, {} unknown</dd><dt>page made by</dt><dd>gpudx {}</dd></dl>\n</header>\n",
                       esc(r.matrix_path), esc(r.generated_at), r.inputs, r.nodes, r.read_seconds, r.health_saved,
                       r.health_computed, r.health_unknown, GPUDX_VERSION);
    return out;
}

std::string classes_section(const FleetReport& r) {
    std::string out = "<section id=\"classes\">\n<h2>Nodes by class</h2>\n";
    if (r.classes.empty()) return out + "<p>No node was read.</p>\n</section>\n";
    // A stacked bar per class: conforming, drifted, failing, unknown; the table under it holds the numbers.
    constexpr double kLabelW = 220, kPlotW = 640, kRow = 24;
    size_t biggest = 1;
    for (auto& c : r.classes) biggest = std::max(biggest, c.nodes);
    std::string svg = fmt::format("<div class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"{:.0f}\" "
                                  "height=\"{:.0f}\" aria-label=\"nodes per class by state\">\n",
                                  kLabelW + kPlotW + 80, r.classes.size() * kRow + 24);
    std::string table = "<table><tr><th>class</th><th>owner</th><th>nodes</th><th>conforming</th><th>drifted</th><th>"
                        "failing</th><th>health unknown</th><th>fewer GPUs</th><th>review by</th></tr>\n";
    for (size_t i = 0; i < r.classes.size(); ++i) {
        auto& c = r.classes[i];
        size_t failing = failing_nodes(c), drifted = c.diverging.size();
        size_t rest = c.nodes > c.conforming ? c.nodes - c.conforming : 0;
        size_t other = rest > failing ? rest - failing : 0;  // drifted or warned, not failing
        double y = 4 + i * kRow, x = kLabelW;
        svg += fmt::format("<text x=\"0\" y=\"{:.0f}\" font-size=\"12\">{}</text>\n", y + 13, esc(c.name));
        for (auto [count, colour, what] : {std::tuple{c.conforming, html::kGreen, "conforming"},
                                           std::tuple{other, html::kAmber, "drifted or warned"},
                                           std::tuple{failing, html::kRed, "failing"}}) {
            double w = static_cast<double>(count) / biggest * kPlotW;
            if (w > 0)
                svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.0f}\" width=\"{:.1f}\" height=\"{:.0f}\" fill=\"{}\"><title>{}: {} "
                                   "{}</title></rect>\n",
                                   x, y, w, kRow - 6, colour, esc(c.name), count, what);
            x += w;
        }
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\" font-size=\"11\">{}</text>\n", x + 4, y + 13, c.nodes);
        table += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}"
                             "</td><td class=\"num {}\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class="
                             "\"{}\">{}</td></tr>\n",
                             esc(c.name), esc(c.owner), c.nodes, c.conforming, drifted, failing ? "bad" : "", failing,
                             c.health_unknown, c.missing.size(), c.review_overdue ? "bad" : "",
                             esc(c.review_by.empty() ? "—" : c.review_by + (c.review_overdue ? " (overdue)" : "")));
    }
    svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"11\" fill=\"#555\">green conforming · amber drifted or "
                       "warned · red failing</text>\n",
                       kLabelW, r.classes.size() * kRow + 18);
    return out + svg + "</svg></div>\n" + table + "</table>\n</section>\n";
}

// Classes against checks: the share of each class's nodes that fails each check.
std::string class_heatmap(const FleetReport& r, const std::vector<Check>& checks, const FleetHtmlOptions& o) {
    std::string out = "<section id=\"heatmap\">\n<h2>Checks by class</h2>\n";
    if (checks.empty()) return out + "<p>No node fails any check.</p>\n</section>\n";
    size_t cols = std::min(checks.size(), o.checks);
    constexpr double kLabelW = 220, kCell = 26, kHead = 170;
    std::string svg = fmt::format("<p>Each cell: the share of the class's nodes with that finding (red: an error, amber: a "
                                  "warning or a divergence from the class); the {} checks most nodes fail{}.</p>\n<div "
                                  "class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"{:.0f}\" "
                                  "height=\"{:.0f}\" aria-label=\"share of nodes failing each check, per class\">\n",
                                  cols, checks.size() > cols ? fmt::format(" (of {})", checks.size()) : "",
                                  kLabelW + cols * kCell + 40, kHead + r.classes.size() * kCell + 10);
    std::string table = "<table class=\"sr\"><caption>Nodes failing each check, per class</caption><tr><th>class</th><th>"
                        "check</th><th>nodes</th><th>of</th></tr>\n";
    for (size_t j = 0; j < cols; ++j)
        svg += fmt::format("<text transform=\"translate({:.1f} {:.0f}) rotate(-55)\" font-size=\"11\">{}</text>\n",
                           kLabelW + j * kCell + kCell / 2 + 3, kHead - 4, esc(checks[j].id));
    for (size_t i = 0; i < r.classes.size(); ++i) {
        auto& c = r.classes[i];
        double y = kHead + i * kCell;
        svg += fmt::format("<text x=\"0\" y=\"{:.0f}\" font-size=\"12\">{}</text>\n", y + 17, esc(c.name));
        for (size_t j = 0; j < cols; ++j) {
            size_t n = 0;
            if (auto it = c.finding_nodes.find(checks[j].id); it != c.finding_nodes.end()) n += it->second.nodes;
            if (auto it = c.divergence_nodes.find(checks[j].id); it != c.divergence_nodes.end()) n += it->second;
            double share = c.nodes ? static_cast<double>(n) / c.nodes : 0;
            svg += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"{}\"><title>{} · {}: {} "
                               "of {} node(s)</title></rect>\n",
                               kLabelW + j * kCell, y, kCell - 2, kCell - 2, heat_colour(share, checks[j].error), esc(c.name),
                               esc(checks[j].id), n, c.nodes);
            if (n > 0) table += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", esc(c.name),
                                            esc(checks[j].id), n, c.nodes);
        }
    }
    return out + svg + "</svg></div>\n" + table + "</table>\n</section>\n";
}

// The worst nodes against the checks: at most o.node_rows rows, those failing most checks first, the rest counted.
std::string node_heatmap(const FleetReport& r, const std::vector<Check>& checks, const FleetHtmlOptions& o) {
    struct Row {
        std::string node, node_class;
        std::map<std::string, Severity> failed;
        size_t errors = 0;
    };
    std::map<std::pair<std::string, std::string>, Row> rows;
    for (auto& c : r.classes) {
        // Unhealthy and diverging nodes alike: a row per node, each check at the worst severity it had.
        auto add_rows = [&](auto& nodes) {
            for (auto& n : nodes) {
                auto& row = rows[{c.name, n.node}];
                row.node = n.node;
                row.node_class = c.name;
                for (auto& f : n.findings) {
                    auto& s = row.failed[f.id];
                    s = std::max(s, f.severity);
                }
            }
        };
        add_rows(c.unhealthy);
        add_rows(c.diverging);
    }
    std::vector<Row> sorted;
    for (auto& [k, row] : rows) {
        for (auto& [id, s] : row.failed) row.errors += s == Severity::error;
        sorted.push_back(std::move(row));
    }
    std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) {
        return a.errors != b.errors ? a.errors > b.errors : a.failed.size() > b.failed.size();
    });
    std::string out = "<section id=\"nodes\">\n<h2>Nodes against checks</h2>\n";
    if (sorted.empty()) return out + "<p>Every node conforms.</p>\n</section>\n";
    size_t shown = std::min(sorted.size(), o.node_rows), cols = std::min(checks.size(), o.checks);
    out += fmt::format("<p>{} node(s) fail a check; the {} failing most are drawn{}. Red: an error, amber: a warning or a "
                       "divergence.</p>\n",
                       sorted.size(), shown,
                       sorted.size() > shown ? fmt::format(", {} more are counted in the class heat map above and listed "
                                                           "by <code>gpudx fleet report --format csv</code>",
                                                           sorted.size() - shown)
                                             : "");
    constexpr double kLabelW = 300, kCell = 14, kHead = 170;
    std::string svg = fmt::format("<div class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"{:.0f}\" "
                                  "height=\"{:.0f}\" aria-label=\"nodes against the checks they fail\">\n",
                                  kLabelW + cols * kCell + 40, kHead + shown * kCell + 10);
    for (size_t j = 0; j < cols; ++j)
        svg += fmt::format("<text transform=\"translate({:.1f} {:.0f}) rotate(-80)\" font-size=\"10\">{}</text>\n",
                           kLabelW + j * kCell + kCell / 2 + 3, kHead - 4, esc(checks[j].id));
    std::string table = "<table class=\"sr\"><caption>Nodes and the checks they fail</caption><tr><th>node</th><th>class"
                        "</th><th>checks failed</th></tr>\n";
    for (size_t i = 0; i < shown; ++i) {
        auto& row = sorted[i];
        double y = kHead + i * kCell;
        svg += fmt::format("<text x=\"0\" y=\"{:.0f}\" font-size=\"11\">{} ({})</text>\n", y + 11, esc(row.node),
                           esc(row.node_class));
        for (size_t j = 0; j < cols; ++j) {
            auto it = row.failed.find(checks[j].id);
            if (it == row.failed.end()) continue;
            svg += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"{}\"><title>{}: {} "
                               "{}</title></rect>\n",
                               kLabelW + j * kCell, y, kCell - 1, kCell - 1,
                               it->second == Severity::error ? html::kRed : html::kAmber, esc(row.node), esc(checks[j].id),
                               to_string(it->second));
        }
        std::string ids;
        for (auto& [id, s] : row.failed) ids += (ids.empty() ? "" : ", ") + esc(id) + " (" + to_string(s) + ")";
        table += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", esc(row.node), esc(row.node_class), ids);
    }
    return out + svg + "</svg></div>\n" + table + "</table>\n</section>\n";
}

std::string versions_table(const char* what, const VersionCounts& v, size_t total) {
    if (v.empty()) return {};
    std::vector<std::pair<std::string, size_t>> sorted(v.begin(), v.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.second > b.second; });
    std::string out = fmt::format("<table><tr><th>{}</th><th>count</th><th></th></tr>\n", esc(what));
    size_t shown = 0;
    for (auto& [version, count] : sorted) {
        if (++shown > 20) {
            out += fmt::format("<tr><td colspan=\"3\">{} more version(s)</td></tr>\n", sorted.size() - 20);
            break;
        }
        double w = total ? 120.0 * count / total : 0;
        out += fmt::format("<tr><td class=\"mono\">{}</td><td class=\"num\">{}</td><td><svg width=\"124\" height=\"10\" "
                           "aria-hidden=\"true\"><rect width=\"{:.1f}\" height=\"10\" fill=\"{}\"/></svg></td></tr>\n",
                           esc(version.empty() ? "unknown" : version), count, w,
                           sorted.size() > 1 && &version != &sorted.front().first ? html::kAmber : html::kBlue);
    }
    return out + "</table>\n";
}

std::string versions_section(const FleetReport& r) {
    std::string out = "<section id=\"versions\">\n<h2>Versions per class</h2>\n<p>More than one version in a class is drift; "
                      "the most common is drawn blue, the others amber.</p>\n";
    for (auto& c : r.classes) {
        size_t gpus = 0;
        for (auto& [v, n] : c.vbios) gpus += n;
        out += fmt::format("<h3>{} ({} nodes)</h3>\n<div style=\"display:flex;flex-wrap:wrap;gap:14px\">\n", esc(c.name), c.nodes);
        out += versions_table("driver", c.drivers, c.nodes);
        out += versions_table("kernel", c.kernels, c.nodes);
        out += versions_table("CUDA", c.cuda, c.nodes);
        out += versions_table("fabric manager", c.fabric_manager, c.nodes);
        out += versions_table("VBIOS (per GPU)", c.vbios, gpus);
        out += "</div>\n";
    }
    return out + "</section>\n";
}

std::string shared_findings_section(const FleetReport& r, const std::vector<Check>& checks) {
    std::string out = "<section id=\"shared\">\n<h2>What most nodes share</h2>\n";
    if (checks.empty()) return out + "<p>No finding on any node.</p>\n</section>\n";
    out += "<table><tr><th>check</th><th>layer</th><th>severity</th><th>nodes</th><th>share of the fleet</th></tr>\n";
    for (size_t i = 0; i < checks.size() && i < 30; ++i) {
        auto& k = checks[i];
        out += fmt::format("<tr><td class=\"mono\">{}</td><td>{}</td><td><span class=\"badge s-{}\">{}</span></td><td class="
                           "\"num\">{}</td><td class=\"num\">{}%</td></tr>\n",
                           esc(k.id), esc(k.layer), k.error ? "error" : "warning", k.error ? "error" : "warning", k.nodes,
                           number(r.nodes ? 100.0 * k.nodes / r.nodes : 0));
    }
    return out + "</table>\n</section>\n";
}

// Per class, the nodes themselves, collapsed and cut to a bound.
std::string class_details_section(const FleetReport& r, const FleetHtmlOptions& o) {
    std::string out = "<section id=\"details\">\n<h2>Nodes per class</h2>\n";
    for (auto& c : r.classes) {
        out += fmt::format("<details><summary>{}: {} unhealthy, {} diverging, {} with fewer GPUs</summary>\n", esc(c.name),
                           c.unhealthy.size(), c.diverging.size(), c.missing.size());
        auto more = [](size_t total, size_t shown) {
            return total > shown ? fmt::format("<p>{} more not listed (--format csv lists every one).</p>\n", total - shown)
                                 : std::string();
        };
        if (!c.unhealthy.empty()) {
            out += "<table><tr><th>node</th><th>health from</th><th>findings</th></tr>\n";
            size_t n = 0;
            for (auto& u : c.unhealthy) {
                if (n++ >= o.node_rows) break;
                std::string fs = u.source == HealthSource::none ? esc("unknown: " + u.error) : "";
                for (auto& f : u.findings) fs += (fs.empty() ? "" : "<br>") + esc(std::string(to_string(f.severity)) + " " + f.id + ": " + f.message);
                out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", esc(u.node), to_string(u.source), fs);
            }
            out += "</table>\n" + more(c.unhealthy.size(), o.node_rows);
        }
        if (!c.missing.empty()) {
            out += "<table><tr><th>node</th><th>GPUs seen</th><th>expected</th></tr>\n";
            size_t n = 0;
            for (auto& m : c.missing) {
                if (n++ >= o.node_rows) break;
                out += fmt::format("<tr><td>{}</td><td class=\"num bad\">{}</td><td class=\"num\">{}</td></tr>\n", esc(m.node),
                                   m.seen, m.expected);
            }
            out += "</table>\n" + more(c.missing.size(), o.node_rows);
        }
        out += "</details>\n";
    }
    if (!r.skipped.empty()) {
        out += fmt::format("<details><summary>{} file(s) skipped</summary>\n<table><tr><th>file</th><th>why</th></tr>\n",
                           r.skipped.size());
        size_t n = 0;
        for (auto& p : r.skipped) {
            if (n++ >= o.node_rows) break;
            out += fmt::format("<tr><td class=\"mono\">{}</td><td>{}</td></tr>\n", esc(p.file), esc(p.reason));
        }
        out += "</table>\n</details>\n";
    }
    if (!r.xids_by_code.empty()) {
        out += "<h3>Xid events by code</h3>\n<table><tr><th>Xid</th><th>events</th><th>nodes</th></tr>\n";
        for (auto& [code, count] : r.xids_by_code)
            out += fmt::format("<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n", code,
                               count, r.xid_nodes_by_code.count(code) ? r.xid_nodes_by_code.at(code) : 0);
        out += "</table>\n";
    }
    return out + "</section>\n";
}

}  // namespace

std::string render_fleet_html(const FleetReport& r, const FleetHtmlOptions& o) {
    std::string out = html::page_begin(fmt::format("gpudx fleet — {} nodes", r.nodes));
    out += summary_section(r);
    out += "<nav><a href=\"#classes\">classes</a> · <a href=\"#heatmap\">checks by class</a> · <a href=\"#nodes\">nodes"
           "</a> · <a href=\"#versions\">versions</a> · <a href=\"#shared\">shared findings</a> · <a href=\"#details\">"
           "per class</a></nav>\n";
    if (r.nodes == 0)
        out += "<p class=\"note\">The fleet is empty: no snapshot could be read. Nothing here says any node is healthy.</p>\n";
    auto checks = checks_of(r);
    out += classes_section(r);
    out += class_heatmap(r, checks, o);
    out += node_heatmap(r, checks, o);
    out += versions_section(r);
    out += shared_findings_section(r, checks);
    out += class_details_section(r, o);
    out += "<footer>Every chart's figures are in the table beside it. Made by gpudx " + esc(GPUDX_VERSION) + ".</footer>\n";
    return out + html::page_end();
}

}  // namespace gpudx

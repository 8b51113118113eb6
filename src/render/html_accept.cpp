// The acceptance run drawn (render/html.hpp): per GPU each bandwidth as a bar against its floor, the GPU-to-GPU
// copies as a heat map of any size, the memory test per GPU, and every sub-test as a table.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "render/html_parts.hpp"

namespace gpudx::html {
namespace {

struct Bandwidth {
    const char* test;    // gpu.d2d
    const char* figure;  // d2d_gbps
    const char* title;
    std::optional<double> AcceptThresholds::*floor;
};
constexpr Bandwidth kBandwidths[] = {
    {"gpu.d2d", "d2d_gbps", "device to device (GB/s, read + write)", &AcceptThresholds::min_d2d_gbps},
    {"gpu.h2d", "h2d_gbps", "host to device (GB/s, pinned)", &AcceptThresholds::min_h2d_gbps},
    {"gpu.d2h", "d2h_gbps", "device to host (GB/s, pinned)", &AcceptThresholds::min_d2h_gbps},
};

const char* status_colour(TestStatus s) {
    switch (s) {
        case TestStatus::pass: return kGreen;
        case TestStatus::warn: return kAmber;
        case TestStatus::fail: return kRed;
        case TestStatus::not_run: return kGrey;
    }
    return kGrey;
}

// The GPUs of the record in ordinal order; those only sub-tests name come after, so no result is lost.
std::vector<std::pair<std::string, std::string>> gpus_of(const AcceptReport& r) {
    std::vector<std::pair<std::string, std::string>> out;  // (uuid, pci)
    auto gpus = r.gpus;
    std::sort(gpus.begin(), gpus.end(), [](auto& a, auto& b) { return a.ordinal < b.ordinal; });
    for (auto& g : gpus) out.emplace_back(g.uuid, g.pci);
    for (auto& t : r.tests)
        for (size_t i = 0; i < t.subjects.size(); ++i)
            if (std::none_of(out.begin(), out.end(), [&](auto& g) { return g.first == t.subjects[i]; }))
                out.emplace_back(t.subjects[i], i < t.pci.size() ? t.pci[i] : "");
    return out;
}

std::string gpu_label(const std::pair<std::string, std::string>& g) {
    return short_id(g.first) + " " + g.second;
}

// A GPU's figure of one sub-test in a record; nullopt when the record has none.
std::optional<double> figure_of(const AcceptReport& r, const Bandwidth& b, const std::string& uuid) {
    for (auto& t : r.tests) {
        if (t.id != b.test || t.subjects.empty() || t.subjects[0] != uuid) continue;
        if (auto it = t.figures.find(b.figure); it != t.figures.end()) return it->second;
    }
    return std::nullopt;
}

std::string bars(const AcceptReport& r, const std::vector<std::pair<std::string, std::string>>& gpus,
                 const Bandwidth& b, const AcceptReport* reference) {
    struct Bar {
        std::string uuid, pci;
        std::optional<double> value;
        std::optional<double> floor;
        TestStatus status = TestStatus::not_run;
        std::string reason;
        std::optional<double> before;  // the reference run's figure
    };
    std::vector<Bar> rows;
    for (auto& g : gpus) {
        Bar bar{g.first, g.second, std::nullopt, r.thresholds.*b.floor, TestStatus::not_run, "not in the record",
                reference ? figure_of(*reference, b, g.first) : std::nullopt};
        for (auto& t : r.tests) {
            if (t.id != b.test || t.subjects.empty() || t.subjects[0] != g.first) continue;
            bar.status = t.status;
            bar.reason = t.reason;
            if (auto it = t.figures.find(b.figure); it != t.figures.end()) bar.value = it->second;
            if (auto it = t.thresholds.find(b.figure); it != t.thresholds.end()) bar.floor = it->second;
        }
        rows.push_back(std::move(bar));
    }
    if (std::none_of(rows.begin(), rows.end(), [](auto& x) { return x.value.has_value(); })) return {};
    double scale = 0;
    bool any_floor = false;
    for (auto& x : rows) {
        scale = std::max({scale, x.value.value_or(0), x.floor.value_or(0), x.before.value_or(0)});
        any_floor = any_floor || x.floor.has_value();
    }
    if (scale <= 0) scale = 1;
    scale *= 1.08;
    constexpr double kLabelW = 230, kPlotW = 560, kRow = 22;
    double height = rows.size() * kRow + 30;
    std::string svg = fmt::format("<h3>{}</h3>\n<div class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" "
                                  "width=\"{:.0f}\" height=\"{:.0f}\" aria-label=\"{} per GPU\">\n",
                                  esc(b.title), kLabelW + kPlotW + (reference ? 260 : 90), height, esc(b.title));
    std::string table = fmt::format("<table class=\"sr\"><caption>{} per GPU</caption><tr><th>GPU UUID"
                                    "</th><th>PCI address</th><th>GB/s</th><th>floor GB/s</th><th>reference run GB/s</th><th>status</th><th>reason"
                                    "</th></tr>\n",
                                    esc(b.title));
    for (size_t i = 0; i < rows.size(); ++i) {
        auto& x = rows[i];
        double y = 6 + i * kRow;
        svg += fmt::format("<text x=\"0\" y=\"{:.0f}\" font-size=\"12\">{}</text>\n", y + 13, esc(gpu_label({x.uuid, x.pci})));
        if (x.value) {
            double w = *x.value / scale * kPlotW;
            svg += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.1f}\" height=\"{:.0f}\" fill=\"{}\"><title>{} {}: "
                               "{} GB/s</title></rect>\n",
                               kLabelW, y, w, kRow - 6, status_colour(x.status), esc(x.uuid), esc(x.pci), number(*x.value));
            svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"11\">{}</text>\n", kLabelW + w + 4, y + 12,
                               number(*x.value));
        } else {
            svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"11\" fill=\"{}\">{}</text>\n", kLabelW, y + 12,
                               kGrey, esc(x.status == TestStatus::not_run ? "not run" : x.reason));
        }
        if (x.floor) {
            double fx = kLabelW + *x.floor / scale * kPlotW;
            svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.0f}\" y2=\"{2:.0f}\" stroke=\"#000\" "
                               "stroke-width=\"2\" stroke-dasharray=\"3 2\"/>\n",
                               fx, y - 2, y + kRow - 4);
        }
        if (x.before) {
            // The reference run's figure: a blue tick; a drop of more than 5 % from it is said in red beside the bar.
            double bx = kLabelW + *x.before / scale * kPlotW;
            svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.0f}\" y2=\"{2:.0f}\" stroke=\"{3}\" "
                               "stroke-width=\"3\"><title>reference run: {4} GB/s</title></line>\n",
                               bx, y - 3, y + kRow - 3, kBlue, number(*x.before));
            if (x.value && *x.value < *x.before * 0.95)
                svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"11\" fill=\"{}\">{:.0f}% below the reference run"
                                   "</text>\n",
                                   kLabelW + kPlotW + 50, y + 12, kRed, 100 * (1 - *x.value / *x.before));
        }
        table += fmt::format("<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td class=\"num\">{}</td><td class="
                             "\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>\n",
                             esc(x.uuid), esc(x.pci), x.value ? number(*x.value) : "—", x.floor ? number(*x.floor) : "—",
                             x.before ? number(*x.before) : "—", to_string(x.status), esc(x.reason));
    }
    svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"11\" fill=\"#555\">{}</text>\n", kLabelW, height - 4,
                       std::string(any_floor ? "dashed line: the floor the run was held to" : "no floor in this record")
                           + (reference ? "; blue tick: the reference run" : any_floor ? "" : ": the bars compare the GPUs with each other"));
    // The figures as a table: for screen readers and grep; the bars show them to the eye.
    return svg + "</svg></div>\n" + table + "</table>\n";
}

// GPU-to-GPU copies: cell (row i, column j) is the rate from GPU i to GPU j.
std::string p2p_heatmap(const AcceptReport& r, const std::vector<std::pair<std::string, std::string>>& gpus) {
    size_t n = gpus.size();
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < n; ++i) index[gpus[i].first] = i;
    struct Cell {
        std::optional<double> gbps;
        TestStatus status = TestStatus::not_run;
        bool tested = false;
        std::string link;
    };
    std::vector<Cell> cells(n * n);
    bool any = false;
    for (auto& t : r.tests) {
        if (t.id != "pair.copy" || t.subjects.size() != 2) continue;
        auto a = index.find(t.subjects[0]), b = index.find(t.subjects[1]);
        if (a == index.end() || b == index.end()) continue;
        auto link = t.details.count("link") ? t.details.at("link") : std::string();
        for (auto [from, to, key] : {std::tuple{a->second, b->second, "a_to_b_gbps"},
                                     std::tuple{b->second, a->second, "b_to_a_gbps"}}) {
            auto& c = cells[from * n + to];
            c.tested = true;
            c.status = t.status;
            c.link = link;
            if (auto it = t.figures.find(key); it != t.figures.end()) c.gbps = it->second;
            any = true;
        }
    }
    std::string out = "<h3>GPU to GPU copies</h3>\n";
    if (!any) return out + "<p>No GPU-to-GPU copy in this record (one GPU, or pairs not permitted).</p>\n";
    double max = 0;
    for (auto& c : cells) max = std::max(max, c.gbps.value_or(0));
    if (max <= 0) max = 1;
    double cell = std::clamp(560.0 / n, 8.0, 56.0);
    double label_w = n <= 32 ? 210 : 60;
    double size = label_w + cell * n;
    bool values_inside = cell >= 40;
    std::string svg = fmt::format("<p>Row: from; column: to. Darker is faster (the fastest, {} GB/s, is darkest); grey: "
                                  "not tested; a red border: the pair failed.</p>\n<div class=\"chart\"><svg xmlns=\"http:"
                                  "//www.w3.org/2000/svg\" role=\"img\" width=\"{:.0f}\" height=\"{:.0f}\" aria-label=\"GPU "
                                  "to GPU copy rates, {} GPUs\">\n",
                                  number(max), size + 10 + (n <= 32 ? 120 : 20), size + 10, n);
    auto label = [&](size_t i) { return n <= 32 ? fmt::format("{} {}", i, gpu_label(gpus[i])) : std::to_string(i); };
    for (size_t i = 0; i < n; ++i) {
        svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" font-size=\"{:.0f}\" text-anchor=\"end\">{}</text>\n", label_w - 4,
                           label_w + i * cell + cell / 2 + 4, std::min(11.0, cell * 0.8), esc(label(i)));
        svg += fmt::format("<text transform=\"translate({:.1f} {:.0f}) rotate(-60)\" font-size=\"{:.0f}\">{}</text>\n",
                           label_w + i * cell + cell / 2 + 3, label_w - 4, std::min(11.0, cell * 0.8), esc(label(i)));
    }
    std::string table = "<table class=\"sr\"><caption>GPU to GPU copy rates</caption><tr><th>from UUID</th><th>from PCI"
                        "</th><th>to UUID</th><th>to PCI</th><th>GB/s</th><th>link</th><th>status</th></tr>\n";
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j) {
            const auto& c = cells[i * n + j];
            double x = label_w + j * cell, y = label_w + i * cell;
            std::string fill = "#e0e0e0";
            if (c.gbps) {
                // Light to dark blue with the rate: 0 is white, the fastest pair full colour.
                double t = std::clamp(*c.gbps / max, 0.0, 1.0);
                int rr = static_cast<int>(255 - t * (255 - 21)), gg = static_cast<int>(255 - t * (255 - 101)),
                    bb = static_cast<int>(255 - t * (255 - 192));
                fill = fmt::format("#{:02x}{:02x}{:02x}", rr, gg, bb);
            }
            bool failed = c.tested && c.status == TestStatus::fail;
            svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" stroke=\"{}\" "
                               "stroke-width=\"{}\"><title>{} → {}: {}</title></rect>\n",
                               x, y, cell - 1, cell - 1, fill, failed ? kRed : "#fff", failed ? 2 : 0.5,
                               esc(gpu_label(gpus[i])), esc(gpu_label(gpus[j])),
                               c.gbps ? number(*c.gbps) + " GB/s" : i == j ? std::string("itself") : std::string("not tested"));
            if (values_inside && c.gbps)
                svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"middle\" fill=\"{}\">{}"
                                   "</text>\n",
                                   x + cell / 2, y + cell / 2 + 4, *c.gbps / max > 0.55 ? "#fff" : "#000", number(*c.gbps));
            if (c.tested)
                table += fmt::format("<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td "
                                     "class=\"mono\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>\n",
                                     esc(gpus[i].first), esc(gpus[i].second), esc(gpus[j].first), esc(gpus[j].second),
                                     c.gbps ? number(*c.gbps) : "—", esc(c.link), to_string(c.status));
        }
    return out + svg + "</svg></div>\n" + table + "</table>\n";
}

std::string memory_table(const AcceptReport& r) {
    std::string out = "<h3>Memory test</h3>\n";
    std::string rows;
    auto fig = [](const SubTest& t, const char* k) {
        auto it = t.figures.find(k);
        return it == t.figures.end() ? std::string("—") : number(it->second);
    };
    for (auto& t : r.tests) {
        if (t.id != "gpu.memory") continue;
        rows += fmt::format("<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td><span class=\"badge s-{}\">{}</span>"
                            "</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num {}\">{}</td><td class="
                            "\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
                            esc(t.subjects.empty() ? "" : t.subjects[0]), esc(t.pci.empty() ? "" : t.pci[0]),
                            to_string(t.status), to_string(t.status), fig(t, "tested_gib"), fig(t, "patterns"),
                            t.figures.count("errors") && t.figures.at("errors") > 0 ? "bad" : "", fig(t, "errors"),
                            fig(t, "read_gbps"), fig(t, "write_gbps"), esc(t.reason));
    }
    if (rows.empty()) return out + "<p>No memory test in this record.</p>\n";
    return out + "<table><tr><th>GPU UUID</th><th>PCI address</th><th>status</th><th>tested GiB</th><th>patterns</th>"
                 "<th>errors</th><th>read GB/s</th><th>write GB/s</th><th>reason</th></tr>\n" +
           rows + "</table>\n";
}

}  // namespace

std::string accept_section(const AcceptReport& r, std::string_view source, const AcceptReport* reference,
                           std::string_view reference_source) {
    std::string v = r.verdict.empty() ? "unknown" : r.verdict;
    std::string out = "<section id=\"accept\">\n<h2>Acceptance run</h2>\n";
    out += fmt::format("<p class=\"verdict v-{0}\"><span class=\"badge s-{0}\">{0}</span> {1} run of {2} GPU(s) on {3}, "
                       "started {4} (exit {5}; {6:.1f} s)</p>\n",
                       esc(v), esc(r.mode), r.gpus.size(), esc(r.node.empty() ? "unknown node" : r.node),
                       esc(r.started_at), r.exit_code, r.wall_ms / 1000);
    out += fmt::format("<dl class=\"meta\"><dt>record</dt><dd>{}</dd><dt>driver</dt><dd>{}</dd><dt>kernel</dt><dd>{}</dd>"
                       "<dt>floors from</dt><dd>{}</dd><dt>allocation</dt><dd>{}</dd></dl>\n",
                       esc(source), esc(r.driver_version), esc(r.kernel), esc(r.thresholds_source),
                       esc(r.allocation_source.empty() ? "none" : r.allocation_source + ": " + [&] {
                           std::string a;
                           for (auto& x : r.allocation) a += (a.empty() ? "" : ",") + x;
                           return a;
                       }()));
    auto gpus = gpus_of(r);
    if (reference)
        out += fmt::format("<p>Compared with the reference run {} of {} (blue ticks).</p>\n", esc(reference_source),
                           esc(reference->started_at));
    for (auto& b : kBandwidths) out += bars(r, gpus, b, reference);
    out += p2p_heatmap(r, gpus);
    out += memory_table(r);
    out += "<details><summary>Every sub-test</summary>\n<table><tr><th>test</th><th>GPUs</th><th>status</th><th>required"
           "</th><th>ms</th><th>reason</th></tr>\n";
    for (auto& t : r.tests) {
        std::string who;
        for (size_t i = 0; i < t.subjects.size(); ++i)
            who += (who.empty() ? "" : "<br>") + esc(t.subjects[i]) + " " + esc(i < t.pci.size() ? t.pci[i] : "");
        out += fmt::format("<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td><span class=\"badge s-{}\">{}</span>"
                           "</td><td>{}</td><td class=\"num\">{:.1f}</td><td>{}</td></tr>\n",
                           esc(t.id), who, to_string(t.status), to_string(t.status), t.required ? "yes" : "no",
                           t.duration_ms, esc(t.reason));
    }
    return out + "</table>\n</details>\n</section>\n";
}

}  // namespace gpudx::html

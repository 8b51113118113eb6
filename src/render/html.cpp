// The node page (render/html.hpp): header and verdict, what the input lacked, the layers with the failure
// boundary, the findings, the identity table; the drawings are render/html_topology.cpp, html_accept.cpp and
// html_events.cpp.
#include "render/html.hpp"

#include <ctime>
#include <utility>

#include <fmt/format.h>

#include "core/text.hpp"
#include "render/html_parts.hpp"

namespace gpudx {

std::string html_escape(std::string_view text) {
    // Control characters first (a terminal sequence in a process name means nothing on a page), then UTF-8
    // repaired, so every byte that reaches the page is text a browser shows as written.
    std::string clean = sanitize_utf8(strip_control(text));
    std::string out;
    out.reserve(clean.size() + clean.size() / 8);
    for (char c : clean) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

namespace html {

namespace {

// One style sheet for every page: system fonts only (nothing to fetch), colours that survive printing in grey.
constexpr std::string_view kStyle = R"css(
:root{--red:#c62828;--amber:#b26a00;--green:#2e7d32;--grey:#757575;--line:#d0d0d0;--soft:#f5f5f5}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1a1a1a;margin:0 auto;padding:16px 24px;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
code,.mono,td.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px}
table{border-collapse:collapse;margin:6px 0 10px}th,td{border:1px solid var(--line);padding:3px 7px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{font-size:17px;margin:8px 0;padding:8px 12px;border-left:6px solid var(--grey);background:var(--soft)}
.v-healthy,.v-pass{border-color:var(--green)}.v-degraded,.v-warn{border-color:var(--amber)}.v-unhealthy,.v-fail{border-color:var(--red)}
.badge{display:inline-block;padding:0 7px;border-radius:3px;color:#fff;font-weight:600;font-size:12px;text-transform:uppercase}
.s-error,.s-failed,.s-fail,.s-unhealthy{background:var(--red)}.s-warning,.s-warn,.s-degraded{background:var(--amber)}
.s-ok,.s-pass,.s-healthy,.s-info{background:var(--green)}.s-not_evaluated,.s-unknown,.s-not_run{background:var(--grey)}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}dl.meta dt{color:#555}dl.meta dd{margin:0}
.note{background:#fff8e1;border:1px solid #ffe082;padding:8px 12px;margin:8px 0}
.layers td.state{font-weight:600}.layers tr.boundary td{border-top:3px solid var(--red);border-bottom:3px solid var(--red);background:#ffebee}
.layers tr.untrusted td{color:#888}.layers td.mark{color:var(--red);font-weight:700}
.finding{border:1px solid var(--line);border-left:6px solid var(--grey);padding:6px 12px;margin:10px 0;break-inside:avoid}
.finding.error{border-left-color:var(--red)}.finding.warning{border-left-color:var(--amber)}.finding.info{border-left-color:var(--green)}
.finding .next{background:var(--soft);padding:4px 8px;margin:6px 0}.finding table{width:100%}
tr.disagree td{background:#ffebee}td.bad{color:var(--red);font-weight:600}
.chart{overflow-x:auto;margin:6px 0}.chart svg{display:block}
.rcs{display:flex;flex-wrap:wrap;gap:0 18px;align-items:flex-start}.rc{max-width:100%}
svg text{font-family:system-ui,"DejaVu Sans",sans-serif}
.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
details{margin:6px 0}summary{cursor:pointer;font-weight:600}
footer{margin-top:30px;color:#666;font-size:12px;border-top:1px solid var(--line);padding-top:6px}
@media print{body{max-width:none;padding:0}.chart{overflow:visible}details>*{display:block}h2{break-after:avoid}}
)css";

}  // namespace

std::string page_begin(std::string_view title, int refresh_s) {
    std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    // Nothing may load from anywhere: no script, no font, no image but data: URIs, no connection. A page that
    // tries is a bug the browser test sees in its console.
    out += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
           "img-src data:\">\n";
    out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    if (refresh_s > 0) out += fmt::format("<meta http-equiv=\"refresh\" content=\"{}\">\n", refresh_s);
    out += "<title>" + esc(title) + "</title>\n<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
    return out;
}

std::string page_end() { return "</body>\n</html>\n"; }

std::string utc_time(int64_t ms) {
    std::time_t t = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    if (!gmtime_r(&t, &tm)) return std::to_string(ms);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%SZ", &tm);
    return buf;
}

std::string short_id(std::string_view uuid) {
    if (uuid.empty()) return "?";
    return std::string(uuid.substr(0, std::min<size_t>(uuid.size(), 12)));
}

std::string number(double v) {
    if (v >= 100 || v <= -100) return fmt::format("{:.0f}", v);
    if (v >= 10 || v <= -10) return fmt::format("{:.1f}", v);
    return fmt::format("{:.2f}", v);
}

}  // namespace html

namespace {

using html::esc;

std::string gpu_name(const GpuRef& g) {
    return fmt::format("{} <code>{}</code> <code>{}</code>", esc(subject_label(g)),
                       esc(g.uuid.empty() ? "(no UUID known)" : g.uuid), esc(g.pci.empty() ? "(no address)" : g.pci));
}

// The verdict in one line: what a person reads first.
std::string verdict_line(const NodePage& p) {
    const auto& d = p.diagnosis;
    auto findings = p.findings();
    const size_t errors = findings.count(Severity::error), warnings = findings.count(Severity::warning);
    std::string what;
    switch (d.verdict) {
        case Verdict::healthy: what = "no problem found on any layer"; break;
        case Verdict::degraded: what = fmt::format("{} warning(s), no error", warnings); break;
        case Verdict::unhealthy:
            what = fmt::format("{} error(s), {} warning(s)", errors, warnings);
            if (d.boundary) what += fmt::format("; the failure boundary is the {} layer: fix it first", to_string(*d.boundary));
            break;
        case Verdict::unknown: {
            auto unread = unreadable_layers(d);
            what = unread.empty() ? "could not evaluate" : "could not evaluate: " + unread + " could not be read";
            break;
        }
    }
    std::string v(name_of(d.verdict));
    return fmt::format("<p class=\"verdict v-{0}\" id=\"verdict\"><span class=\"badge s-{0}\">{0}</span> {1}: {2} "
                       "(exit {3})</p>\n",
                       esc(v), esc(p.node.empty() ? "unknown node" : p.node), esc(what), d.exit_code);
}

std::string header(const NodePage& p) {
    std::string out = fmt::format("<header>\n<h1>gpudx report — {}</h1>\n", esc(p.node.empty() ? "unknown node" : p.node));
    out += verdict_line(p);
    auto row = [](std::string_view name, std::string_view value) {
        return fmt::format("<dt>{}</dt><dd>{}</dd>", esc(name), esc(value.empty() ? "unknown" : value));
    };
    out += "<dl class=\"meta\">";
    out += row("node", p.node);
    out += row("collected at", p.collected_at);
    out += row("kernel", p.kernel);
    out += row("driver", p.driver);
    out += row("collected by", p.gpudx_version.empty() ? "" : "gpudx " + p.gpudx_version);
    out += row("source", p.source);
    out += row("page made by", p.generated_by);
    out += "</dl>\n</header>\n";
    return out;
}

std::string missing_section(const NodePage& p) {
    if (p.missing.empty()) return {};
    std::string out = "<section id=\"missing\" class=\"note\">\n<h3>Not in the input</h3>\n<p>What follows was not "
                      "in what the page was made from (an older gpudx, or a part no input gave); the rest is shown, "
                      "and nothing missing is taken as healthy.</p>\n<ul>\n";
    for (auto& m : p.missing) out += "<li><code>" + esc(m) + "</code></li>\n";
    return std::move(out) + "</ul>\n</section>\n";
}

std::string layers_section(const NodePage& p) {
    const auto& d = p.diagnosis;
    std::string out = "<section id=\"layers\">\n<h2>Layers</h2>\n";
    if (d.layers.empty()) return std::move(out) + "<p>The input holds no layer states.</p>\n</section>\n";
    out += "<p>Read from the bottom up: the lowest layer with an error is the failure boundary; the layers above it "
           "are not trusted until it is fixed.</p>\n";
    out += "<table class=\"layers\"><caption class=\"sr\">Layers, top to bottom, with their state</caption>\n"
           "<tr><th>layer</th><th>state</th><th>errors</th><th>warnings</th><th>note</th><th></th></tr>\n";
    for (auto it = d.layers.rbegin(); it != d.layers.rend(); ++it) {
        const auto& l = *it;
        bool boundary = d.boundary && l.layer == *d.boundary;
        std::string cls = boundary ? "boundary" : !l.trusted ? "untrusted" : "";
        std::string state = to_string(l.state);
        std::string note = l.reason;
        if (!l.trusted && !boundary) note = note.empty() ? "not trusted: a layer below is broken" : note + " (not trusted)";
        out += fmt::format("<tr class=\"{}\" data-layer=\"{}\"><td><b>{}</b></td><td class=\"state\"><span class=\"badge "
                           "s-{}\">{}</span></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class="
                           "\"mark\">{}</td></tr>\n",
                           cls, to_string(l.layer), to_string(l.layer), esc(state),
                           esc(l.state == LayerState::not_evaluated ? "not evaluated" : state), l.errors, l.warnings,
                           esc(note), boundary ? "◀ failure boundary" : "");
    }
    return std::move(out) + "</table>\n</section>\n";
}

std::string finding_block(const Finding& f, size_t n) {
    std::string sev = to_string(f.severity);
    std::string out = fmt::format(
        "<article class=\"finding {0}\" id=\"finding-{1}\" data-finding=\"{2}\" data-severity=\"{0}\">\n<p><span class="
        "\"badge s-{0}\">{0}</span> <code>{2}</code> · layer {3}</p>\n<p><b>{4}</b></p>\n",
        esc(sev), n, esc(f.id), to_string(f.layer), esc(f.message));
    if (!f.subjects.empty()) {
        out += "<ul>";
        for (auto& g : f.subjects) out += "<li>" + gpu_name(g) + "</li>";
        out += "</ul>\n";
    }
    if (f.process) out += "<p>process: " + esc(describe(*f.process)) + "</p>\n";
    if (!f.evidence.empty()) {
        out += "<table><tr><th>evidence from</th><th>value seen there</th></tr>\n";
        for (auto& e : f.evidence)
            out += fmt::format("<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td></tr>\n", esc(e.source), esc(e.value));
        out += "</table>\n";
    }
    if (!f.next_step.empty()) out += "<p class=\"next\"><b>Next:</b> " + esc(f.next_step) + "</p>\n";
    return std::move(out) + "</article>\n";
}

// The findings section's items: the errors and warnings, then the informational ones folded under a summary. Each
// finding is read (from the pack, on the agent's page) as its block is drawn.
struct FindingsSection {
    std::string begin, end;
    size_t items = 0;  // two passes over the findings: items [0, n) the errors and warnings, [n, 2n) the others
    PiecedText::Item item;
};

FindingsSection findings_section(const NodePage& p) {
    FindingsSection out;
    out.begin = "<section id=\"findings\">\n<h2>Findings</h2>\n";
    auto fs = p.findings();
    if (fs.empty()) {
        out.end = "<p>No finding.</p>\n</section>\n";
        return out;
    }
    const size_t info = fs.count(Severity::info), n = fs.size(), shown_first = n - info;
    out.items = 2 * n;
    out.item = [fs, n, shown_first, info, drawn = size_t{0}](size_t k, std::string& text) mutable {
        bool second_pass = k >= n;
        size_t i = second_pass ? k - n : k;
        if (k == n) {
            if (shown_first == 0) text += "<p>No error or warning.</p>\n";
            if (info > 0) text += fmt::format("<details><summary>{} informational finding(s)</summary>\n", info);
        }
        if ((fs.severity(i) == Severity::info) != second_pass) return;
        fs.with(i, [&](const Finding& f) { text += finding_block(f, drawn++); });
    };
    out.end = std::string(info > 0 ? "</details>\n" : "") + "</section>\n";
    return out;
}

std::string optional_text(const auto& v) { return v ? fmt::format("{}", *v) : std::string("—"); }

std::string identity_section(const NodePage& p) {
    std::string out = "<section id=\"identity\">\n<h2>Which GPU is which</h2>\n";
    if (!p.snapshot) return std::move(out) + "<p>Not in the input: a saved diagnosis holds no identity table (make the page from a "
                                  "snapshot, <code>gpudx snapshot -o FILE</code>).</p>\n</section>\n";
    if (p.identity.empty()) return std::move(out) + "<p>No GPU found by any source.</p>\n</section>\n";
    out += "<p>Only the UUID and the PCI address are stable; the numbers differ between nvidia-smi, /dev, CUDA and "
           "schedulers. A row in red: its sources disagree.";
    if (!p.allocation.empty()) out += " The job's view is read from <code>" + esc(p.allocation) + "</code>.";
    out += "</p>\n<table class=\"identity\"><tr><th>PCI address</th><th>UUID</th><th>slot</th><th>NUMA</th><th>model</th>"
           "<th>minor</th><th>NVML index</th><th>CUDA ordinal</th><th>job's view</th><th>disagreements and findings</th>"
           "</tr>\n";
    for (auto& r : p.identity) {
        bool bad = !r.disagreements.empty();
        std::string notes;
        for (auto& d : r.disagreements) notes += (notes.empty() ? "" : "<br>") + esc(d);
        for (auto& f : r.findings) notes += (notes.empty() ? "" : "<br>") + ("<code>" + esc(f) + "</code>");
        std::string job;
        for (auto& v : r.job_view) job += (job.empty() ? "" : "<br>") + esc(v);
        out += fmt::format("<tr class=\"{}\" data-pci=\"{}\" data-uuid=\"{}\"><td class=\"mono\">{}</td><td class=\"mono"
                           "\">{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td><td class="
                           "\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"{}\">{}</td></tr>\n",
                           bad ? "disagree" : "", esc(r.pci), esc(r.uuid), esc(r.pci),
                           esc(r.uuid.empty() ? "(no UUID known)" : r.uuid), esc(r.slot.empty() ? "—" : r.slot),
                           esc(r.numa_node && *r.numa_node >= 0 ? std::to_string(*r.numa_node) : "—"), esc(r.model), esc(optional_text(r.minor)),
                           esc(optional_text(r.nvml_index)), esc(optional_text(r.cuda_ordinal)),
                           job.empty() ? "every GPU (no allocation set)" : job, bad ? "bad" : "", notes);
    }
    return std::move(out) + "</table>\n</section>\n";
}

std::string collectors_section(const NodePage& p) {
    if (p.collectors.empty()) return {};
    std::string out = "<section id=\"collectors\">\n<details><summary>Collectors: what was read, and how long it took"
                      "</summary>\n<table><tr><th>collector</th><th>state</th><th>ms</th><th>message</th></tr>\n";
    for (auto& c : p.collectors)
        out += fmt::format("<tr><td>{}</td><td><span class=\"badge s-{}\">{}</span></td><td class=\"num\">{:.2f}</td>"
                           "<td>{}</td></tr>\n",
                           esc(c.name), c.state == CollectorState::ok ? "ok" : "not_evaluated", esc(to_string(c.state)),
                           c.duration_ms, esc(c.message));
    return std::move(out) + "</table>\n</details>\n</section>\n";
}

}  // namespace

PiecedText node_page_html_pieces(const NodePage& p) {
    std::string before = html::page_begin("gpudx report — " + (p.node.empty() ? std::string("unknown node") : p.node),
                                          p.refresh_s);
    before += header(p);
    before += "<nav><a href=\"#layers\">layers</a> · <a href=\"#findings\">findings</a> · <a href=\"#identity\">"
              "identity</a> · <a href=\"#topology\">topology</a> · <a href=\"#accept\">acceptance</a> · <a href=\""
              "#events\">events</a></nav>\n";
    before += missing_section(p);
    before += layers_section(p);
    auto findings = findings_section(p);
    before += findings.begin;
    std::string after = std::move(findings.end);
    after += identity_section(p);
    after += html::topology_section(p);
    if (p.accept) after += html::accept_section(*p.accept, p.accept_source, p.accept_reference, p.accept_reference_source);
    else after += "<section id=\"accept\">\n<h2>Acceptance run</h2>\n<p>None given (<code>gpudx report --accept "
                  "FILE</code>, a record of <code>gpudx accept</code>).</p>\n</section>\n";
    after += html::events_section(p);
    after += collectors_section(p);
    after += "<footer>Made by " + esc(p.generated_by) + " from " + esc(p.source) +
             ". Every chart's figures are in the table beside it.</footer>\n";
    after += html::page_end();
    return PiecedText(std::move(before), findings.items, std::move(findings.item), std::move(after));
}

std::string render_node_page_html(const NodePage& p) { return node_page_html_pieces(p).whole(); }

}  // namespace gpudx

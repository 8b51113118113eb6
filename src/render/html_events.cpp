// The agent's events as a timeline, one lane per GPU and one for the node (render/html.hpp): findings appearing and
// clearing (Xid, AER, ...), drains and resumes of the Slurm node, NVML events, the agent's own news.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "render/html_parts.hpp"

namespace gpudx::html {
namespace {

constexpr size_t kTableRows = 500;  // the newest events listed; the drawing holds every one given

struct Mark {
    const char* colour;
    const char* shape;  // circle, ring, down (drain), up (resume), square, diamond
};

Mark mark_of(const PageEvent& e) {
    const char* sev = e.severity == "error" ? kRed : e.severity == "warning" ? kAmber : kGrey;
    switch (e.kind) {
        case AgentEventKind::appeared:
        case AgentEventKind::changed: return {sev, "circle"};
        case AgentEventKind::cleared: return {kGreen, "ring"};
        case AgentEventKind::drained: return {kRed, "down"};
        case AgentEventKind::drain_failed: return {kAmber, "down"};
        case AgentEventKind::resumed: return {kGreen, "up"};
        case AgentEventKind::nvml: return {sev == kGrey ? kBlue : sev, "square"};
        case AgentEventKind::agent: break;
    }
    return {kGrey, "diamond"};
}

// The mark of one event, its title (what a hover shows) inside it.
std::string shape(const Mark& m, double x, double y, const std::string& title) {
    std::string s = m.shape, t = "<title>" + title + "</title>";
    if (s == "circle")
        return fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\">{}</circle>\n", x, y, m.colour, t);
    if (s == "ring")
        return fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"#fff\" stroke=\"{}\" stroke-width=\"2\">{}"
                           "</circle>\n",
                           x, y, m.colour, t);
    if (s == "square")
        return fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"9\" height=\"9\" fill=\"{}\">{}</rect>\n", x - 4.5,
                           y - 4.5, m.colour, t);
    std::string d = s == "down" ? fmt::format("M{:.1f} {:.1f} l6 -10 h-12 z", x, y + 5)
                    : s == "up" ? fmt::format("M{:.1f} {:.1f} l6 10 h-12 z", x, y - 5)
                                : fmt::format("M{:.1f} {:.1f} l5 5 l-5 5 l-5 -5 z", x, y - 5);
    return fmt::format("<path d=\"{}\" fill=\"{}\">{}</path>\n", d, m.colour, t);
}

}  // namespace

std::string events_section(const NodePage& page) {
    std::string out = "<section id=\"events\">\n<h2>Events</h2>\n";
    if (!page.events) return out + "<p>None given (<code>gpudx report --events FILE</code>, the agent's "
                                   "<code>/v1/events</code>; the agent's own page has them).</p>\n</section>\n";
    const auto& events = *page.events;
    if (events.empty()) return out + "<p>No event recorded in the period asked.</p>\n</section>\n";

    // Lanes: the node's GPUs in address order (those of the identity table first, so a quiet GPU still shows),
    // then any other GPU the events name, then the node itself.
    std::vector<std::pair<std::string, std::string>> lanes;  // (pci, uuid)
    std::map<std::string, size_t> lane_of;                   // pci or uuid -> lane
    auto add_lane = [&](const std::string& pci, const std::string& uuid) {
        std::string key = pci.empty() ? uuid : pci;
        if (key.empty() || lane_of.count(key)) return;
        lane_of[key] = lanes.size();
        if (!uuid.empty()) lane_of[uuid] = lanes.size();
        lanes.emplace_back(pci, uuid);
    };
    for (auto& r : page.identity) add_lane(r.pci, r.uuid);
    for (auto& e : events) add_lane(e.gpu_pci, e.gpu_uuid);
    size_t node_lane = lanes.size();
    lanes.emplace_back("", "");
    auto lane = [&](const PageEvent& e) {
        if (auto it = lane_of.find(e.gpu_pci); !e.gpu_pci.empty() && it != lane_of.end()) return it->second;
        if (auto it = lane_of.find(e.gpu_uuid); !e.gpu_uuid.empty() && it != lane_of.end()) return it->second;
        return node_lane;
    };

    int64_t t0 = events.front().time_ms, t1 = events.front().time_ms;
    for (auto& e : events) {
        t0 = std::min(t0, e.time_ms);
        t1 = std::max(t1, e.time_ms);
    }
    if (t1 == t0) t1 = t0 + 1000;
    constexpr double kLabelW = 250, kPlotW = 760, kLane = 30;
    double height = lanes.size() * kLane + 40;
    out += fmt::format("<p>{} event(s) from {} to {}. ● a finding appeared (red error, amber warning), ○ it cleared, ▼ the "
                       "node drained, ▲ resumed, ■ an NVML event, ◆ the agent's own news. Hover a mark for its message.</p>\n",
                       events.size(), esc(utc_time(t0)), esc(utc_time(t1)));
    if (page.events_left_out > 0)
        out += fmt::format("<p>{} older event(s) not drawn (ask the agent's <code>/v1/events</code> for them).</p>\n",
                           page.events_left_out);
    std::string svg = fmt::format("<div class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"{:.0f}\" "
                                  "height=\"{:.0f}\" aria-label=\"events per GPU over time\">\n",
                                  kLabelW + kPlotW + 20, height);
    for (size_t i = 0; i < lanes.size(); ++i) {
        double y = 14 + i * kLane;
        std::string label = i == node_lane ? std::string("node (no GPU)")
                                           : short_id(lanes[i].second) + " " + (lanes[i].first.empty() ? "?" : lanes[i].first);
        svg += fmt::format("<text x=\"0\" y=\"{:.0f}\" font-size=\"12\">{}</text><line x1=\"{:.0f}\" x2=\"{:.0f}\" y1=\"{:.0f}\" "
                           "y2=\"{:.0f}\" stroke=\"#e0e0e0\"/>\n",
                           y + 4, esc(label), kLabelW, kLabelW + kPlotW, y, y);
    }
    double axis = lanes.size() * kLane + 10;
    for (int k = 0; k <= 4; ++k) {
        double x = kLabelW + kPlotW * k / 4;
        int64_t t = t0 + (t1 - t0) * k / 4;
        svg += fmt::format("<line x1=\"{0:.0f}\" x2=\"{0:.0f}\" y1=\"0\" y2=\"{1:.0f}\" stroke=\"#eee\"/><text x=\"{0:.0f}\" "
                           "y=\"{2:.0f}\" font-size=\"10\" text-anchor=\"{3}\">{4}</text>\n",
                           x, axis - 6, axis + 12, k == 0 ? "start" : k == 4 ? "end" : "middle", esc(utc_time(t)));
    }
    for (auto& e : events) {
        double x = kLabelW + kPlotW * static_cast<double>(e.time_ms - t0) / static_cast<double>(t1 - t0);
        double y = 14 + lane(e) * kLane;
        svg += shape(mark_of(e), x, y,
                     fmt::format("{} {}{}{}: {}", esc(utc_time(e.time_ms)), esc(name_of(e.kind)),
                                 e.severity.empty() ? "" : " " + esc(e.severity),
                                 e.finding.empty() ? "" : " " + esc(e.finding), esc(e.message)));
    }
    out += svg + "</svg></div>\n";

    // The same events as a table, newest first: what a screen reader reads and grep finds.
    std::vector<const PageEvent*> newest;
    for (auto& e : events) newest.push_back(&e);
    std::stable_sort(newest.begin(), newest.end(), [](auto* a, auto* b) { return a->time_ms > b->time_ms; });
    out += "<details open><summary>Events as a table, newest first</summary>\n<table><tr><th>time (UTC)</th><th>kind</th>"
           "<th>severity</th><th>finding</th><th>GPU UUID</th><th>PCI address</th><th>message</th></tr>\n";
    for (size_t i = 0; i < newest.size() && i < kTableRows; ++i) {
        auto& e = *newest[i];
        out += fmt::format("<tr><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td><td class=\"mono\">"
                           "{}</td><td class=\"mono\">{}</td><td>{}</td></tr>\n",
                           esc(utc_time(e.time_ms)), esc(name_of(e.kind)), esc(e.severity), esc(e.finding), esc(e.gpu_uuid),
                           esc(e.gpu_pci), esc(e.message));
    }
    out += "</table>\n";
    if (newest.size() > kTableRows)
        out += fmt::format("<p>{} older event(s) drawn above, not listed.</p>\n", newest.size() - kTableRows);
    return out + "</details>\n</section>\n";
}

}  // namespace gpudx::html

#include "agent/endpoints.hpp"

#include <malloc.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/release_memory.hpp"
#include "core/text.hpp"
#include "identity/page_identity.hpp"
#include "render/html.hpp"
#include "render/agent_metrics.hpp"
#include "render/report.hpp"
#include "render/report_format.hpp"
#include "rules/comparisons/baseline.hpp"

namespace gpudx {

namespace {

constexpr size_t kDefaultEventLimit = 1000;
constexpr size_t kMaxEventLimit = 100000;
constexpr size_t kEventPage = 500;
// Events in one piece of a streamed /v1/events answer: about 45 kB of text.
constexpr size_t kEventsPiece = 64;
// The least of one piece of a streamed diagnosis (/v1/status, the page): a few dozen findings.
constexpr size_t kDiagnosisPiece = 64 * 1024;

// An answer made of `pieces` as the client takes them (HttpResponse::more), with `end` after the last. `published`
// and `page` keep alive what the pieces read: the diagnosis's snapshot and pack, and the page they draw, if any.
struct PiecedAnswer {
    std::shared_ptr<const Published> published;
    std::optional<NodePage> page;
    std::optional<PiecedText> pieces;
    std::string end;
};

void send_in_pieces(HttpResponse& res, std::shared_ptr<PiecedAnswer> a) {
    res.more = [a]() -> std::optional<std::string> {
        if (auto piece = a->pieces->next(kDiagnosisPiece)) return piece;
        if (a->end.empty()) return std::nullopt;
        return std::exchange(a->end, std::string());
    };
}

}  // namespace

void Published::hold(const Diagnosis& d) {
    summary_.layers = d.layers;
    summary_.boundary = d.boundary;
    summary_.verdict = d.verdict;
    summary_.exit_code = d.exit_code;
    findings_ = PackedFindings(d.findings);
}

Diagnosis Published::diagnosis_head(size_t n) const {
    return with_first_findings(summary_, FindingsView(findings_), n);
}

PrometheusOptions Published::prom_options() const {
    return {.node = make_node_record(snapshot),
            .node_class = node_class,
            .xid_counts = xid_counts ? &*xid_counts : nullptr};
}

std::vector<XidCount> digest_kernel_log(KernelLog& log) {
    auto counts = xid_counts(log);
    release_memory(log.lines);
    release_memory(log.xids);
    release_memory(log.tallies);
    return counts;
}

std::shared_ptr<const Published> Publication::latest() const {
    std::lock_guard lock(mutex_);
    return latest_;
}

void Publication::publish(std::shared_ptr<const Published> p) {
    std::lock_guard lock(mutex_);
    ++by_trigger_[static_cast<size_t>(p->trigger)];
    latest_ = std::move(p);
}

void Publication::describe(AgentStatus& s) const {
    std::lock_guard lock(mutex_);
    if (latest_) s.last_diagnosis = {latest_->time_ms, latest_->trigger, latest_->duration_ms};
    s.diagnoses_by_trigger = by_trigger_;
}

HttpResponse Endpoints::status_response(const HttpRequest& r) {
    auto p = publication_.latest();
    if (!p) return {503, "application/json", R"({"error":"the first diagnosis is still running"})" "\n", {}};
    auto format = parse_name<ReportFormat>(r.query.contains("format") ? r.query.at("format") : "json");
    if (!format)
        return {400, "application/json",
                json_text(nlohmann::json({{"error", "format must be one of " + names_listed<ReportFormat>()}})) + "\n", {}};
    HttpResponse res;
    // JSON and text are sent as they are made, a few findings at a time read from the pack: with thousands of
    // findings the answer is megabytes, and the agent holds one piece of it (the others are a line each).
    auto a = std::make_shared<PiecedAnswer>();
    a->published = p;
    if (*format == ReportFormat::json) {
        a->pieces = diagnosis_json_pieces(p->snapshot, p->summary(), {{"agent", agent_status_to_json(status_())}},
                                          FindingsView(p->findings()));
        a->end = "\n";
        res.headers.emplace_back("X-Gpudx-Exit-Code", std::to_string(p->exit_code()));
        send_in_pieces(res, std::move(a));
        return res;
    }
    RenderOptions ro;
    ro.verbose = r.query.contains("verbose");
    res.content_type = "text/plain; charset=utf-8";
    if (*format == ReportFormat::text) {
        a->pieces = diagnosis_text_pieces(p->snapshot, p->summary(), FindingsView(p->findings()), ro);
        res.headers.emplace_back("X-Gpudx-Exit-Code", std::to_string(p->exit_code()));
        send_in_pieces(res, std::move(a));
        return res;
    }
    auto report = render_report(p->snapshot, p->summary(), FindingsView(p->findings()), *format, ro, p->prom_options());
    res.body = std::move(report.text);
    res.headers.emplace_back("X-Gpudx-Exit-Code", std::to_string(report.exit_code));
    return res;
}

HttpResponse Endpoints::events_response(const HttpRequest& r) {
    auto bad = [](const std::string& why) {
        return HttpResponse{400, "application/json", json_text(nlohmann::json({{"error", why}})) + "\n", {}};
    };
    int64_t since = 0, after = 0;
    size_t limit = kDefaultEventLimit;
    if (auto it = r.query.find("since"); it != r.query.end()) {
        auto t = parse_event_time(it->second, now_ms());
        if (!t)
            return bad("since=" + it->second +
                       ": not Unix seconds, an ISO 8601 time or an age (15m, 2h, 7d), up to the year 9999");
        since = *t;
    }
    if (auto it = r.query.find("after"); it != r.query.end()) {
        auto v = parse_int(it->second);
        if (!v) return bad("after=" + it->second + ": not an event id");
        after = *v;
    }
    if (auto it = r.query.find("limit"); it != r.query.end()) {
        auto v = parse_uint(it->second);
        if (!v || *v == 0) return bad("limit=" + it->second + ": not a positive number");
        limit = std::min<size_t>(*v, kMaxEventLimit);
    }
    // Streamed (chunked), a piece of kEventsPiece events at a time, each made when the client has taken the one
    // before: an answer of any size holds one piece in the agent, a client that stops reading pins one piece until
    // the server's answer deadline, and the main loop's writes wait for one page of the store at most. The events
    // are written as text from the store's rows (append_event_json), never as one JSON document.
    struct Stream {
        EventsAnswer answer{std::numeric_limits<size_t>::max()};
        int64_t since = 0, cursor = 0;
        size_t limit = 0;
        size_t unstored_seen = 0;  // held in memory (no id): listed after the stored ones
        enum class Phase { stored, unstored, done } phase = Phase::stored;
    };
    auto s = std::make_shared<Stream>();
    s->since = since;
    s->cursor = after;
    s->limit = limit;
    HttpResponse res;
    res.more = [s, this]() -> std::optional<std::string> {
        auto add = [&](const AgentEvent& e, std::optional<std::string_view> evidence_json) {
            s->answer.add(e, evidence_json);
            if (e.id > 0) s->cursor = e.id;
        };
        while (s->phase != Stream::Phase::done) {
            size_t want = std::min(kEventsPiece, s->limit - s->answer.count());
            if (s->phase == Stream::Phase::stored) {
                auto visited = recorder_.visit_page(s->since, s->cursor, want, add);
                // Without a store every event is among the unstored.
                if (!visited || *visited < want) s->phase = Stream::Phase::unstored;
            } else {
                size_t visited = want == 0 ? 0 : recorder_.visit_unstored(s->since, s->unstored_seen, want, add);
                s->unstored_seen += visited;
                if (visited < want || want == 0) break;
            }
            if (s->answer.count() >= s->limit) s->phase = Stream::Phase::unstored;
            if (s->answer.pending_bytes() > 0) return s->answer.take();
        }
        if (s->phase == Stream::Phase::done) return std::nullopt;
        s->phase = Stream::Phase::done;
        return std::move(s->answer).finish(std::nullopt, 0);
    };
    return res;
}

HttpResponse Endpoints::page_response() {
    // The page of the latest diagnosis with the events of the last week, the newest kReportEvents of them: a node
    // with a storm of events still answers with a page of bounded size.
    constexpr size_t kReportEvents = 2000;
    constexpr int64_t kReportPeriodMs = 7LL * 24 * 3600 * 1000;
    auto p = publication_.latest();
    HttpResponse res;
    res.content_type = "text/html; charset=utf-8";
    // The same policy as the page's own meta tag, from the server too: nothing loads, nothing runs.
    res.headers.emplace_back("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:");
    res.headers.emplace_back("Cache-Control", "no-store");
    // Kept as the page draws them, the newest kReportEvents, visited a page of the store at a time: their evidence,
    // which the page does not draw, is never read into a JSON tree.
    const int64_t since = now_ms() - kReportPeriodMs;
    std::deque<PageEvent> latest;
    size_t left_out = 0;
    int64_t cursor = 0;
    auto keep_stored = [&](const AgentEvent& e, std::optional<std::string_view>) {
        latest.push_back(page_event_of(e));
        cursor = e.id;
        if (latest.size() > kReportEvents) {
            latest.pop_front();
            ++left_out;
        }
    };
    for (;;) {
        auto visited = recorder_.visit_page(since, cursor, kEventPage, keep_stored);
        if (!visited || *visited < kEventPage) break;
    }
    auto keep_unstored = [&](const AgentEvent& e, std::optional<std::string_view>) {
        latest.push_back(page_event_of(e));
    };
    recorder_.visit_unstored(since, 0, kReportEvents, keep_unstored);
    std::vector<PageEvent> events(std::make_move_iterator(latest.begin()), std::make_move_iterator(latest.end()));
    release_memory(latest);
    if (!p) {
        // Before the first diagnosis: a page that says so, never one that looks healthy.
        NodePage page;
        page.node = "this node";
        page.source = "the agent, before its first diagnosis";
        page.generated_by = std::string("gpudx ") + GPUDX_VERSION + " agent";
        page.missing.push_back("diagnosis: the agent has not finished its first one yet");
        page.events = std::move(events);
        page.events_left_out = left_out;
        page.refresh_s = 5;
        res.body = render_node_page_html(page);
        return res;
    }
    // Sent as it is made, its findings drawn a few at a time from the pack (a page of thousands is megabytes).
    auto a = std::make_shared<PiecedAnswer>();
    a->published = p;
    NodePage& page = a->page.emplace(node_page_of(p->snapshot, p->summary(), p->findings()));
    page.source = fmt::format("the agent's diagnosis of {} ({})", utc_iso8601_ms(p->time_ms), to_string(p->trigger));
    page.generated_by += " agent";
    page.events = std::move(events);
    page.events_left_out = left_out;
    page.refresh_s = 60;
    a->pieces = node_page_html_pieces(page);
    send_in_pieces(res, std::move(a));
    return res;
}

HttpResponse Endpoints::handle(const HttpRequest& r) {
    HttpResponse res = answer(r);
    // A large answer (the status as JSON or the page of a diagnosis with thousands of findings) was made from a JSON
    // tree or a page model several times its size, freed by now: its pages go back to the system instead of
    // staying in the server thread's arena.
    if (res.body.size() > (1u << 20)) ::malloc_trim(0);
    return res;
}

HttpResponse Endpoints::answer(const HttpRequest& r) {
    if (r.path == "/" || r.path == "/report.html") return page_response();
    if (r.path == "/metrics") {
        auto p = publication_.latest();
        HttpResponse res;
        res.content_type = "text/plain; version=0.0.4; charset=utf-8";
        res.body = (p ? render_prometheus(p->snapshot, p->summary(), FindingsView(p->findings()), p->prom_options())
                      : std::string()) +
                   render_agent_metrics(status_());
        return res;
    }
    if (r.path == "/v1/status") return status_response(r);
    if (r.path == "/v1/events") return events_response(r);
    nlohmann::json unknown = {{"error", "no such endpoint: " + r.path},
                              {"endpoints", {"/", "/report.html", "/metrics", "/v1/status", "/v1/events"}}};
    return {404, "application/json", json_text(unknown) + "\n", {}};
}

}  // namespace gpudx

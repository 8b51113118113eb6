// `gpudx status` and `gpudx events`: ask a running agent (docs/agent.md).
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/events.hpp"
#include "agent/http.hpp"
#include "app/command.hpp"
#include "app/common.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "render/report_format.hpp"
#include "rules/comparisons/baseline.hpp"
#include "rules/engine/diagnose.hpp"

namespace gpudx::app {
namespace {

// Exit code of `gpudx events` (and `status --no-fallback`) when no agent answers: sysexits' EX_UNAVAILABLE.
constexpr int kExitNoAgent = 69;

struct AgentClientOptions {
    std::string socket;
    std::string url;
    std::string state_dir = "/var/lib/gpudx";
    double timeout_s = 5;
};

void add_client_options(CLI::App& cmd, AgentClientOptions& o) {
    auto* socket = cmd.add_option("--socket", o.socket, "The agent's unix socket (default: STATE_DIR/agent.sock)")
                       ->type_name("PATH");
    cmd.add_option("--url", o.url, "Ask the agent at http://HOST:PORT instead of its socket")
        ->type_name("URL")
        ->excludes(socket);
    cmd.add_option("--state-dir", o.state_dir, "The agent's --state-dir, where its socket is")
        ->type_name("DIR")
        ->capture_default_str();
    cmd.add_option("--timeout", o.timeout_s, "Seconds to wait for the agent's answer")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 600.0));
}

AgentAddress agent_address(const AgentClientOptions& o) {
    if (!o.url.empty()) {
        auto a = parse_agent_url(o.url);
        if (!a) throw UsageError{a.error().message};
        return *a;
    }
    AgentAddress a;
    a.socket_path = o.socket.empty() ? (std::filesystem::path(o.state_dir) / "agent.sock").string() : o.socket;
    return a;
}

std::chrono::milliseconds timeout(const AgentClientOptions& o) {
    return std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000));
}

// The agent's error body ({"error": ...}), or the status line.
std::string reply_error(const HttpReply& r) {
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_string()) return j["error"].get<std::string>();
    return fmt::format("HTTP {}", r.status);
}

// ---- status

struct StatusOptions {
    AgentClientOptions client;
    NodeOptions node;
    ReportFormat format = ReportFormat::text;
    std::string output;
    bool verbose = false;
    bool no_fallback = false;
};

int run_status(const StatusOptions& o) {
    AgentAddress where = agent_address(o.client);
    std::string query = "/v1/status?format=" + std::string(name_of(o.format)) + (o.verbose ? "&verbose=1" : "");
    auto reply = http_get(where, query, timeout(o.client));
    if (reply && reply->status == 200) {
        // The agent's report, rendered there: what reaches a terminal is still this client's to strip.
        write_output(o.output, reply->body, is_data_format(o.format) ? OutputKind::data : OutputKind::text);
        auto code = reply->headers.find("x-gpudx-exit-code");
        return code == reply->headers.end() ? kExitUnknown : static_cast<int>(parse_int(code->second).value_or(kExitUnknown));
    }
    std::string why = reply ? fmt::format("the gpudx agent at {} answered: {}", where.describe(), reply_error(*reply))
                            : reply.error().message;
    if (o.no_fallback) {
        std::fprintf(stderr, "gpudx status: %s\n", why.c_str());
        return kExitNoAgent;
    }
    std::fprintf(stderr, "gpudx status: %s; a one-shot diagnosis instead\n", why.c_str());
    Snapshot s = collect_node(o.node);
    Diagnosis d = diagnose(s, DiagnoseOptions{.since = o.node.since});
    RenderOptions r;
    r.color = o.output.empty() && stdout_is_terminal();
    r.verbose = o.verbose;
    auto report = render_report(s, d, o.format, r, {.node = make_node_record(s)});
    write_output(o.output, report.text, is_data_format(o.format) ? OutputKind::data : text_output(r.color));
    return report.exit_code;
}

// ---- events

struct EventsOptions {
    AgentClientOptions client;
    std::string since;
    int64_t after = 0;
    unsigned limit = 1000;
    std::string format = "text";
};

std::string url_encode(std::string_view s) {
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == ':') out += static_cast<char>(c);
        else out += fmt::format("%{:02X}", c);
    }
    return out;
}

std::string render_events_text(const std::vector<AgentEvent>& events) {
    if (events.empty()) return "No events.\n";
    std::string out;
    for (const auto& e : events) {
        std::string gpu = e.gpu_uuid.empty() && e.gpu_pci.empty() ? std::string() : describe(GpuRef{e.gpu_uuid, e.gpu_pci});
        out += fmt::format("{}  {:<12} {:<8} {}{}{}\n", utc_iso8601_ms(e.time_ms), to_string(e.kind),
                           e.severity.empty() ? "-" : e.severity, e.finding.empty() ? "" : e.finding + "  ",
                           gpu.empty() ? "" : gpu + "  ", e.message);
    }
    return out;
}

int run_events(const EventsOptions& o) {
    AgentAddress where = agent_address(o.client);
    if (!o.since.empty() && !parse_event_time(o.since, now_ms()))
        throw UsageError{"--since " + o.since +
                         ": not Unix seconds, an ISO 8601 time or an age (15m, 2h, 7d), up to the year 9999"};
    auto no_list = [&](const std::string& why) {
        std::fprintf(stderr, "gpudx events: %s (start one with `gpudx agent`, docs/agent.md)\n", why.c_str());
        return kExitNoAgent;
    };
    // An agent that ends an answer early says where the rest starts ("next_after"; agents before the streamed
    // answer did so at 4 MiB): asked again from there until the events run out or --limit is reached.
    std::vector<nlohmann::json> listed;
    uint64_t left_out = 0;
    int64_t after = o.after;
    for (;;) {
        std::string query = fmt::format("/v1/events?limit={}", o.limit - listed.size());
        if (!o.since.empty()) query += "&since=" + url_encode(o.since);
        if (after > 0) query += fmt::format("&after={}", after);
        auto reply = http_get(where, query, timeout(o.client));
        if (!reply) return no_list(reply.error().message);
        if (reply->status != 200)
            return no_list(fmt::format("the gpudx agent at {} answered: {}", where.describe(), reply_error(*reply)));
        auto j = nlohmann::json::parse(reply->body, nullptr, false);
        if (!j.is_object() || !j.contains("events") || !j["events"].is_array()) {
            std::fprintf(stderr, "gpudx events: the agent at %s answered no event list\n", where.describe().c_str());
            return kExitNoAgent;
        }
        for (auto& e : j["events"]) listed.push_back(std::move(e));
        if (auto l = j.find("left_out"); l != j.end() && l->is_number_unsigned()) left_out += l->get<uint64_t>();
        auto next = j.find("next_after");
        // Only forward, and only with events in hand: an answer that would page forever is not followed.
        if (next == j.end() || !next->is_number_integer() || next->get<int64_t>() <= after || j["events"].empty() ||
            listed.size() >= o.limit)
            break;
        after = next->get<int64_t>();
    }
    if (left_out > 0)
        std::fprintf(stderr,
                     "gpudx events: %llu more events are held in memory while the agent's store refuses writes; "
                     "they are listed once stored\n",
                     static_cast<unsigned long long>(left_out));
    if (o.format == "json") {
        // As the agent writes one answer, all pages in one document.
        std::string out = "{\"events\": [";
        for (size_t i = 0; i < listed.size(); ++i) out += (i == 0 ? "\n" : ",\n") + json_text(listed[i]);
        out += "\n]}\n";
        write_output("", out, OutputKind::data);
        return 0;
    }
    std::vector<AgentEvent> events;
    events.reserve(listed.size());
    for (const auto& e : listed) events.push_back(event_from_json(e));
    write_output("", render_events_text(events), OutputKind::text);
    return 0;
}

CommandRegistrar register_status{
    {"status", "Ask the running agent for the node's current diagnosis (a one-shot diagnosis when none runs)", 16,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<StatusOptions>();
         add_client_options(cmd, o->client);
         add_node_options(cmd, o->node);
         add_report_format_option(cmd, o->format, "text (default), json, prom, slurm, npd, nagios: as for diagnose");
         cmd.add_option("-o,--output", o->output, "Write to FILE (atomically) instead of stdout")->type_name("FILE");
         cmd.add_flag("-v,--verbose", o->verbose, "Also show info findings and collector timings");
         cmd.add_flag("--no-fallback", o->no_fallback, "Without an agent, exit 69 instead of diagnosing once");
         cmd.footer("Prints what `gpudx diagnose` would, from the agent's last diagnosis (answered from memory), and\n"
                    "exits as diagnose does: 0 healthy, 1 errors, 2 warnings, 3 could not evaluate (npd, nagios: their\n"
                    "codes). Without an agent it says so on stderr and diagnoses once with the node options\n"
                    "(--root, --no-driver, ...); with --no-fallback it exits 69.\n\n"
                    "Examples:\n  gpudx status\n  gpudx status --format json --url http://127.0.0.1:9400\n"
                    "  gpudx status --format npd      # node-problem-detector, from the agent when it runs\n"
                    "  gpudx status --format prom -o /var/lib/prometheus/node-exporter/gpudx.prom");
         return [o] { return run_status(*o); };
     }}};

CommandRegistrar register_events{
    {"events", "List the events the running agent recorded: findings that appeared or cleared, drains", 17,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<EventsOptions>();
         add_client_options(cmd, o->client);
         cmd.add_option("--since", o->since, "Events at or after TIME: Unix seconds, ISO 8601, or an age (15m, 2h, 7d)")
             ->type_name("TIME");
         cmd.add_option("--after", o->after, "Events after this event id (to page through)")->type_name("ID");
         cmd.add_option("--limit", o->limit, "At most this many events")->capture_default_str()->check(CLI::Range(1u, 100000u));
         cmd.add_option("--format", o->format, "text (default) or json (the agent's /v1/events answer)")
             ->check(CLI::IsMember({"text", "json"}));
         cmd.footer("Exit codes: 0 listed, 64 usage error, 69 no agent answers.\n\n"
                    "Examples:\n  gpudx events --since 2h\n  gpudx events --since 2026-12-02T00:00:00Z --format json");
         return [o] { return run_events(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app

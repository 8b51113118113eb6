#include "agent/nvml_watch.hpp"

#include <fcntl.h>
#include <sys/wait.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/supervisor.hpp"
#include "core/text.hpp"
#include "model/layer_json.hpp"
#include "gpu_api/nvml/events.hpp"

namespace gpudx {

namespace {

std::string seconds(std::chrono::milliseconds d) { return fmt::format("{:.1f} s", static_cast<double>(d.count()) / 1000); }

std::string str(const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

template <class T>
std::optional<T> number(const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
    return it->get<T>();
}

}  // namespace

NvmlWatchLine parse_nvml_watch_line(std::string_view text) {
    NvmlWatchLine l;
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        l.reason = "not JSON: " + excerpt(text);
        return l;
    }
    std::string kind = str(j, "line");
    if (kind == "call") {
        l.kind = NvmlWatchLine::Kind::call;
        l.call = str(j, "call");
        if (auto i = number<unsigned>(j, "index")) l.call += fmt::format("({})", *i);
    } else if (kind == "ready") {
        l.kind = NvmlWatchLine::Kind::ready;
        if (auto it = j.find("devices"); it != j.end() && it->is_array())
            for (auto& d : *it) {
                std::vector<std::string> types;
                if (auto r = d.find("registered"); r != d.end() && r->is_array())
                    for (auto& t : *r)
                        if (t.is_string()) types.push_back(t.get<std::string>());
                if (types.empty()) continue;
                l.watching.push_back(fmt::format("{} ({}): {}", str(d, "uuid"), str(d, "pci"), join_strings(types, ", ")));
            }
    } else if (kind == "event") {
        l.kind = NvmlWatchLine::Kind::event;
        if (!j.contains("type")) {
            l.kind = NvmlWatchLine::Kind::unreadable;
            l.reason = "an event without a type: " + excerpt(text);
            return l;
        }
        // The event's keys are the snapshot's (model/snapshot_keys.hpp), read by its schema. Fault-isolation
        // boundary: nlohmann's exception for a field of the wrong type, or a type gpudx does not know, makes the
        // line unreadable.
        try {
            layer_from_json(j, l.event);
        } catch (const nlohmann::json::exception& e) {
            l.kind = NvmlWatchLine::Kind::unreadable;
            l.reason = std::string("an event that does not fit: ") + e.what() + ": " + excerpt(text);
            return l;
        }
    } else if (kind == "alive") {
        l.kind = NvmlWatchLine::Kind::alive;
    } else if (kind == "error") {
        l.kind = NvmlWatchLine::Kind::error;
        l.call = str(j, "call");
        if (auto i = number<unsigned>(j, "index")) l.call += fmt::format("({})", *i);
        l.reason = str(j, "reason");
    } else if (kind == "unavailable") {
        l.kind = NvmlWatchLine::Kind::unavailable;
        l.reason = str(j, "reason");
    } else {
        l.reason = "an unknown line: " + excerpt(text);
    }
    return l;
}

std::optional<NvmlEventWatcher::Clock::time_point> NvmlEventWatcher::next_check() const {
    if (!enabled()) return std::nullopt;
    if (child_.running()) return last_heard_ + o_.quiet_limit;
    return start_at_;
}

void NvmlEventWatcher::start(Clock::time_point now, Outcome& out) {
    start_at_.reset();
    auto child = SpawnedProgram::start(o_.command, {.stderr_to = SpawnOptions::Stderr::discard});
    if (!child) {
        out.notes.push_back(fmt::format("NVML events: cannot run {}: {}", o_.command[0], child.error().message));
        start_at_ = now + o_.restart_after;
        return;
    }
    child_ = std::move(*child);
    ::fcntl(child_.fd(), F_SETFL, ::fcntl(child_.fd(), F_GETFL) | O_NONBLOCK);
    buffer_.clear();
    last_heard_ = now;
    last_call_ = "starting gpudx nvml-events";
    ready_ = false;
}

void NvmlEventWatcher::ended(Clock::time_point now, std::string why, Outcome& out) {
    bool was_ready = ready_;
    ready_ = false;
    start_at_ = now + o_.restart_after;
    // A child that said it had nothing to watch ended as it should; the driver may come later, so it is asked
    // again, quietly.
    if (why.empty()) return;
    out.restarted_or_lost = was_ready || why.find("hung") != std::string::npos;
    out.notes.push_back(fmt::format("NVML events: the watcher {}; starting it again in {}", why, seconds(o_.restart_after)));
}

void NvmlEventWatcher::take(const NvmlWatchLine& l, Outcome& out) {
    using K = NvmlWatchLine::Kind;
    switch (l.kind) {
        case K::call: last_call_ = l.call; break;
        case K::ready:
            ready_ = true;
            last_call_ = "nvmlEventSetWait_v2";
            last_unavailable_.clear();
            if (!l.watching.empty())
                out.notes.push_back("NVML events: watching " + join_strings(l.watching, "; "));
            break;
        case K::event: out.events.push_back(l.event); break;
        case K::alive: break;
        case K::error:
            if (l.call + l.reason != last_error_)
                out.notes.push_back(fmt::format("NVML events: {} failed: {}", l.call, l.reason));
            last_error_ = l.call + l.reason;
            break;
        case K::unavailable:
            if (l.reason != last_unavailable_) out.notes.push_back("NVML events: nothing to watch: " + l.reason);
            last_unavailable_ = l.reason;
            break;
        case K::unreadable: out.notes.push_back("NVML events: the watcher wrote " + l.reason); break;
    }
}

NvmlEventWatcher::Outcome NvmlEventWatcher::check(Clock::time_point now) {
    Outcome out;
    if (!enabled()) return out;
    if (!child_.running()) {
        if (start_at_ && now >= *start_at_) start(now, out);
        if (!child_.running()) return out;
    }
    SpawnedProgram::Read r;
    while ((r = child_.read_available(buffer_)) == SpawnedProgram::Read::data) last_heard_ = now;
    split_lines(buffer_, [&](std::string_view line) { take(parse_nvml_watch_line(line), out); });
    if (r == SpawnedProgram::Read::closed || r == SpawnedProgram::Read::failed) {
        auto status = child_.wait(std::chrono::milliseconds(500));
        if (!status) {
            child_.kill();
            status = child_.wait(kKilledChildGrace);
        }
        bool quiet_end = !last_unavailable_.empty() && status && WIFEXITED(*status) && WEXITSTATUS(*status) == kNvmlEventsUnavailable;
        ended(now, quiet_end ? std::string() : (status ? describe_exit_status(*status) : std::string("ended")), out);
        child_ = SpawnedProgram();
        return out;
    }
    if (now - last_heard_ > o_.quiet_limit) {
        std::string call = last_call_;
        child_ = SpawnedProgram();  // killed, and reaped later if the driver holds it
        ended(now, fmt::format("hung in {} (no line for {}) and was killed", call, seconds(o_.quiet_limit)), out);
    }
    return out;
}

}  // namespace gpudx

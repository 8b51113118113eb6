#include "agent/events.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include <fmt/format.h>

#include "collect/kernel_log_parse.hpp"
#include "core/text.hpp"

namespace gpudx {

std::string finding_key(const Finding& f) {
    std::string key = f.id;
    for (const auto& s : f.subjects) key += "|" + s.uuid + "@" + s.pci;
    return key;
}

namespace {

AgentEvent finding_event(const Finding& f, AgentEventKind kind, int64_t time_ms) {
    AgentEvent e;
    e.time_ms = time_ms;
    e.kind = kind;
    e.finding = f.id;
    e.layer = to_string(f.layer);
    e.severity = to_string(f.severity);
    if (!f.subjects.empty()) {
        e.gpu_uuid = f.subjects.front().uuid;
        e.gpu_pci = f.subjects.front().pci;
    }
    e.message = f.message;
    for (const auto& ev : f.evidence) e.evidence.push_back({{"source", ev.source}, {"value", ev.value}});
    if (f.subjects.size() > 1)
        for (const auto& s : f.subjects) e.evidence.push_back({{"source", "subject"}, {"value", describe(s)}});
    return e;
}

}  // namespace

std::vector<Finding> FindingLedger::carried(const std::map<Layer, std::string>& unread) const {
    std::vector<Finding> out;
    for (const auto& [key, o] : open_) {
        auto why = unread.find(o.layer());
        if (why == unread.end()) continue;
        Finding f = o.finding();
        f.evidence.push_back({"gpudx agent",
                              fmt::format("carried: the {} layer could not be read ({}); as last read at {}",
                                          to_string(f.layer), why->second, utc_iso8601_ms(o.read_ms))});
        out.push_back(std::move(f));
    }
    return out;
}

std::vector<AgentEvent> FindingLedger::advance(std::shared_ptr<const PackedFindings> now,
                                               const std::map<Layer, std::string>& unread, int64_t time_ms) {
    std::vector<AgentEvent> events, cleared;
    std::set<std::string> seen;
    // Entered once the loop is done: the ledger's nodes and keys, held for hours, are then made together, not
    // one by one between the loop's events and copies, which are freed and would leave their pages perforated.
    std::vector<std::pair<std::string, Open>> appeared;
    for (size_t i = 0; i < now->size(); ++i) {
        if (now->severity(i) == Severity::info) continue;
        Finding f = now->at(i);
        auto key = finding_key(f);
        if (!seen.insert(key).second) continue;  // one finding per key
        auto it = open_.find(key);
        // What an unread layer shows of an open finding is its carried copy: the ledger keeps the original.
        if (it != open_.end() && unread.contains(f.layer)) continue;
        // Held where `now` holds it: `now` lives while the ledger points into it.
        Open held{now, static_cast<uint32_t>(i), time_ms};
        if (it == open_.end()) {
            events.push_back(finding_event(f, AgentEventKind::appeared, time_ms));
            appeared.emplace_back(std::move(key), std::move(held));
            continue;
        }
        if (it->second.severity() != f.severity) {
            AgentEvent e = finding_event(f, AgentEventKind::changed, time_ms);
            e.message = fmt::format("{} (was {}, now {})", f.message, to_string(it->second.severity()),
                                    to_string(f.severity));
            events.push_back(std::move(e));
        }
        it->second = std::move(held);
    }
    for (auto& [key, held] : appeared) open_.emplace(std::string(key), std::move(held));  // a copy: made here
    // Kept as last read, in a copy of their own (one pack for all of them): the diagnosis that read them may go.
    std::vector<Open*> copied_out;
    std::vector<Finding> copies;
    for (auto& [key, o] : open_)
        if (unread.contains(o.layer()) && !o.owned) copied_out.push_back(&o), copies.push_back(o.finding());
    if (!copies.empty()) {
        auto pack = std::make_shared<const PackedFindings>(copies);
        for (size_t k = 0; k < copied_out.size(); ++k)
            *copied_out[k] = Open{pack, static_cast<uint32_t>(k), copied_out[k]->read_ms, true};
    }
    for (auto it = open_.begin(); it != open_.end();) {
        if (unread.contains(it->second.layer())) {
            ++it;
            continue;
        }
        if (seen.contains(it->first)) {
            ++it;
            continue;
        }
        cleared.push_back(finding_event(it->second.finding(), AgentEventKind::cleared, time_ms));
        it = open_.erase(it);
    }
    events.insert(events.end(), std::make_move_iterator(cleared.begin()), std::make_move_iterator(cleared.end()));
    return events;
}

namespace {

nlohmann::json open_finding_to_json(const FindingLedger::Open& o) {
    return {{"read_ms", o.read_ms}, {"finding", finding_to_json(o.finding())}};
}

}  // namespace

void FindingLedger::save_entries(const std::function<void(const std::string& key, const std::string& entry)>& put) const {
    for (const auto& [key, o] : open_) put(key, json_text(open_finding_to_json(o)));
}

void FindingLedger::Restoring::add(const nlohmann::json& entry) {
    if (!entry.is_object() || !entry.contains("finding")) return;
    auto f = finding_from_json(entry["finding"]);
    if (!f || f->severity == Severity::info) return;
    auto r = entry.find("read_ms");
    read_ms_.push_back(r != entry.end() && r->is_number_integer() ? r->get<int64_t>() : 0);
    findings_.push_back(std::move(*f));
}

FindingLedger FindingLedger::Restoring::finish() && {
    FindingLedger ledger;
    auto pack = std::make_shared<const PackedFindings>(findings_);
    for (size_t i = 0; i < findings_.size(); ++i)
        ledger.open_.emplace(finding_key(findings_[i]), Open{pack, static_cast<uint32_t>(i), read_ms_[i], true});
    return ledger;
}

FindingLedger FindingLedger::from_json(const nlohmann::json& j) {
    Restoring restoring;
    if (j.is_array())
        for (const auto& entry : j) restoring.add(entry);
    return std::move(restoring).finish();
}

AgentEvent agent_note(std::string message, int64_t time_ms) {
    AgentEvent e;
    e.time_ms = time_ms;
    e.kind = AgentEventKind::agent;
    e.message = std::move(message);
    return e;
}

AgentEvent nvml_agent_event(const NvmlEvent& n, int64_t time_ms) {
    AgentEvent e;
    e.time_ms = time_ms;
    e.kind = AgentEventKind::nvml;
    e.gpu_uuid = n.uuid;
    e.gpu_pci = n.pci;
    std::string what = n.type == NvmlEventType::xid               ? fmt::format("Xid {}", n.data)
                       : n.type == NvmlEventType::recovery_action ? fmt::format("recovery action {}", n.data)
                                                                  : std::string(to_string(n.type));
    e.message = fmt::format("NVML event: {} on {} ({})", what, n.uuid.empty() ? "a GPU" : n.uuid,
                            n.pci.empty() ? "no PCI address" : n.pci);
    std::string value = fmt::format("type {} (mask 0x{:x}), data {}", to_string(n.type), n.mask, n.data);
    if (n.gpu_instance) value += fmt::format(", GPU instance {}", *n.gpu_instance);
    if (n.compute_instance) value += fmt::format(", compute instance {}", *n.compute_instance);
    e.evidence = nlohmann::json::array({{{"source", "NVML event"}, {"value", value}}});
    return e;
}

std::vector<AgentEvent> NvmlEventCoalescer::take(const std::vector<NvmlEvent>& events, int64_t time_ms) {
    // Keys are GPUs times codes, a few thousand at most; a map past that is started again (fail open: the next
    // event of each key is recorded as a first one).
    constexpr size_t kMaxKeys = 8192;
    std::vector<AgentEvent> out;
    auto repeated = [&](Seen& s) {
        AgentEvent e = nvml_agent_event(s.last, time_ms);
        e.message += fmt::format(" (repeated: {} more since the last one recorded, {} in all)", s.unrecorded, s.total);
        out.push_back(std::move(e));
        s.unrecorded = 0;
        s.recorded_ms = time_ms;
    };
    for (const auto& n : events) {
        if (seen_.size() >= kMaxKeys) seen_.clear();
        auto key = std::make_tuple(n.uuid, n.pci, n.type, n.data);
        auto [it, first] = seen_.try_emplace(key);
        Seen& s = it->second;
        ++s.total;
        s.last = n;
        if (first) {
            out.push_back(nvml_agent_event(n, time_ms));
            s.recorded_ms = time_ms;
            continue;
        }
        ++s.unrecorded;
        if (time_ms - s.recorded_ms >= interval_ms_) repeated(s);
    }
    for (auto& [key, s] : seen_)
        if (s.unrecorded > 0 && time_ms - s.recorded_ms >= interval_ms_) repeated(s);
    return out;
}

nlohmann::json event_to_json(const AgentEvent& e) {
    nlohmann::json j = {{"id", e.id},           {"time", utc_iso8601_ms(e.time_ms)},
                        {"time_ms", e.time_ms}, {"kind", to_string(e.kind)},
                        {"finding", e.finding}, {"layer", e.layer},
                        {"severity", e.severity}, {"gpu", {{"uuid", e.gpu_uuid}, {"pci", e.gpu_pci}}},
                        {"message", e.message}, {"evidence", e.evidence}};
    return j;
}

PageEvent page_event_of(const AgentEvent& e) {
    return PageEvent{e.time_ms, e.kind, e.finding, e.severity, e.gpu_uuid, e.gpu_pci, e.message};
}

AgentEvent event_from_json(const nlohmann::json& j) {
    auto text = [&](const nlohmann::json& o, const char* key) {
        auto it = o.find(key);
        return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    auto number = [&](const char* key) {
        auto it = j.find(key);
        return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : int64_t{0};
    };
    AgentEvent e;
    if (!j.is_object()) return e;
    e.id = number("id");
    e.time_ms = number("time_ms");
    e.finding = text(j, "finding");
    e.layer = text(j, "layer");
    e.severity = text(j, "severity");
    if (auto g = j.find("gpu"); g != j.end() && g->is_object()) {
        e.gpu_uuid = text(*g, "uuid");
        e.gpu_pci = text(*g, "pci");
    }
    e.message = text(j, "message");
    e.kind = read_event_kind(text(j, "kind"), e.message);
    if (auto ev = j.find("evidence"); ev != j.end() && ev->is_array()) e.evidence = *ev;
    return e;
}

AgentEventKind read_event_kind(std::string_view name, std::string& message) {
    if (auto kind = parse_agent_event_kind(name)) return *kind;
    message = fmt::format("an event of kind \"{}\", which this gpudx does not know: {}", name, message);
    return AgentEventKind::agent;
}

namespace {

// Times and ages up to the year 9999 (253402300799 s): beyond, a double is past what an int64_t of milliseconds
// holds (1e300, inf), or nan, and the conversion would be undefined; no event is that old or that new.
constexpr double kLatestEventSeconds = 253'402'300'799.0;

}  // namespace

std::optional<int64_t> parse_event_time(std::string_view text, int64_t now) {
    text = trim(text);
    if (text.empty()) return std::nullopt;
    auto in_range = [](double secs) { return secs >= 0 && secs <= kLatestEventSeconds; };  // false for nan
    // An age before now: 90s, 15m, 2h, 7d.
    static constexpr std::pair<char, int64_t> kUnits[] = {{'s', 1000}, {'m', 60'000}, {'h', 3'600'000}, {'d', 86'400'000}};
    for (auto [unit, ms] : kUnits) {
        if (text.size() > 1 && text.back() == unit) {
            auto n = parse_double(text.substr(0, text.size() - 1));
            if (!n || !in_range(*n * static_cast<double>(ms) / 1000.0)) return std::nullopt;
            return now - static_cast<int64_t>(*n * static_cast<double>(ms));
        }
    }
    if (auto secs = parse_double(text)) {
        if (!in_range(*secs)) return std::nullopt;
        return static_cast<int64_t>(*secs * 1000.0);
    }
    // ISO 8601: the kernel-log parser reads it (an offset or "Z" included); a fraction is taken off first.
    std::string iso(text);
    int64_t frac_ms = 0;
    if (auto dot = iso.find('.'); dot != std::string::npos) {
        auto end = iso.find_first_not_of("0123456789", dot + 1);
        if (end == std::string::npos) end = iso.size();
        std::string digits = iso.substr(dot + 1, end - dot - 1);
        digits.resize(3, '0');
        frac_ms = parse_int(digits).value_or(0);
        iso.erase(dot, end - dot);
    }
    auto wall = parse_wall_time(iso, 1970);
    if (!wall || !in_range(static_cast<double>(*wall))) return std::nullopt;
    return *wall * 1000 + frac_ms;
}

namespace {

// A string as nlohmann's dump writes it (no ASCII escaping, invalid UTF-8 replaced). Text that needs no escape,
// all a log line or an id usually holds, is copied as it is; anything else goes through nlohmann itself, so the
// two can never differ.
void append_json_string(std::string& out, std::string_view s) {
    bool plain = std::all_of(s.begin(), s.end(), [](char c) {
        auto u = static_cast<unsigned char>(c);
        return u >= 0x20 && u < 0x80 && c != '"' && c != '\\';
    });
    if (!plain) {
        out += json_text(nlohmann::json(s));
        return;
    }
    out += '"';
    out += s;
    out += '"';
}

}  // namespace

void append_event_json(std::string& out, const AgentEvent& e, std::optional<std::string_view> evidence_json) {
    // The keys in the order nlohmann's objects keep them (sorted), as event_to_json's dump writes them.
    out += "{\"evidence\":";
    // The store's text was written by json_text, and EventStore::visit hands out only text that is JSON.
    if (evidence_json) out += *evidence_json;
    else out += json_text(e.evidence);
    out += ",\"finding\":";
    append_json_string(out, e.finding);
    out += ",\"gpu\":{\"pci\":";
    append_json_string(out, e.gpu_pci);
    out += ",\"uuid\":";
    append_json_string(out, e.gpu_uuid);
    out += "},\"id\":";
    out += std::to_string(e.id);
    out += ",\"kind\":";
    append_json_string(out, to_string(e.kind));
    out += ",\"layer\":";
    append_json_string(out, e.layer);
    out += ",\"message\":";
    append_json_string(out, e.message);
    out += ",\"severity\":";
    append_json_string(out, e.severity);
    out += ",\"time\":";
    append_json_string(out, utc_iso8601_ms(e.time_ms));
    out += ",\"time_ms\":";
    out += std::to_string(e.time_ms);
    out += '}';
}

bool EventsAnswer::add(const AgentEvent& e, std::optional<std::string_view> evidence_json) {
    event_.clear();
    append_event_json(event_, e, evidence_json);
    if (count_ > 0 && taken_ + body_.size() + 2 + event_.size() > max_bytes_) return false;
    body_ += count_++ == 0 ? "\n" : ",\n";
    body_ += event_;
    return true;
}

std::string EventsAnswer::take() {
    taken_ += body_.size();
    std::string piece = std::move(body_);
    // The next piece is about as large: made in one allocation instead of a dozen doublings, each a copy.
    body_ = std::string();
    body_.reserve(piece.size() + piece.size() / 8);
    return piece;
}

std::string EventsAnswer::finish(std::optional<int64_t> next_after, size_t left_out) && {
    body_ += "\n]";
    if (next_after) body_ += fmt::format(", \"next_after\": {}", *next_after);
    if (left_out > 0) body_ += fmt::format(", \"left_out\": {}", left_out);
    body_ += "}\n";
    return std::move(body_);
}

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace gpudx

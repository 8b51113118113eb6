#pragma once
// What the agent remembers (docs/agent.md): a finding that appeared or cleared, a drain or resume of the Slurm
// node, and what happened to the agent itself (records lost to a kmsg overrun, a database moved aside).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/clock.hpp"
#include "core/json_text.hpp"  // json_text, which the agent's answers are written with
#include "model/agent_status.hpp"
#include "model/driver.hpp"
#include "model/finding.hpp"
#include "model/packed_findings.hpp"
#include "model/node_page.hpp"

namespace gpudx {

// One event, of a kind model/agent_status.hpp declares.
struct AgentEvent {
    int64_t id = 0;       // the store's row id, increasing; 0 before it is stored
    int64_t time_ms = 0;  // Unix time in milliseconds
    AgentEventKind kind = AgentEventKind::agent;
    std::string finding;   // the finding id (appeared/changed/cleared), the drain reason's finding, empty otherwise
    std::string layer;     // empty when none
    std::string severity;  // empty when none; for changed, the new one
    std::string gpu_uuid;  // the first GPU the finding names, empty when none
    std::string gpu_pci;
    std::string message;
    nlohmann::json evidence = nlohmann::json::array();  // [{source, value}], every subject included
};

// The identity of a finding across diagnoses: its id and the GPUs it names. The message is left out: it
// carries counts ("3 Xid 79 events") that change while the finding stays the same. So is the severity: a
// warning that becomes an error is the same finding, changed.
std::string finding_key(const Finding& f);

// What the agent holds open: every warning and error finding it recorded as appeared (or changed) and has not
// recorded as cleared, by finding_key. It is saved in the event store beside the events, in the same commit,
// so a restarted agent goes on from it instead of recording every finding again.
//
// Fail closed: a finding of a layer the latest diagnosis could not read is neither cleared nor changed. It
// stays open as last read, and carried() hands it back to be judged beside what was read, so the verdict (and
// the Slurm node) never turns healthy because a read failed.
class FindingLedger {
public:
    // An open finding is held where the diagnosis that read it keeps it (the agent's published diagnosis, packed),
    // not copied: with thousands of findings open the ledger would otherwise hold the diagnosis twice. A finding of
    // a layer left unread gets a copy of its own, so it pins no old diagnosis (those copied at once share one pack);
    // so do those read back from the store (one pack for all of them).
    struct Open {
        std::shared_ptr<const PackedFindings> pack;
        uint32_t index = 0;   // its place in `pack`
        int64_t read_ms = 0;  // when a diagnosis last read it
        bool owned = false;   // `pack` is its own (or the restored ones'), not a diagnosis's
        Finding finding() const { return pack->at(index); }
        Layer layer() const { return pack->layer(index); }
        Severity severity() const { return pack->severity(index); }
    };
    // The open findings of the `unread` layers (layer -> why it could not be read), each with a line of
    // evidence saying that it is carried, from when, and why.
    std::vector<Finding> carried(const std::map<Layer, std::string>& unread) const;
    // The events that take the ledger to `now` (a diagnosis's findings, carried ones included): appeared,
    // changed, then cleared; info findings are no events. Findings of `unread` layers are left as they are.
    // The ledger keeps `now` alive for as long as it holds one of its findings.
    std::vector<AgentEvent> advance(std::shared_ptr<const PackedFindings> now,
                                    const std::map<Layer, std::string>& unread, int64_t time_ms);
    // The same, for findings not held elsewhere (tests, and callers with a vector of their own).
    std::vector<AgentEvent> advance(const std::vector<Finding>& now, const std::map<Layer, std::string>& unread,
                                    int64_t time_ms) {
        return advance(std::make_shared<const PackedFindings>(now), unread, time_ms);
    }
    const std::map<std::string, Open>& open() const { return open_; }
    // What the agent saves: each open finding as one entry, {"read_ms": ..., "finding": {...}}, handed to `put`
    // with its key one at a time, so that thousands of open findings are never one text (10,000 made 8 MB of it,
    // held three times over while it was written: docs/agent.md, "The API at size").
    void save_entries(const std::function<void(const std::string& key, const std::string& entry)>& put) const;
    // A ledger read back from saved entries, one at a time (the store's rows, or the one JSON array gpudx kept
    // before); an entry it cannot read is skipped. The findings restored share one pack of their own.
    class Restoring {
    public:
        void add(const nlohmann::json& entry);
        FindingLedger finish() &&;

    private:
        std::vector<Finding> findings_;
        std::vector<int64_t> read_ms_;
    };
    // Reads back an array of entries as one document.
    static FindingLedger from_json(const nlohmann::json& j);

private:
    std::map<std::string, Open> open_;
};

AgentEvent agent_note(std::string message, int64_t time_ms);
// An NVML event as the agent records it (kind nvml): "NVML event: Xid 79 on GPU-... (0000:...)".
AgentEvent nvml_agent_event(const NvmlEvent& e, int64_t time_ms);
// An NVML event storm (one Xid on one GPU, thousands a second: NVIDIA/NVSentinel#1120 saw 800,000 lines of 29
// events) recorded as a change: the first event of each GPU, type and value, then at most one event per
// `interval_ms` for that key saying how many came since the last one recorded. The findings judged from them
// (kernel_log.xid_from_nvml) are one per GPU and code already; this keeps the event store from a row per event.
class NvmlEventCoalescer {
public:
    explicit NvmlEventCoalescer(int64_t interval_ms = 60'000) : interval_ms_(interval_ms) {}
    // The events to record for `events` (received at time_ms), and for keys whose repeats since the last recorded
    // event are due; call it on every check, with or without events, so that the end of a storm is recorded.
    std::vector<AgentEvent> take(const std::vector<NvmlEvent>& events, int64_t time_ms);

private:
    struct Seen {
        int64_t recorded_ms = 0;   // when its last event was recorded
        uint64_t unrecorded = 0;   // events since then not recorded
        uint64_t total = 0;
        NvmlEvent last;
    };
    int64_t interval_ms_;
    std::map<std::tuple<std::string, std::string, NvmlEventType, unsigned long long>, Seen> seen_;
};

nlohmann::json event_to_json(const AgentEvent& e);
// Appends json_text(event_to_json(e)) byte for byte without building a JSON tree (/v1/events writes 10,000 of
// them in milliseconds). `evidence_json`: the evidence array as JSON text, as the store keeps it (EventStore::visit
// hands out only text that is JSON); nullopt: e.evidence.
void append_event_json(std::string& out, const AgentEvent& e, std::optional<std::string_view> evidence_json = {});
// Reads back what event_to_json wrote (the client of /v1/events); a missing field is left empty, a kind as
// read_event_kind reads it.
AgentEvent event_from_json(const nlohmann::json& j);
// The event as the node page's timeline draws it (render/html.hpp).
PageEvent page_event_of(const AgentEvent& e);
// An event's kind as the store or a JSON answer names it. A name this gpudx does not know (written by a newer
// one) is not taken for another kind: the event is the agent's news, its message saying the kind it was
// written with, so it is still listed, and nothing counts it as a finding or a drain.
AgentEventKind read_event_kind(std::string_view name, std::string& message);
// --since and ?since=: Unix seconds ("1764634443", "1764634443.5"), an ISO 8601 UTC time
// ("2026-12-02T00:14:03Z", fractions and "+00:00" allowed), or an age: "90s", "15m", "2h", "7d" before now.
// nullopt for anything else, and for a time or an age that is negative, not a number, or past the year 9999.
std::optional<int64_t> parse_event_time(std::string_view text, int64_t now_ms);

// The body of a /v1/events answer, written event by event: {"events": [...]}, and a byte cap (the agent's
// streamed answer has none: it holds one piece at a time). Full, it takes no more events; the answer then says
// where the rest is: "next_after" (the last id it holds: ask ?after= that), or "left_out" (events held in memory
// while the store refuses them, which have no id to go on from).
class EventsAnswer {
public:
    explicit EventsAnswer(size_t max_bytes) : max_bytes_(max_bytes) {}
    // False, and the event left out, once one more would pass the cap; the first event always goes in, so
    // every answer makes progress. `evidence_json` as for append_event_json.
    bool add(const AgentEvent& e, std::optional<std::string_view> evidence_json = {});
    size_t count() const { return count_; }
    // The text made since the last take: a streamed answer hands it out piece by piece and holds one at a time.
    std::string take();
    size_t pending_bytes() const { return body_.size(); }
    // The rest of the answer: all of it when take was never called.
    std::string finish(std::optional<int64_t> next_after, size_t left_out) &&;

private:
    size_t max_bytes_;
    size_t count_ = 0;
    size_t taken_ = 0;  // bytes already handed out by take: the cap counts the whole answer
    std::string body_ = "{\"events\": [";
    std::string event_;  // one event's text, its buffer reused
};

int64_t now_ms();

}  // namespace gpudx

#pragma once
// The agent's endpoints, answered from the HTTP adapter's threads (agent/http.hpp): /metrics, /v1/status and
// /v1/events (docs/agent.md), and the node page at /. They read what the main loop published (the latest diagnosis),
// the recorder's events, and what the agent knows of itself; they never wait on a diagnosis.
#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/http.hpp"
#include "agent/recorder.hpp"
#include "model/agent_status.hpp"
#include "model/diagnosis.hpp"
#include "model/packed_findings.hpp"
#include "model/snapshot.hpp"
#include "render/formats.hpp"  // PrometheusOptions

namespace gpudx {

// One diagnosis as the endpoints serve it. What is made of it (the Prometheus text, the status, the page) is made
// per answer, never held: a diagnosis with thousands of findings would hold its text several times over. Its
// findings are packed (model/packed_findings.hpp); an answer reads them one at a time, and the long ones (the status
// as JSON or text, the page) are sent as they are made.
struct Published {
    Snapshot snapshot;
    std::string node_class;  // the node's class in the compatibility matrix, as the Prometheus format names it
    int64_t time_ms = 0;
    DiagnosisTrigger trigger = DiagnosisTrigger::start;
    double duration_ms = 0;
    // What digest_kernel_log counted of the snapshot's kernel log, once it dropped it; none: the log is whole.
    std::optional<std::vector<XidCount>> xid_counts;

    // Holds `d`: its verdict, layers and boundary as they are, its findings packed.
    void hold(const Diagnosis& d);
    // The same with only its first `n` findings (the most severe first): what a one-line reason reads.
    Diagnosis diagnosis_head(size_t n) const;
    // The diagnosis held without its findings (its verdict, layers and boundary): with findings(), what an answer
    // that reads them one at a time is made of.
    const Diagnosis& summary() const { return summary_; }
    int exit_code() const { return summary_.exit_code; }
    // The findings, packed, where the ledger holds the open ones (FindingLedger::advance).
    const PackedFindings& findings() const { return findings_; }

    // The node record, class and Xid counts the Prometheus format names.
    PrometheusOptions prom_options() const;

private:
    Diagnosis summary_;  // without its findings
    PackedFindings findings_;
};

// Drops what no answer reads of a published snapshot's kernel log, once the diagnosis has read it: its lines, its
// Xid events and its tallies are the findings' now. Returned: the Xid counts by code and GPU, which /metrics gives
// (Published::xid_counts). A storm's log is then held once, in the findings, not twice (the next kernel-log
// diagnosis reads the log again; it never starts from this one).
std::vector<XidCount> digest_kernel_log(KernelLog& log);

// The latest diagnosis and the count of diagnoses by trigger, under one mutex: the main loop publishes, the
// servers' threads read.
class Publication {
public:
    std::shared_ptr<const Published> latest() const;
    void publish(std::shared_ptr<const Published> p);
    // The last diagnosis and the count by trigger.
    void describe(AgentStatus& s) const;

private:
    mutable std::mutex mutex_;
    std::shared_ptr<const Published> latest_;
    std::array<uint64_t, std::size(kAllDiagnosisTriggers)> by_trigger_{};
};

class Endpoints {
public:
    // `status`: what the agent knows of itself, as of the call.
    Endpoints(const Publication& publication, Recorder& recorder, std::function<AgentStatus()> status)
        : publication_(publication), recorder_(recorder), status_(std::move(status)) {}
    HttpResponse handle(const HttpRequest& r);

private:
    HttpResponse answer(const HttpRequest& r);
    HttpResponse status_response(const HttpRequest& r);
    HttpResponse events_response(const HttpRequest& r);
    // / and /report.html: the node page of the latest diagnosis and the recent events (docs/report.md).
    HttpResponse page_response();

    const Publication& publication_;
    Recorder& recorder_;
    std::function<AgentStatus()> status_;
};

}  // namespace gpudx

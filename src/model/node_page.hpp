#pragma once
// What `gpudx report` draws for one node (docs/report.md): the diagnosis with its snapshot, the identity table,
// an acceptance record and the agent's events, each optional, and what the inputs did not hold. The commands and
// the agent fill it from the same models the other formats render; render/html.hpp only reads it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.hpp"
#include "model/accept.hpp"
#include "model/agent_status.hpp"
#include "model/collector_status.hpp"
#include "model/diagnosis.hpp"
#include "model/findings_view.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

// One physical GPU as the identity table shows it: every source's name for it, and where they disagree.
struct PageIdentityRow {
    std::string pci;  // normalised dddd:bb:dd.f
    std::string uuid;  // the UUID to name it by (procfs, else NVML, else CUDA, else ROCm)
    std::string slot, model;
    std::optional<int32_t> numa_node;
    std::optional<uint32_t> minor;  // /dev/nvidiaN
    std::string dev_node;
    std::optional<unsigned> nvml_index;
    std::optional<int> cuda_ordinal;  // under the environment's CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER
    std::vector<std::string> job_view;  // "CUDA_VISIBLE_DEVICES entry 1 (GPU-…)", "pid 4242: ordinal 0"; empty: not allocated
    std::vector<std::string> disagreements;  // each a sentence: "NVML's UUID GPU-… is not procfs's GPU-…"
    std::vector<std::string> findings;       // ids of the warning and error findings that name it
};

// A saved diagnosis (`gpudx diagnose --format json`, the agent's /v1/status?format=json) read back.
struct SavedDiagnosis {
    Diagnosis diagnosis;  // its findings, unless packed_findings holds them
    // The agent's page: the diagnosis's findings, read from the agent's pack one at a time as the page is drawn
    // (diagnosis.findings is empty then); null: they are diagnosis.findings.
    const PackedFindings* packed_findings = nullptr;
    FindingsView findings() const {
        return packed_findings ? FindingsView(*packed_findings) : FindingsView(diagnosis.findings);
    }
    std::string host, collected_at, root;
    std::vector<CollectorStatus> collectors;
};
// An Error naming what is wrong for a document that is not one (no verdict, layers or findings).
Result<SavedDiagnosis> diagnosis_from_json(const nlohmann::json& j);

// One event of the agent's store, as the timeline draws it.
struct PageEvent {
    int64_t time_ms = 0;
    AgentEventKind kind = AgentEventKind::agent;
    std::string finding;   // finding id, when one
    std::string severity;  // empty when none
    std::string gpu_uuid, gpu_pci;
    std::string message;
};

struct NodePage {
    // Header: what the page is about.
    std::string node, collected_at, kernel, driver, gpudx_version;
    std::string source;  // "this node", "saved snapshot FILE", "saved diagnosis FILE", "the agent"
    std::string generated_by;  // the gpudx that made the page
    const Snapshot* snapshot = nullptr;  // null when only a saved diagnosis was given: no identity or topology
    Diagnosis diagnosis;  // its findings, unless packed_findings holds them
    // The agent's page: the diagnosis's findings, read from the agent's pack one at a time as the page is drawn
    // (diagnosis.findings is empty then); null: they are diagnosis.findings.
    const PackedFindings* packed_findings = nullptr;
    FindingsView findings() const {
        return packed_findings ? FindingsView(*packed_findings) : FindingsView(diagnosis.findings);
    }
    std::vector<CollectorStatus> collectors;
    std::vector<PageIdentityRow> identity;
    std::string allocation;  // the variables the job's view was read from ("CUDA_VISIBLE_DEVICES=1"), or empty
    const AcceptReport* accept = nullptr;
    std::string accept_source;
    // An earlier run of the same node to compare with (`--accept-reference`): its figures are drawn as a tick on
    // each bar. Null when none.
    const AcceptReport* accept_reference = nullptr;
    std::string accept_reference_source;
    std::optional<std::vector<PageEvent>> events;  // nullopt: none given; empty: none happened
    size_t events_left_out = 0;                    // older events not drawn (the agent's page keeps the latest)
    // What the inputs did not hold: fields an older gpudx did not write, parts no input gave. Each rendered as said.
    std::vector<std::string> missing;
    int refresh_s = 0;  // the agent's page reloads itself after this many seconds; 0: never
};

// The fields a current gpudx writes (`written`: the document as this gpudx would write what it read) that the
// saved document `read` lacks, as dotted paths ("pcie.devices[].slot"), objects in arrays judged by their union
// of keys; at most `limit`, then "... and N more".
std::vector<std::string> missing_json_fields(const nlohmann::json& written, const nlohmann::json& read,
                                             size_t limit = 40);

}  // namespace gpudx

#pragma once
// The agent's Slurm drain (--drain): drains the node on an error and resumes it once healthy, only when gpudx
// drained it (actions/slurm.hpp decides), and journals each decision in the event store so a kill -9 never leaves
// a drain without a record: the intent is committed before scontrol runs, the outcome after, and an intent found
// at the next start is resolved against the node's state. A node gpudx drained comes back only on a diagnosis
// that read again every layer the drain rested on (fail closed).
//
// The main loop alone decides; the last outcome is read by the servers' threads (/v1/status), under its mutex.
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "actions/slurm.hpp"
#include "agent/recorder.hpp"
#include "model/agent_status.hpp"
#include "model/diagnosis.hpp"
#include "render/formats.hpp"  // kSlurmReasonFindingsRead

namespace gpudx {

class SlurmDrain {
public:
    SlurmDrain(const SlurmDrainOptions& o, Recorder& recorder) : o_(o), recorder_(recorder) {}

    // What the journal holds of the previous run: the layers gpudx's drain rested on, an intent not resolved.
    void restore();
    // Whether a decision is due even when the verdict did not change: a failure to retry, an intent to resolve.
    bool pending() const { return failing_ || interrupted_; }
    // Drains or resumes the node as the diagnosis says; `unread`: the layers it could not read (layer -> why).
    // Of its findings (sorted, the most severe first) it reads the first kFindingsRead: the reason's, and whether
    // another error follows it (slurm_reason's "(+more)"); a caller holding thousands may pass only those.
    void decide(const Diagnosis& d, const std::map<Layer, std::string>& unread);
    static constexpr size_t kFindingsRead = kSlurmReasonFindingsRead;
    AgentStatus::Drain status() const;

private:
    // Records what the previous run's unrecorded drain or resume did, from the node's state; false when that
    // state could not be read (the decision waits).
    bool resolve_interrupted();
    // The drain, resume or failure to record for scontrol's answer, if any.
    std::optional<AgentEvent> event_for(const Diagnosis& d, const std::optional<SlurmReason>& reason,
                                        const Result<SlurmDrainResult>& r);
    void set_outcome(bool failing, std::string last);

    const SlurmDrainOptions& o_;
    Recorder& recorder_;

    // The last outcome, so a failure is said once while it lasts and retried. Written by the main loop, which
    // reads it without the lock; the servers' threads read it under it.
    mutable std::mutex outcome_mutex_;
    bool failing_ = false;
    std::string last_;

    // Main thread only. The layers gpudx's drain of the node rested on (read when it drained).
    std::set<Layer> drain_layers_;
    // The drain or resume the previous run started and did not record (it stopped between scontrol and the
    // commit): resolved from the node's state at the first decision.
    std::optional<nlohmann::json> interrupted_;
    std::string resume_held_;  // why a resume is held back, said once while it lasts
};

}  // namespace gpudx

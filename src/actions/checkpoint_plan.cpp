// Running a checkpoint plan: the steps in order for every process, undoing what was done when one fails.
#include "actions/checkpoint.hpp"

#include <map>
#include <set>

#include <fmt/format.h>

#include "core/clock.hpp"
#include "core/text.hpp"

namespace gpudx {

// ---------------------------------------------------------------------------------------------------------------
// Orchestration

CheckpointReport run_checkpoint_plan(const CheckpointPlan& plan, CheckpointDriver& driver) {
    CheckpointReport report;
    auto start = SteadyClock::now();
    std::map<int, ProcessState> tracked;

    auto perform = [&](int pid, CheckpointStep step, bool rollback, const std::vector<GpuPair>& pairs) {
        StepRecord record{pid, step, {}, rollback};
        switch (step) {
            case CheckpointStep::lock: record.result = driver.lock(pid, plan.lock_timeout_ms); break;
            case CheckpointStep::checkpoint: record.result = driver.checkpoint(pid); break;
            case CheckpointStep::restore: record.result = driver.restore(pid, pairs); break;
            case CheckpointStep::unlock: record.result = driver.unlock(pid); break;
        }
        if (record.result.ok()) {
            static constexpr ProcessState after[] = {ProcessState::locked, ProcessState::checkpointed,
                                                     ProcessState::locked, ProcessState::running};
            tracked[pid] = after[static_cast<int>(step)];
        } else if (!report.failure) {
            report.failure = record;
        }
        report.steps.push_back(record);
        return record.result.ok();
    };

    // Step by step across all processes: every process is locked before any is checkpointed, and so on.
    bool failed = false;
    for (auto step : plan.steps) {
        for (int pid : plan.pids)
            if (!perform(pid, step, false, plan.pairs)) {
                failed = true;
                break;
            }
        if (failed) break;
    }

    if (failed && plan.rollback_on_failure) {
        // Back to running, in the same order: restore every checkpointed process onto its own GPUs, then unlock.
        std::map<int, ProcessState> now;
        for (int pid : plan.pids) {
            auto s = driver.state(pid);
            auto it = tracked.find(pid);
            now[pid] = s.call.ok() ? s.state : (it != tracked.end() ? it->second : ProcessState::unknown);
        }
        for (int pid : plan.pids)
            if (now[pid] == ProcessState::checkpointed && perform(pid, CheckpointStep::restore, true, {}))
                now[pid] = ProcessState::locked;
        if (plan.unlock_on_rollback)
            for (int pid : plan.pids)
                if (now[pid] == ProcessState::locked) perform(pid, CheckpointStep::unlock, true, {});
    }

    for (int pid : plan.pids) {
        auto s = driver.state(pid);
        ProcessOutcome outcome{pid, s.state, {}};
        if (!s.call.ok()) outcome.state_error = fmt::format("{} ({}): {}", s.call.name, s.call.code, s.call.meaning);
        report.final_states.push_back(outcome);
    }
    report.seconds = seconds_since(start);
    return report;
}

}  // namespace gpudx

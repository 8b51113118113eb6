// gpudx checkpoint, restore, migrate and state: the request checked, the plan built and run, identity verified.
#include "actions/checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "actions/device_map.hpp"
#include "core/clock.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "identity/verify.hpp"

namespace gpudx {

// ---------------------------------------------------------------------------------------------------------------
// The command

namespace {

// Where the preload library most likely is, for the hint: beside the binary, or where install puts it.
std::string shim_hint() {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        auto dir = exe.parent_path();
        for (auto candidate : {dir / "libgpudx_shim.so", dir / ".." / "lib" / "gpudx" / "libgpudx_shim.so"})
            if (std::filesystem::exists(candidate, ec)) return std::filesystem::weakly_canonical(candidate, ec).string();
    }
    return "/path/to/libgpudx_shim.so";
}

}  // namespace

CheckpointCommandResult run_checkpoint_command(const CheckpointRequest& request, const Root& root,
                                               CheckpointDriver* driver_override) {
    CheckpointCommandResult r;
    r.request = request;
    auto refuse = [&](std::string message) {
        r.exit_code = 64;
        r.usage_error = std::move(message);
        return r;
    };

    if (request.pids.empty()) return refuse("name at least one process id");
    std::set<int> seen;
    for (int pid : request.pids)
        if (!seen.insert(pid).second) return refuse(fmt::format("process {} is named twice", pid));
    bool restores = request.command == CheckpointCommand::restore || request.command == CheckpointCommand::migrate ||
                    (request.command == CheckpointCommand::single_step && request.action == CheckpointStep::restore);
    if (!request.device_map.empty() && !restores)
        return refuse("--device-map applies to restore and migrate only (the map is used when the process comes back)");
    if (request.command == CheckpointCommand::migrate && request.device_map.empty())
        return refuse("migrate needs --device-map (e.g. --device-map swap:0,1)");
    if (request.command == CheckpointCommand::single_step && !request.action)
        return refuse("--action needs one of lock, checkpoint, restore, unlock");
    // Only the processes named, and only one's own unless root: checked before the driver is touched.
    for (int pid : request.pids)
        if (auto ok = check_process_access(root, pid, ::geteuid()); !ok) return refuse(ok.error().message);

    std::unique_ptr<CheckpointDriver> owned;
    CheckpointDriver* driver = driver_override;
    if (!driver) {
        owned = open_isolated_driver(request.driver);
        driver = owned.get();
    }
    r.driver = driver->info();
    if (!r.driver.load_error.empty()) {
        r.exit_code = 3;
        r.notes.push_back("cannot use the CUDA driver: " + r.driver.load_error);
        return r;
    }
    if (!r.driver.usable()) {
        r.exit_code = 3;
        r.notes.push_back(fmt::format("cuInit failed in {}: {} ({}): {}", r.driver.library_path, r.driver.init->name,
                                      r.driver.init->code, r.driver.init->meaning));
        return r;
    }
    if (!r.driver.has_checkpoint_api()) {
        r.exit_code = 3;
        r.notes.push_back(fmt::format(
            "this driver has no checkpoint API ({} missing from {}; {}): cuCheckpointProcess* came with driver 550. "
            "Upgrade the driver to use checkpoint/restore",
            fmt::join(r.driver.missing_entry_points, ", "), r.driver.library_path, describe_version(r.driver)));
        return r;
    }
    r.gpus = driver->gpus();

    if (!request.device_map.empty()) {
        MemoryHeld held = driver->memory_held(request.pids);
        auto plan = plan_device_map(request.device_map, r.gpus, held);
        if (!plan) return refuse(plan.error().message);
        if (plan->remaps() && !r.driver.can_remap()) {
            r.exit_code = 3;
            r.notes.push_back(fmt::format(
                "this driver cannot restore onto other GPUs ({}): remapping on restore needs driver 580 or newer "
                "(CUDA 13.0). Nothing was locked",
                describe_version(r.driver)));
            return r;
        }
        if (plan->remaps()) r.pairs = plan->pairs;
        for (auto& n : plan->notes) r.notes.push_back(n);
    }

    if (request.command == CheckpointCommand::state) {
        auto start = SteadyClock::now();
        for (int pid : request.pids) {
            auto s = driver->state(pid);
            ProcessOutcome o{pid, s.state, {}};
            if (!s.call.ok()) {
                o.state_error = fmt::format("{} ({}): {}", s.call.name, s.call.code, s.call.meaning);
                r.exit_code = 1;
            }
            r.report.final_states.push_back(o);
        }
        r.report.seconds = seconds_since(start);
        return r;
    }

    CheckpointPlan plan;
    plan.pids = request.pids;
    plan.lock_timeout_ms = request.lock_timeout_ms;
    plan.pairs = r.pairs;
    plan.unlock_on_rollback = !request.no_unlock;
    using S = CheckpointStep;
    switch (request.command) {
        case CheckpointCommand::checkpoint: plan.steps = {S::lock, S::checkpoint}; break;
        case CheckpointCommand::restore:
            plan.steps = {S::restore};
            if (!request.no_unlock) plan.steps.push_back(S::unlock);
            break;
        case CheckpointCommand::migrate:
            plan.steps = {S::lock, S::checkpoint, S::restore};
            if (!request.no_unlock) plan.steps.push_back(S::unlock);
            break;
        case CheckpointCommand::single_step:
            plan.steps = {*request.action};
            // One step at a time is for a person driving the sequence: report, do not undo.
            plan.rollback_on_failure = false;
            break;
        case CheckpointCommand::state: break;
    }
    r.report = run_checkpoint_plan(plan, *driver);
    r.exit_code = r.report.ok() ? 0 : 1;
    if (!r.report.ok() && plan.rollback_on_failure) {
        // What the operator does next for each process the undo could not bring back.
        for (const auto& o : r.report.final_states) {
            switch (o.state) {
                case ProcessState::running: break;
                case ProcessState::locked:
                    if (plan.unlock_on_rollback)
                        r.notes.push_back(fmt::format("process {} is left locked: `gpudx restore {} --action unlock` "
                                                      "resumes it",
                                                      o.pid, o.pid));
                    break;
                case ProcessState::checkpointed:
                    r.notes.push_back(fmt::format("process {} is left checkpointed (its GPU memory is in host memory): "
                                                  "`gpudx restore {}` puts it back on its own GPUs",
                                                  o.pid, o.pid));
                    break;
                case ProcessState::failed:
                    r.notes.push_back(fmt::format("process {} is in the driver's FAILED checkpoint state: its GPU work "
                                                  "cannot be resumed; check the kernel log (gpudx diagnose)",
                                                  o.pid));
                    break;
                case ProcessState::unknown:
                    r.notes.push_back(fmt::format("the state of process {} is unknown: check with `gpudx state {}`",
                                                  o.pid, o.pid));
                    break;
            }
        }
    }
    if (r.report.failure && r.report.failure->result.code == kCallDeadlineExceeded)
        r.notes.push_back("a driver call hung: see `gpudx diagnose` (driver layer, kernel log) before retrying");

    bool restored = std::find(plan.steps.begin(), plan.steps.end(), S::restore) != plan.steps.end();
    if (r.report.ok() && restored) {
        for (int pid : request.pids) {
            VerifyOutcome v;
            v.pid = pid;
            auto shim = find_loaded_shim(root, pid);
            if (shim) {
                // The shim's own account (gpudx verify): it refreshes when the process next asks the driver,
                // so right after a restore "unknown" or a stale state file is possible, not a failure.
                v.shim_path = *shim;
                auto checked = verify_process(root, pid, VerifyOptions{});
                if (checked) {
                    v.verdict = std::string(verdict_name(checked->verdict));
                    if (checked->verdict == IdentityVerdict::consistent || checked->verdict == IdentityVerdict::corrected)
                        v.consistent = true;
                    else if (checked->verdict == IdentityVerdict::inconsistent)
                        v.consistent = false;
                    v.detail = checked->summary;
                } else {
                    v.verdict = "unknown";
                    v.detail = "gpudx verify could not run: " + checked.error().message;
                }
                if (v.consistent == false)
                    r.notes.push_back(fmt::format("process {} reports an inconsistent GPU identity after the restore: "
                                                  "see `gpudx verify {}`",
                                                  pid, pid));
            } else if (!r.pairs.empty()) {
                v.detail = fmt::format(
                    "the gpudx shim is not loaded in process {}: after this remap it reports stale PCI addresses "
                    "(cuDeviceGetPCIBusId answers the old GPU's bus id, so NVML and NCCL resolve the wrong card or "
                    "none). Start such processes with LD_PRELOAD={} to keep their identity right",
                    pid, shim_hint());
                r.notes.push_back(v.detail);
            } else {
                v.detail = "restored onto the same GPUs: identity unchanged";
            }
            r.verify.push_back(v);
        }
    }
    return r;
}

}  // namespace gpudx

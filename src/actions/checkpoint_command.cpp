// gpudx checkpoint, restore, migrate and state: the request checked, the plan built and run, identity verified.
#include "actions/checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
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

// Why the request is refused before the driver is touched, or nothing: no or twice-named processes, a device map
// where none applies or none where migrate needs one, a single step without its action, and a process the caller
// may not act on (only the processes named, and only one's own unless root).
std::optional<std::string> request_refusal(const CheckpointRequest& request, const Root& root) {
    if (request.pids.empty()) return "name at least one process id";
    std::set<int> seen;
    for (int pid : request.pids)
        if (!seen.insert(pid).second) return fmt::format("process {} is named twice", pid);
    bool restores = request.command == CheckpointCommand::restore || request.command == CheckpointCommand::migrate ||
                    (request.command == CheckpointCommand::single_step && request.action == CheckpointStep::restore);
    if (!request.device_map.empty() && !restores)
        return "--device-map applies to restore and migrate only (the map is used when the process comes back)";
    if (request.command == CheckpointCommand::migrate && request.device_map.empty())
        return "migrate needs --device-map (e.g. --device-map swap:0,1)";
    if (request.command == CheckpointCommand::single_step && !request.action)
        return "--action needs one of lock, checkpoint, restore, unlock";
    for (int pid : request.pids)
        if (auto ok = check_process_access(root, pid, ::geteuid()); !ok) return ok.error().message;
    return std::nullopt;
}

// Why this driver cannot checkpoint at all (not loaded, cuInit failed, no checkpoint API), or nothing.
std::optional<std::string> driver_unusable(const DriverInfo& driver) {
    if (!driver.load_error.empty()) return "cannot use the CUDA driver: " + driver.load_error;
    if (!driver.usable())
        return fmt::format("cuInit failed in {}: {} ({}): {}", driver.library_path, driver.init->name,
                           driver.init->code, driver.init->meaning);
    if (!driver.has_checkpoint_api())
        return fmt::format(
            "this driver has no checkpoint API ({} missing from {}; {}): cuCheckpointProcess* came with driver 550. "
            "Upgrade the driver to use checkpoint/restore",
            fmt::join(driver.missing_entry_points, ", "), driver.library_path, describe_version(driver));
    return std::nullopt;
}

// The request's --device-map planned against the GPUs and the memory the processes hold: the pairs to restore
// onto. False when it stops the command (a map that cannot be planned, or a remap this driver cannot do).
bool plan_remap(const CheckpointRequest& request, CheckpointDriver& driver, CheckpointCommandResult& r) {
    MemoryHeld held = driver.memory_held(request.pids);
    auto plan = plan_device_map(request.device_map, r.gpus, held);
    if (!plan) {
        r.exit_code = 64;
        r.usage_error = plan.error().message;
        return false;
    }
    if (plan->remaps() && !r.driver.can_remap()) {
        r.exit_code = 3;
        r.notes.push_back(fmt::format(
            "this driver cannot restore onto other GPUs ({}): remapping on restore needs driver 580 or newer "
            "(CUDA 13.0). Nothing was locked",
            describe_version(r.driver)));
        return false;
    }
    if (plan->remaps()) r.pairs = plan->pairs;
    for (auto& n : plan->notes) r.notes.push_back(n);
    return true;
}

// `gpudx state`: each process's checkpoint state, changing nothing.
void report_states(const CheckpointRequest& request, CheckpointDriver& driver, CheckpointCommandResult& r) {
    auto start = SteadyClock::now();
    for (int pid : request.pids) {
        auto s = driver.state(pid);
        ProcessOutcome o{pid, s.state, {}};
        if (!s.call.ok()) {
            o.state_error = fmt::format("{} ({}): {}", s.call.name, s.call.code, s.call.meaning);
            r.exit_code = 1;
        }
        r.report.final_states.push_back(o);
    }
    r.report.seconds = seconds_since(start);
}

// The steps each command runs, and whether a failure is undone.
CheckpointPlan plan_steps(const CheckpointRequest& request, const std::vector<GpuPair>& pairs) {
    CheckpointPlan plan;
    plan.pids = request.pids;
    plan.lock_timeout_ms = request.lock_timeout_ms;
    plan.pairs = pairs;
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
    return plan;
}

// What the operator does next for each process the undo could not bring back.
void note_processes_left_behind(const CheckpointPlan& plan, CheckpointCommandResult& r) {
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

// After a restore, each process's GPU identity: the shim's own account where it is loaded, else whether a remap
// left the process reporting stale addresses.
void verify_restored_identities(const CheckpointRequest& request, const Root& root, CheckpointCommandResult& r) {
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

}  // namespace

CheckpointCommandResult run_checkpoint_command(const CheckpointRequest& request, const Root& root,
                                               CheckpointDriver* driver_override) {
    CheckpointCommandResult r;
    r.request = request;
    if (auto refused = request_refusal(request, root)) {
        r.exit_code = 64;
        r.usage_error = std::move(*refused);
        return r;
    }

    std::unique_ptr<CheckpointDriver> owned;
    CheckpointDriver* driver = driver_override;
    if (!driver) {
        owned = open_isolated_driver(request.driver);
        driver = owned.get();
    }
    r.driver = driver->info();
    if (auto unusable = driver_unusable(r.driver)) {
        r.exit_code = 3;
        r.notes.push_back(std::move(*unusable));
        return r;
    }
    r.gpus = driver->gpus();
    if (!request.device_map.empty() && !plan_remap(request, *driver, r)) return r;

    if (request.command == CheckpointCommand::state) {
        report_states(request, *driver, r);
        return r;
    }

    CheckpointPlan plan = plan_steps(request, r.pairs);
    r.report = run_checkpoint_plan(plan, *driver);
    r.exit_code = r.report.ok() ? 0 : 1;
    if (!r.report.ok() && plan.rollback_on_failure) note_processes_left_behind(plan, r);
    if (r.report.failure && r.report.failure->result.code == kCallDeadlineExceeded)
        r.notes.push_back("a driver call hung: see `gpudx diagnose` (driver layer, kernel log) before retrying");

    bool restored = std::find(plan.steps.begin(), plan.steps.end(), CheckpointStep::restore) != plan.steps.end();
    if (r.report.ok() && restored) verify_restored_identities(request, root, r);
    return r;
}

}  // namespace gpudx

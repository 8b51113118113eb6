// gpudx state | checkpoint | restore | migrate: the CUDA checkpoint API over named processes, with a device map.
#include <algorithm>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "actions/checkpoint.hpp"
#include "actions/device_map.hpp"
#include "model/diagnosis.hpp"
#include "render/checkpoint.hpp"

namespace gpudx::app {
namespace {

struct CheckpointCmdOptions {
    CheckpointCommand command = CheckpointCommand::state;
    std::vector<int> pids;
    std::string device_map;
    unsigned timeout_ms = 0;
    bool no_unlock = false;
    std::string action;
    std::string format = "text";
    std::string output;
    double deadline_s = 600;
    std::string driver_lib_dir;
};

// A refusal (bad map, foreign PID) is one line on stderr; JSON consumers also get the record.
int report_refusal(const CheckpointCmdOptions& o, const CheckpointCommandResult& result) {
    if (o.format == "json") write_output(o.output, checkpoint_result_to_json(result).dump(2) + "\n", OutputKind::data);
    std::fprintf(stderr, "gpudx: %s\n", result.usage_error.c_str());
    return kExitUsage;
}

int run_checkpoint_cmd(const CheckpointCmdOptions& o) {
    CheckpointRequest request;
    request.command = o.command;
    request.pids = o.pids;
    request.device_map = o.device_map;
    request.lock_timeout_ms = o.timeout_ms;
    request.no_unlock = o.no_unlock;
    if (!o.action.empty()) {
        request.command = CheckpointCommand::single_step;
        request.action = parse_step(o.action);
    }
    request.driver.library_dir = o.driver_lib_dir;
    request.driver.call_deadline_s = o.deadline_s;
    // cuInit takes ~0.4 s with persistence mode on; a short --deadline must not fail a healthy but busy node.
    request.driver.init_deadline_s = std::clamp(o.deadline_s, 10.0, 60.0);

    // The map's syntax needs no driver: a mistyped map is a usage error even where no driver loads, and is
    // told before the driver is opened to resolve the map against the node's GPUs.
    if (!request.device_map.empty())
        if (auto items = parse_device_map(request.device_map); !items) {
            CheckpointCommandResult refused;
            refused.request = request;
            refused.exit_code = kExitUsage;
            refused.usage_error = items.error().message;
            return report_refusal(o, refused);
        }
    Root root("/");
    auto result = run_checkpoint_command(request, root);
    if (result.exit_code == kExitUsage) return report_refusal(o, result);
    if (o.format == "json") write_output(o.output, checkpoint_result_to_json(result).dump(2) + "\n", OutputKind::data);
    else write_output(o.output, render_checkpoint_text(result), OutputKind::text);
    if (result.exit_code != 0 && (o.format == "json" || !o.output.empty())) {
        if (result.report.failure)
            std::fprintf(stderr, "gpudx: %s of pid %d failed: %s\n", std::string(step_name(result.report.failure->step)).c_str(),
                         result.report.failure->pid, result.report.failure->result.name.c_str());
        for (const auto& n : result.notes) std::fprintf(stderr, "gpudx: %s\n", n.c_str());
    }
    return result.exit_code;
}

void add_common(CLI::App& cmd, CheckpointCmdOptions& o) {
    cmd.add_option("pids", o.pids, "Process ids (all are locked before any is checkpointed, and so on)")
        ->required()
        ->check(CLI::Range(1, std::numeric_limits<int>::max()));
    cmd.add_option("--format", o.format, "text (default), json")->check(CLI::IsMember({"text", "json"}));
    cmd.add_option("-o,--output", o.output, "Write to FILE (atomically) instead of stdout")->type_name("FILE");
    cmd.add_option("--deadline", o.deadline_s,
                   "Seconds one driver call may take before gpudx kills the worker making it and reports a hang")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 86400.0));
    cmd.add_option("--driver-lib-dir", o.driver_lib_dir, "Load libcuda.so.1 (and libnvidia-ml.so.1) from DIR")
        ->type_name("DIR");
}

void add_device_map(CLI::App& cmd, CheckpointCmdOptions& o) {
    cmd.add_option("--device-map", o.device_map,
                   "OLD=NEW[,OLD=NEW…] by UUID, PCI address or index, or swap:A,B; unmapped GPUs stay put")
        ->type_name("MAP");
}

void add_action(CLI::App& cmd, CheckpointCmdOptions& o) {
    cmd.add_option("--action", o.action, "Run one step only, without undo on failure")
        ->check(CLI::IsMember({"lock", "checkpoint", "restore", "unlock"}));
}

const char* kFooter =
    "Exit codes: 0 done, 1 a driver step failed (processes were brought back to running where possible),\n"
    "3 the driver cannot do it (not loadable, no checkpoint API: < 550, no remapping: < 580), 64 refused\n"
    "(bad device map, a process you do not own, bad arguments).\n"
    "Driver calls run in a worker process under --deadline; a hung call is killed and reported.";

Command make(CheckpointCommand which, std::string name, std::string summary, int order) {
    return {std::move(name), std::move(summary), order, [which](CLI::App& cmd) -> std::function<int()> {
                auto o = std::make_shared<CheckpointCmdOptions>();
                o->command = which;
                add_common(cmd, *o);
                switch (which) {
                    case CheckpointCommand::state:
                        cmd.footer(std::string("Examples:\n  gpudx state 1234 5678\n\n") + kFooter);
                        break;
                    case CheckpointCommand::checkpoint:
                        cmd.add_option("--timeout", o->timeout_ms, "Lock timeout in milliseconds (0: the driver's default)");
                        add_action(cmd, *o);
                        add_device_map(cmd, *o);
                        cmd.footer(std::string("Locks, then checkpoints (GPU memory goes to host memory).\n\nExamples:\n"
                                               "  gpudx checkpoint 1234 --timeout 5000\n"
                                               "  gpudx checkpoint 1234 --action lock\n\n") +
                                   kFooter);
                        break;
                    case CheckpointCommand::restore:
                        add_device_map(cmd, *o);
                        cmd.add_flag("--no-unlock", o->no_unlock, "Leave the process locked after the restore");
                        add_action(cmd, *o);
                        cmd.footer(std::string("Restores (optionally onto other GPUs), then unlocks.\n\nExamples:\n"
                                               "  gpudx restore 1234\n  gpudx restore 1234 --device-map swap:0,1\n"
                                               "  gpudx restore 1234 --device-map 0000:00:06.0=0000:00:07.0,1=0\n\n") +
                                   kFooter);
                        break;
                    case CheckpointCommand::migrate:
                        add_device_map(cmd, *o);
                        cmd.add_option("--timeout", o->timeout_ms, "Lock timeout in milliseconds (0: the driver's default)");
                        cmd.add_flag("--no-unlock", o->no_unlock, "Leave the process locked after the restore");
                        cmd.footer(std::string("Lock, checkpoint, restore with the map, unlock; then checks identity.\n\n"
                                               "Examples:\n  gpudx migrate 1234 --device-map swap:0,1\n"
                                               "  gpudx migrate 1234 5678 --device-map GPU-7e37…=GPU-8480…,GPU-8480…=GPU-7e37… "
                                               "--format json\n\n") +
                                   kFooter);
                        break;
                    case CheckpointCommand::single_step: break;
                }
                return [o] { return run_checkpoint_cmd(*o); };
            }};
}

CommandRegistrar register_state{make(CheckpointCommand::state, "state", "CUDA checkpoint state of processes", 60)};
CommandRegistrar register_checkpoint{
    make(CheckpointCommand::checkpoint, "checkpoint", "Lock and checkpoint CUDA processes (GPU memory to host)", 61)};
CommandRegistrar register_restore{
    make(CheckpointCommand::restore, "restore", "Restore checkpointed CUDA processes, optionally onto other GPUs", 62)};
CommandRegistrar register_migrate{
    make(CheckpointCommand::migrate, "migrate", "Move CUDA processes to other GPUs of this node (--device-map)", 63)};

}  // namespace
}  // namespace gpudx::app

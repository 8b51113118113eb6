#include "app/common.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "collect/collectors.hpp"
#include "collect/kernel_log_parse.hpp"
#include "core/error.hpp"
#include "core/output_file.hpp"
#include "core/text.hpp"

namespace gpudx::app {
namespace {

// The scanner keeps the current boot when --since does not parse (a library caller gets a note); on the
// command line it is a mistake to tell at once.
std::function<std::string(const std::string&)> since_validator() {
    return [](const std::string& text) -> std::string {
        auto spec = parse_since(text);
        if (spec) return {};
        // CLI11 names the option itself: "--since: last tuesday: not seconds since boot ...".
        std::string message = spec.error().message;
        if (message.starts_with("--since ")) message.erase(0, std::string_view("--since ").size());
        return message;
    };
}

}  // namespace

void add_node_options(CLI::App& cmd, NodeOptions& o) {
    cmd.add_option("--root", o.root, "Read the node under DIR instead of / (a capture made by `gpudx gather`)")
        ->type_name("DIR");
    cmd.add_option("--kernel-log", o.kernel_log,
                   "Read this saved kernel log (dmesg, dmesg -T, journalctl -k, syslog or raw kmsg) instead of /dev/kmsg")
        ->type_name("FILE");
    cmd.add_option("--since", o.since, "Kernel-log window start: seconds since boot, or a wall time as the log writes it")
        ->type_name("TIME")
        ->check(since_validator());
    cmd.add_option("--deadline", o.deadline_s, "Seconds each driver layer (NVML, CUDA) may take before it is a finding")
        ->capture_default_str()
        ->check(CLI::Range(0.05, 600.0));
    cmd.add_flag("--no-driver", o.no_driver, "Do not load NVML or the CUDA driver (host layers only)");
    cmd.add_flag("--no-cuda", o.no_cuda, "Load NVML but not the CUDA driver (skips cuInit, ~0.4 s on large GPUs)");
    cmd.add_flag("--all-devices", o.all_devices,
                 "Also evaluate CUDA with CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER unset");
    cmd.add_option("--driver-lib-dir", o.driver_lib_dir,
                   "Load libnvidia-ml.so.1 and libcuda.so.1 from DIR (stand-ins, or a specific driver)")
        ->type_name("DIR");
}

CLI::Validator non_negative_number() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            auto value = parse_double(text);
            if (!value) return "Value " + text + " is not a number";
            return *value < 0 ? "Value " + text + " is negative; expected 0 or more" : std::string();
        },
        "");
}

void exclude_node_sources(CLI::Option* from, CLI::App& cmd) {
    for (const char* source : {"--root", "--kernel-log", "--driver-lib-dir"}) from->excludes(cmd.get_option(source));
}

CollectOptions make_collect_options(const NodeOptions& o, const Root& root) {
    CollectOptions c;
    if (!o.kernel_log.empty()) c.kernel_log_file = o.kernel_log;
    c.since = o.since;
    c.kernel_log_words = catalogue_gate_words(o.signatures ? *o.signatures : builtin_signature_catalogue());
    c.environment = load_environment(root);
    c.driver_deadline = std::chrono::milliseconds(static_cast<long>(o.deadline_s * 1000));
    c.probe_driver = !o.no_driver;
    // A capture holds the driver's recorded answers, not a driver: probing would ask THIS machine's NVML and
    // CUDA and mix their answers with the capture's files. They replay only through the stand-ins.
    if (c.probe_driver && !root.is_live() && o.driver_lib_dir.empty()) {
        c.probe_driver = false;
        c.driver_not_probed_reason =
            "a capture: driver answers replay only through --driver-lib-dir <stand-ins>; see docs/capture-format.md";
    }
    c.all_devices = o.all_devices;
    c.probe_cuda = !o.no_cuda;
    if (!o.driver_lib_dir.empty()) c.driver_library_dir = o.driver_lib_dir;
    c.pids = o.pids;
    return c;
}

Snapshot collect_node(const NodeOptions& o) {
    std::error_code ec;
    if (!std::filesystem::is_directory(o.root, ec)) throw UsageError{"--root " + o.root + ": not a directory"};
    if (!o.kernel_log.empty() && !std::filesystem::is_regular_file(o.kernel_log, ec))
        throw UsageError{"--kernel-log " + o.kernel_log + ": no such file"};
    Root root(o.root);
    auto opts = make_collect_options(o, root);
    return take_snapshot(root, opts);
}

void add_drain_options(CLI::App& cmd, DrainCliOptions& o, const std::string& drain_help, bool scontrol_needs_drain) {
    auto* drain = cmd.add_flag("--drain", o.drain, drain_help);
    cmd.add_option("--node", o.node, "Slurm node name for --drain (default: SLURMD_NODENAME, else the short host name)")
        ->type_name("NAME")
        ->needs(drain);
    auto* scontrol =
        cmd.add_option("--scontrol", o.scontrol,
                       scontrol_needs_drain ? "scontrol to run for --drain (default: $GPUDX_SCONTROL, else scontrol)"
                                            : "scontrol to run for --drain and --slurm-job (default: $GPUDX_SCONTROL, "
                                              "else scontrol)")
            ->type_name("PATH");
    if (scontrol_needs_drain) scontrol->needs(drain);
}

SlurmDrainOptions slurm_drain_options(const DrainCliOptions& o) {
    SlurmDrainOptions so;
    std::map<std::string, std::string> env;
    if (const char* v = std::getenv("SLURMD_NODENAME")) env["SLURMD_NODENAME"] = v;
    so.node = o.node.empty() ? default_slurm_node_name(env) : o.node;
    if (!o.scontrol.empty()) so.scontrol = o.scontrol;
    else if (const char* v = std::getenv("GPUDX_SCONTROL"); v && *v) so.scontrol = v;
    return so;
}

void load_judge_files(const std::string& xid_policy, const std::string& signatures, JudgeFiles& files,
                      DiagnoseOptions& diagnose, NodeOptions& node) {
    if (!xid_policy.empty()) {
        auto p = load_xid_policy_file(xid_policy);
        if (!p) throw UsageError{p.error().message};
        files.xid_policy = std::move(*p);
        diagnose.xid_policy = &files.xid_policy;
    }
    if (!signatures.empty()) {
        auto c = load_signature_catalogue_file(signatures);
        if (!c) throw UsageError{c.error().message};
        files.signatures = std::move(*c);
        node.signatures = &files.signatures;
        diagnose.signatures = &files.signatures;
    }
}

void write_output(const std::string& path, const std::string& text) {
    if (path.empty() || path == "-") {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return;
    }
    if (auto written = write_output_file(path, text); !written) throw UsageError{written.error().message};
}

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

}  // namespace gpudx::app

#pragma once
// Options and helpers shared by the commands that read a node.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "actions/slurm.hpp"
#include "collect/context.hpp"
#include "core/root.hpp"
#include "model/snapshot.hpp"
#include "rules/check_context.hpp"
#include "rules/signatures.hpp"
#include "rules/xid_policy.hpp"

namespace gpudx::app {

struct NodeOptions {
    std::string root = "/";
    std::string kernel_log;
    std::string since;
    double deadline_s = 5.0;
    bool no_driver = false;
    bool all_devices = false;
    bool no_cuda = false;
    std::string driver_lib_dir;
    // Kernel-log lines are kept for this catalogue's words (a site catalogue, `--signatures`); null: built-in.
    const SignatureCatalogue* signatures = nullptr;
    std::vector<int> pids;  // --pid, and --slurm-job's processes: read as each sees the GPU stack
};

// --root, --kernel-log, --since, --deadline, --no-driver, --all-devices, --driver-lib-dir
void add_node_options(CLI::App& cmd, NodeOptions& o);
// A number of 0 or more; CLI11's NonNegativeNumber quotes the largest double as the bound instead.
CLI::Validator non_negative_number();

// A saved snapshot (--from) is another node than --root, --kernel-log or --driver-lib-dir would read.
void exclude_node_sources(CLI::Option* from, CLI::App& cmd);
CollectOptions make_collect_options(const NodeOptions& o, const Root& root);
// Collects the node named by the options (or loads --from FILE when given).
Snapshot collect_node(const NodeOptions& o);

// --drain, --node and --scontrol, as `diagnose` and `agent` take them.
struct DrainCliOptions {
    bool drain = false;
    std::string node;
    std::string scontrol;
};
// scontrol_needs_drain false: --scontrol serves another option too (diagnose --slurm-job).
void add_drain_options(CLI::App& cmd, DrainCliOptions& o, const std::string& drain_help,
                       bool scontrol_needs_drain = true);
// The node (--node, else SLURMD_NODENAME, else the short host name) and scontrol (--scontrol, else
// $GPUDX_SCONTROL, else scontrol on PATH).
SlurmDrainOptions slurm_drain_options(const DrainCliOptions& o);

// --xid-policy and --signatures read into what a diagnosis judges with: a mistake in either file is a usage
// error, told before the node is probed. Keeps the loaded files; the pointers in `diagnose` and `node` point
// into it, so it must outlive them.
struct JudgeFiles {
    XidPolicy xid_policy;
    SignatureCatalogue signatures;
};
void load_judge_files(const std::string& xid_policy, const std::string& signatures, JudgeFiles& files,
                      DiagnoseOptions& diagnose, NodeOptions& node);

// Writes text to FILE atomically (temporary file in the same directory, then rename), or to stdout when empty.
void write_output(const std::string& path, const std::string& text);
bool stdout_is_terminal();

}  // namespace gpudx::app

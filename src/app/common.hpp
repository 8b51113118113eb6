#pragma once
// Options and helpers shared by the commands that read a node.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "collect/context.hpp"
#include "core/root.hpp"
#include "model/snapshot.hpp"
#include "rules/signatures.hpp"

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

// Writes text to FILE atomically (temporary file in the same directory, then rename), or to stdout when empty.
void write_output(const std::string& path, const std::string& text);
bool stdout_is_terminal();

}  // namespace gpudx::app

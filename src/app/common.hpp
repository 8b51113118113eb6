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
#include "model/matrix.hpp"
#include "model/node_record.hpp"
#include "model/snapshot.hpp"
#include "render/report_format.hpp"
#include "rules/engine/check_context.hpp"
#include "rules/reference/result_codes.hpp"
#include "rules/reference/signatures.hpp"
#include "rules/reference/xid_policy.hpp"

namespace gpudx::app {

struct NodeOptions {
    std::string root = "/";
    std::string kernel_log;
    std::string since;
    double deadline_s = 5.0;
    unsigned health_interval_ms = 1000;  // --health-interval: the GPU health's second sample; 0: one sample
    bool no_driver = false;
    bool all_devices = false;
    bool no_cuda = false;
    std::string driver_lib_dir;
    // Kernel-log lines are kept for this catalogue's words (a site catalogue, `--signatures`); null: built-in.
    const SignatureCatalogue* signatures = nullptr;
    std::vector<int> pids;  // --pid, and --slurm-job's processes: read as each sees the GPU stack
};

// --root, --kernel-log, --since, --deadline, --counter-interval, --no-driver, --all-devices, --driver-lib-dir
void add_node_options(CLI::App& cmd, NodeOptions& o);
// A number of 0 or more; CLI11's NonNegativeNumber quotes the largest double as the bound instead.
CLI::Validator non_negative_number();

// --format over the report formats (render/report_format.hpp): diagnose's and status's, the same choices.
CLI::Option* add_report_format_option(CLI::App& cmd, ReportFormat& format, const std::string& help);

// A saved snapshot (--from) is another node than --root, --kernel-log or --driver-lib-dir would read.
void exclude_node_sources(CLI::Option* from, CLI::App& cmd);
CollectOptions make_collect_options(const NodeOptions& o, const Root& root);
// Collects the node named by the options.
Snapshot collect_node(const NodeOptions& o);
// The saved snapshot `from` (--from FILE) when one is named, else the node collected: what every command that
// takes --from reads. A file that cannot be read as a snapshot is a usage error naming it.
Snapshot load_or_collect(const std::string& from, const NodeOptions& node);

// The node page (`gpudx report`'s HTML) of a snapshot diagnosed with the built-in rules: what `gather` puts beside
// its capture. `source` says where the snapshot came from.
std::string render_node_report(const Snapshot& s, const std::string& source);

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
    std::vector<ResultCodeTable> result_codes;
};
// --baseline FILE and --matrix FILE, as diagnose and the agent take them: nullopt when the option is empty; a file
// that cannot be read or parsed is a UsageError naming it.
std::optional<NodeRecord> load_baseline_option(const std::string& path);
std::optional<Matrix> load_matrix_option(const std::string& path);

void load_judge_files(const std::string& xid_policy, const std::string& signatures,
                      const std::vector<std::string>& error_codes, JudgeFiles& files, DiagnoseOptions& diagnose,
                      NodeOptions& node);

// What a command prints, which decides what write_output does to it on the way out.
enum class OutputKind {
    text,           // for people: every terminal control stripped (strip_terminal_controls), newlines kept
    coloured_text,  // the same, keeping the colour sequences the renderer painted for a terminal
    data,           // JSON, Prometheus, CSV, TOML, a record: written as its own format's escaping left it
};
// Text for people, painted or not.
inline OutputKind text_output(bool coloured) { return coloured ? OutputKind::coloured_text : OutputKind::text; }

// Writes what a command prints to FILE (write_output_file: atomically, links and devices as it says), or to
// standard output when FILE is empty or "-". A write that fails is an OutputError (exit 74) for a full disk or an
// I/O error, a UsageError (64) for a place that cannot be written; a reader gone from a pipe ends gpudx quietly.
void write_output(const std::string& path, const std::string& content, OutputKind kind);
// The same, its failure returned for the caller to throw (throw_write_error) once it has done what must happen
// whether or not the report arrived (diagnose --drain).
Result<void> try_write_output(const std::string& path, const std::string& content, OutputKind kind);
// Standard output alone, checked as write_output checks it: for data written in parts (gather's archive).
void write_standard_output(std::string_view data);
// An error of a write to a file, as main() reports it: OutputError (74) when the output is lost or cut,
// UsageError (64) otherwise.
[[noreturn]] void throw_write_error(const Error& e);
bool stdout_is_terminal();

// Before anything opens a file: descriptors 0, 1 and 2, when the caller closed them, are held by /dev/null
// opened the wrong way round (standard input for writing, the others for reading), so that no file gpudx opens
// becomes its standard output (a report written into a capture, say) and a read of standard input or a write
// to standard output still fails, loudly, as it would on the closed descriptor.
void hold_closed_standard_descriptors();
// At the end of every command: standard output flushed and closed, and any failure since the start (a write
// the buffer held, a full disk found at close) an OutputError.
void finish_standard_output();

}  // namespace gpudx::app

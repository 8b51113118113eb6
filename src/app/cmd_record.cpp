#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "app/command.hpp"

#include "core/clock.hpp"
#include "app/common.hpp"
#include "rules/engine/diagnose.hpp"
#include "capture/record.hpp"
#include "actions/slurm.hpp"

extern char** environ;

namespace gpudx::app {
namespace {

struct RecordCmdOptions {
    std::string file = "/var/log/gpudx/allocations.jsonl";
    std::string node;
    std::string root = "/";
    bool no_driver = false;
    double deadline_s = 5.0;
    std::string driver_lib_dir;
    bool fsync = false;
};

std::map<std::string, std::string> process_environment() {
    std::map<std::string, std::string> env;
    for (char** e = environ; e && *e; ++e) {
        std::string_view kv = *e;
        auto pos = kv.find('=');
        if (pos != std::string_view::npos) env.emplace(std::string(kv.substr(0, pos)), std::string(kv.substr(pos + 1)));
    }
    return env;
}

int run_record(const RecordCmdOptions& o) {
    std::error_code ec;
    if (!std::filesystem::is_directory(o.root, ec)) throw UsageError{"--root " + o.root + ": not a directory"};
    Root root(o.root);
    CollectOptions c;
    // As for snapshot and diagnose (make_collect_options): a capture's driver answers replay only through the
    // stand-ins, never from this machine's NVML.
    c.probe_driver = !o.no_driver && (root.is_live() || !o.driver_lib_dir.empty());
    c.driver_deadline = std::chrono::milliseconds(static_cast<long>(o.deadline_s * 1000));
    if (!o.driver_lib_dir.empty()) c.driver_library_dir = o.driver_lib_dir;
    Snapshot s = collect_gpu_inventory(root, c);

    // The job's variables are this process's own (the prolog's), even when the GPUs come from --root.
    auto env = process_environment();
    std::string node = o.node.empty() ? default_slurm_node_name(env) : o.node;
    FileReader reader = [&root](const std::string& path) -> std::optional<std::string> {
        // podman's marker describes the machine gpudx looks at; an OCI bundle path is this host's.
        if (path == "/run/.containerenv") {
            auto t = root.read_file(path, 1 << 16);
            return t ? std::optional(*t) : std::nullopt;
        }
        std::ifstream in(path);
        if (!in) return std::nullopt;
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    };
    auto record = build_allocation_record(s, env, node, utc_now_iso8601(), reader);
    std::string line = allocation_record_to_json(record).dump();
    if (o.file == "-") {
        write_output("", line + "\n", OutputKind::data);
        return kExitHealthy;
    }
    auto r = append_line(o.file, line, o.fsync);
    if (!r) {
        // A full disk loses the record (exit 74); a file that cannot be opened is the caller's mistake (64).
        Error e = r.error();
        e.message = "cannot append the record to " + o.file + ": " + e.message;
        throw_write_error(e);
    }
    return kExitHealthy;
}

CommandRegistrar register_record{
    {"record", "Append which physical GPUs a job was given to an allocation log (a Slurm prolog step)", 55,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<RecordCmdOptions>();
         cmd.add_option("--file", o->file, "Append the record to FILE (one JSON line each; `-` prints it instead)")
             ->capture_default_str()
             ->type_name("FILE");
         cmd.add_option("--node", o->node, "Node name to record (default: SLURMD_NODENAME, else the short host name)")
             ->type_name("NAME");
         cmd.add_option("--root", o->root, "Read the node's GPUs under DIR instead of / (a capture made by `gpudx gather`)")
             ->type_name("DIR");
         cmd.add_flag("--no-driver", o->no_driver,
                      "Do not load NVML (MIG instance UUIDs are then unknown); implied by a --root capture without "
                      "--driver-lib-dir");
         cmd.add_option("--deadline", o->deadline_s, "Seconds NVML may take before it is skipped")
             ->capture_default_str()
             ->check(CLI::Range(0.05, 600.0));
         cmd.add_option("--driver-lib-dir", o->driver_lib_dir, "Load libnvidia-ml.so.1 from DIR")->type_name("DIR");
         cmd.add_flag("--fsync", o->fsync, "fsync the file after appending (durable across a crash, slower)");
         cmd.footer(
             "Run it where the job's allocation is known: a Slurm Prolog (examples/slurm/prolog.sh), or a job step.\n"
             "The allocation comes from SLURM_STEP_GPUS, SLURM_JOB_GPUS (indices as in gres.conf, i.e. device\n"
             "minors), CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES, the first one set; each entry is joined with\n"
             "the node's GPUs to a UUID and PCI address, and numbered with the CUDA ordinal the job will see.\n"
             "Job id, step, user and container image come from the same environment. The record is one JSON line,\n"
             "appended with a single write so jobs starting together never mix lines (format: docs/integration.md).\n\n"
             "Exit codes: 0 recorded, 64 usage error or the file cannot be written (the message says why).\n"
             "A prolog should not fail the job over a record: the example ignores the exit code.\n\n"
             "Examples:\n  gpudx record\n  gpudx record --file - --root tests/fixtures/h200x2 --no-driver\n"
             "  SLURM_JOB_ID=7 SLURM_JOB_GPUS=1 gpudx record --file /tmp/alloc.jsonl");
         return [o] { return run_record(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app

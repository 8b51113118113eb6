#include <fmt/format.h>

#include "app/command.hpp"
#include "app/common.hpp"
#include "rules/engine/diagnose.hpp"
#include "capture/gather.hpp"

namespace gpudx::app {
namespace {

struct GatherCmdOptions {
    std::string output;
    bool directory = false;
    bool no_commands = false;
    bool no_report = false;
    NodeOptions node;
};

int run_gather(const GatherCmdOptions& o) {
    bool to_stdout = o.output == "-";
    if (to_stdout && o.directory)
        throw UsageError{"gather: --dir and - (the archive on standard output) do not go together"};
    // As gzip refuses: compressed bytes on a terminal help no one and can leave it in a state it acts on.
    if (to_stdout && stdout_is_terminal())
        throw UsageError{"gather -: standard output is a terminal; redirect it to a file or a pipe"};
    GatherOptions g;
    g.output = o.output;
    g.as_directory = o.directory || !(to_stdout || o.output.ends_with(".tar.gz") || o.output.ends_with(".tgz"));
    g.run_commands = !o.no_commands;
    Root live("/");
    g.collect = make_collect_options(o.node, live);
    if (!o.no_report)
        g.front_page = [](const Snapshot& s) { return render_node_report(s, "gpudx gather, at the capture"); };
    auto r = gather(g);
    // A full disk (or an I/O error) under the capture is exit 74, naming the file; a place that cannot be
    // written at all (no permission, not empty) is a usage error.
    if (!r) throw_write_error(r.error());
    if (to_stdout) write_standard_output(r->archive);
    fmt::print(stderr, "gpudx: captured {} files, {} links, {} device nodes, {} command outputs into {}\n", r->files,
               r->links, r->device_nodes, r->commands.size(), to_stdout ? "standard output" : o.output);
    if (r->placeholders)
        fmt::print(stderr, "gpudx: {} files (libraries) kept as empty placeholders: gpudx reads no more than their "
                           "presence\n", r->placeholders);
    for (auto& p : r->problems) fmt::print(stderr, "gpudx: not captured: {}\n", p);
    fmt::print(stderr, "gpudx: replay with: gpudx diagnose --root {}\n",
               g.as_directory ? o.output : "<the unpacked directory>");
    return kExitHealthy;
}

CommandRegistrar register_gather{{"gather", "Capture what gpudx reads on this node as a tree that --root replays", 60,
                      [](CLI::App& cmd) -> std::function<int()> {
                          auto o = std::make_shared<GatherCmdOptions>();
                          cmd.add_option("output", o->output,
                                         "OUT.tar.gz (a compressed capture), - (the archive to standard output) or a "
                                         "new directory")
                              ->required()
                              ->type_name("OUT");
                          cmd.add_flag("--dir", o->directory, "Write an unpacked directory even without a .tar.gz name");
                          cmd.add_flag("--no-commands", o->no_commands,
                                       "Do not run nvidia-smi, ldconfig or uname for _commands/");
                          cmd.add_option("--deadline", o->node.deadline_s, "Seconds each driver layer may take")
                              ->capture_default_str()
                              ->check(CLI::Range(0.05, 600.0));
                          cmd.add_flag("--no-driver", o->node.no_driver, "Do not load NVML or the CUDA driver");
                          cmd.add_flag("--no-report", o->no_report,
                                       "Do not put the node page (report.html, as gpudx report) beside the capture");
                          cmd.add_option("--pid", o->node.pids,
                                         "Also capture this process's view (repeatable): its /proc/PID files and what "
                                         "it reads in its own root, replayed by `diagnose --root OUT --pid PID`")
                              ->type_name("PID")
                              ->check(CLI::Range(1, 2147483647));
                          cmd.add_option("--driver-lib-dir", o->node.driver_lib_dir,
                                         "Load libnvidia-ml.so.1 and libcuda.so.1 from DIR")
                              ->type_name("DIR");
                          cmd.footer(
                              "Captures every file, link and device node the collectors read (sysfs, procfs, /etc, "
                              "/dev),\nthe node page (report.html, at the top: read it first), the kernel log, the GPU-related environment variables, and command outputs, "
                              "in the format\ndescribed in docs/capture-format.md, and what NVML and the CUDA driver answered "
                              "(_driver/answers.json),\nwhich the stand-in libraries of tests/standins replay.\n\n"
                              "The capture is written into a temporary folder (inside the output folder, beside the "
                              "archive, or in\n$TMPDIR for -) and published only when whole; it is removed however "
                              "gather ends, interrupted\nor killed included. Exit codes: 0 captured, 64 usage error "
                              "(the output exists and is not empty,\ncannot be created), 74 a write failed (a full "
                              "disk: the message names the file).\n\n"
                              "Examples:\n  gpudx gather node17.tar.gz\n  gpudx gather --dir /tmp/node17 && gpudx "
                              "diagnose --root /tmp/node17\n  gpudx gather --pid 4242 job.tar.gz   # replay: gpudx "
                              "diagnose --root DIR --pid 4242\n  gpudx gather - | ssh admin@host 'cat > node17.tar.gz'"
                              "\n\nOf a process only the GPU-related variables of its "
                              "environment are written (docs/process-view.md).");
                          return [o] { return run_gather(*o); };
                      }}};

}  // namespace
}  // namespace gpudx::app

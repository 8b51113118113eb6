#include <limits>

#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "identity/verify.hpp"
#include "render/verify.hpp"

namespace gpudx::app {
namespace {

struct VerifyCmdOptions {
    int pid = 0;
    std::string root = "/";
    std::string state_dir;
    std::string node_root;
    std::string format = "text";
    std::string output;
};

int run_verify(const VerifyCmdOptions& o) {
    Root root(o.root);
    VerifyOptions vo;
    vo.state_dir = o.state_dir;
    vo.node_root = o.node_root;
    auto report = verify_process(root, o.pid, vo);
    if (!report) throw UsageError{report.error().message};
    std::string text = o.format == "json" ? verify_report_to_json(*report).dump(2) + "\n" : render_verify_text(*report);
    write_output(o.output, text, o.format == "json" ? OutputKind::data : OutputKind::text);
    return report->exit_code;
}

CommandRegistrar register_verify{
    {"verify", "Check a process's GPU identity after checkpoint/restore (exit 0/1/3)", 60,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<VerifyCmdOptions>();
         cmd.add_option("pid", o->pid, "The process to check")->required()->check(CLI::Range(1, std::numeric_limits<int>::max()));
         cmd.add_option("--state-dir", o->state_dir,
                        "Where the shim writes gpudx-shim.PID (default: the process's GPUDX_SHIM_STATE_DIR, "
                        "then /dev/shm, then /tmp)")
             ->type_name("DIR");
         cmd.add_option("--node-root", o->node_root,
                        "Read /proc/driver/nvidia/gpus under DIR (default: the process's GPUDX_SHIM_PROC_ROOT, "
                        "else /)")
             ->type_name("DIR");
         cmd.add_option("--format", o->format, "text (default), json")->check(CLI::IsMember({"text", "json"}));
         cmd.add_option("-o,--output", o->output, "Write to FILE (atomically) instead of stdout")->type_name("FILE");
         cmd.footer(
             "Reads what the preload shim (libgpudx_shim.so) published for the process and, per CUDA ordinal,\n"
             "compares the bus id the driver reports with the address of the card the ordinal's UUID names.\n"
             "See docs/shim.md.\n\n"
             "Exit codes: 0 consistent (or every answer corrected by the shim), 1 inconsistent (the process\n"
             "names the wrong card), 3 could not evaluate (shim not loaded, no state yet), 64 usage error.\n\n"
             "Examples:\n  LD_PRELOAD=/usr/lib/gpudx/libgpudx_shim.so python train.py &\n"
             "  gpudx verify $!\n  gpudx verify 4242 --format json");
         return [o] { return run_verify(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app

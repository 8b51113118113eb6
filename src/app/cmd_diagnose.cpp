#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "core/text.hpp"
#include "rules/engine/diagnose.hpp"
#include "rules/reference/xid_policy.hpp"
#include "rules/comparisons/baseline.hpp"
#include "rules/comparisons/held_to.hpp"
#include "actions/slurm.hpp"
#include "render/formats.hpp"
#include "render/report_format.hpp"

namespace gpudx::app {
namespace {

struct DiagnoseCmdOptions {
    NodeOptions node;
    std::string from;
    ReportFormat format = ReportFormat::text;
    std::string output;
    bool verbose = false;
    std::optional<unsigned> expect_gpus;
    std::string xid_policy;
    std::string signatures;
    std::vector<std::string> error_codes;
    std::string baseline;
    DrainCliOptions drain;
    std::vector<int> pids;
    std::string slurm_job;
    std::string matrix;
};

// --pid and --slurm-job: the processes whose own view is judged beside the node's (docs/process-view.md). False,
// having said why, when the job has no process here: nothing of what was asked can be judged.
bool resolve_processes(const DiagnoseCmdOptions& o, NodeOptions& node) {
    node.pids = o.pids;
    if (o.slurm_job.empty()) return true;
    if (!parse_uint(o.slurm_job)) throw UsageError{"--slurm-job " + o.slurm_job + ": not a Slurm job id (a number)"};
    SlurmJobPidsOptions so;
    so.job = o.slurm_job;
    so.scontrol = slurm_drain_options(o.drain).scontrol;
    auto pids = slurm_job_pids(Root(o.node.root), so);
    if (!pids) {
        std::fprintf(stderr, "gpudx: --slurm-job %s: %s\n", o.slurm_job.c_str(), pids.error().message.c_str());
        return false;
    }
    for (int pid : *pids)
        if (std::find(node.pids.begin(), node.pids.end(), pid) == node.pids.end()) node.pids.push_back(pid);
    return true;
}

// Exit 3 when processes were named and none of them could be read: nothing was judged for what was asked.
int process_exit_code(const Snapshot& s, const NodeOptions& node, int exit_code) {
    if (node.pids.empty() || exit_code == kExitErrors) return exit_code;
    bool any_read = std::any_of(s.processes.begin(), s.processes.end(),
                                [](auto& p) { return p.state == ProcessViewState::read; });
    return any_read ? exit_code : kExitUnknown;
}

// Drains or resumes this node in Slurm once the report is written, or failed to be (docs/integration.md). Failing
// to talk to Slurm is its own exit code, so a health checker never mistakes it for a verdict about the GPUs.
int drain_or_resume(const DiagnoseCmdOptions& o, const Diagnosis& d) {
    auto r = apply_slurm_drain(slurm_drain_options(o.drain), d.exit_code, slurm_reason(d));
    if (!r) {
        std::fprintf(stderr, "gpudx: --drain: %s\n", r.error().message.c_str());
        return kExitSchedulerFailed;
    }
    std::fprintf(stderr, "gpudx: %s\n", r->message.c_str());
    return 0;
}

int run_diagnose(const DiagnoseCmdOptions& o) {
    if (o.drain.drain && !o.from.empty())
        throw UsageError{"--drain acts on the node gpudx runs on: it cannot be combined with --from"};
    // The input files first: a mistake in one is told before the node is probed (which can take the deadline).
    auto baseline = load_baseline_option(o.baseline);
    auto matrix = load_matrix_option(o.matrix);
    DiagnoseOptions dopts;
    JudgeFiles judge_files;
    NodeOptions node = o.node;
    load_judge_files(o.xid_policy, o.signatures, o.error_codes, judge_files, dopts, node);
    if (o.from.empty() && !resolve_processes(o, node)) return kExitUnknown;
    Snapshot s = load_or_collect(o.from, node);
    dopts.expect_gpus = o.expect_gpus;
    dopts.since = o.node.since;
    auto held = hold_node_to(s, baseline, matrix);
    dopts.extra_findings = std::move(held.findings);
    dopts.node_class = held.class_held_to;
    PrometheusOptions prom{.node = make_node_record(s), .node_class = held.node_class};
    Diagnosis d = diagnose(s, dopts);
    d.exit_code = process_exit_code(s, node, d.exit_code);
    RenderOptions r;
    r.color = o.output.empty() && stdout_is_terminal();
    r.verbose = o.verbose;
    auto report = render_report(s, d, o.format, r, prom);
    std::string text = std::move(report.text);
    int exit_code = report.exit_code;
    auto written = try_write_output(o.output, text, is_data_format(o.format) ? OutputKind::data : text_output(r.color));
    // The node's Slurm state follows the verdict even when the report could not be written: a full disk under
    // the report must not keep an unhealthy node in service. The failed write is told after (exit 74).
    int drained = o.drain.drain ? drain_or_resume(o, d) : 0;
    if (!written) throw_write_error(written.error());
    if (drained != 0) return kExitSchedulerFailed;
    return exit_code;
}

CommandRegistrar register_diagnose{
    {"diagnose", "Walk the layers bottom-up and name the failure boundary (exit 0/1/2/3)", 10,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<DiagnoseCmdOptions>();
         add_node_options(cmd, o->node);
         auto* from = cmd.add_option("--from", o->from,
                                     "Diagnose a saved snapshot (gpudx snapshot -o FILE) instead of collecting")
                          ->type_name("FILE");
         exclude_node_sources(from, cmd);
         add_report_format_option(cmd, o->format,
                                  "text (default), json, prom (node_exporter textfile), slurm (one drain reason line), "
                                  "npd (node-problem-detector plugin: exit 0/1/2), nagios (exit 0/1/2/3)");
         cmd.add_option("-o,--output", o->output, "Write to FILE (atomically) instead of stdout")->type_name("FILE");
         cmd.add_option("--expect-gpus", o->expect_gpus, "Number of GPUs this node should have on PCIe");
         cmd.add_option("--baseline", o->baseline,
                        "Also compare with this node record (`gpudx baseline save`): a card missing, moved or "
                        "replaced, a link trained lower, a driver, kernel or library change")
             ->type_name("FILE");
         cmd.add_option("--matrix", o->matrix,
                        "Also hold the node to its class's tested set in this compatibility matrix (TOML, "
                        "docs/baseline-matrix-fleet.md): its matrix.* divergences join the findings, and --format "
                        "prom names the class in gpudx_node_info")
             ->type_name("FILE");
         cmd.add_option("--xid-policy", o->xid_policy,
                        "Xid severities from this TOML file (format of data/xid-policy.toml; see `gpudx xid --list`)")
             ->type_name("FILE");
         cmd.add_option("--signatures", o->signatures,
                        "Site signature catalogue (TOML, format of data/signatures.toml; see `gpudx explain --list`): "
                        "its signatures replace built-in ones of the same id")
             ->type_name("FILE");
         cmd.add_option("--error-codes", o->error_codes,
                        "Site result-code table (TOML, format of data/error-codes/*.toml; repeatable): its codes replace the built-in ones of the same name or are added; a name or number that disagrees with the library's header is refused")
             ->type_name("FILE");
         cmd.add_option("--pid", o->pids,
                                    "Also judge this process as it sees the GPU stack (repeatable): what it has mapped, "
                                    "what its loader picks, its environment, container and open GPUs, read from "
                                    "/proc/PID without entering it")
                         ->type_name("PID")
                         ->check(CLI::Range(1, 2147483647))
                         ->excludes(from);
         cmd.add_option("--slurm-job", o->slurm_job,
                        "Also judge every process of this Slurm job on this node (scontrol listpids, else the job's "
                        "cgroup)")
             ->type_name("JOBID")
             ->excludes(from);
         cmd.add_flag("-v,--verbose", o->verbose, "Also show info findings and collector timings");
         add_drain_options(cmd, o->drain,
                           "Slurm: drain this node on an error finding (reason: the --format slurm line); resume it "
                           "when healthy again, but only if gpudx drained it",
                           /*scontrol_needs_drain=*/false);
         cmd.footer(
             "Layers, bottom up: pcie, module, kernel_log, libraries, devices, driver, container, allocation.\n"
             "The failure boundary is the lowest layer with an error; fix it first.\n\n"
             "Exit codes: 0 healthy, 1 error findings, 2 warnings only, 3 could not evaluate (a layer every node\n"
             "has, pcie, module or kernel_log, could not be read, or a collector failed, and no error was found:\n"
             "never healthy on what was not read), 64 usage error,\n"
             "69 --drain could not read or change the node's Slurm state (scontrol missing, failing, or node unknown),\n"
             "74 the report could not be written whole (standard output or -o FILE).\n"
             "With --format npd: 0 OK, 1 problem, 2 unknown. With --format nagios: 0 OK, 1 warning, 2 critical, "
             "3 unknown.\n\n"
             "Examples:\n  gpudx diagnose\n  gpudx diagnose --root tests/fixtures/h200x2 --expect-gpus 2\n"
             "  gpudx diagnose --baseline /var/lib/gpudx/node.json\n"
             "  gpudx diagnose --no-driver --pid 4242          # that process's libraries, environment, container, GPUs\n"
             "  gpudx diagnose --slurm-job 1234               # every process of the job on this node\n"
             "  gpudx diagnose --from node.json --format json\n"
             "  gpudx diagnose --format prom -o /var/lib/prometheus/node-exporter/gpudx.prom\n"
             "  gpudx diagnose --format slurm --drain      # as Slurm's HealthCheckProgram (docs/integration.md)\n\n"
             "--drain never resumes a node drained by someone else or for another reason: gpudx knows its own\n"
             "drains by the reason prefix \"gpudx:\". It leaves the node alone when the diagnosis could not\n"
             "evaluate it (exit 3).");
         return [o] { return run_diagnose(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app

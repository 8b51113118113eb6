#include <cstdio>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "rules/diagnose.hpp"
#include "rules/xid_policy.hpp"
#include "rules/baseline.hpp"
#include "rules/matrix.hpp"
#include "actions/slurm.hpp"
#include "render/formats.hpp"
#include "render/report.hpp"

namespace gpudx::app {
namespace {

struct DiagnoseCmdOptions {
    NodeOptions node;
    std::string from;
    std::string format = "text";
    std::string output;
    bool verbose = false;
    std::optional<unsigned> expect_gpus;
    std::string xid_policy;
    std::string signatures;
    std::string baseline;
    std::string matrix;
    bool drain = false;
    std::string slurm_node;
    std::string scontrol;
};

// Drains or resumes this node in Slurm once the report is out (docs/integration.md). Failing to talk to Slurm
// is its own exit code, so a health checker never mistakes it for a verdict about the GPUs.
int drain_or_resume(const DiagnoseCmdOptions& o, const Diagnosis& d) {
    SlurmDrainOptions so;
    std::map<std::string, std::string> env;
    if (const char* v = std::getenv("SLURMD_NODENAME")) env["SLURMD_NODENAME"] = v;
    so.node = o.slurm_node.empty() ? default_slurm_node_name(env) : o.slurm_node;
    if (!o.scontrol.empty()) so.scontrol = o.scontrol;
    else if (const char* v = std::getenv("GPUDX_SCONTROL"); v && *v) so.scontrol = v;
    auto r = apply_slurm_drain(so, d.exit_code, slurm_reason(d));
    if (!r) {
        std::fprintf(stderr, "gpudx: --drain: %s\n", r.error().message.c_str());
        return kExitSchedulerFailed;
    }
    std::fprintf(stderr, "gpudx: %s\n", r->message.c_str());
    return 0;
}

int run_diagnose(const DiagnoseCmdOptions& o) {
    if (o.drain && !o.from.empty())
        throw UsageError{"--drain acts on the node gpudx runs on: it cannot be combined with --from"};
    // The input files first: a mistake in one is told before the node is probed (which can take the deadline).
    std::optional<NodeRecord> baseline;
    if (!o.baseline.empty()) {
        auto record = load_node_record(o.baseline);
        if (!record) throw UsageError{o.baseline + ": " + record.error().message};
        baseline = std::move(*record);
    }
    std::optional<Matrix> matrix;
    if (!o.matrix.empty()) {
        auto m = load_matrix(o.matrix);
        if (!m) throw UsageError{m.error().message};
        matrix = std::move(*m);
    }
    DiagnoseOptions dopts;
    XidPolicy xid_policy;
    if (!o.xid_policy.empty()) {
        auto p = load_xid_policy_file(o.xid_policy);
        if (!p) throw UsageError{p.error().message};
        xid_policy = std::move(*p);
        dopts.xid_policy = &xid_policy;
    }
    SignatureCatalogue signatures;
    NodeOptions node = o.node;
    if (!o.signatures.empty()) {
        auto c = load_signature_catalogue_file(o.signatures);
        if (!c) throw UsageError{c.error().message};
        signatures = std::move(*c);
        node.signatures = &signatures;
    }
    Snapshot s;
    if (!o.from.empty()) {
        auto loaded = load_snapshot_file(o.from);
        if (!loaded) throw UsageError{o.from + ": " + loaded.error().message};
        s = std::move(*loaded);
    } else {
        s = collect_node(node);
    }
    if (node.signatures) dopts.signatures = node.signatures;
    dopts.expect_gpus = o.expect_gpus;
    dopts.since = o.node.since;
    if (baseline) dopts.extra_findings = diff_against_baseline(*baseline, s);
    PrometheusOptions prom;
    if (matrix) {
        auto check = check_against_matrix(*matrix, s, today_utc());
        if (check.node_class) prom.node_class = check.node_class->name;
        for (auto& f : check.findings) dopts.extra_findings.push_back(std::move(f));
    }
    Diagnosis d = diagnose(s, dopts);
    std::string text;
    int exit_code = d.exit_code;
    if (o.format == "json") {
        text = diagnosis_to_json(s, d).dump(2) + "\n";
    } else if (o.format == "prom") {
        text = render_prometheus(s, d, prom);
    } else if (o.format == "slurm") {
        text = slurm_reason(d) + "\n";
    } else if (o.format == "npd") {
        auto r = node_problem_detector(d);
        text = r.message + "\n";
        exit_code = r.exit_code;
    } else if (o.format == "nagios") {
        auto r = nagios(s, d);
        text = r.message + "\n";
        exit_code = r.exit_code;
    } else {
        RenderOptions r;
        r.color = o.output.empty() && stdout_is_terminal();
        r.verbose = o.verbose;
        text = render_diagnosis_text(s, d, r);
    }
    write_output(o.output, text);
    if (o.drain && drain_or_resume(o, d) != 0) return kExitSchedulerFailed;
    return exit_code;
}

CommandRegistrar reg{
    {"diagnose", "Walk the layers bottom-up and name the failure boundary (exit 0/1/2/3)", 10,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<DiagnoseCmdOptions>();
         add_node_options(cmd, o->node);
         auto* from = cmd.add_option("--from", o->from,
                                     "Diagnose a saved snapshot (gpudx snapshot -o FILE) instead of collecting")
                          ->type_name("FILE");
         exclude_node_sources(from, cmd);
         cmd.add_option("--format", o->format,
                        "text (default), json, prom (node_exporter textfile), slurm (one drain reason line), "
                        "npd (node-problem-detector plugin: exit 0/1/2), nagios (exit 0/1/2/3)")
             ->check(CLI::IsMember({"text", "json", "prom", "slurm", "npd", "nagios"}));
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
         cmd.add_flag("-v,--verbose", o->verbose, "Also show info findings and collector timings");
         auto* drain = cmd.add_flag("--drain", o->drain,
                      "Slurm: drain this node on an error finding (reason: the --format slurm line); resume it when "
                      "healthy again, but only if gpudx drained it");
         cmd.add_option("--node", o->slurm_node,
                        "Slurm node name for --drain (default: SLURMD_NODENAME, else the short host name)")
             ->type_name("NAME")
             ->needs(drain);
         cmd.add_option("--scontrol", o->scontrol, "scontrol to run for --drain (default: $GPUDX_SCONTROL, else scontrol)")
             ->type_name("PATH")
             ->needs(drain);
         cmd.footer(
             "Layers, bottom up: pcie, module, kernel_log, libraries, devices, driver, container, allocation.\n"
             "The failure boundary is the lowest layer with an error; fix it first.\n\n"
             "Exit codes: 0 healthy, 1 error findings, 2 warnings only, 3 could not evaluate, 64 usage error,\n"
             "69 --drain could not read or change the node's Slurm state (scontrol missing, failing, or node unknown).\n"
             "With --format npd: 0 OK, 1 problem, 2 unknown. With --format nagios: 0 OK, 1 warning, 2 critical, "
             "3 unknown.\n\n"
             "Examples:\n  gpudx diagnose\n  gpudx diagnose --root tests/fixtures/h200x2 --expect-gpus 2\n"
             "  gpudx diagnose --baseline /var/lib/gpudx/node.json\n"
             "  gpudx diagnose --matrix /etc/gpudx/matrix.toml --format prom -o /var/lib/prometheus/node-exporter/gpudx.prom\n"
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

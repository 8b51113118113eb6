#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "checks/diagnose.hpp"
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
};

int run_diagnose(const DiagnoseCmdOptions& o) {
    Snapshot s;
    if (!o.from.empty()) {
        auto loaded = load_snapshot_file(o.from);
        if (!loaded) throw UsageError{o.from + ": " + loaded.error().message};
        s = std::move(*loaded);
    } else {
        s = collect_node(o.node);
    }
    DiagnoseOptions dopts;
    dopts.expect_gpus = o.expect_gpus;
    dopts.since = o.node.since;
    Diagnosis d = diagnose(s, dopts);
    std::string text;
    if (o.format == "json") {
        text = diagnosis_to_json(s, d).dump(2) + "\n";
    } else {
        RenderOptions r;
        r.color = o.output.empty() && stdout_is_terminal();
        r.verbose = o.verbose;
        text = render_diagnosis_text(s, d, r);
    }
    write_output(o.output, text);
    return d.exit_code;
}

CommandRegistrar reg{
    {"diagnose", "Walk the layers bottom-up and name the failure boundary (exit 0/1/2/3)", 10,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<DiagnoseCmdOptions>();
         add_node_options(cmd, o->node);
         cmd.add_option("--from", o->from, "Diagnose a saved snapshot (gpudx snapshot -o FILE) instead of collecting")
             ->type_name("FILE");
         cmd.add_option("--format", o->format, "text (default), json")->check(CLI::IsMember({"text", "json"}));
         cmd.add_option("-o,--output", o->output, "Write to FILE (atomically) instead of stdout")->type_name("FILE");
         cmd.add_option("--expect-gpus", o->expect_gpus, "Number of GPUs this node should have on PCIe");
         cmd.add_flag("-v,--verbose", o->verbose, "Also show info findings and collector timings");
         cmd.footer(
             "Layers, bottom up: pcie, module, kernel_log, libraries, devices, driver, container, allocation.\n"
             "The failure boundary is the lowest layer with an error; fix it first.\n\n"
             "Exit codes: 0 healthy, 1 error findings, 2 warnings only, 3 could not evaluate, 64 usage error.\n\n"
             "Examples:\n  gpudx diagnose\n  gpudx diagnose --root tests/fixtures/h200x2 --expect-gpus 2\n"
             "  gpudx diagnose --from node.json --format json");
         return [o] { return run_diagnose(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app

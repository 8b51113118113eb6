#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/command.hpp"

#include "core/clock.hpp"
#include "app/common.hpp"
#include "rules/engine/diagnose.hpp"
#include "rules/comparisons/baseline.hpp"
#include "render/records.hpp"
#include "render/report.hpp"

namespace gpudx::app {
namespace {

struct BaselineOptions {
    NodeOptions node;
    std::string file;
    std::string from;
    std::string format = "text";
};

int run_save(const BaselineOptions& o) {
    Snapshot s = load_or_collect(o.from, o.node);
    NodeRecord r = make_node_record(s);
    r.recorded_at = utc_now_iso8601();
    if (r.gpudx_version.empty()) r.gpudx_version = GPUDX_VERSION;
    write_output(o.file, node_record_to_json(r).dump(2) + "\n", OutputKind::data);
    if (o.file != "-") {
        std::string uuids_unknown;
        for (auto& g : r.gpus)
            if (g.uuid.empty()) uuids_unknown += (uuids_unknown.empty() ? "" : ", ") + g.pci;
        std::fprintf(stderr, "gpudx: recorded %zu GPU(s), driver %s, kernel %s in %s\n", r.gpus.size(),
                     r.driver_version.empty() ? "unknown" : r.driver_version.c_str(),
                     r.kernel_release.empty() ? "unknown" : r.kernel_release.c_str(), o.file.c_str());
        if (!uuids_unknown.empty())
            std::fprintf(stderr,
                         "gpudx: warning: no UUID known for %s (driver not loaded?); a later diff can only compare "
                         "addresses for them\n",
                         uuids_unknown.c_str());
    }
    return kExitHealthy;
}

int run_diff(const BaselineOptions& o) {
    auto base = load_node_record(o.file);
    if (!base) throw UsageError{o.file + ": " + base.error().message};
    Snapshot s = load_or_collect(o.from, o.node);
    std::string source = !o.from.empty() ? "snapshot " + o.from
                         : o.node.root == "/" ? std::string("this node")
                                              : "capture " + o.node.root;
    auto findings = diff_records(*base, make_node_record(s), o.file, source);
    int code = exit_code_for(findings);
    std::string text;
    if (o.format == "json") {
        nlohmann::json j;
        j["baseline"] = o.file;
        j["baseline_recorded_at"] = base->recorded_at;
        j["compared_with"] = source;
        auto& fs = j["findings"] = nlohmann::json::array();
        for (auto& f : findings) fs.push_back(finding_to_json(f));
        j["exit_code"] = code;
        text = j.dump(2) + "\n";
    } else {
        text = fmt::format("gpudx baseline diff — {} (recorded {}) against {}\n\n", o.file,
                           base->recorded_at.empty() ? "at an unknown time" : base->recorded_at, source);
        text += render_findings_text(findings, stdout_is_terminal());
        bool any = false;
        for (auto& f : findings) any |= f.severity != Severity::info;
        if (!any) text += "No change from the baseline.\n";
        text += fmt::format("Exit {}\n", code);
    }
    write_output("", text, o.format == "json" ? OutputKind::data : text_output(stdout_is_terminal()));
    return code;
}

CommandRegistrar register_baseline{
    {"baseline", "Save this node's record (cards, slots, links, driver stack) or diff against a saved one", 40,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<BaselineOptions>();
         cmd.require_subcommand(1);
         auto* save = cmd.add_subcommand("save", "Write the node record to FILE (atomically; - for stdout)");
         save->add_option("FILE", o->file, "Where to write the record")->required();
         add_node_options(*save, o->node);
         exclude_node_sources(save->add_option("--from", o->from, "Make the record from a saved snapshot instead of collecting")
                                  ->type_name("SNAPSHOT"),
                              *save);
         auto* diff = cmd.add_subcommand("diff", "Compare this node (or a snapshot) with the record in FILE");
         diff->add_option("FILE", o->file, "A record written by `gpudx baseline save`")->required();
         add_node_options(*diff, o->node);
         exclude_node_sources(
             diff->add_option("--from", o->from, "Compare a saved snapshot instead of collecting")->type_name("SNAPSHOT"),
             *diff);
         diff->add_option("--format", o->format, "text (default), json")->check(CLI::IsMember({"text", "json"}));
         cmd.footer(
             "The record lists per GPU its UUID, PCI address, slot, model, VBIOS, link (max and current) and NUMA\n"
             "node, and the driver, kernel, module file, resolved libraries, Fabric Manager and CUDA versions.\n"
             "diff reports missing, extra, moved and replaced cards, lower links and version changes.\n\n"
             "Exit codes (diff): 0 unchanged, 1 a card is missing, 2 other changes, 64 usage error.\n\n"
             "Examples:\n  gpudx baseline save /var/lib/gpudx/node.json\n"
             "  gpudx baseline diff /var/lib/gpudx/node.json\n"
             "  gpudx baseline diff node.json --from snapshot.json --format json");
         return [o, save, diff]() -> int {
             if (save->parsed()) return run_save(*o);
             if (diff->parsed()) return run_diff(*o);
             return kExitUsage;
         };
     }}};

}  // namespace
}  // namespace gpudx::app

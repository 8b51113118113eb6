#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "rules/engine/diagnose.hpp"
#include "render/report.hpp"

namespace gpudx::app {
namespace {

struct SnapshotOptions {
    NodeOptions node;
    std::string format = "json";
    std::string output;
};

int run_snapshot(const SnapshotOptions& o) {
    Snapshot s = collect_node(o.node);
    std::string text = o.format == "json" ? snapshot_to_json(s).dump(2) + "\n" : render_snapshot_text(s);
    write_output(o.output, text, o.format == "json" ? OutputKind::data : OutputKind::text);
    return kExitHealthy;
}

CommandRegistrar register_snapshot{{"snapshot",
                      "Collect every layer of this node (or a capture) into one JSON document (docs/snapshot-format.md)",
                      20, [](CLI::App& cmd) -> std::function<int()> {
                          auto o = std::make_shared<SnapshotOptions>();
                          add_node_options(cmd, o->node);
                          cmd.add_option("--format", o->format, "json (default) or text")
                              ->check(CLI::IsMember({"json", "text"}));
                          cmd.add_option("-o,--output", o->output, "Write to FILE (atomically) instead of stdout")
                              ->type_name("FILE");
                          cmd.footer("Examples:\n  gpudx snapshot -o node.json\n"
                                     "  gpudx snapshot --root tests/fixtures/h200x2 --no-driver --format text");
                          return [o] { return run_snapshot(*o); };
                      }}};

}  // namespace
}  // namespace gpudx::app

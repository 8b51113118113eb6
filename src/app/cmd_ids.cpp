// gpudx ids: one row per physical GPU keyed by PCI address, then every disagreement between the sources.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "rules/engine/check_context.hpp"
#include "rules/engine/diagnose.hpp"
#include "identity/join.hpp"
#include "model/infiniband.hpp"
#include "render/report.hpp"

namespace gpudx::app {
namespace {

struct IdsOptions {
    NodeOptions node;
    std::string from;
    std::string format = "text";
    std::string output;
};

// The findings about which GPU is which: those of the rules declared with RuleTag::identity, from the families
// that declare any.
std::vector<Finding> identity_findings(const Snapshot& s) {
    DiagnoseOptions dopts;
    CheckContext ctx{s, dopts};
    auto about_identity = [](const Rule& r) { return r.tags.contains(RuleTag::identity); };
    std::vector<Finding> out;
    for (auto& fam : check_families()) {
        if (std::none_of(fam.rules.begin(), fam.rules.end(), about_identity)) continue;
        std::vector<Finding> found;
        fam.run(ctx, found);
        for (auto& f : found)
            if (std::any_of(fam.rules.begin(), fam.rules.end(),
                            [&](const Rule& r) { return r.id == f.id && about_identity(r); }))
                out.push_back(std::move(f));
    }
    return out;
}

// The InfiniBand/RoCE adapters after the GPUs: each with its ports and the GPUs by PCIe distance, nearest first,
// so an operator sees which NIC a GPU's GPUDirect traffic should take.
nlohmann::json nics_to_json(const Snapshot& s, const CheckContext& ctx) {
    auto out = nlohmann::json::array();
    for (auto& d : s.infiniband.devices) {
        nlohmann::json n = {{"name", d.name}, {"pci", d.pci}, {"ports", nlohmann::json::array()},
                            {"gpus", nlohmann::json::array()}};
        for (auto& p : d.ports)
            n["ports"].push_back({{"port", p.port}, {"state", p.state}, {"phys_state", p.phys_state}, {"rate", p.rate},
                                  {"link_layer", p.link_layer}, {"netdev", p.netdev}});
        if (!d.pci.empty())
            for (auto& g : gpus_by_distance(s.pcie, d.pci))
                n["gpus"].push_back({{"pci", g.gpu}, {"uuid", ctx.gpu(g.gpu).uuid}, {"place", name_of(g.place)}});
        out.push_back(std::move(n));
    }
    return out;
}

std::string render_nics_text(const Snapshot& s) {
    if (s.infiniband.devices.empty()) return {};
    std::string text = "\nInfiniBand/RoCE adapters:\n";
    for (auto& d : s.infiniband.devices) {
        text += fmt::format("  {}  {}\n", d.name, d.pci.empty() ? std::string("(no PCI function)") : d.pci);
        for (auto& p : d.ports)
            text += fmt::format("    port {}: {} / {}, {}, {}{}\n", p.port, p.state.empty() ? "?" : p.state,
                                p.phys_state.empty() ? "?" : p.phys_state, p.rate.empty() ? "rate ?" : p.rate,
                                p.link_layer.empty() ? "link layer ?" : p.link_layer,
                                p.netdev.empty() ? "" : " (" + p.netdev + ")");
        if (d.pci.empty()) continue;
        std::string gpus;
        for (auto& g : gpus_by_distance(s.pcie, d.pci))
            gpus += fmt::format("{}{} ({})", gpus.empty() ? "" : ", ", g.gpu, describe(g.place));
        if (!gpus.empty()) text += "    GPUs, nearest first: " + gpus + "\n";
    }
    return text;
}

int run_ids(const IdsOptions& o) {
    Snapshot s = load_or_collect(o.from, o.node);
    IdentityTable table = join_identity(s);
    auto findings = identity_findings(s);
    bool disagreement = false;
    for (auto& f : findings)
        if (f.severity != Severity::info) disagreement = true;

    std::string text;
    if (o.format == "json") {
        auto j = identity_to_json(table);
        j["findings"] = nlohmann::json::array();
        for (auto& f : findings) j["findings"].push_back(finding_to_json(f));
        j["consistent"] = !disagreement;
        DiagnoseOptions dopts;
        j["nics"] = nics_to_json(s, CheckContext{s, dopts});
        for (auto collector : {Collector::nvml, Collector::cuda})
            if (auto* c = s.collector(collector))
                j["driver_status"][to_string(collector)] = {{"state", to_string(c->state)}, {"message", c->message}};
        text = j.dump(2) + "\n";
    } else if (o.format == "csv") {
        text = render_identity_csv(table);
    } else {
        text = render_identity_text(table);
        text += render_nics_text(s);
        for (auto collector : {Collector::nvml, Collector::cuda})
            if (auto* c = s.collector(collector); c && c->state != CollectorState::ok)
                text += fmt::format("{}: {}{}\n", to_string(collector), to_string(c->state), c->message.empty() ? "" : ": " + c->message);
        if (findings.empty()) {
            text += "consistent: every source names the same GPU at each address\n";
        } else {
            text += "\n";
            for (auto& f : findings) {
                text += fmt::format("{} {}: {}\n", to_string(f.severity), f.id, f.message);
                for (auto& e : f.evidence) text += fmt::format("    {} = {}\n", e.source, e.value);
                if (!f.next_step.empty()) text += fmt::format("  next: {}\n", f.next_step);
            }
        }
    }
    write_output(o.output, text, o.format == "json" || o.format == "csv" ? OutputKind::data : OutputKind::text);
    return disagreement ? kExitErrors : kExitHealthy;
}

CommandRegistrar register_ids{
    {"ids", "One row per GPU by PCI address: slot, minor, /dev node, UUID, NVML index, CUDA ordinal (exit 0/1)", 30,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<IdsOptions>();
         add_node_options(cmd, o->node);
         exclude_node_sources(cmd.add_option("--from", o->from,
                                             "Read a saved snapshot (gpudx snapshot -o FILE) instead of collecting")
                                  ->type_name("FILE"),
                              cmd);
         cmd.add_option("--format", o->format, "text (default), json, csv")
             ->check(CLI::IsMember({"text", "json", "csv"}));
         cmd.add_option("-o,--output", o->output, "Write to FILE (atomically) instead of stdout")->type_name("FILE");
         cmd.footer("Only the PCI address and the UUID are stable; indices differ between nvidia-smi, /dev, CUDA "
                    "and schedulers.\nThe CUDA column is the ordinal under this environment's CUDA_VISIBLE_DEVICES "
                    "and CUDA_DEVICE_ORDER.\n\nExit codes: 0 every source agrees, 1 a disagreement (listed after "
                    "the table), 64 usage error.\n\nExamples:\n  gpudx ids\n  gpudx ids --format csv\n"
                    "  gpudx ids --root CAPTURE --driver-lib-dir build/tests/standins/lib");
         return [o] { return run_ids(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app

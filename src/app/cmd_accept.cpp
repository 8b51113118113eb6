#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "rules/engine/diagnose.hpp"
#include "collect/collectors.hpp"
#include "core/root.hpp"
#include "core/text.hpp"
#include "actions/accept.hpp"
#include "rules/comparisons/matrix.hpp"
#include "render/accept.hpp"

extern char** environ;

namespace gpudx::app {
namespace {

struct AcceptCmdOptions {
    std::string format = "text";
    std::string output;
    bool long_mode = false;
    std::string pairs = "all";
    std::vector<std::string> allow;
    std::string matrix;
    std::optional<double> min_d2d, min_h2d, min_d2h, min_p2p, min_p2p_pcie, min_memory_fraction;
    std::optional<unsigned> expect_gpus;
    std::string compare;
    std::string from;
    std::string driver_lib_dir;
    double timeout_s = 600;
    std::string image_digest;
    bool visibility_probe = false;
    bool verbose = false;
};

std::map<std::string, std::string> process_environment() {
    std::map<std::string, std::string> env;
    for (char** e = environ; e && *e; ++e) {
        std::string_view kv(*e);
        auto eq = kv.find('=');
        if (eq != std::string_view::npos) env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
    }
    return env;
}

// The image digest when the container runtime tells: --image-digest, GPUDX_IMAGE_DIGEST (set it from
// the pod spec or the job script), or podman's /run/.containerenv.
std::string find_image_digest(const Root& root, const std::map<std::string, std::string>& env, const std::string& flag) {
    if (!flag.empty()) return flag;
    if (auto it = env.find("GPUDX_IMAGE_DIGEST"); it != env.end() && !it->second.empty()) return it->second;
    if (auto text = root.read_file("/run/.containerenv", 64 * 1024)) {
        std::string image;
        for (auto& [k, v] : parse_key_values(*text, '=')) {
            std::string value(trim(v));
            if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
            if (k == "imageid" && !value.empty()) return value;
            if (k == "image") image = value;
        }
        if (auto at = image.find("@sha256:"); at != std::string::npos) return image.substr(at + 1);
    }
    return {};
}

std::string self_executable() {
    char buf[PATH_MAX] = {};
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// --pairs is all, none, or A:B items; whether A and B are GPUs that CUDA sees is for the run to find out.
std::string pairs_syntax_problem(const std::string& spec) {
    auto s = to_lower(trim(spec));
    if (s == "all" || s == "none") return {};
    if (s.empty()) return "empty; expected all, none, or A:B,C:D (UUID, PCI address or ordinal)";
    for (auto part : split(spec, ',')) {
        auto item = trim(part);
        if (item.empty()) continue;
        // A PCI address holds ':' itself: one split must leave a name on both sides.
        bool two_sides = false;
        for (size_t pos = item.find(':'); pos != std::string_view::npos && !two_sides; pos = item.find(':', pos + 1))
            two_sides = !trim(item.substr(0, pos)).empty() && !trim(item.substr(pos + 1)).empty();
        if (!two_sides)
            return fmt::format("item '{}' is not A:B; expected all, none, or A:B,C:D (UUID, PCI address or ordinal)",
                               item);
    }
    return {};
}

int run_accept(const AcceptCmdOptions& o) {
    std::optional<std::string> lib_dir;
    if (!o.driver_lib_dir.empty()) lib_dir = o.driver_lib_dir;

    if (o.visibility_probe) {
        write_output("", visible_view_to_json(probe_visible_devices(lib_dir)).dump() + "\n", OutputKind::data);
        return 0;
    }

    std::optional<AcceptReport> old;
    if (!o.compare.empty()) {
        auto r = load_accept_report(o.compare);
        if (!r) throw UsageError{"--compare " + o.compare + ": " + r.error().message};
        old = std::move(*r);
    }

    AcceptReport report;
    if (!o.from.empty()) {
        auto r = load_accept_report(o.from);
        if (!r) throw UsageError{"--from " + o.from + ": " + r.error().message};
        report = std::move(*r);
    } else {
        Root root("/");
        auto opts = default_accept_options(o.long_mode);
        opts.environment = process_environment();
        opts.pairs = o.pairs;
        opts.expect_gpus = o.expect_gpus;
        for (auto& a : o.allow)
            for (auto part : split(a, ','))
                if (!trim(part).empty()) opts.allow.emplace_back(trim(part));
        if (!opts.allow.empty()) opts.allow_source = "--allow";

        CollectOptions copts;
        CollectContext ctx{root, copts};
        HostInfo host;
        collect_host(ctx, host);
        opts.node = host.hostname;
        opts.kernel = host.kernel_release;
        if (auto v = root.read_file("/sys/module/nvidia/version", 4096)) opts.module_version = std::string(trim(*v));
        opts.image_digest = find_image_digest(root, opts.environment, o.image_digest);

        if (!o.matrix.empty()) {
            auto m = load_matrix(o.matrix);
            if (!m) throw UsageError{"--matrix " + o.matrix + ": " + m.error().message};
            NodeOptions node;
            node.driver_lib_dir = o.driver_lib_dir;
            Snapshot s = collect_node(node);
            const NodeClass* cls = class_for(*m, s);
            if (!cls) throw UsageError{"--matrix " + o.matrix + ": no class in the matrix fits this node"};
            if (auto t = thresholds_for(*m, s)) opts.thresholds = *t;
            opts.thresholds_source = "matrix " + o.matrix + " class " + cls->name;
        }
        bool any_flag = false;
        auto flag = [&](std::optional<double>& slot, const std::optional<double>& value) {
            if (value) {
                slot = value;
                any_flag = true;
            }
        };
        flag(opts.thresholds.min_d2d_gbps, o.min_d2d);
        flag(opts.thresholds.min_h2d_gbps, o.min_h2d);
        flag(opts.thresholds.min_d2h_gbps, o.min_d2h);
        flag(opts.thresholds.min_p2p_gbps, o.min_p2p);
        flag(opts.thresholds.min_p2p_pcie_gbps, o.min_p2p_pcie);
        flag(opts.thresholds.min_memory_fraction, o.min_memory_fraction);
        if (any_flag) opts.thresholds_source = o.matrix.empty() ? "flags" : opts.thresholds_source + ", flags";

        CudaAcceptConfig cfg;
        cfg.library_dir = lib_dir;
        std::string exe = self_executable();
        if (!exe.empty()) {
            cfg.probe_command = {exe, "accept", "--visibility-probe"};
            if (lib_dir) {
                cfg.probe_command.push_back("--driver-lib-dir");
                cfg.probe_command.push_back(std::filesystem::absolute(*lib_dir).string());
            }
        }
        WatchOptions watch;
        watch.overall = std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000));
        if (getenv("GPUDX_ACCEPT_DEADLINE_SCALE"))  // tests shrink every sub-test deadline
            if (auto s = parse_double(getenv("GPUDX_ACCEPT_DEADLINE_SCALE"))) watch.deadline_scale = *s;
        bool tty = ::isatty(STDERR_FILENO) == 1;
        if (tty)
            watch.progress = [](const SubTest& t, size_t done, size_t planned) {
                std::string subj = t.subjects.empty() ? "" : " " + t.subjects[0].substr(0, 12);
                std::fprintf(stderr, "\r\033[K[%zu/%zu] %s%s", done + 1, planned, t.id.c_str(), subj.c_str());
                std::fflush(stderr);
            };
        report = run_acceptance_watched([cfg] { return make_cuda_accept_driver(cfg); }, opts, watch);
        if (tty) std::fprintf(stderr, "\r\033[K");
    }

    std::vector<AcceptChange> changes;
    if (old) changes = compare_accept_reports(*old, report);
    std::string text;
    bool coloured = o.output.empty() && stdout_is_terminal();
    if (o.format == "json") {
        auto j = accept_report_to_json(report);
        if (old) {
            j["comparison"] = nlohmann::json::array();
            for (auto& c : changes)
                j["comparison"].push_back({{"what", c.what}, {"before", c.before}, {"after", c.after}, {"worse", c.worse}});
        }
        text = j.dump(2) + "\n";
    } else {
        text = render_accept_text(report, coloured, o.verbose);
        if (old) text += "\n" + render_accept_comparison(changes);
    }
    write_output(o.output, text, o.format == "json" ? OutputKind::data : text_output(coloured));
    if (!o.from.empty() && old) {
        for (auto& c : changes)
            if (c.worse) return kExitErrors;
        return kExitHealthy;
    }
    return report.exit_code;
}

CommandRegistrar register_accept{
    {"accept", "Acceptance tests after a repair: compute, memory, transfers, isolation; JSON record", 60,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<AcceptCmdOptions>();
         cmd.add_option("--format", o->format, "text (default), json")->check(CLI::IsMember({"text", "json"}));
         cmd.add_option("-o,--output", o->output, "Write to FILE (atomically) instead of stdout")->type_name("FILE");
         cmd.add_flag("--long", o->long_mode, "Longer memory passes (4 patterns x 4 seeds, 95 % of free memory) and stress repetitions");
         cmd.add_option("--pairs", o->pairs,
                        "Permitted GPU pairs for the peer tests: all (default), none, or A:B,C:D (UUID, PCI address or ordinal)")
             ->type_name("SPEC")
             ->check(pairs_syntax_problem);
         cmd.add_option("--allow", o->allow,
                        "The allocation to check isolation for (UUIDs or PCI addresses, comma-separated); default: the "
                        "scheduler's variables (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, SLURM_JOB_GPUS)")
             ->type_name("UUID,...")
             ->delimiter(',');
         cmd.add_option("--matrix", o->matrix, "Take the floors (and permitted pairs) from this compatibility matrix's class")
             ->type_name("FILE");
         cmd.add_option("--min-d2d", o->min_d2d, "Floor for device-to-device copy, GB/s (bytes read + written)")
             ->type_name("GBPS")
             ->check(non_negative_number());
         cmd.add_option("--min-h2d", o->min_h2d, "Floor for pinned host-to-device copy, GB/s")
             ->type_name("GBPS")
             ->check(non_negative_number());
         cmd.add_option("--min-d2h", o->min_d2h, "Floor for device-to-pinned-host copy, GB/s")
             ->type_name("GBPS")
             ->check(non_negative_number());
         cmd.add_option("--min-p2p", o->min_p2p, "Floor for GPU-to-GPU copy over NVLink, GB/s each way")
             ->type_name("GBPS")
             ->check(non_negative_number());
         cmd.add_option("--min-p2p-pcie", o->min_p2p_pcie, "Floor for GPU-to-GPU copy over PCIe, GB/s each way")
             ->type_name("GBPS")
             ->check(non_negative_number());
         cmd.add_option("--min-memory-fraction", o->min_memory_fraction,
                        "Share of free memory (0-1) the memory test must have covered")
             ->check(CLI::Range(0.0, 1.0));
         cmd.add_option("--expect-gpus", o->expect_gpus, "Fail when CUDA sees fewer GPUs");
         cmd.add_option("--compare", o->compare, "Show what changed against an earlier record (gpudx accept --format json -o OLD.json)")
             ->type_name("OLD.json");
         auto* from = cmd.add_option("--from", o->from, "Do not run: show (or --compare) a saved record")->type_name("FILE");
         cmd.add_option("--driver-lib-dir", o->driver_lib_dir, "Load libcuda.so.1 and libnvidia-ml.so.1 from DIR")
             ->type_name("DIR");
         cmd.add_option("--timeout", o->timeout_s, "Stop the whole acceptance after this many seconds (each sub-test has its own deadline too)")
             ->capture_default_str()
             ->check(CLI::Range(1.0, 86400.0));
         cmd.add_option("--image-digest", o->image_digest, "Container image digest to record (else GPUDX_IMAGE_DIGEST or /run/.containerenv)");
         cmd.add_flag("-v,--verbose", o->verbose, "Text report: also each sub-test's details (patterns, link class, children's views)");
         cmd.add_flag("--visibility-probe", o->visibility_probe, "internal: print what CUDA and NVML show this process")
             ->group("");
         // What only a run uses cannot go with a saved record.
         for (const char* running : {"--long", "--pairs", "--allow", "--matrix", "--min-d2d", "--min-h2d", "--min-d2h",
                                     "--min-p2p", "--min-p2p-pcie", "--min-memory-fraction", "--expect-gpus",
                                     "--driver-lib-dir", "--timeout", "--image-digest", "--visibility-probe"})
             from->excludes(cmd.get_option(running));
         cmd.footer(
             "Per GPU: context, compute on every multiprocessor (PTX JIT), memory patterns over most free memory,\n"
             "device, host<->device copies. Per permitted pair: peer access, copies both ways, then all at once.\n"
             "Isolation (with an allocation): children must see exactly the allocated GPUs through CUDA and NVML.\n"
             "A figure below its floor fails; within 5 % above it warns. A sub-test that could not run is 'not_run'.\n\n"
             "Exit codes: 0 pass, 1 a required sub-test failed, 2 warnings, 3 a required sub-test did not run, 64 usage.\n\n"
             "Examples:\n  gpudx accept\n  gpudx accept --format json -o accept.json --min-h2d 48 --min-p2p 335\n"
             "  gpudx accept --allow GPU-992cb470 --compare last-week.json\n"
             "  gpudx accept --from new.json --compare old.json");
         return [o] { return run_accept(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app

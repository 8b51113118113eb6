// The job's view: whether gpudx runs inside a container, and the variables that decide which GPUs and
// libraries a job gets.
#include <array>

#include "collect/collectors.hpp"
#include "collect/proc_cgroup.hpp"
#include "core/text.hpp"

extern char** environ;

namespace gpudx {
namespace {

constexpr std::array<std::string_view, 16> kGpuVariables = {
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
    "ROCR_VISIBLE_DEVICES",   "HIP_VISIBLE_DEVICES",        "GPU_DEVICE_ORDINAL",   "SLURM_JOB_ID",
    "SLURM_STEP_ID",          "SLURM_JOB_GPUS",             "SLURM_STEP_GPUS",      "SLURM_LOCALID",
    "LD_LIBRARY_PATH",        "LD_PRELOAD",                 "CUDA_MPS_PIPE_DIRECTORY", "NVIDIA_REQUIRE_CUDA"};

bool is_gpu_variable(std::string_view key) {
    for (auto k : kGpuVariables)
        if (k == key) return true;
    return key.starts_with("KUBERNETES_");
}

}  // namespace

// Fills runtime and id from a cgroup file's owner, keeping what earlier evidence found.
void add_container_from_cgroup(const Root& root, const std::string& path, ContainerInfo& c) {
    auto text = root.read_file(path, 1 << 16);
    if (!text) return;
    auto lines = parse_proc_cgroup(*text);
    for (auto& l : lines) {
        auto owner = cgroup_owner(l.path);
        if (owner.runtime.empty() || owner.runtime == "slurm") continue;
        c.in_container = true;
        // The orchestrator names the setting better than the engine under it (docker under kubepods).
        if (c.runtime.empty() || c.runtime == "container" || owner.runtime == "kubernetes") c.runtime = owner.runtime;
        if (c.container_id.empty()) c.container_id = owner.container_id;
        if (c.cgroup.empty()) c.cgroup = l.path;
        c.evidence.push_back(path + ": " + l.path);
        break;
    }
    if (c.cgroup.empty()) c.cgroup = primary_cgroup_path(lines);
}

std::map<std::string, std::string> load_environment(const Root& root) {
    std::map<std::string, std::string> env;
    if (root.is_live()) {
        for (char** e = environ; e && *e; ++e) {
            std::string_view kv = *e;
            auto pos = kv.find('=');
            if (pos != std::string_view::npos) env.emplace(std::string(kv.substr(0, pos)), std::string(kv.substr(pos + 1)));
        }
        return env;
    }
    auto text = root.read_file("/_commands/environment.txt");
    if (!text) return env;
    size_t start = 0;
    while (start < text->size()) {
        size_t end = text->find('\n', start);
        if (end == std::string::npos) end = text->size();
        std::string_view kv(text->data() + start, end - start);
        auto pos = kv.find('=');
        if (pos != std::string_view::npos && pos > 0)
            env.emplace(std::string(kv.substr(0, pos)), std::string(kv.substr(pos + 1)));
        start = end + 1;
    }
    return env;
}

CollectorStatus collect_environment(const CollectContext& ctx, EnvironmentLayer& layer) {
    auto st = status_ok(Collector::environment);
    for (auto& [k, v] : ctx.options.environment)
        if (is_gpu_variable(k)) layer.variables.emplace(k, sanitize_utf8(v));

    auto& c = layer.container;
    const Root& root = ctx.root;
    if (root.exists("/.dockerenv")) {
        c.in_container = true;
        c.runtime = "docker";
        c.evidence.push_back("/.dockerenv exists");
    }
    if (root.exists("/run/.containerenv")) {
        c.in_container = true;
        if (c.runtime.empty()) c.runtime = "podman";
        c.evidence.push_back("/run/.containerenv exists");
    }
    add_container_from_cgroup(root, "/proc/1/cgroup", c);
    if (root.is_live()) add_container_from_cgroup(root, "/proc/self/cgroup", c);
    if (auto it = ctx.options.environment.find("KUBERNETES_SERVICE_HOST"); it != ctx.options.environment.end()) {
        c.in_container = true;
        c.runtime = "kubernetes";
        c.evidence.push_back("KUBERNETES_SERVICE_HOST=" + it->second);
    }
    return st;
}

}  // namespace gpudx

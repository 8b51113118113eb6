#include "rules/reference/job_context.hpp"

#include <algorithm>
#include <array>
#include <optional>

#include "core/text.hpp"
#include "rules/reference/signatures.hpp"

namespace gpudx {

namespace {

enum class Context { slurm, container, kubernetes };

struct Marker {
    std::string_view command;  // lower case, a whole word at the start of the command
    Context context;
};
constexpr std::array kMarkers{
    Marker{"srun", Context::slurm},          Marker{"sbatch", Context::slurm},
    Marker{"salloc", Context::slurm},        Marker{"docker run", Context::container},
    Marker{"podman run", Context::container}, Marker{"nerdctl run", Context::container},
    Marker{"kubectl", Context::kubernetes},
};

// The findings that mean "this program sees no GPU" (or not the one it asked for).
constexpr std::array<std::string_view, 7> kNoGpuVisible{
    "driver.cuda_no_device",        "cudart.cudaErrorNoDevice",      "cuda.CUDA_ERROR_NO_DEVICE",
    "devices.nvidia_smi_no_devices", "cudart.cudaErrorInvalidDevice", "cuda.CUDA_ERROR_INVALID_DEVICE",
    "hip.hipErrorNoDevice",
};

// The command a line runs, after a shell prompt ("$ ", "# ", "user@host:~$ ") if it has one.
std::optional<Context> context_of(std::string_view line) {
    std::string_view rest = trim(line);
    if (size_t prompt = rest.find("$ "); prompt != std::string_view::npos && prompt < 64) rest = rest.substr(prompt + 2);
    else if (rest.starts_with("# ")) rest = rest.substr(2);
    rest = trim(rest);
    for (auto& m : kMarkers) {
        if (rest.size() < m.command.size() || find_ci(rest.substr(0, m.command.size()), m.command) != 0) continue;
        if (rest.size() == m.command.size() || rest[m.command.size()] == ' ') return m.context;
    }
    return std::nullopt;
}

std::string question(Context c, std::string_view line) {
    std::string cited = "(`" + fit(trim(line), 100) + "`)";
    switch (c) {
        case Context::slurm:
            return "This ran under Slurm " + cited +
                   ": did the job ask for GPUs (`--gres=gpu:N` or `--gpus=N`)? Without them Slurm's cgroup hides "
                   "every GPU from it; `scontrol show job $SLURM_JOB_ID` shows the TRES it got. Then: ";
        case Context::container:
            return "This ran in a container " + cited +
                   ": was it given GPUs (`--gpus all`, the nvidia runtime, or a CDI device such as "
                   "`--device nvidia.com/gpu=all`)? `docker inspect` shows its DeviceRequests. Then: ";
        case Context::kubernetes:
            return "This ran in a Kubernetes pod " + cited +
                   ": does the pod request `nvidia.com/gpu` under resources.limits, and does the node advertise it "
                   "(`kubectl describe node`, the device plugin's pod)? Then: ";
    }
    return {};
}

}  // namespace

std::vector<std::string> job_context_words() {
    std::vector<std::string> out;
    for (auto& m : kMarkers) out.emplace_back(m.command);
    return out;
}

std::vector<std::string> explain_scan_words(const SignatureCatalogue& catalogue) {
    std::vector<std::string> words = kernel_log_text_words(catalogue);
    for (auto& w : job_context_words()) words.push_back(w);  // srun, docker run ...: where it ran
    return words;
}

bool is_job_context_line(std::string_view line) { return context_of(line).has_value(); }

void add_job_context_steps(std::string_view context_line, std::vector<Finding>& findings) {
    auto context = context_of(context_line);
    if (!context) return;
    for (auto& f : findings) {
        if (std::find(kNoGpuVisible.begin(), kNoGpuVisible.end(), f.id) == kNoGpuVisible.end()) continue;
        f.next_step = question(*context, context_line) + f.next_step;
    }
}

}  // namespace gpudx

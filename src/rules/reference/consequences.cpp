#include "rules/reference/consequences.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

#include "core/text.hpp"

namespace gpudx {

namespace {

// One cause and what it makes the stack above it print. An effect is a finding id, or an id prefix ending in '.'
// for a whole result-code table ("cudart." every cudaError_t a program printed).
struct Link {
    std::string_view cause;
    std::vector<int> xids;  // for kernel_log.xid: the codes that are this cause; empty for any other id
    std::vector<std::string_view> effects;
    std::string_view story;  // how the effects follow, for the cause's message
};

// The CUDA, NCCL and NVML errors every program prints once its GPU is gone or faulted.
#define GPUDX_PROGRAM_ERRORS "cudart.", "cuda.", "nccl.", "driver.nccl_cuda_failure", "driver.cuda_illegal_address", \
                             "driver.cuda_ecc_uncorrectable"

const std::vector<Link>& links() {
    static const std::vector<Link> kLinks = {
        // The GPU stopped answering on PCIe: the driver, NVML, nvidia-smi and every CUDA program lose it.
        {"kernel_log.xid", {79},
         {"kernel_log.fallen_off_bus", "driver.gpu_handle_unknown_error", "driver.nvidia_smi_gpu_lost", "driver.gpu_lost",
          "devices.nvidia_smi_no_devices", "nvml.", GPUDX_PROGRAM_ERRORS},
         "the GPU fell off the bus, so the driver, NVML and the programs on it lost it"},
        {"kernel_log.fallen_off_bus", {},
         {"driver.gpu_handle_unknown_error", "driver.nvidia_smi_gpu_lost", "driver.gpu_lost",
          "devices.nvidia_smi_no_devices", "nvml.", GPUDX_PROGRAM_ERRORS},
         "the GPU fell off the bus, so the driver, NVML and the programs on it lost it"},
        // An uncontained memory error or a GPU the driver must reset: the program on it fails with a CUDA error.
        {"kernel_log.xid", {48, 62, 63, 64, 74, 92, 94, 95, 109, 119, 120, 121, 140, 143, 144, 145, 146, 147, 148, 149, 150,
                            154},
         {GPUDX_PROGRAM_ERRORS},
         "the GPU faulted under the program, which then failed"},
        // The program's own fault, seen by the driver (Xid 13, 31, 43) and by the program (its CUDA error).
        {"kernel_log.xid", {13, 31, 43}, {GPUDX_PROGRAM_ERRORS},
         "the driver's record of the program's own fault, which the program then reported"},
        // User space of one driver version, kernel module of another.
        {"libs.api_mismatch", {},
         {"libs.nvml_version_mismatch", "module.nvidia_smi_no_driver", "cudart.cudaErrorInsufficientDriver",
          "cudart.cudaErrorSystemDriverMismatch", "cuda.CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
          "nvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH", "driver.cuda_insufficient_driver"},
         "the driver libraries and the kernel module are different versions, so NVML and CUDA refuse to start"},
        // The nvidia module never loaded: nothing above it finds a GPU.
        {"module.signature_refused", {},
         {"module.nvidia_smi_no_driver", "devices.nvidia_smi_no_devices", "driver.cuda_no_device",
          "nvml.NVML_ERROR_DRIVER_NOT_LOADED", "cudart.cudaErrorNoDevice", "cuda.CUDA_ERROR_NO_DEVICE",
          "container.toolkit_driver_not_loaded"},
         "the kernel refused the nvidia module, so no program finds the driver"},
        {"module.dkms_build_error", {},
         {"module.nvidia_smi_no_driver", "devices.nvidia_smi_no_devices", "driver.cuda_no_device",
          "nvml.NVML_ERROR_DRIVER_NOT_LOADED", "cudart.cudaErrorNoDevice", "cuda.CUDA_ERROR_NO_DEVICE",
          "container.toolkit_driver_not_loaded"},
         "the nvidia module was not built for this kernel, so no program finds the driver"},
        // NVSwitch systems: CUDA waits for the fabric manager.
        {"driver.fabric_manager_start_failed", {},
         {"driver.cuda_system_not_ready", "cuda.CUDA_ERROR_SYSTEM_NOT_READY", "cudart.cudaErrorSystemNotReady",
          "nccl.", "driver.nccl_cuda_failure"},
         "the fabric manager did not start, so CUDA reports the system not yet initialised"},
        {"driver.fabric_manager_config_invalid", {},
         {"driver.fabric_manager_start_failed", "driver.cuda_system_not_ready", "cuda.CUDA_ERROR_SYSTEM_NOT_READY",
          "cudart.cudaErrorSystemNotReady"},
         "the fabric manager's configuration is invalid, so it cannot start and CUDA waits for it"},
    };
    return kLinks;
}
#undef GPUDX_PROGRAM_ERRORS

bool names_effect(const Link& link, std::string_view id) {
    for (auto e : link.effects)
        if (e.ends_with('.') ? id.starts_with(e) : id == e) return true;
    return false;
}

bool is_cause(const Link& link, const Finding& f) {
    if (f.id != link.cause) return false;
    if (link.xids.empty()) return true;
    auto code = finding_xid_code(f);
    return code && std::find(link.xids.begin(), link.xids.end(), *code) != link.xids.end();
}

// The same GPU, or an effect that names none (a program's error rarely says which GPU).
bool same_subject(const Finding& cause, const Finding& effect) {
    if (effect.subjects.empty()) return true;
    for (auto& e : effect.subjects)
        for (auto& c : cause.subjects)
            if (!e.pci.empty() && e.pci == c.pci) return true;
    return false;
}

}  // namespace

std::optional<int> finding_xid_code(const Finding& f) {
    // kernel_log.xid's message starts "Xid <code> (" (rules/families/kernel_log.cpp).
    std::string_view m = f.message;
    if (!m.starts_with("Xid ")) return std::nullopt;
    m.remove_prefix(4);
    auto code = parse_uint(m.substr(0, m.find(' ')));
    if (!code || *code > 1000) return std::nullopt;
    return static_cast<int>(*code);
}

void fold_consequences(std::vector<Finding>& findings) {
    std::vector<bool> folded(findings.size(), false);
    std::vector<std::vector<size_t>> effects_of(findings.size());
    for (size_t e = 0; e < findings.size(); ++e) {
        for (size_t c = 0; c < findings.size() && !folded[e]; ++c) {
            if (c == e || folded[c]) continue;
            for (auto& link : links()) {
                if (!is_cause(link, findings[c]) || !names_effect(link, findings[e].id) ||
                    !same_subject(findings[c], findings[e]))
                    continue;
                // A cause that is itself an effect of another (fallen_off_bus after Xid 79) still takes effects of its
                // own; they move to the first cause with it.
                effects_of[c].push_back(e);
                folded[e] = true;
                break;
            }
        }
    }
    // An effect folded into a cause that is folded too moves up to that cause's cause.
    for (size_t c = 0; c < findings.size(); ++c) {
        if (!folded[c] || effects_of[c].empty()) continue;
        for (size_t up = 0; up < findings.size(); ++up) {
            auto& list = effects_of[up];
            if (folded[up] || std::find(list.begin(), list.end(), c) == list.end()) continue;
            list.insert(list.end(), effects_of[c].begin(), effects_of[c].end());
            effects_of[c].clear();
            break;
        }
    }
    for (size_t c = 0; c < findings.size(); ++c) {
        if (effects_of[c].empty() || folded[c]) continue;
        Finding& cause = findings[c];
        std::string story;
        for (auto& link : links())
            if (is_cause(link, cause)) {
                story = std::string(link.story);
                break;
            }
        std::vector<std::string> what;
        for (size_t e : effects_of[c]) {
            const Finding& effect = findings[e];
            cause.severity = std::max(cause.severity, effect.severity);
            cause.followed_by.push_back(effect.id);
            // Its headline: up to the first ": " ("NVML cannot reach GPU at 0000:3b:00.0 (UUID unknown)"), the rest
            // being its own explanation, which the cause's story replaces.
            std::string_view headline = effect.message;
            headline = headline.substr(0, headline.find(": "));
            what.push_back(fit(headline, 120));
            for (auto& ev : effect.evidence)
                if (std::find_if(cause.evidence.begin(), cause.evidence.end(), [&](auto& x) {
                        return x.source == ev.source && x.value == ev.value;
                    }) == cause.evidence.end())
                    cause.evidence.push_back(ev);
        }
        cause.message += "; what followed in the same text (" + story + "): " + join_strings(what, "; ");
    }
    std::vector<Finding> kept;
    for (size_t i = 0; i < findings.size(); ++i)
        if (!folded[i]) kept.push_back(std::move(findings[i]));
    findings = std::move(kept);
}

}  // namespace gpudx

// driver.*: what NVML and the CUDA driver answered (or failed to), explained by the layers below.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checks/check_context.hpp"
#include "core/pci_address.hpp"
#include "driver/cuda_abi.hpp"
#include "driver/nvml_abi.hpp"

namespace gpudx {

namespace {

bool nvidia_module_loaded(const Snapshot& s) {
    return std::any_of(s.module.loaded.begin(), s.module.loaded.end(), [](auto& m) { return m.name == "nvidia"; });
}

bool module_layer_read(const Snapshot& s) {
    auto* c = s.collector("module");
    return c && c->state == CollectorState::ok;
}

std::vector<std::string> nvidia_pcie_gpus(const Snapshot& s) {
    std::vector<std::string> out;
    for (auto& d : s.pcie.devices)
        if (d.is_gpu && !d.is_nvswitch && d.vendor_id == 0x10de) out.push_back(normalize_pci(d.address));
    return out;
}

std::string cuda_env(const CudaView& v) {
    return fmt::format("CUDA_VISIBLE_DEVICES={} CUDA_DEVICE_ORDER={}", v.cuda_visible_devices, v.cuda_device_order);
}

Finding make(std::string id, Severity sev, std::string message) {
    Finding f;
    f.id = std::move(id);
    f.layer = Layer::driver;
    f.severity = sev;
    f.message = std::move(message);
    return f;
}

void check_unresponsive(const Snapshot& s, std::vector<Finding>& out) {
    struct Probe {
        const char* collector;
        const char* library;
        const std::string& call;
    };
    for (auto p : {Probe{"nvml", "NVML", s.nvml.timed_out_call}, Probe{"cuda", "the CUDA driver", s.cuda.timed_out_call}}) {
        auto* c = s.collector(p.collector);
        bool timed_out = c && c->state == CollectorState::timed_out;
        if (!timed_out && p.call.empty()) continue;
        std::string call = p.call.empty() ? (c ? c->path : std::string()) : p.call;
        auto f = make("driver.unresponsive", Severity::error,
                      fmt::format("{} did not answer: {} never returned", p.library, call.empty() ? "a call" : call));
        f.evidence.push_back({call.empty() ? std::string(p.collector) : call,
                              c ? (c->message.empty() ? "timed out" : c->message) : "timed out"});
        f.next_step = "A driver call that never returns means a wedged GPU or driver: look for Xid 79 / \"fallen off "
                      "the bus\" in the kernel log and for processes in D state (`ps -eo pid,stat,wchan:32,cmd | awk "
                      "'$2 ~ /D/'`). Drain the node; a GPU reset (`nvidia-smi -r -i <UUID>`) or a reboot is usually "
                      "needed. gpudx killed its probe, so the other layers are still valid.";
        out.push_back(std::move(f));
    }
}

void check_nvml_init(const Snapshot& s, std::vector<Finding>& out) {
    const auto& n = s.nvml;
    bool gpus_on_pcie = !nvidia_pcie_gpus(s).empty();
    if (!n.load_error.empty() && gpus_on_pcie) {
        auto f = make("driver.nvml_not_loaded", Severity::warning,
                      "libnvidia-ml.so.1 could not be loaded, although NVIDIA GPUs are on the PCIe bus");
        f.evidence.push_back({"dlopen(libnvidia-ml.so.1)", n.load_error});
        f.next_step = "Install the driver's user-space package matching the kernel module (see the libraries layer), "
                      "or in a container run with the NVIDIA container runtime so the library is injected.";
        out.push_back(std::move(f));
    }
    if (!n.init_result || *n.init_result == 0) return;
    int rc = *n.init_result;
    auto f = make("driver.nvml_init_failed", Severity::error, fmt::format("nvmlInit_v2 failed: {}", n.init_error));
    f.evidence.push_back({"nvmlInit_v2 in " + n.library_path, fmt::format("{} ({})", nvml_return_name(rc), rc)});
    if (rc == NVML_ERROR_DRIVER_NOT_LOADED) {
        if (module_layer_read(s) && !nvidia_module_loaded(s)) {
            f.message += "; the nvidia kernel module is not loaded: the module layer is the cause";
            f.evidence.push_back({"/proc/modules", "no nvidia module"});
        }
        f.next_step = "Load the kernel module (`modprobe nvidia`) and read the kernel log for why it failed "
                      "(Secure Boot signature, vermagic mismatch, no module for this kernel).";
    } else if (rc == NVML_ERROR_LIB_RM_VERSION_MISMATCH) {
        f.message += "; the user-space library and the kernel module are different driver versions";
        if (s.module.nvidia_driver_version)
            f.evidence.push_back({"/proc/driver/nvidia/version", *s.module.nvidia_driver_version});
        f.layer = Layer::libraries;
        f.next_step = "Usually a driver upgrade without a reboot, or a container carrying its own libnvidia-ml: "
                      "reboot into the new module, or remove the stale library copy the libraries layer names.";
    } else if (rc == NVML_ERROR_NO_PERMISSION) {
        f.message += "; permission denied on the device nodes";
        f.next_step = "Check /dev/nvidiactl and /dev/nvidia* permissions (devices layer) and the cgroup device rules.";
    } else {
        f.next_step = "Read the kernel log for NVRM errors and Xids; compare with `nvidia-smi` on the node.";
    }
    out.push_back(std::move(f));
}

std::string explain_cuinit(const Snapshot& s, int rc, Layer& layer) {
    const auto& v = s.cuda.caller;
    switch (rc) {
        case CUDA_ERROR_NO_DEVICE: {
            if (module_layer_read(s) && !nvidia_module_loaded(s))
                return "the nvidia kernel module is not loaded: the module layer is the cause";
            if (nvidia_pcie_gpus(s).empty() && s.collector("pcie") && s.collector("pcie")->state == CollectorState::ok)
                return "no NVIDIA GPU is on the PCIe bus: the pcie layer is the cause";
            bool hidden_by_env = v.cuda_visible_devices != "<unset>" &&
                                 ((s.cuda.all && s.cuda.all->device_count.value_or(0) > 0) ||
                                  s.nvml.device_count.value_or(0) > 0);
            if (hidden_by_env) {
                layer = Layer::allocation;
                return fmt::format("CUDA_VISIBLE_DEVICES={} hides every GPU of this node: the allocation is the cause",
                                   v.cuda_visible_devices);
            }
            bool uvm = false;
            for (auto& n : s.devices.nodes)
                if (n.path == "/dev/nvidia-uvm" && n.type != "missing") uvm = true;
            if (!s.devices.nodes.empty() && !uvm)
                return "/dev/nvidia-uvm is missing (nvidia_uvm not loaded or the node not created): the devices layer "
                       "is the cause";
            return "the driver sees no usable GPU";
        }
        case CUDA_ERROR_INSUFFICIENT_DRIVER:
        case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
            layer = Layer::libraries;
            return fmt::format("libcuda ({}) does not match the kernel module ({}): the libraries layer is the cause",
                               s.cuda.library_path, s.module.nvidia_driver_version.value_or("version unknown"));
        case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
            layer = Layer::libraries;
            return "a forward-compatibility libcuda (cuda-compat) is loaded on a GPU that does not support it";
        case CUDA_ERROR_STUB_LIBRARY:
            layer = Layer::libraries;
            return fmt::format("{} is the CUDA toolkit's stub library, not the driver", s.cuda.library_path);
        case CUDA_ERROR_SYSTEM_NOT_READY:
            return "the fabric manager has not finished initialising the NVSwitch fabric";
        case CUDA_ERROR_OPERATING_SYSTEM:
        case CUDA_ERROR_NOT_PERMITTED:
            return "the driver was refused access to the device nodes (permissions or cgroup device rules)";
        default: return {};
    }
}

void check_cuda_init(const Snapshot& s, std::vector<Finding>& out) {
    if (!s.cuda.load_error.empty() && !nvidia_pcie_gpus(s).empty()) {
        auto f = make("driver.cuda_not_loaded", Severity::warning,
                      "libcuda.so.1 could not be loaded, although NVIDIA GPUs are on the PCIe bus: CUDA programs "
                      "cannot start");
        f.evidence.push_back({"dlopen(libcuda.so.1)", s.cuda.load_error});
        f.next_step = "Install the driver's user-space package matching the kernel module (see the libraries layer), "
                      "or in a container run with the NVIDIA container runtime so the library is injected.";
        out.push_back(std::move(f));
    }
    const auto& v = s.cuda.caller;
    if (!v.init_result || *v.init_result == 0) return;
    int rc = *v.init_result;
    Layer layer = Layer::driver;
    std::string cause = explain_cuinit(s, rc, layer);
    auto f = make("driver.cuda_init_failed", Severity::error,
                  fmt::format("cuInit failed with {} ({}): {}{}{}", v.init_name, rc, v.init_meaning,
                              cause.empty() ? "" : "; ", cause));
    f.layer = layer;
    f.evidence.push_back({"cuInit(0) in " + s.cuda.library_path, fmt::format("{} ({})", v.init_name, rc)});
    f.evidence.push_back({"environment", cuda_env(v)});
    if (s.module.nvidia_driver_version)
        f.evidence.push_back({"/proc/driver/nvidia/version", *s.module.nvidia_driver_version});
    if (s.cuda.driver_version) f.evidence.push_back({"cuDriverGetVersion", std::to_string(*s.cuda.driver_version)});
    f.next_step = layer == Layer::allocation
                      ? "Fix the job's CUDA_VISIBLE_DEVICES (use UUIDs from `gpudx ids`); run `gpudx diagnose "
                        "--all-devices` to confirm CUDA sees the GPUs without it."
                  : layer == Layer::libraries
                      ? "Make the dynamic loader pick the libcuda.so.1 of the installed driver (see the libraries "
                        "layer for every copy on the path); reboot if the module was upgraded without one."
                      : "Fix the lowest failing layer first (gpudx diagnose names it), then re-run.";
    out.push_back(std::move(f));
}

void check_version(const Snapshot& s, std::vector<Finding>& out) {
    const auto& user = s.nvml.driver_version;
    const auto& kernel = s.module.nvidia_driver_version;
    if (user.empty() || !kernel || kernel->empty() || user == *kernel) return;
    auto f = make("driver.version_mismatch", Severity::error,
                  fmt::format("NVML reports driver {} but the kernel module is {}", user, *kernel));
    // The fix is in user space: the boundary belongs to the libraries layer.
    f.layer = Layer::libraries;
    f.evidence = {{"nvmlSystemGetDriverVersion in " + s.nvml.library_path, user},
                  {"/proc/driver/nvidia/version", *kernel}};
    f.next_step = "The loaded user-space driver is not the kernel module's: remove or stop loading the stale "
                  "libnvidia-ml/libcuda copy (libraries layer), or reboot if the driver was upgraded in place.";
    out.push_back(std::move(f));
}

void check_missing_gpus(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (!s.nvml.device_count || (s.nvml.init_result && *s.nvml.init_result != 0)) return;
    auto on_pcie = nvidia_pcie_gpus(s);
    std::vector<std::string> missing;
    for (auto& pci : on_pcie) {
        bool seen = std::any_of(s.nvml.devices.begin(), s.nvml.devices.end(), [&](auto& d) { return d.pci == pci; });
        if (!seen) missing.push_back(pci);
    }
    // NVML may still be partway (a hung probe): only count when it listed every device it announced.
    if (!missing.empty() && s.nvml.devices.size() >= *s.nvml.device_count) {
        auto f = make("driver.nvml_missing_gpu", Severity::error,
                      fmt::format("NVML sees {} GPU(s), PCIe has {}; missing: {}", *s.nvml.device_count, on_pcie.size(),
                                  fmt::join(missing, ", ")));
        for (auto& pci : missing) {
            f.subjects.push_back(ctx.gpu(pci));
            bool in_procfs = std::any_of(s.module.nvidia_gpus.begin(), s.module.nvidia_gpus.end(),
                                         [&](auto& g) { return g.address == pci; });
            f.evidence.push_back({"/sys/bus/pci/devices/" + pci, in_procfs ? "present; the kernel driver knows it"
                                                                           : "present; not in /proc/driver/nvidia/gpus"});
        }
        f.evidence.push_back({"nvmlDeviceGetCount_v2", std::to_string(*s.nvml.device_count)});
        f.next_step = "Read the kernel log for this address (Xid, RmInitAdapter failed, fallen off the bus). Check "
                      "whether the GPU is excluded (NVreg_ExcludedGpus) or held by another driver (vfio-pci); a GPU "
                      "that failed init usually needs a reset or a reboot.";
        out.push_back(std::move(f));
    }
    // CUDA without CUDA_VISIBLE_DEVICES should see what NVML sees.
    const CudaView* unfiltered = s.cuda.all ? &*s.cuda.all
                                 : s.cuda.caller.cuda_visible_devices == "<unset>" ? &s.cuda.caller
                                                                                   : nullptr;
    if (unfiltered && unfiltered->device_count && *unfiltered->device_count < static_cast<int>(s.nvml.devices.size())) {
        std::vector<std::string> lost;
        Finding f = make("driver.cuda_missing_gpu", Severity::error, "");
        for (auto& d : s.nvml.devices) {
            bool seen = std::any_of(unfiltered->devices.begin(), unfiltered->devices.end(),
                                    [&](auto& c) { return c.pci == d.pci || (!d.uuid.empty() && c.uuid == d.uuid); });
            if (!seen) {
                lost.push_back(d.pci);
                f.subjects.push_back(ctx.gpu(d.pci));
            }
        }
        f.message = fmt::format("CUDA sees {} GPU(s) with no CUDA_VISIBLE_DEVICES, NVML {}; missing: {}",
                                *unfiltered->device_count, s.nvml.devices.size(), fmt::join(lost, ", "));
        f.evidence = {{"cuDeviceGetCount", std::to_string(*unfiltered->device_count)},
                      {"nvmlDeviceGetCount_v2", std::to_string(s.nvml.devices.size())}};
        f.next_step = "A GPU NVML sees but CUDA does not is usually in a failed state (check Xids) or uses an "
                      "unsupported mode; `nvidia-smi -q -i <UUID>` shows its state.";
        out.push_back(std::move(f));
    }
}

void check_device_health(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    bool nvswitch_system = !s.pcie.nvswitches.empty();
    for (auto& d : s.nvml.devices) {
        GpuRef g = ctx.gpu(d.pci);
        if (g.uuid.empty()) g.uuid = d.uuid;
        auto call = [&](const char* name) { return fmt::format("{}({})", name, d.index); };
        auto add = [&](std::string id, Severity sev, std::string msg, Evidence ev, std::string next) {
            auto f = make(std::move(id), sev, std::move(msg));
            f.subjects.push_back(g);
            f.evidence.push_back(std::move(ev));
            f.next_step = std::move(next);
            out.push_back(std::move(f));
        };
        for (auto& e : d.errors) {
            bool lost = e.find("GPU_IS_LOST") != std::string::npos;
            add(lost ? "driver.gpu_lost" : "driver.query_failed", lost ? Severity::error : Severity::warning,
                fmt::format("{}: {}", describe(g), e), {call("nvml"), e},
                lost ? "The GPU stopped answering (fallen off the bus): drain the node, read the kernel log for Xid "
                       "79, reset or reboot."
                     : "Re-run; if it persists, compare with `nvidia-smi -q -i <UUID>` and the kernel log.");
        }
        if (d.persistence_mode && !*d.persistence_mode)
            add("driver.persistence_off", Severity::warning, fmt::format("{}: persistence mode is off", describe(g)),
                {call("nvmlDeviceGetPersistenceMode"), "Disabled"},
                "Enable nvidia-persistenced (systemctl enable --now nvidia-persistenced): without it every CUDA start "
                "re-initialises the GPU and checkpoint/restore needs an explicit cuInit.");
        if (d.ecc_uncorrected_volatile.value_or(0) > 0)
            add("driver.ecc_uncorrected", Severity::error,
                fmt::format("{}: {} uncorrected ECC error(s) since the driver loaded", describe(g),
                            *d.ecc_uncorrected_volatile),
                {call("nvmlDeviceGetTotalEccErrors") + " volatile", std::to_string(*d.ecc_uncorrected_volatile)},
                "Drain the node; jobs on this GPU may have computed on corrupted memory. Reset the GPU so pending "
                "row remaps apply, and replace it if errors recur.");
        else if (d.ecc_uncorrected_aggregate.value_or(0) > 0)
            add("driver.ecc_uncorrected_history", Severity::warning,
                fmt::format("{}: {} uncorrected ECC error(s) over its lifetime", describe(g),
                            *d.ecc_uncorrected_aggregate),
                {call("nvmlDeviceGetTotalEccErrors") + " aggregate", std::to_string(*d.ecc_uncorrected_aggregate)},
                "Track this GPU: a rising lifetime count is a reason for an RMA.");
        if (d.retired_pages_pending.value_or(0) > 0)
            add("driver.retired_pages_pending", Severity::warning,
                fmt::format("{}: retired pages are pending (take effect after a GPU reset)", describe(g)),
                {call("nvmlDeviceGetRetiredPagesPendingStatus"), "pending"},
                "Reset the GPU (nvidia-smi -r) when it is idle so the retirement takes effect.");
        if (d.remapped_rows_failure.value_or(false))
            add("driver.remapped_rows_failure", Severity::error,
                fmt::format("{}: row remapping failed (no spare rows left)", describe(g)),
                {call("nvmlDeviceGetRemappedRows"), fmt::format("failureOccurred=1, uncorrectable={}",
                                                                 d.remapped_rows_uncorrectable.value_or(0))},
                "The GPU's memory can no longer be repaired in the field: drain the node and replace the GPU.");
        else if (d.remapped_rows_pending.value_or(false))
            add("driver.remapped_rows_pending", Severity::warning,
                fmt::format("{}: a row remap is pending and applies at the next GPU reset", describe(g)),
                {call("nvmlDeviceGetRemappedRows"), "isPending=1"},
                "Reset the GPU (nvidia-smi -r -i <UUID>) when it is idle, or reboot.");
        if (d.mig_mode.value_or(false))
            add("driver.mig_enabled", Severity::info,
                fmt::format("{}: MIG is on with {} instance(s)", describe(g), d.mig_uuids.size()),
                {call("nvmlDeviceGetMigMode"), "Enabled"},
                "Jobs must address MIG instances by their MIG-UUIDs (gpudx ids lists them).");
        if (nvswitch_system) {
            if (!d.fabric_state) {
                add("driver.fabric_unknown", Severity::warning,
                    fmt::format("{}: NVSwitches are present but the fabric state could not be read", describe(g)),
                    {call("nvmlDeviceGetGpuFabricInfoV"), "not available"},
                    "Check `nvidia-smi -q | grep -A3 Fabric` and that nvidia-fabricmanager is running.");
            } else if (*d.fabric_state != NVML_GPU_FABRIC_STATE_COMPLETED) {
                const char* state = *d.fabric_state == NVML_GPU_FABRIC_STATE_NOT_STARTED ? "not started"
                                    : *d.fabric_state == NVML_GPU_FABRIC_STATE_IN_PROGRESS ? "in progress"
                                                                                           : "not supported";
                add("driver.fabric_not_ready", Severity::error,
                    fmt::format("{}: NVSwitch fabric registration is {}", describe(g), state),
                    {call("nvmlDeviceGetGpuFabricInfoV"), fmt::format("state={} ({})", *d.fabric_state, state)},
                    "Start nvidia-fabricmanager (systemctl status nvidia-fabricmanager; its version must equal the "
                    "driver's); CUDA returns CUDA_ERROR_SYSTEM_NOT_READY until registration completes.");
            } else if (d.fabric_status.value_or(0) != 0) {
                add("driver.fabric_failed", Severity::error,
                    fmt::format("{}: NVSwitch fabric registration completed with an error", describe(g)),
                    {call("nvmlDeviceGetGpuFabricInfoV"),
                     fmt::format("status={}", nvml_return_name(static_cast<int>(*d.fabric_status)))},
                    "Read /var/log/fabricmanager.log; restart nvidia-fabricmanager, then reset the GPUs.");
            }
        }
    }
}

}  // namespace

void check_driver(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    check_unresponsive(s, out);
    check_nvml_init(s, out);
    check_cuda_init(s, out);
    check_version(s, out);
    check_missing_gpus(ctx, out);
    check_device_health(ctx, out);
}

}  // namespace gpudx

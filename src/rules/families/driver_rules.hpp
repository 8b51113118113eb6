#pragma once
// The driver family's rule table (rules/families/driver.cpp). It sits in a header because the AMD family files ROCm SMI's
// answers under the same rules where they mean the same thing (an uncorrectable ECC count, a query that failed).
#include <string_view>

#include "rules/engine/rule.hpp"

namespace gpudx {

inline constexpr Rule kDriverRules[] = {
    {"driver.unresponsive", Layer::driver, Severity::error, {Collector::nvml, Collector::cuda, Collector::rocm_smi},
     "an NVML, CUDA or ROCm SMI call never returned: a wedged GPU or driver, named when the call says which"},
    {"driver.nvml_not_loaded", Layer::driver, Severity::warning, {Collector::nvml, Collector::pcie},
     "libnvidia-ml.so.1 could not be loaded although NVIDIA GPUs are on PCIe"},
    {"driver.nvml_init_failed", Layer::driver, Severity::error, {Collector::nvml, Collector::module},
     "nvmlInit failed, explained by the layer below when it can be (filed under libraries for a version mismatch)",
     {}, {Layer::libraries}},
    {"driver.cuda_not_loaded", Layer::driver, Severity::warning, {Collector::cuda, Collector::pcie},
     "libcuda.so.1 could not be loaded although NVIDIA GPUs are on PCIe"},
    {"driver.cuda_init_failed", Layer::driver, Severity::error,
     {Collector::cuda, Collector::pcie, Collector::module, Collector::libraries, Collector::devices, Collector::nvml},
     "cuInit failed, filed under the layer that caused it (libraries, allocation) when it can be told",
     {}, {Layer::libraries, Layer::allocation}},
    // Filed under libraries: the fix is in user space, so the failure boundary belongs there.
    {"driver.version_mismatch", Layer::libraries, Severity::error, {Collector::nvml, Collector::module},
     "NVML reports another driver version than the kernel module: the user-space side is stale"},
    {"driver.nvml_missing_gpu", Layer::driver, Severity::error,
     {Collector::nvml, Collector::pcie, Collector::module, Collector::environment},
     "NVML does not list a GPU that is on PCIe and in this allocation", {RuleTag::identity}},
    {"driver.cuda_missing_gpu", Layer::driver, Severity::error, {Collector::cuda, Collector::nvml},
     "CUDA without CUDA_VISIBLE_DEVICES sees fewer GPUs than NVML", {RuleTag::identity}},
    {"driver.gpu_lost", Layer::driver, Severity::error, {Collector::nvml}, "NVML reports a GPU as lost"},
    {"driver.query_failed", Layer::driver, Severity::warning, {Collector::nvml, Collector::rocm_smi},
     "an NVML or ROCm SMI query about a GPU failed"},
    {"driver.persistence_off", Layer::driver, Severity::warning, {Collector::nvml}, "persistence mode is off"},
    {"driver.ecc_uncorrected", Layer::driver, Severity::error, {Collector::nvml, Collector::rocm_smi},
     "uncorrected ECC errors since the driver loaded (NVML) or counted by ROCm SMI"},
    {"driver.ecc_uncorrected_history", Layer::driver, Severity::warning, {Collector::nvml},
     "uncorrected ECC errors over the GPU's lifetime, none since the driver loaded"},
    {"driver.retired_pages_pending", Layer::driver, Severity::warning, {Collector::nvml},
     "retired pages wait for a GPU reset"},
    {"driver.remapped_rows_failure", Layer::driver, Severity::error, {Collector::nvml},
     "row remapping failed: no spare rows left"},
    {"driver.remapped_rows_pending", Layer::driver, Severity::warning, {Collector::nvml},
     "a row remap waits for a GPU reset"},
    {"driver.recovery_action", Layer::driver, Severity::error, {Collector::nvml},
     "the driver asks for a recovery of the GPU (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION): a GPU reset, a node reboot or a "
     "drain and reset an error, draining P2P traffic a warning; a driver that does not report it is not a finding"},
    {"driver.mig_enabled", Layer::driver, Severity::info, {Collector::nvml}, "MIG is on, with its instance count"},
    {"driver.fabric_unknown", Layer::driver, Severity::warning, {Collector::nvml, Collector::pcie},
     "NVSwitches are present but a GPU's fabric state could not be read"},
    {"driver.fabric_not_ready", Layer::driver, Severity::error, {Collector::nvml, Collector::pcie},
     "a GPU's NVSwitch fabric registration has not completed"},
    {"driver.fabric_failed", Layer::driver, Severity::error, {Collector::nvml, Collector::pcie},
     "a GPU's NVSwitch fabric registration completed with an error"},
};

consteval const Rule& driver_rule(std::string_view id) { return declared_rule(kDriverRules, id); }

}  // namespace gpudx

#include "gpu_api/rocm_smi/api.hpp"

#include <fmt/format.h>

namespace gpudx {

namespace {

// librocm_smi64's soname carries the ROCm generation (.so.7 in ROCm 6, .so.5 in ROCm 5); ROCm installs it
// under /opt/rocm/lib, which the loader's cache does not always name.
Result<DriverLibrary> open_library(const std::optional<std::string>& directory) {
    static constexpr std::string_view sonames[] = {"librocm_smi64.so.7", "librocm_smi64.so.6", "librocm_smi64.so.5",
                                                   "librocm_smi64.so"};
    std::optional<Error> first;
    auto attempt = [&](const std::optional<std::string>& dir) -> std::optional<DriverLibrary> {
        for (auto soname : sonames) {
            auto lib = DriverLibrary::open(soname, dir, "rsmi_init");
            if (lib) return std::move(*lib);
            if (!first) first = lib.error();
        }
        return std::nullopt;
    };
    if (directory) {
        if (auto lib = attempt(directory)) return std::move(*lib);
        return std::unexpected(*first);
    }
    if (auto lib = attempt(std::nullopt)) return std::move(*lib);
    if (auto lib = attempt(std::string("/opt/rocm/lib"))) return std::move(*lib);
    return std::unexpected(*first);
}

}  // namespace

Result<RocmSmiApi> RocmSmiApi::open(const std::optional<std::string>& directory) {
    auto lib = open_library(directory);
    if (!lib) return std::unexpected(lib.error());
    return RocmSmiApi(std::move(*lib));
}

RocmSmiApi::RocmSmiApi(DriverLibrary lib) : library(std::move(lib)) {
    const auto& l = library;
    l.bind(init, "rsmi_init");
    l.bind(status_string, "rsmi_status_string");
    l.bind(version, "rsmi_version_get");
    l.bind(version_str, "rsmi_version_str_get");
    l.bind(count, "rsmi_num_monitor_devices");
    l.bind(pci_id, "rsmi_dev_pci_id_get");
    l.bind(unique_id, "rsmi_dev_unique_id_get");
    l.bind(hive_id, "rsmi_dev_xgmi_hive_id_get");
    l.bind(ecc_enabled, "rsmi_dev_ecc_enabled_get");
    l.bind(render_minor, "rsmi_dev_drm_render_minor_get");
    l.bind(name, "rsmi_dev_name_get");
    l.bind(serial, "rsmi_dev_serial_number_get");
    l.bind(vbios, "rsmi_dev_vbios_version_get");
    l.bind(memory_total, "rsmi_dev_memory_total_get");
    l.bind(ecc_count, "rsmi_dev_ecc_count_get");
    l.bind(temp_metric, "rsmi_dev_temp_metric_get");
    l.bind(gpu_metrics, "rsmi_dev_gpu_metrics_info_get");
    l.bind(xgmi_error_status, "rsmi_dev_xgmi_error_status");
    l.bind(link_type, "rsmi_topo_get_link_type");
}

std::string RocmSmiApi::describe(rsmi::Status rc) const {
    const char* text = nullptr;
    if (status_string && status_string(rc, &text) != rsmi::SUCCESS) text = nullptr;
    return fmt::format("{} ({}{}{})", rsmi::status_name(rc), rc, text ? ", " : "", text ? text : "");
}

}  // namespace gpudx

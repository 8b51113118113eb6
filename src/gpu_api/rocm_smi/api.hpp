#pragma once
// librocm_smi64 as gpudx reaches it: opened once, every entry point resolved once; one this library lacks is
// null, and the probe records it as not in this library.
#include <optional>
#include <string>

#include "abi/rocm_smi.hpp"
#include "core/error.hpp"
#include "gpu_api/library.hpp"

namespace gpudx {

struct RocmSmiApi {
    DriverLibrary library;

    rsmi::Init init = nullptr;
    rsmi::StatusString status_string = nullptr;
    rsmi::VersionGet version = nullptr;
    rsmi::VersionStrGet version_str = nullptr;
    rsmi::NumMonitorDevices count = nullptr;
    rsmi::DevU64 pci_id = nullptr, unique_id = nullptr, hive_id = nullptr, ecc_enabled = nullptr;
    rsmi::DevU32 render_minor = nullptr;
    rsmi::DevName name = nullptr;
    rsmi::DevString serial = nullptr, vbios = nullptr;
    rsmi::DevMemoryTotal memory_total = nullptr;
    rsmi::DevEccCount ecc_count = nullptr;
    rsmi::DevTempMetric temp_metric = nullptr;
    rsmi::DevGpuMetrics gpu_metrics = nullptr;
    rsmi::DevXgmiErrorStatus xgmi_error_status = nullptr;
    rsmi::TopoLinkType link_type = nullptr;

    // The newest librocm_smi64 soname in `directory`, or (none given) through the loader, then in /opt/rocm/lib;
    // the error is the first attempt's.
    static Result<RocmSmiApi> open(const std::optional<std::string>& directory);
    explicit RocmSmiApi(DriverLibrary lib);

    // "RSMI_STATUS_NOT_SUPPORTED (2, ...)": the code's name and number, and the library's own text.
    std::string describe(rsmi::Status rc) const;
};

}  // namespace gpudx

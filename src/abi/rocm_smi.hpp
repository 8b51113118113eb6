#pragma once
// gpudx's own declarations of the few ROCm SMI types, constants and entry points it uses (rocm_smi.h is
// never included; librocm_smi64.so is dlopen'ed). Layouts follow rocm_smi.h of ROCm 5.x-6.x, x86-64.
#include <cstddef>
#include <cstdint>
#include <iterator>

namespace gpudx::rsmi {

using Status = int;  // rsmi_status_t

inline constexpr Status SUCCESS = 0;
inline constexpr Status INVALID_ARGS = 1;
inline constexpr Status NOT_SUPPORTED = 2;
inline constexpr Status FILE_ERROR = 3;
inline constexpr Status PERMISSION = 4;
inline constexpr Status OUT_OF_RESOURCES = 5;
inline constexpr Status INTERNAL_EXCEPTION = 6;
inline constexpr Status INPUT_OUT_OF_BOUNDS = 7;
inline constexpr Status INIT_ERROR = 8;
inline constexpr Status NOT_YET_IMPLEMENTED = 9;
inline constexpr Status NOT_FOUND = 10;
inline constexpr Status INSUFFICIENT_SIZE = 11;
inline constexpr Status INTERRUPT = 12;
inline constexpr Status UNEXPECTED_SIZE = 13;
inline constexpr Status NO_DATA = 14;
inline constexpr Status UNEXPECTED_DATA = 15;
inline constexpr Status BUSY = 16;
inline constexpr Status REFCOUNT_OVERFLOW = 17;
inline constexpr Status UNKNOWN_ERROR = static_cast<Status>(0xFFFFFFFF);

// "RSMI_STATUS_NOT_SUPPORTED" for 2; "RSMI_STATUS_UNKNOWN_ERROR" for a code this gpudx does not know.
inline const char* status_name(Status s) {
    static constexpr const char* names[] = {
        "RSMI_STATUS_SUCCESS", "RSMI_STATUS_INVALID_ARGS", "RSMI_STATUS_NOT_SUPPORTED", "RSMI_STATUS_FILE_ERROR",
        "RSMI_STATUS_PERMISSION", "RSMI_STATUS_OUT_OF_RESOURCES", "RSMI_STATUS_INTERNAL_EXCEPTION",
        "RSMI_STATUS_INPUT_OUT_OF_BOUNDS", "RSMI_STATUS_INIT_ERROR", "RSMI_STATUS_NOT_YET_IMPLEMENTED",
        "RSMI_STATUS_NOT_FOUND", "RSMI_STATUS_INSUFFICIENT_SIZE", "RSMI_STATUS_INTERRUPT",
        "RSMI_STATUS_UNEXPECTED_SIZE", "RSMI_STATUS_NO_DATA", "RSMI_STATUS_UNEXPECTED_DATA", "RSMI_STATUS_BUSY",
        "RSMI_STATUS_REFCOUNT_OVERFLOW"};
    if (s >= 0 && static_cast<size_t>(s) < std::size(names)) return names[s];
    return "RSMI_STATUS_UNKNOWN_ERROR";
}

// rsmi_gpu_block_t: the RAS blocks whose ECC counts can be read. Bit flags in ROCm 5.x and later; the enum's
// values reach 1<<63, so it is passed as a 64-bit value (an older library reading an int sees the same bits).
struct GpuBlock {
    uint64_t bit;
    const char* name;
};
inline constexpr GpuBlock kEccBlocks[] = {
    {0x1, "UMC"},   {0x2, "SDMA"}, {0x4, "GFX"},    {0x8, "MMHUB"},   {0x10, "ATHUB"}, {0x20, "PCIE_BIF"},
    {0x40, "HDP"},  {0x80, "XGMI_WAFL"}, {0x100, "DF"}, {0x200, "SMN"}, {0x400, "SEM"}, {0x800, "MP0"},
    {0x1000, "MP1"}, {0x2000, "FUSE"},
};

// rsmi_error_count_t. ROCm 6.1 appended deferred_err; the spare field keeps a newer library that writes one
// more counter inside our buffer.
struct ErrorCount {
    uint64_t correctable_err = 0;
    uint64_t uncorrectable_err = 0;
    uint64_t deferred_err = 0;
    uint64_t spare = 0;
};

struct Version {  // rsmi_version_t
    uint32_t major = 0, minor = 0, patch = 0;
    const char* build = nullptr;
};

inline constexpr int SW_COMP_DRIVER = 0;  // rsmi_sw_component_t
inline constexpr int MEM_TYPE_VRAM = 0;   // rsmi_memory_type_t

// The BDFID of rsmi_dev_pci_id_get: domain in bits 63:32, partition id in 31:28, bus 15:8, device 7:3,
// function 2:0 (which some MI parts use for the partition id too; to the OS every partition is function 0).
struct Bdfid {
    unsigned domain = 0, bus = 0, device = 0, function = 0, partition = 0;
};
inline Bdfid decode_bdfid(uint64_t bdfid) {
    return {static_cast<unsigned>(bdfid >> 32), static_cast<unsigned>((bdfid >> 8) & 0xff),
            static_cast<unsigned>((bdfid >> 3) & 0x1f), static_cast<unsigned>(bdfid & 0x7),
            static_cast<unsigned>((bdfid >> 28) & 0xf)};
}

// rsmi_temperature_type_t: the sensors gpudx reads (the HBM_0..3 instances after them are not asked).
inline constexpr uint32_t TEMP_TYPE_EDGE = 0, TEMP_TYPE_JUNCTION = 1, TEMP_TYPE_MEMORY = 2;
// rsmi_temperature_metric_t, in millidegrees C: the reading and the GPU's own limits. CRITICAL is where the
// firmware throttles hard (hwmon temp*_crit), EMERGENCY where the GPU shuts down (temp*_emergency).
inline constexpr int TEMP_CURRENT = 0, TEMP_CRITICAL = 5, TEMP_EMERGENCY = 7;

// rsmi_xgmi_status_t.
inline constexpr int XGMI_STATUS_NO_ERRORS = 0, XGMI_STATUS_ERROR = 1, XGMI_STATUS_MULTIPLE_ERRORS = 2;
// RSMI_IO_LINK_TYPE (an enum whose largest value is 0xFFFFFFFF: 32 bits).
inline constexpr uint32_t IOLINK_TYPE_UNDEFINED = 0, IOLINK_TYPE_PCIEXPRESS = 1, IOLINK_TYPE_XGMI = 2;

// rsmi_gpu_metrics_t is the library's own union of every gpu_metrics version the kernel may publish, and it grows
// with each ROCm release: gpudx hands rsmi_dev_gpu_metrics_info_get a buffer far larger than any release's struct
// and reads only these fields at their offsets, which every release since the v1.3 fields were added kept:
//   metrics_table_header_t {uint16 structure_size; uint8 format_revision; uint8 content_revision} at 0,
//   uint32 throttle_status at 68 (after 6 temperatures, 3 activities, the socket power, two uint64 counters and
//   14 uint16 clocks), and uint64 indep_throttle_status at 112 (after the v1.1 accumulators and HBM temperatures,
//   the v1.2 firmware timestamp and the v1.3 voltages).
// Libraries before rocm_smi_lib 7.1 (ROCm 6.1) end the struct at 96 bytes with no indep_throttle_status; a field
// the GPU's metrics do not carry is written all ones by the library (and our buffer starts all ones, so a field a
// library did not write reads the same: not reported).
inline constexpr size_t kGpuMetricsBufferSize = 16384;
inline constexpr size_t kGpuMetricsFormatRevision = 2, kGpuMetricsContentRevision = 3;
inline constexpr size_t kGpuMetricsThrottleStatus = 68;
inline constexpr size_t kGpuMetricsIndepThrottleStatus = 112;
inline constexpr uint32_t kIndepThrottleFirstLibraryMajor = 7, kIndepThrottleFirstLibraryMinor = 1;

using Init = Status (*)(uint64_t flags);
using StatusString = Status (*)(Status, const char** text);
using VersionGet = Status (*)(Version*);
using VersionStrGet = Status (*)(int component, char* buf, uint32_t len);
using NumMonitorDevices = Status (*)(uint32_t* count);
using DevU64 = Status (*)(uint32_t index, uint64_t* out);
using DevU32 = Status (*)(uint32_t index, uint32_t* out);
using DevName = Status (*)(uint32_t index, char* buf, size_t len);
using DevString = Status (*)(uint32_t index, char* buf, uint32_t len);
using DevMemoryTotal = Status (*)(uint32_t index, int memory_type, uint64_t* total);
using DevEccCount = Status (*)(uint32_t index, uint64_t block, ErrorCount* counts);
using DevTempMetric = Status (*)(uint32_t index, uint32_t sensor, int metric, int64_t* millidegrees);
using DevGpuMetrics = Status (*)(uint32_t index, void* metrics);  // rsmi_gpu_metrics_t*: see the offsets above
using DevXgmiErrorStatus = Status (*)(uint32_t index, int* status);
using TopoLinkType = Status (*)(uint32_t source, uint32_t destination, uint64_t* hops, uint32_t* type);

}  // namespace gpudx::rsmi

#pragma once
// Answers of the driver libraries (NVML and the CUDA driver for NVIDIA, ROCm SMI for AMD), probed under a deadline.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/named_enum.hpp"
#include "model/environment.hpp"

namespace gpudx {

// A query that may be unsupported on this GPU or driver: value, or why not.
enum class QueryState { ok, unsupported, error, not_asked };

enum class DriverApi { nvml, cuda, rocm_smi };

// The driver call a probe was inside when its deadline passed. The rules read its fields; a snapshot stores
// it as the label the probe announced (label(), parse_hung_call), so the JSON reads as it always has.
struct HungCall {
    enum class Scope {
        caller,       // the probe under the caller's environment
        all_devices,  // CUDA's --all-devices evaluation, with CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER unset
    };
    DriverApi api = DriverApi::nvml;
    std::string function;            // "nvmlDeviceGetUUID"; empty: the probe hung before its first call
    std::optional<unsigned> device;  // the library's own number of the device the call was about
    std::string arguments;           // the call's other arguments as announced: "link 3", "UMC", "33", "0"
    Scope scope = Scope::caller;

    // "nvmlDeviceGetUUID(1)", "(all devices) cuDeviceGetAttribute(33, 1)", "(before the first call)".
    std::string label() const;
    bool operator==(const HungCall&) const = default;
};

// The label a probe announces before a call: the device goes where the function takes it (last for
// cuDeviceGetAttribute, first for every other per-device call), the other arguments beside it.
std::string driver_call_label(std::string_view function, std::optional<unsigned> device = std::nullopt,
                              std::string_view arguments = {});
// A non-empty label read back: every label a probe writes reads back to the call it was made from. A text no
// probe writes (an edited snapshot) is kept whole as the function, so it is written back unchanged.
HungCall parse_hung_call(DriverApi api, std::string_view label);
// What a snapshot stores: the label, or "" when no call hung.
std::string hung_call_label(const std::optional<HungCall>& call);

struct NvmlProcess {
    unsigned pid = 0;
    std::string name;
    std::optional<unsigned long long> used_memory;
};

// What is at the other end of an NVLink (nvmlDeviceGetNvLinkRemoteDeviceType).
// not_read: the type was not asked or not answered (an inactive link, an older snapshot, Not Supported).
enum class NvlinkRemote : uint8_t { not_read, gpu, nvswitch, ibmnpu, unknown };
inline constexpr EnumName<NvlinkRemote> kNvlinkRemoteNames[] = {{NvlinkRemote::not_read, "not_read"},
                                                                {NvlinkRemote::gpu, "gpu"},
                                                                {NvlinkRemote::nvswitch, "nvswitch"},
                                                                {NvlinkRemote::ibmnpu, "ibmnpu"},
                                                                {NvlinkRemote::unknown, "unknown"}};
constexpr std::span<const EnumName<NvlinkRemote>> enum_names(NvlinkRemote) { return kNvlinkRemoteNames; }

// One NVLink of a GPU. Every fact but the link number and `active` is nullopt/empty when it was not read (a
// snapshot older than the fact, or a driver that does not answer it; the device's `unsupported` says which).
struct NvlinkState {
    unsigned link = 0;
    bool active = false;
    std::optional<unsigned> version;     // NVLink generation (4 on Hopper, 5 on Blackwell)
    std::optional<unsigned> speed_mbps;  // the link's speed in MB/s as the driver reports it
    std::string remote_pci;              // the remote end's PCI address, normalised; empty when not read
    NvlinkRemote remote_type = NvlinkRemote::not_read;
};

// One NVLink's error counters at one moment (since the driver loaded). Hopper and earlier answer the data-link
// counters; Blackwell answers the NVLink 5 counters instead. nullopt: not answered.
struct NvlinkErrorCounters {
    unsigned link = 0;
    std::optional<unsigned long long> replay, recovery, crc_flit, crc_data, ecc_data;
    // NVLink 5 (Blackwell): link recoveries that failed (the link went down) and all recoveries; packets received
    // with errors; the times the local error count passed its threshold.
    std::optional<unsigned long long> recovery_failed, recovery_events, receive_errors, link_integrity;
};

// The facts of one moment that can change from one second to the next, judged across two samples so that a
// spike or a counter's history is not taken for a fault (docs/gpu-health.md).
struct GpuHealthSample {
    unsigned after_ms = 0;  // the interval waited after the first sample (0 for it)
    std::optional<unsigned long long> clock_event_reasons;  // nvmlClocksEventReason* bits
    std::optional<unsigned> temperature_c, memory_temperature_c;
    std::optional<unsigned> power_mw;
    std::optional<unsigned long long> pcie_replays;  // nvmlDeviceGetPcieReplayCounter
    std::vector<NvlinkErrorCounters> nvlink_errors;
};

// How many DRAM banks have how many spare rows left (nvmlDeviceGetRowRemapperHistogram): max (all), high,
// partial, low, none (no spare row left: the next uncorrectable error in that bank cannot be remapped).
struct RowRemapHistogram {
    unsigned max = 0, high = 0, partial = 0, low = 0, none = 0;
};

// ECC counts of one memory location since the driver loaded (volatile) and over the GPU's life (aggregate).
#define GPUDX_ECC_LOCATIONS(X) X(total) X(l1_cache) X(l2_cache) X(device_memory) X(register_file) X(texture_memory) X(cbu)
GPUDX_NAMED_ENUM(EccLocation, GPUDX_ECC_LOCATIONS)
struct EccLocationCounts {
    EccLocation location = EccLocation::total;
    std::optional<unsigned long long> corrected_volatile, uncorrected_volatile, corrected_aggregate,
        uncorrected_aggregate;
};

// The GPU's own health as NVML reports it (docs/gpu-health.md): limits and counts read once, and one or two
// samples of what changes. An older snapshot has none of it: empty samples mean "not read".
struct GpuHealth {
    std::optional<unsigned> temperature_slowdown_c, temperature_shutdown_c;  // the GPU's own thresholds
    std::optional<unsigned> power_limit_mw;                                  // the enforced limit
    std::optional<RowRemapHistogram> row_remap_histogram;
    std::vector<EccLocationCounts> ecc;
    std::optional<unsigned> retired_pages_single_bit, retired_pages_double_bit;  // pre-Ampere page retirement
    std::optional<unsigned> nvlink_count;  // links the GPU has (NVML_FI_DEV_NVLINK_LINK_COUNT)
    std::vector<GpuHealthSample> samples;  // the first, and a second when the first showed something to confirm
    // Why a second sample was wanted but not taken (it would not have finished inside the deadline); empty else.
    std::string second_sample_skipped;
};


struct NvmlDevice {
    unsigned index = 0;
    std::string uuid, name, serial;
    std::string bus_id;  // as NVML wrote it
    std::string pci;     // normalised
    std::optional<unsigned> domain, bus, device;
    std::optional<unsigned> minor;
    std::optional<bool> persistence_mode;
    std::optional<bool> mig_mode;
    std::vector<std::string> mig_uuids;
    std::optional<bool> ecc_enabled;
    std::optional<unsigned long long> ecc_uncorrected_volatile, ecc_uncorrected_aggregate;
    std::optional<unsigned> retired_pages_pending;
    std::optional<unsigned> remapped_rows_correctable, remapped_rows_uncorrectable;
    std::optional<bool> remapped_rows_pending, remapped_rows_failure;
    std::optional<unsigned> fabric_state, fabric_status;
    std::optional<unsigned> fabric_clique_id;
    std::string fabric_cluster_uuid;  // empty when not read or all zero (no cluster)
    // NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: what the driver asks for to recover the GPU (0 none, 1 GPU reset, 2 node
    // reboot, 3 drain P2P, 4 drain and reset); nullopt when not read (an older driver: listed in `unsupported`).
    std::optional<unsigned> gpu_recovery_action;
    std::vector<NvlinkState> nvlinks;
    GpuHealth health;
    std::vector<NvmlProcess> processes;
    std::vector<std::string> unsupported;  // queries the device answered Not Supported
    std::vector<std::string> errors;       // "nvmlDeviceGetX: message"
};

// The clock event reasons (nvmlClocksEventReason*): faults of the hardware or the facility, a warning of the
// cooling, and the ordinary reasons a GPU runs below its top clock (docs/gpu-health.md).
inline constexpr unsigned long long kClockReasonHwSlowdown = 0x8, kClockReasonHwThermalSlowdown = 0x40,
                                    kClockReasonHwPowerBrake = 0x80, kClockReasonSwThermalSlowdown = 0x20;
inline constexpr unsigned long long kClockReasonsHardware =
    kClockReasonHwSlowdown | kClockReasonHwThermalSlowdown | kClockReasonHwPowerBrake;
// "HW slowdown, HW power brake": the names of the set bits, for evidence and reports.
std::string clock_event_reason_names(unsigned long long reasons);

// How close to its slowdown threshold a GPU may run before one sample calls for a second (and two call for a
// warning): GPUs under full load run a few degrees under it by design only when the cooling is short.
inline constexpr unsigned kTemperatureMarginC = 5;
// A PCIe replay count at or below this is the link's training history, not a sign (the real 2xH200 capture: 2
// and 1 since reset): below it one sample does not call for a second.
inline constexpr unsigned long long kPcieReplaysNoticeable = 100;

// Power above the enforced limit by more than this is a fault of the power capping or its sensor: at the limit
// under load is normal (SW power cap).
inline constexpr unsigned kPowerOverLimitPercent = 5;
bool power_over_limit(const GpuHealthSample& s, std::optional<unsigned> limit_mw);
bool temperature_near_slowdown(const GpuHealthSample& s, std::optional<unsigned> slowdown_c);
bool any_nvlink_error(const NvlinkErrorCounters& c);

// Why the first health sample of a device calls for a second one (a hardware clock reason, a temperature near its
// slowdown threshold, power over the limit, a non-zero NVLink error counter or many PCIe replays), or nullopt.
std::optional<std::string> second_sample_wanted(const NvmlDevice& d);

// An event NVML delivered to the agent's watcher (`gpudx nvml-events`, gpu_api/nvml/events.hpp): the agent keeps
// the recent ones in the snapshots it judges, so an Xid the kernel log cannot show (no /dev/kmsg in a
// container, a ring buffer that wrapped) is still judged.
//
// The kinds of event, declared once: each with the name the watcher's lines and the snapshot use and its bit in
// an event mask (abi/nvml.hpp, expanded in model/driver.cpp).
#define GPUDX_NVML_EVENT_TYPES(X)                                  \
    X(single_bit_ecc, nvmlEventTypeSingleBitEccError)              \
    X(double_bit_ecc, nvmlEventTypeDoubleBitEccError)              \
    X(pstate, nvmlEventTypePState)                                 \
    X(xid, nvmlEventTypeXidCriticalError)                          \
    X(clock, nvmlEventTypeClock)                                   \
    X(power_source, nvmlEventTypePowerSourceChange)                \
    X(mig_config, nvmlEventMigConfigChange)                        \
    X(single_bit_ecc_storm, nvmlEventTypeSingleBitEccErrorStorm)   \
    X(dram_retirement, nvmlEventTypeDramRetirementEvent)           \
    X(dram_retirement_failure, nvmlEventTypeDramRetirementFailure) \
    X(nonfatal_poison, nvmlEventTypeNonFatalPoisonError)           \
    X(fatal_poison, nvmlEventTypeFatalPoisonError)                 \
    X(gpu_unavailable, nvmlEventTypeGpuUnavailableError)           \
    X(recovery_action, nvmlEventTypeGpuRecoveryAction)

enum class NvmlEventType {
#define GPUDX_NVML_EVENT_TYPE(name, bit) name,
    GPUDX_NVML_EVENT_TYPES(GPUDX_NVML_EVENT_TYPE)
#undef GPUDX_NVML_EVENT_TYPE
};
inline constexpr NvmlEventType kAllNvmlEventTypes[] = {
#define GPUDX_NVML_EVENT_TYPE(name, bit) NvmlEventType::name,
    GPUDX_NVML_EVENT_TYPES(GPUDX_NVML_EVENT_TYPE)
#undef GPUDX_NVML_EVENT_TYPE
};
std::string_view to_string(NvmlEventType t);
// nullopt for a name gpudx does not know (a newer watcher's, or "0x..." for a bit without a name).
std::optional<NvmlEventType> parse_nvml_event_type(std::string_view name);
unsigned long long nvml_event_bit(NvmlEventType t);
// nullopt for a bit gpudx does not know.
std::optional<NvmlEventType> nvml_event_type_of_bit(unsigned long long bit);

struct NvmlEvent {
    std::string time;  // ISO 8601 UTC, when the watcher received it
    unsigned index = 0;
    std::string uuid;
    std::string pci;
    NvmlEventType type = NvmlEventType::xid;
    unsigned long long mask = 0;
    unsigned long long data = 0;  // the Xid for xid, the action for recovery_action
    std::optional<unsigned> gpu_instance;
    std::optional<unsigned> compute_instance;
};

struct NvmlLayer {
    std::string library_path;  // the file actually loaded
    std::string load_error;    // why libnvidia-ml.so.1 could not be loaded (dlerror), when it could not
    std::optional<int> init_result;
    std::string init_error;
    std::string driver_version;
    std::string nvml_version;
    std::optional<int> cuda_driver_version;
    std::optional<unsigned> device_count;
    std::vector<NvmlDevice> devices;
    std::optional<HungCall> hung_call;  // the call that never returned, when one did not
};

struct CudaDevice {
    int ordinal = 0;
    std::string uuid;
    std::string bus_id;  // as cuDeviceGetPCIBusId wrote it
    std::string pci;     // normalised
    std::optional<int> attr_bus, attr_device, attr_domain;
    std::string name;
    std::optional<int> cc_major, cc_minor;
    std::optional<unsigned long long> total_memory;
    std::optional<int> multiprocessor_count;
};

struct CudaView {
    // As the probe ran under them; "" in a view no probe filled.
    EnvValue cuda_visible_devices = std::string();
    EnvValue cuda_device_order = std::string();
    std::optional<int> init_result;
    std::string init_name, init_meaning;
    std::optional<int> device_count;
    std::vector<CudaDevice> devices;
};

struct CudaLayer {
    std::string library_path;
    std::string load_error;  // why libcuda.so.1 could not be loaded (dlerror), when it could not
    std::optional<int> driver_version;
    CudaView caller;                  // under the caller's environment
    std::optional<CudaView> all;      // with CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER unset (--all-devices)
    std::optional<HungCall> hung_call;  // the caller's probe's, else the --all-devices probe's (scope all_devices)
};

// ROCm SMI (librocm_smi64.so), the AMD counterpart of NVML: asked only on nodes with a KFD topology.
struct RocmSmiEcc {
    std::string block;  // "UMC", "GFX", ... (rsmi_gpu_block_t)
    unsigned long long correctable = 0, uncorrectable = 0;
};

// ---- AMD GPU health through ROCm SMI (docs/amd.md, "Health"). Everything below is nullopt/empty when it was not
// read: an older snapshot, a library without the call, or a GPU that answered Not Supported (the device's
// `unsupported` says which); such a fact is not judged, never taken for healthy.

#define GPUDX_ROCM_TEMPERATURE_SENSORS(X) X(edge) X(junction) X(memory)
GPUDX_NAMED_ENUM(RocmTemperatureSensor, GPUDX_ROCM_TEMPERATURE_SENSORS)

// A sensor's own limits (rsmi_dev_temp_metric_get), in millidegrees C: critical is where the firmware throttles
// hard, emergency where the GPU shuts itself down.
struct RocmSmiTemperatureLimits {
    RocmTemperatureSensor sensor = RocmTemperatureSensor::edge;
    std::optional<long long> critical_mc, emergency_mc;
};
struct RocmSmiTemperature {
    RocmTemperatureSensor sensor = RocmTemperatureSensor::edge;
    long long current_mc = 0;
};

// One moment of what changes from second to second; the second sample (only when the first showed something to
// confirm) re-reads the temperatures, the throttle status and the ECC counts of blocks that had corrected errors.
struct RocmSmiHealthSample {
    unsigned after_ms = 0;                         // the interval waited after the first sample (0 for it)
    std::vector<RocmSmiTemperature> temperatures;  // the sensors that answered
    // rsmi_dev_gpu_metrics_info_get: throttle_status has ASIC-specific bits (kept, not decoded);
    // indep_throttle_status the kernel's ASIC-independent SMU_THROTTLER_* bits (decoded: rocm_throttle_reasons).
    std::optional<unsigned> throttle_status;
    std::optional<unsigned long long> indep_throttle_status;
    std::vector<RocmSmiEcc> ecc;  // second sample only
};

#define GPUDX_ROCM_LINK_TYPES(X) X(undefined) X(pcie) X(xgmi) X(other)
GPUDX_NAMED_ENUM(RocmLinkType, GPUDX_ROCM_LINK_TYPES)
// How this GPU reaches another (rsmi_topo_get_link_type): XGMI directly (1 hop) or PCIe through the CPUs.
struct RocmSmiPeerLink {
    unsigned peer = 0;     // the other device's ROCm SMI index
    std::string peer_pci;  // its address, normalised
    RocmLinkType type = RocmLinkType::undefined;
    std::optional<unsigned long long> hops;
};

// not_read: not asked or not answered (an older snapshot, Not Supported: the device's `unsupported` says which).
#define GPUDX_ROCM_XGMI_STATUSES(X) X(not_read) X(no_errors) X(error) X(multiple_errors)
GPUDX_NAMED_ENUM(RocmXgmiStatus, GPUDX_ROCM_XGMI_STATUSES)

struct RocmSmiHealth {
    std::vector<RocmSmiTemperatureLimits> temperature_limits;  // the sensors whose reading answered
    std::string gpu_metrics_version;                           // the kernel's gpu_metrics table: "1.5"
    RocmXgmiStatus xgmi_error_status = RocmXgmiStatus::not_read;  // rsmi_dev_xgmi_error_status
    std::vector<RocmSmiPeerLink> links;                        // to the other GPUs (one device per PCI address)
    std::vector<RocmSmiHealthSample> samples;
    std::string second_sample_skipped;  // why a wanted second sample was not taken; empty else
};

// The indep_throttle_status bits (the kernel's SMU_THROTTLER_*_BIT, kgd_pp_interface.h) by what they mean:
// power and current limits hold a busy GPU at its cap by design; thermal and hardware (VRHOT, PROCHOT) ones say
// the cooling or the platform is failing it.
enum class ThrottleKind { power, current, thermal, hardware, reliability };
struct ThrottleReason {
    unsigned bit;
    std::string_view name;
    ThrottleKind kind;
};
// The reasons set in `bits`, in bit order; a bit gpudx does not know is named "bit N" (kind reliability: not judged).
std::vector<ThrottleReason> rocm_throttle_reasons(unsigned long long bits);
bool rocm_throttle_is_fault(const ThrottleReason& r);
// "TEMP_HOTSPOT, PROCHOT_GFX": the names, for evidence.
std::string rocm_throttle_names(const std::vector<ThrottleReason>& reasons);

struct RocmSmiDevice {
    unsigned index = 0;                        // ROCm SMI's device index
    std::optional<unsigned long long> bdfid;   // rsmi_dev_pci_id_get as returned
    std::string pci;                           // normalised dddd:bb:dd.f, function 0 (partitions share the BDF)
    std::optional<unsigned> partition;         // the partition id the BDFID carries, when not 0
    std::string unique_id;                     // 16 lower-case hex digits; empty when unknown or 0
    std::string name, serial, vbios_version;
    std::optional<unsigned> render_minor;      // 128 for /dev/dri/renderD128
    std::string xgmi_hive_id;                  // 16 hex digits; empty when not in a hive
    std::optional<unsigned long long> vram_total;
    std::optional<unsigned long long> ecc_enabled_blocks;  // bit mask of rsmi_gpu_block_t
    std::vector<RocmSmiEcc> ecc;                // blocks with ECC enabled and their counts
    RocmSmiHealth health;
    std::vector<std::string> unsupported;       // queries answered RSMI_STATUS_NOT_SUPPORTED
    std::vector<std::string> errors;            // "rsmi_dev_x_get: RSMI_STATUS_... (n)"
};

struct RocmSmiLayer {
    bool probed = false;            // false: not asked (no KFD, or driver layers not probed); not written to JSON
    std::string library_path;       // the file actually loaded
    std::string load_error;         // why no librocm_smi64 could be loaded
    std::optional<int> init_result;
    std::string init_error;
    std::string library_version;    // rsmi_version_get: "7.4.0"
    std::string driver_version;     // rsmi_version_str_get(RSMI_SW_COMP_DRIVER)
    std::optional<unsigned> device_count;
    std::vector<RocmSmiDevice> devices;
    std::optional<HungCall> hung_call;  // the call that never returned, when one did not
};

// How near its critical temperature a sensor may read before the first sample calls for a second (and two call for
// a warning): the same margin as NVIDIA's slowdown threshold.
inline constexpr long long kRocmTemperatureMarginMc = 5000;
// The limit a sensor is judged against: critical, else emergency; nullopt when neither was read.
std::optional<long long> rocm_temperature_limit(const RocmSmiTemperatureLimits& l);
std::optional<long long> rocm_temperature(const RocmSmiHealthSample& s, RocmTemperatureSensor sensor);
// Why the first health sample of a device calls for a second one (a sensor near its limit, a thermal or hardware
// throttle, corrected ECC errors counted), or nullopt.
std::optional<std::string> rocm_second_sample_wanted(const RocmSmiDevice& d);

// What the recorded return codes mean, for the rules: computed from the integers a snapshot holds (so the JSON
// stays the libraries' own codes), never stored.

enum class NvmlInit {
    not_attempted,             // the library did not load, or the probe never got to nvmlInit
    succeeded,
    driver_not_loaded,         // the kernel module is not loaded
    library_version_mismatch,  // libnvidia-ml and the kernel module are different driver versions
    no_permission,             // the device nodes refused the caller
    other_failure,
};
NvmlInit nvml_init(const NvmlLayer& nvml);

enum class CudaInit {
    not_attempted,
    succeeded,
    no_device,               // the driver sees no usable GPU
    driver_mismatch,         // libcuda and the kernel module come from different driver installs
    compat_not_supported,    // a forward-compatibility libcuda on a GPU that does not support it
    stub_library,            // the CUDA toolkit's stub libcuda, not the driver
    system_not_ready,        // the NVSwitch fabric is not initialised yet
    access_denied,           // the operating system refused the device nodes
    other_failure,
};
CudaInit cuda_init(const CudaView& view);

// NVSwitch fabric registration of one GPU; nullopt when it could not be read.
enum class FabricState { not_supported, not_started, in_progress, completed };
std::optional<FabricState> fabric_state(const NvmlDevice& device);
// Registration completed but with an error status.
bool fabric_failed(const NvmlDevice& device);

// An NVML device error ("nvmlDeviceGetX: NVML_ERROR_GPU_IS_LOST (15, ...)") that says the GPU stopped answering.
bool reports_gpu_lost(std::string_view device_error);

// "NVML_ERROR_LIB_RM_VERSION_MISMATCH", "RSMI_STATUS_INIT_ERROR": a recorded code by name, for evidence.
std::string_view nvml_code_name(int code);
std::string_view rocm_smi_code_name(int code);

}  // namespace gpudx

#pragma once
// gpudx's own declarations of the few NVML types, constants and entry points it uses (nvml.h is never
// included; libnvidia-ml.so.1 is dlopen'ed). Layouts follow nvml.h of driver branches 535-580, x86-64.
#include <cstddef>

namespace gpudx {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlEnableState_t = int;  // 0 disabled, 1 enabled

inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
inline constexpr nvmlReturn_t NVML_ERROR_TIMEOUT = 10;
inline constexpr nvmlReturn_t NVML_ERROR_LIBRARY_NOT_FOUND = 12;
inline constexpr nvmlReturn_t NVML_ERROR_FUNCTION_NOT_FOUND = 13;
inline constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
inline constexpr nvmlReturn_t NVML_ERROR_RESET_REQUIRED = 16;
inline constexpr nvmlReturn_t NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18;
inline constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;

// Buffer sizes from nvml.h (the _V2 sizes where there are two).
inline constexpr unsigned NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_SERIAL_BUFFER_SIZE = 30;
inline constexpr unsigned NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
inline constexpr unsigned NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;
inline constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;

// nvmlDeviceGetTotalEccErrors arguments.
inline constexpr int NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
inline constexpr int NVML_VOLATILE_ECC = 0;
inline constexpr int NVML_AGGREGATE_ECC = 1;

// The value NVML writes where a number is not available (a process's memory inside a VM or a container
// without accounting).
inline constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ull;

// nvmlDeviceGetP2PStatus: the NVLink capability index, and the status that means the link works.
inline constexpr int NVML_P2P_CAPS_INDEX_NVLINK = 2;
inline constexpr int NVML_P2P_STATUS_OK = 0;

// nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v2/_v3 (the plain v1 call has another layout).
struct nvmlPciInfo_t {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
};
static_assert(sizeof(nvmlPciInfo_t) == 68);

// nvmlProcessInfo_t of nvmlDeviceGetComputeRunningProcesses_v2/_v3.
struct nvmlProcessInfo_t {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
};
static_assert(sizeof(nvmlProcessInfo_t) == 24);

// nvmlMemory_t (v1), as the plain nvmlDeviceGetMemoryInfo fills it (_v2 takes a versioned struct).
struct nvmlMemory_t {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};
static_assert(sizeof(nvmlMemory_t) == 24);

// nvmlDeviceGetFieldValues: many values of one device in one call. Field ids from nvml.h (stable by its rule).
inline constexpr unsigned NVML_FI_DEV_ECC_CURRENT = 1;        // 1 = ECC on
inline constexpr unsigned NVML_FI_DEV_ECC_DBE_VOL_TOTAL = 4;  // uncorrected (double-bit), volatile
inline constexpr unsigned NVML_FI_DEV_ECC_DBE_AGG_TOTAL = 6;  // uncorrected (double-bit), aggregate
inline constexpr unsigned NVML_FI_DEV_RETIRED_PENDING = 31;   // 1 = pages pending retirement
inline constexpr unsigned NVML_FI_DEV_REMAPPED_COR = 142;
inline constexpr unsigned NVML_FI_DEV_REMAPPED_UNC = 143;
inline constexpr unsigned NVML_FI_DEV_REMAPPED_PENDING = 144;
inline constexpr unsigned NVML_FI_DEV_REMAPPED_FAILURE = 145;
// What the driver asks for to recover the GPU (nvmlDeviceGpuRecoveryAction_t: 0 none, 1 GPU reset, 2 node reboot,
// 3 drain P2P, 4 drain and reset); drivers before R570 answer the field Not Supported or Invalid Argument.
inline constexpr unsigned NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230;

// ECC counts by location, single-bit (corrected) and double-bit (uncorrected), volatile and aggregate.
inline constexpr unsigned NVML_FI_DEV_ECC_SBE_VOL_TOTAL = 3;
inline constexpr unsigned NVML_FI_DEV_ECC_SBE_AGG_TOTAL = 5;
inline constexpr unsigned NVML_FI_DEV_ECC_SBE_VOL_L1 = 7, NVML_FI_DEV_ECC_DBE_VOL_L1 = 8;
inline constexpr unsigned NVML_FI_DEV_ECC_SBE_VOL_L2 = 9, NVML_FI_DEV_ECC_DBE_VOL_L2 = 10;
inline constexpr unsigned NVML_FI_DEV_ECC_SBE_VOL_DEV = 11, NVML_FI_DEV_ECC_DBE_VOL_DEV = 12;
inline constexpr unsigned NVML_FI_DEV_ECC_SBE_VOL_REG = 13, NVML_FI_DEV_ECC_DBE_VOL_REG = 14;
inline constexpr unsigned NVML_FI_DEV_ECC_SBE_VOL_TEX = 15, NVML_FI_DEV_ECC_DBE_VOL_TEX = 16;
inline constexpr unsigned NVML_FI_DEV_ECC_DBE_VOL_CBU = 17;
inline constexpr unsigned NVML_FI_DEV_ECC_SBE_AGG_L1 = 18, NVML_FI_DEV_ECC_DBE_AGG_L1 = 19;
inline constexpr unsigned NVML_FI_DEV_ECC_SBE_AGG_L2 = 20, NVML_FI_DEV_ECC_DBE_AGG_L2 = 21;
inline constexpr unsigned NVML_FI_DEV_ECC_SBE_AGG_DEV = 22, NVML_FI_DEV_ECC_DBE_AGG_DEV = 23;
inline constexpr unsigned NVML_FI_DEV_ECC_SBE_AGG_REG = 24, NVML_FI_DEV_ECC_DBE_AGG_REG = 25;
inline constexpr unsigned NVML_FI_DEV_ECC_SBE_AGG_TEX = 26, NVML_FI_DEV_ECC_DBE_AGG_TEX = 27;
inline constexpr unsigned NVML_FI_DEV_ECC_DBE_AGG_CBU = 28;
inline constexpr unsigned NVML_FI_DEV_RETIRED_SBE = 29;  // pages retired for single-bit errors (pre-Ampere)
inline constexpr unsigned NVML_FI_DEV_RETIRED_DBE = 30;  // pages retired for double-bit errors
inline constexpr unsigned NVML_FI_DEV_MEMORY_TEMP = 82;  // memory (HBM) temperature, degrees C
inline constexpr unsigned NVML_FI_DEV_NVLINK_LINK_COUNT = 91;
inline constexpr unsigned NVML_FI_DEV_PCIE_REPLAY_COUNTER = 94;
inline constexpr unsigned NVML_FI_DEV_POWER_INSTANT = 186;        // milliwatts
inline constexpr unsigned NVML_FI_DEV_POWER_CURRENT_LIMIT = 190;  // the enforced limit, milliwatts
// Per NVLink: the link number goes in the field's scopeId. The *_TOTAL error counters sum the link's lanes.
inline constexpr unsigned NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL = 38;
inline constexpr unsigned NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL = 45;
inline constexpr unsigned NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL = 52;
inline constexpr unsigned NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL = 59;
inline constexpr unsigned NVML_FI_DEV_NVLINK_ECC_DATA_ERROR_COUNT_TOTAL = 160;
inline constexpr unsigned NVML_FI_DEV_NVLINK_GET_SPEED = 164;    // MB/s
inline constexpr unsigned NVML_FI_DEV_NVLINK_GET_STATE = 165;    // 1 active
inline constexpr unsigned NVML_FI_DEV_NVLINK_GET_VERSION = 166;
// NVLink 5 (Blackwell), per link; the data-link counters above are not supported there.
inline constexpr unsigned NVML_FI_DEV_NVLINK_COUNT_RCV_ERRORS = 208;
inline constexpr unsigned NVML_FI_DEV_NVLINK_COUNT_LOCAL_LINK_INTEGRITY_ERRORS = 211;
inline constexpr unsigned NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS = 214;
inline constexpr unsigned NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS = 215;

enum nvmlValueType_t : int {
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
    NVML_VALUE_TYPE_SIGNED_INT = 5,
    NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
};
union nvmlValue_t {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    unsigned short usVal;
};
struct nvmlFieldValue_t {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
};
static_assert(sizeof(nvmlFieldValue_t) == 40);

// Fabric registration state (NVSwitch / NVLink-domain systems).
inline constexpr unsigned NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0;
inline constexpr unsigned NVML_GPU_FABRIC_STATE_NOT_STARTED = 1;
inline constexpr unsigned NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2;
inline constexpr unsigned NVML_GPU_FABRIC_STATE_COMPLETED = 3;

struct nvmlGpuFabricInfo_t {  // nvmlDeviceGetGpuFabricInfo (535+)
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
};
struct nvmlGpuFabricInfo_v2_t {  // nvmlDeviceGetGpuFabricInfoV with version nvmlGpuFabricInfo_v2 (550+)
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
};
static_assert(sizeof(nvmlGpuFabricInfo_v2_t) == 36);
inline constexpr unsigned nvmlGpuFabricInfo_v2 = sizeof(nvmlGpuFabricInfo_v2_t) | (2u << 24);

// nvmlDeviceGetNvLinkRemoteDeviceType answers (nvmlIntNvLinkDeviceType_t).
inline constexpr int NVML_NVLINK_DEVICE_TYPE_GPU = 0x00;
inline constexpr int NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01;
inline constexpr int NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02;
inline constexpr int NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF;

// nvmlDeviceGetTemperature sensor and nvmlDeviceGetTemperatureThreshold kinds (nvmlTemperatureThresholds_t).
inline constexpr int NVML_TEMPERATURE_GPU = 0;
inline constexpr int NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0;
inline constexpr int NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1;

// nvmlDeviceGetCurrentClocksEventReasons bits (the older name: ...ClocksThrottleReasons, same bits).
inline constexpr unsigned long long nvmlClocksEventReasonGpuIdle = 0x1;
inline constexpr unsigned long long nvmlClocksEventReasonApplicationsClocksSetting = 0x2;
inline constexpr unsigned long long nvmlClocksEventReasonSwPowerCap = 0x4;
inline constexpr unsigned long long nvmlClocksThrottleReasonHwSlowdown = 0x8;
inline constexpr unsigned long long nvmlClocksEventReasonSyncBoost = 0x10;
inline constexpr unsigned long long nvmlClocksEventReasonSwThermalSlowdown = 0x20;
inline constexpr unsigned long long nvmlClocksThrottleReasonHwThermalSlowdown = 0x40;
inline constexpr unsigned long long nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80;
inline constexpr unsigned long long nvmlClocksEventReasonDisplayClockSetting = 0x100;

struct nvmlRowRemapperHistogramValues_t {
    unsigned int max;
    unsigned int high;
    unsigned int partial;
    unsigned int low;
    unsigned int none;
};
static_assert(sizeof(nvmlRowRemapperHistogramValues_t) == 20);

// Events (nvmlEventSetCreate / nvmlDeviceRegisterEvents / nvmlEventSetWait_v2): the bits of an event mask.
// A device answers nvmlDeviceGetSupportedEventTypes with the bits it can deliver; registering a bit it cannot
// is NVML_ERROR_NOT_SUPPORTED for the whole call, so a mask is always cut to the supported bits first.
using nvmlEventSet_t = struct nvmlEventSet_st*;
inline constexpr unsigned long long nvmlEventTypeSingleBitEccError = 0x1;
inline constexpr unsigned long long nvmlEventTypeDoubleBitEccError = 0x2;
inline constexpr unsigned long long nvmlEventTypePState = 0x4;
inline constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8;  // eventData: the Xid
inline constexpr unsigned long long nvmlEventTypeClock = 0x10;
inline constexpr unsigned long long nvmlEventTypePowerSourceChange = 0x80;
inline constexpr unsigned long long nvmlEventMigConfigChange = 0x100;
inline constexpr unsigned long long nvmlEventTypeSingleBitEccErrorStorm = 0x200;
inline constexpr unsigned long long nvmlEventTypeDramRetirementEvent = 0x400;
inline constexpr unsigned long long nvmlEventTypeDramRetirementFailure = 0x800;
inline constexpr unsigned long long nvmlEventTypeNonFatalPoisonError = 0x1000;
inline constexpr unsigned long long nvmlEventTypeFatalPoisonError = 0x2000;
inline constexpr unsigned long long nvmlEventTypeGpuUnavailableError = 0x4000;
inline constexpr unsigned long long nvmlEventTypeGpuRecoveryAction = 0x8000;  // eventData: the action (field 230)
struct nvmlEventData_t {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;      // MIG: the instance the event is about, 0xFFFFFFFF when none
    unsigned int computeInstanceId;
};
static_assert(sizeof(nvmlEventData_t) == 32);

namespace nvml {
using Init = nvmlReturn_t (*)();  // nvmlInit_v2
using Shutdown = nvmlReturn_t (*)();
using ErrorString = const char* (*)(nvmlReturn_t);
using SystemGetString = nvmlReturn_t (*)(char* buf, unsigned int len);  // driver / NVML version
using SystemGetCudaDriverVersion = nvmlReturn_t (*)(int* version);
using SystemGetProcessName = nvmlReturn_t (*)(unsigned int pid, char* name, unsigned int len);
using DeviceGetCount = nvmlReturn_t (*)(unsigned int* count);
using DeviceGetHandleByIndex = nvmlReturn_t (*)(unsigned int index, nvmlDevice_t* device);
using DeviceGetHandleByPciBusId = nvmlReturn_t (*)(const char* busId, nvmlDevice_t* device);
using DeviceGetHandleByUUID = nvmlReturn_t (*)(const char* uuid, nvmlDevice_t* device);
using DeviceGetString = nvmlReturn_t (*)(nvmlDevice_t device, char* buf, unsigned int len);  // UUID, name, serial
using DeviceGetPciInfo = nvmlReturn_t (*)(nvmlDevice_t device, nvmlPciInfo_t* pci);
using DeviceGetUInt = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int* value);  // minor, index, max MIG count
using DeviceGetMemoryInfo = nvmlReturn_t (*)(nvmlDevice_t device, nvmlMemory_t* memory);
using DeviceGetP2PStatus = nvmlReturn_t (*)(nvmlDevice_t a, nvmlDevice_t b, int capsIndex, int* status);
using DeviceGetEnableState = nvmlReturn_t (*)(nvmlDevice_t device, nvmlEnableState_t* state);
using DeviceGetEnableStatePair = nvmlReturn_t (*)(nvmlDevice_t device, nvmlEnableState_t* current,
                                                  nvmlEnableState_t* pending);  // ECC mode
using DeviceGetMigMode = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int* current, unsigned int* pending);
using DeviceGetMigDeviceHandleByIndex = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int index, nvmlDevice_t* mig);
using DeviceGetTotalEccErrors = nvmlReturn_t (*)(nvmlDevice_t device, int errorType, int counterType,
                                                 unsigned long long* count);
using DeviceGetRemappedRows = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int* corrRows, unsigned int* uncRows,
                                               unsigned int* isPending, unsigned int* failureOccurred);
using DeviceGetGpuFabricInfo = nvmlReturn_t (*)(nvmlDevice_t device, nvmlGpuFabricInfo_t* info);
using DeviceGetGpuFabricInfoV = nvmlReturn_t (*)(nvmlDevice_t device, nvmlGpuFabricInfo_v2_t* info);
using DeviceGetNvLinkState = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int link, nvmlEnableState_t* active);
using DeviceGetNvLinkRemotePciInfo = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci);  // _v2
using DeviceGetNvLinkRemoteDeviceType = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int link, int* type);
using DeviceGetClocksEventReasons = nvmlReturn_t (*)(nvmlDevice_t device, unsigned long long* reasons);
using DeviceGetTemperature = nvmlReturn_t (*)(nvmlDevice_t device, int sensor, unsigned int* celsius);
using DeviceGetTemperatureThreshold = nvmlReturn_t (*)(nvmlDevice_t device, int threshold, unsigned int* celsius);
using DeviceGetRowRemapperHistogram = nvmlReturn_t (*)(nvmlDevice_t device, nvmlRowRemapperHistogramValues_t* values);
using DeviceGetFieldValues = nvmlReturn_t (*)(nvmlDevice_t device, int count, nvmlFieldValue_t* values);
using DeviceGetComputeRunningProcesses = nvmlReturn_t (*)(nvmlDevice_t device, unsigned int* count,
                                                          nvmlProcessInfo_t* infos);  // _v3 / _v2
using EventSetCreate = nvmlReturn_t (*)(nvmlEventSet_t* set);
using EventSetFree = nvmlReturn_t (*)(nvmlEventSet_t set);
using DeviceGetSupportedEventTypes = nvmlReturn_t (*)(nvmlDevice_t device, unsigned long long* eventTypes);
using DeviceRegisterEvents = nvmlReturn_t (*)(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set);
using EventSetWait = nvmlReturn_t (*)(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms);  // _v2
}  // namespace nvml

// NVML return codes by name, for messages that must not depend on the library being loadable.
inline const char* nvml_return_name(nvmlReturn_t r) {
    switch (r) {
        case 0: return "NVML_SUCCESS";
        case 1: return "NVML_ERROR_UNINITIALIZED";
        case 2: return "NVML_ERROR_INVALID_ARGUMENT";
        case 3: return "NVML_ERROR_NOT_SUPPORTED";
        case 4: return "NVML_ERROR_NO_PERMISSION";
        case 5: return "NVML_ERROR_ALREADY_INITIALIZED";
        case 6: return "NVML_ERROR_NOT_FOUND";
        case 7: return "NVML_ERROR_INSUFFICIENT_SIZE";
        case 8: return "NVML_ERROR_INSUFFICIENT_POWER";
        case 9: return "NVML_ERROR_DRIVER_NOT_LOADED";
        case 10: return "NVML_ERROR_TIMEOUT";
        case 11: return "NVML_ERROR_IRQ_ISSUE";
        case 12: return "NVML_ERROR_LIBRARY_NOT_FOUND";
        case 13: return "NVML_ERROR_FUNCTION_NOT_FOUND";
        case 14: return "NVML_ERROR_CORRUPTED_INFOROM";
        case 15: return "NVML_ERROR_GPU_IS_LOST";
        case 16: return "NVML_ERROR_RESET_REQUIRED";
        case 17: return "NVML_ERROR_OPERATING_SYSTEM";
        case 18: return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
        case 19: return "NVML_ERROR_IN_USE";
        case 20: return "NVML_ERROR_MEMORY";
        case 21: return "NVML_ERROR_NO_DATA";
        case 22: return "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED";
        case 23: return "NVML_ERROR_INSUFFICIENT_RESOURCES";
        case 25: return "NVML_ERROR_ARGUMENT_VERSION_MISMATCH";
        case 26: return "NVML_ERROR_DEPRECATED";
        case 27: return "NVML_ERROR_NOT_READY";
        case 28: return "NVML_ERROR_GPU_NOT_FOUND";
        case 29: return "NVML_ERROR_INVALID_STATE";
        case 999: return "NVML_ERROR_UNKNOWN";
        default: return "NVML_ERROR_(unlisted)";
    }
}

}  // namespace gpudx

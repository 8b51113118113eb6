#include "model/driver.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "abi/cuda.hpp"
#include "abi/nvml.hpp"
#include "abi/rocm_smi.hpp"
#include "core/text.hpp"

namespace gpudx {

namespace {

constexpr std::string_view kAllDevicesPrefix = "(all devices) ";
constexpr std::string_view kBeforeFirstCall = "(before the first call)";
// Device numbers past this are not devices (the probes stop at 1024 GPUs).
constexpr unsigned long long kMaxDeviceNumber = 1u << 16;

enum class DeviceArgument { none, first, last };

// Where a function of NVML, the CUDA driver or ROCm SMI takes the device its probe names.
DeviceArgument device_argument(std::string_view function) {
    if (function == "cuDeviceGetAttribute") return DeviceArgument::last;  // (attribute, ordinal)
    if (function.starts_with("nvmlDevice") || function.starts_with("cuDevice") || function.starts_with("rsmi_dev_") ||
        function.starts_with("rsmi_topo_"))  // (source, destination): the source GPU is the one named
        return DeviceArgument::first;
    return DeviceArgument::none;
}

std::optional<unsigned> device_number(std::string_view text) {
    auto n = parse_uint(text);
    if (!n || *n > kMaxDeviceNumber) return std::nullopt;
    return static_cast<unsigned>(*n);
}

}  // namespace

std::string driver_call_label(std::string_view function, std::optional<unsigned> device, std::string_view arguments) {
    std::string args;
    auto add = [&](std::string_view part) {
        if (!args.empty()) args += ", ";
        args += part;
    };
    std::string number = device ? std::to_string(*device) : std::string();
    bool last = device_argument(function) == DeviceArgument::last;
    if (device && !last) add(number);
    if (!arguments.empty()) add(arguments);
    if (device && last) add(number);
    std::string label(function);
    if (!args.empty()) label += "(" + args + ")";
    return label;
}

std::string HungCall::label() const {
    std::string out = scope == Scope::all_devices ? std::string(kAllDevicesPrefix) : std::string();
    out += function.empty() ? std::string(kBeforeFirstCall) : driver_call_label(function, device, arguments);
    return out;
}

HungCall parse_hung_call(DriverApi api, std::string_view label) {
    HungCall call;
    call.api = api;
    std::string_view rest = label;
    if (rest.starts_with(kAllDevicesPrefix)) {
        call.scope = HungCall::Scope::all_devices;
        rest.remove_prefix(kAllDevicesPrefix.size());
    }
    if (rest != kBeforeFirstCall) {
        std::string_view args;
        auto open = rest.find('(');
        if (open != std::string_view::npos && open > 0 && rest.back() == ')') {
            call.function = rest.substr(0, open);
            args = rest.substr(open + 1, rest.size() - open - 2);
        } else {
            call.function = rest;
        }
        call.arguments = args;
        auto where = device_argument(call.function);
        if (where != DeviceArgument::none && !args.empty()) {
            auto comma = where == DeviceArgument::first ? args.find(", ") : args.rfind(", ");
            std::string_view number = args, others;
            if (comma != std::string_view::npos) {
                number = where == DeviceArgument::first ? args.substr(0, comma) : args.substr(comma + 2);
                others = where == DeviceArgument::first ? args.substr(comma + 2) : args.substr(0, comma);
            }
            if (auto device = device_number(number)) {
                call.device = device;
                call.arguments = others;
            }
        }
    }
    if (call.label() == label) return call;
    HungCall verbatim;
    verbatim.api = api;
    verbatim.function = label;
    return verbatim;
}

std::string hung_call_label(const std::optional<HungCall>& call) { return call ? call->label() : std::string(); }

NvmlInit nvml_init(const NvmlLayer& nvml) {
    if (!nvml.init_result) return NvmlInit::not_attempted;
    switch (*nvml.init_result) {
        case NVML_SUCCESS: return NvmlInit::succeeded;
        case NVML_ERROR_DRIVER_NOT_LOADED: return NvmlInit::driver_not_loaded;
        case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return NvmlInit::library_version_mismatch;
        case NVML_ERROR_NO_PERMISSION: return NvmlInit::no_permission;
        default: return NvmlInit::other_failure;
    }
}

CudaInit cuda_init(const CudaView& view) {
    if (!view.init_result) return CudaInit::not_attempted;
    switch (*view.init_result) {
        case CUDA_SUCCESS: return CudaInit::succeeded;
        case CUDA_ERROR_NO_DEVICE: return CudaInit::no_device;
        case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return CudaInit::driver_mismatch;
        case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: return CudaInit::compat_not_supported;
        case CUDA_ERROR_STUB_LIBRARY: return CudaInit::stub_library;
        case CUDA_ERROR_SYSTEM_NOT_READY: return CudaInit::system_not_ready;
        case CUDA_ERROR_OPERATING_SYSTEM:
        case CUDA_ERROR_NOT_PERMITTED: return CudaInit::access_denied;
        default: return CudaInit::other_failure;
    }
}

std::optional<FabricState> fabric_state(const NvmlDevice& device) {
    if (!device.fabric_state) return std::nullopt;
    switch (*device.fabric_state) {
        case NVML_GPU_FABRIC_STATE_NOT_STARTED: return FabricState::not_started;
        case NVML_GPU_FABRIC_STATE_IN_PROGRESS: return FabricState::in_progress;
        case NVML_GPU_FABRIC_STATE_COMPLETED: return FabricState::completed;
        // nvml.h knows no other state: a value past them reads as the GPU taking no part in a fabric.
        default: return FabricState::not_supported;
    }
}

bool fabric_failed(const NvmlDevice& device) {
    return fabric_state(device) == FabricState::completed &&
           device.fabric_status.value_or(NVML_SUCCESS) != static_cast<unsigned>(NVML_SUCCESS);
}

std::string clock_event_reason_names(unsigned long long reasons) {
    static constexpr std::pair<unsigned long long, std::string_view> kNames[] = {
        {0x1, "idle"},
        {0x2, "application clocks"},
        {0x4, "SW power cap"},
        {kClockReasonHwSlowdown, "HW slowdown"},
        {0x10, "sync boost"},
        {kClockReasonSwThermalSlowdown, "SW thermal slowdown"},
        {kClockReasonHwThermalSlowdown, "HW thermal slowdown"},
        {kClockReasonHwPowerBrake, "HW power brake"},
        {0x100, "display clock setting"},
    };
    std::string out;
    unsigned long long known = 0;
    for (auto& [bit, name] : kNames) {
        known |= bit;
        if (!(reasons & bit)) continue;
        if (!out.empty()) out += ", ";
        out += name;
    }
    if (reasons & ~known) out += fmt::format("{}0x{:x}", out.empty() ? "" : ", ", reasons & ~known);
    return out.empty() ? "none" : out;
}

bool power_over_limit(const GpuHealthSample& s, std::optional<unsigned> limit_mw) {
    return s.power_mw && limit_mw && *limit_mw > 0 &&
           static_cast<unsigned long long>(*s.power_mw) * 100 >
               static_cast<unsigned long long>(*limit_mw) * (100 + kPowerOverLimitPercent);
}

bool temperature_near_slowdown(const GpuHealthSample& s, std::optional<unsigned> slowdown_c) {
    return s.temperature_c && slowdown_c && *slowdown_c > 0 && *s.temperature_c + kTemperatureMarginC >= *slowdown_c;
}

bool any_nvlink_error(const NvlinkErrorCounters& c) {
    for (auto m : {&NvlinkErrorCounters::replay, &NvlinkErrorCounters::recovery, &NvlinkErrorCounters::crc_flit,
                   &NvlinkErrorCounters::crc_data, &NvlinkErrorCounters::ecc_data, &NvlinkErrorCounters::recovery_failed,
                   &NvlinkErrorCounters::recovery_events, &NvlinkErrorCounters::receive_errors,
                   &NvlinkErrorCounters::link_integrity})
        if ((c.*m).value_or(0) > 0) return true;
    return false;
}

std::optional<std::string> second_sample_wanted(const NvmlDevice& d) {
    const auto& h = d.health;
    if (h.samples.empty()) return std::nullopt;
    const auto& s = h.samples.front();
    const unsigned long long watched = kClockReasonsHardware | kClockReasonSwThermalSlowdown;
    if (s.clock_event_reasons && (*s.clock_event_reasons & watched))
        return "clock event reasons: " + clock_event_reason_names(*s.clock_event_reasons & watched);
    if (temperature_near_slowdown(s, h.temperature_slowdown_c))
        return fmt::format("{} °C, slowdown at {} °C", *s.temperature_c, *h.temperature_slowdown_c);
    if (power_over_limit(s, h.power_limit_mw))
        return fmt::format("{} mW over the {} mW limit", *s.power_mw, *h.power_limit_mw);
    for (auto& c : s.nvlink_errors)
        if (any_nvlink_error(c)) return fmt::format("NVLink {} error counters are not zero", c.link);
    if (s.pcie_replays && *s.pcie_replays > kPcieReplaysNoticeable)
        return fmt::format("{} PCIe replays since the driver loaded", *s.pcie_replays);
    return std::nullopt;
}

std::vector<ThrottleReason> rocm_throttle_reasons(unsigned long long bits) {
    using K = ThrottleKind;
    // The kernel's SMU_THROTTLER_*_BIT numbers (drivers/gpu/drm/amd/include/kgd_pp_interface.h).
    static constexpr ThrottleReason kReasons[] = {
        {0, "PPT0", K::power},          {1, "PPT1", K::power},          {2, "PPT2", K::power},
        {3, "PPT3", K::power},          {4, "SPL", K::power},           {5, "FPPT", K::power},
        {6, "SPPT", K::power},          {7, "SPPT_APU", K::power},      {16, "TDC_GFX", K::current},
        {17, "TDC_SOC", K::current},    {18, "TDC_MEM", K::current},    {19, "TDC_VDD", K::current},
        {20, "TDC_CVIP", K::current},   {21, "EDC_CPU", K::current},    {22, "EDC_GFX", K::current},
        {23, "APCC", K::current},       {32, "TEMP_GPU", K::thermal},   {33, "TEMP_CORE", K::thermal},
        {34, "TEMP_MEM", K::thermal},   {35, "TEMP_EDGE", K::thermal},  {36, "TEMP_HOTSPOT", K::thermal},
        {37, "TEMP_SOC", K::thermal},   {38, "TEMP_VR_GFX", K::thermal}, {39, "TEMP_VR_SOC", K::thermal},
        {40, "TEMP_VR_MEM0", K::thermal}, {41, "TEMP_VR_MEM1", K::thermal}, {42, "TEMP_LIQUID0", K::thermal},
        {43, "TEMP_LIQUID1", K::thermal}, {44, "VRHOT0", K::hardware},  {45, "VRHOT1", K::hardware},
        {46, "PROCHOT_CPU", K::hardware}, {47, "PROCHOT_GFX", K::hardware}, {56, "PPM", K::power},
        {57, "FIT", K::reliability},
    };
    // Names of the bits gpudx does not know, kept alive for the string_views handed out.
    static const auto kUnknown = [] {
        std::array<std::string, 64> names;
        for (size_t bit = 0; bit < names.size(); ++bit) names[bit] = fmt::format("bit {}", bit);
        return names;
    }();
    std::vector<ThrottleReason> out;
    for (unsigned bit = 0; bit < 64; ++bit) {
        if (!(bits & (1ull << bit))) continue;
        auto it = std::find_if(std::begin(kReasons), std::end(kReasons), [&](auto& r) { return r.bit == bit; });
        out.push_back(it != std::end(kReasons) ? *it : ThrottleReason{bit, kUnknown[bit], ThrottleKind::reliability});
    }
    return out;
}

bool rocm_throttle_is_fault(const ThrottleReason& r) {
    return r.kind == ThrottleKind::thermal || r.kind == ThrottleKind::hardware;
}

std::string rocm_throttle_names(const std::vector<ThrottleReason>& reasons) {
    std::string out;
    for (auto& r : reasons) {
        if (!out.empty()) out += ", ";
        out += r.name;
    }
    return out;
}

std::optional<long long> rocm_temperature_limit(const RocmSmiTemperatureLimits& l) {
    return l.critical_mc ? l.critical_mc : l.emergency_mc;
}

std::optional<long long> rocm_temperature(const RocmSmiHealthSample& s, RocmTemperatureSensor sensor) {
    for (auto& t : s.temperatures)
        if (t.sensor == sensor) return t.current_mc;
    return std::nullopt;
}

std::optional<std::string> rocm_second_sample_wanted(const RocmSmiDevice& d) {
    const auto& h = d.health;
    if (h.samples.empty()) return std::nullopt;
    const auto& s = h.samples.front();
    for (auto& l : h.temperature_limits) {
        auto limit = rocm_temperature_limit(l);
        auto now = rocm_temperature(s, l.sensor);
        if (limit && now && *now + kRocmTemperatureMarginMc >= *limit)
            return fmt::format("{} {} m°C, limit {} m°C", name_of(l.sensor), *now, *limit);
    }
    if (s.indep_throttle_status) {
        auto reasons = rocm_throttle_reasons(*s.indep_throttle_status);
        std::erase_if(reasons, [](auto& r) { return !rocm_throttle_is_fault(r); });
        if (!reasons.empty()) return "throttled by " + rocm_throttle_names(reasons);
    }
    for (auto& e : d.ecc)
        if (e.correctable) return fmt::format("{} corrected ECC errors in {}", e.correctable, e.block);
    return std::nullopt;
}

bool reports_gpu_lost(std::string_view device_error) {
    return device_error.find(nvml_return_name(NVML_ERROR_GPU_IS_LOST)) != std::string_view::npos;
}

std::string_view nvml_code_name(int code) { return nvml_return_name(code); }
std::string_view rocm_smi_code_name(int code) { return rsmi::status_name(code); }

namespace {

struct NvmlEventTypeName {
    std::string_view name;
    unsigned long long bit;
};
// In the enum's order.
constexpr NvmlEventTypeName kNvmlEventTypeNames[] = {
#define GPUDX_NVML_EVENT_TYPE(name, bit) {#name, bit},
    GPUDX_NVML_EVENT_TYPES(GPUDX_NVML_EVENT_TYPE)
#undef GPUDX_NVML_EVENT_TYPE
};

}  // namespace

std::string_view to_string(NvmlEventType t) { return kNvmlEventTypeNames[static_cast<size_t>(t)].name; }

unsigned long long nvml_event_bit(NvmlEventType t) { return kNvmlEventTypeNames[static_cast<size_t>(t)].bit; }

std::optional<NvmlEventType> parse_nvml_event_type(std::string_view name) {
    for (auto t : kAllNvmlEventTypes)
        if (to_string(t) == name) return t;
    return std::nullopt;
}

std::optional<NvmlEventType> nvml_event_type_of_bit(unsigned long long bit) {
    for (auto t : kAllNvmlEventTypes)
        if (nvml_event_bit(t) == bit) return t;
    return std::nullopt;
}

}  // namespace gpudx

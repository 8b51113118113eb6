#include "gpu_api/nvml/events.hpp"

#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/clock.hpp"
#include "core/pci_address.hpp"
#include "core/supervisor.hpp"
#include "gpu_api/nvml/api.hpp"
#include "gpu_api/probe.hpp"
#include "model/driver.hpp"

namespace gpudx {

namespace {

// MIG ids in an event that names no instance.
constexpr unsigned kNoInstance = 0xFFFFFFFFu;

struct Watched {
    nvmlDevice_t handle = nullptr;
    unsigned index = 0;
    std::string uuid, pci;
};

class Writer {
public:
    explicit Writer(int fd) : fd_(fd) {}
    bool line(nlohmann::json j) { return ok_ = ok_ && write_all(fd_, json_line(j)); }
    bool ok() const { return ok_; }

private:
    int fd_;
    bool ok_ = true;
};

nlohmann::json call_line(std::string_view call, std::optional<unsigned> index = std::nullopt) {
    nlohmann::json j = {{"line", "call"}, {"call", call}};
    if (index) j["index"] = *index;
    return j;
}

nlohmann::json error_line(const NvmlApi& api, std::string_view call, std::optional<unsigned> index, nvmlReturn_t rc) {
    nlohmann::json j = {{"line", "error"}, {"call", call}, {"code", rc}, {"reason", api.describe(rc)}};
    if (index) j["index"] = *index;
    return j;
}

int unavailable(Writer& out, std::string reason) {
    out.line({{"line", "unavailable"}, {"reason", std::move(reason)}});
    return kNvmlEventsUnavailable;
}

}  // namespace

std::string nvml_event_type_name(unsigned long long bit) {
    if (auto t = nvml_event_type_of_bit(bit)) return std::string(to_string(*t));
    return fmt::format("0x{:x}", bit);
}

std::optional<unsigned long long> nvml_event_type_bit(std::string_view name) {
    if (auto t = parse_nvml_event_type(name)) return nvml_event_bit(*t);
    return std::nullopt;
}

std::vector<std::string> nvml_event_type_names(unsigned long long mask) {
    std::vector<std::string> out;
    for (unsigned long long bit = 1; bit != 0 && bit <= mask; bit <<= 1)
        if (mask & bit) out.push_back(nvml_event_type_name(bit));
    return out;
}

unsigned long long nvml_health_event_mask() {
    return nvmlEventTypeDoubleBitEccError | nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccErrorStorm |
           nvmlEventTypeDramRetirementEvent | nvmlEventTypeDramRetirementFailure | nvmlEventTypeNonFatalPoisonError |
           nvmlEventTypeFatalPoisonError | nvmlEventTypeGpuUnavailableError | nvmlEventTypeGpuRecoveryAction;
}

unsigned long long nvml_all_event_mask() {
    unsigned long long m = 0;
    for (auto t : kAllNvmlEventTypes) m |= nvml_event_bit(t);
    return m;
}

int watch_nvml_events(const NvmlEventWatchOptions& o, int fd) {
    Writer out(fd);
    auto api = NvmlApi::open(o.library_dir);
    if (!api) return unavailable(out, api.error().message);
    if (!api->event_set_create || !api->register_events || !api->event_set_wait || !api->count ||
        !api->handle_by_index)
        return unavailable(out, "this libnvidia-ml has no event API (nvmlEventSetWait_v2 and its calls)");

    out.line(call_line("nvmlInit_v2"));
    if (nvmlReturn_t rc = api->init(); rc != NVML_SUCCESS) return unavailable(out, "nvmlInit_v2: " + api->describe(rc));
    out.line(call_line("nvmlDeviceGetCount_v2"));
    unsigned count = 0;
    if (nvmlReturn_t rc = api->count(&count); rc != NVML_SUCCESS)
        return unavailable(out, "nvmlDeviceGetCount_v2: " + api->describe(rc));
    out.line(call_line("nvmlEventSetCreate"));
    nvmlEventSet_t set = nullptr;
    if (nvmlReturn_t rc = api->event_set_create(&set); rc != NVML_SUCCESS)
        return unavailable(out, "nvmlEventSetCreate: " + api->describe(rc));

    std::vector<Watched> watched;
    nlohmann::json devices = nlohmann::json::array();
    for (unsigned i = 0; i < count; ++i) {
        Watched w;
        w.index = i;
        out.line(call_line("nvmlDeviceGetHandleByIndex_v2", i));
        if (nvmlReturn_t rc = api->handle_by_index(i, &w.handle); rc != NVML_SUCCESS) {
            out.line(error_line(*api, "nvmlDeviceGetHandleByIndex_v2", i, rc));
            continue;
        }
        char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        out.line(call_line("nvmlDeviceGetUUID", i));
        if (api->uuid && api->uuid(w.handle, buf, sizeof buf) == NVML_SUCCESS) w.uuid = library_string(buf, sizeof buf);
        nvmlPciInfo_t pci{};
        out.line(call_line("nvmlDeviceGetPciInfo_v3", i));
        if (api->pci && api->pci(w.handle, &pci) == NVML_SUCCESS)
            w.pci = normalize_pci(library_string(pci.busId, sizeof pci.busId));
        unsigned long long supported = o.mask;  // a library without the query: ask for the mask and see
        if (api->supported_event_types) {
            out.line(call_line("nvmlDeviceGetSupportedEventTypes", i));
            if (nvmlReturn_t rc = api->supported_event_types(w.handle, &supported); rc != NVML_SUCCESS) {
                out.line(error_line(*api, "nvmlDeviceGetSupportedEventTypes", i, rc));
                supported = 0;
            }
        }
        unsigned long long wanted = supported & o.mask;
        unsigned long long registered = 0;
        if (wanted != 0) {
            out.line(call_line("nvmlDeviceRegisterEvents", i));
            if (nvmlReturn_t rc = api->register_events(w.handle, wanted, set); rc == NVML_SUCCESS)
                registered = wanted;
            else
                out.line(error_line(*api, "nvmlDeviceRegisterEvents", i, rc));
        }
        devices.push_back({{"index", i},
                           {"uuid", w.uuid},
                           {"pci", w.pci},
                           {"supported", nvml_event_type_names(supported)},
                           {"registered", nvml_event_type_names(registered)}});
        if (registered != 0) watched.push_back(std::move(w));
    }
    out.line({{"line", "ready"}, {"devices", devices}});
    if (watched.empty())
        return unavailable(out, count == 0 ? "NVML sees no GPU" : "no GPU delivers any of the events asked for");

    auto started = SteadyClock::now();
    uint64_t events = 0;
    while (out.ok()) {
        if (o.duration && SteadyClock::now() - started >= *o.duration) return kNvmlEventsEnded;
        nvmlEventData_t data{};
        nvmlReturn_t rc = api->event_set_wait(set, &data, static_cast<unsigned>(o.wait.count()));
        if (rc == NVML_ERROR_TIMEOUT) {
            out.line({{"line", "alive"}, {"time", utc_now_iso8601()}});
            continue;
        }
        if (rc != NVML_SUCCESS) {
            // A lost GPU can make every wait fail at once: say so, and pace the retries as a wait would.
            out.line(error_line(*api, "nvmlEventSetWait_v2", std::nullopt, rc));
            std::this_thread::sleep_for(o.wait);
            continue;
        }
        nlohmann::json e = {{"line", "event"},
                            {"time", utc_now_iso8601()},
                            {"type", nvml_event_type_name(data.eventType)},
                            {"mask", data.eventType},
                            {"data", data.eventData}};
        for (const auto& w : watched)
            if (w.handle == data.device) {
                e["index"] = w.index;
                e["uuid"] = w.uuid;
                e["pci"] = w.pci;
            }
        if (data.gpuInstanceId != kNoInstance) e["gpu_instance"] = data.gpuInstanceId;
        if (data.computeInstanceId != kNoInstance) e["compute_instance"] = data.computeInstanceId;
        out.line(std::move(e));
        if (o.max_events && ++events >= *o.max_events) return kNvmlEventsEnded;
    }
    return kNvmlEventsOutputGone;
}

}  // namespace gpudx

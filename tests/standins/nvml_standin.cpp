// Stand-in libnvidia-ml.so.1: serves the NVML answers of a scenario (standin_scenario.hpp).
#include <chrono>
#include <cstring>
#include <algorithm>
#include <deque>
#include <optional>
#include <utility>
#include <string>
#include <thread>
#include <vector>

#include "abi/nvml.hpp"
#include "standin_scenario.hpp"

using namespace gpudx;
using nlohmann::json;

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Device {
    const json* doc = nullptr;  // NvmlDevice JSON; null for a MIG instance
    std::string mig_uuid;
    int index = 0;
    // Health samples begun (nvmlDeviceGetCurrentClocksEventReasons starts each, as gpudx's probe asks it first):
    // the sample answered is health.samples[begun - 1], the last one when there are fewer.
    int samples_begun = 0;
};

// Handles must stay valid for the process lifetime: a deque never moves its elements.
std::deque<Device>& devices() {
    static std::deque<Device> all = [] {
        std::deque<Device> out;
        const auto& doc = standin::scenario().doc;
        if (!doc.is_object()) return out;
        int i = 0;
        for (auto& d : doc["nvml"]["devices"]) out.push_back({&d, {}, i++});
        return out;
    }();
    return all;
}

std::deque<Device>& mig_devices() {
    static std::deque<Device> all;
    return all;
}

const json& nvml_doc() {
    static const json empty = json::object();
    const auto& doc = standin::scenario().doc;
    return doc.is_object() && doc.contains("nvml") ? doc["nvml"] : empty;
}

Device* dev(nvmlDevice_t h) { return reinterpret_cast<Device*>(h); }

bool unsupported(const Device* d, const char* call) {
    if (!d->doc || !d->doc->contains("unsupported")) return false;
    for (auto& u : (*d->doc)["unsupported"])
        if (u.is_string() && u.get<std::string>().rfind(call, 0) == 0) return true;
    return false;
}

// Value of a device field, or NOT_SUPPORTED when the scenario has none (null or listed as unsupported).
template <class T>
nvmlReturn_t field(nvmlDevice_t h, const char* call, const char* key, T& out) {
    auto* d = dev(h);
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    if (auto f = standin::fault(call, d->index)) return *f;
    if (!d->doc || unsupported(d, call)) return NVML_ERROR_NOT_SUPPORTED;
    auto it = d->doc->find(key);
    if (it == d->doc->end() || it->is_null()) return NVML_ERROR_NOT_SUPPORTED;
    try {
        out = it->get<T>();
    } catch (...) {
        return NVML_ERROR_UNKNOWN;
    }
    return NVML_SUCCESS;
}

nvmlReturn_t copy_string(const std::string& s, char* buf, unsigned len) {
    if (!buf) return NVML_ERROR_INVALID_ARGUMENT;
    if (s.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    std::memcpy(buf, s.c_str(), s.size() + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t string_field(nvmlDevice_t h, const char* call, const char* key, char* buf, unsigned len) {
    std::string s;
    nvmlReturn_t rc = field(h, call, key, s);
    return rc == NVML_SUCCESS ? copy_string(s, buf, len) : rc;
}

nvmlReturn_t system_string(const char* call, const char* key, char* buf, unsigned len) {
    if (auto f = standin::fault(call)) return *f;
    const auto& n = nvml_doc();
    if (!n.contains(key) || !n[key].is_string()) return NVML_ERROR_NOT_SUPPORTED;
    return copy_string(n[key].get<std::string>(), buf, len);
}

// ---- The GPU's health. A device's "health" (GpuHealth JSON) answers the limits and, sample by sample, what
// changes; its "nvlinks" the links. A value that is absent or null answers Not Supported.
const json* health(const Device* d) {
    if (!d || !d->doc) return nullptr;
    auto it = d->doc->find("health");
    return it == d->doc->end() || !it->is_object() ? nullptr : &*it;
}

const json* current_sample(const Device* d) {
    const json* h = health(d);
    if (!h || !h->contains("samples") || !(*h)["samples"].is_array() || (*h)["samples"].empty()) return nullptr;
    const auto& samples = (*h)["samples"];
    size_t i = d->samples_begun > 0 ? static_cast<size_t>(d->samples_begun - 1) : 0;
    return &samples[std::min(i, samples.size() - 1)];
}

// A number under `key` of `obj`, or Not Supported.
nvmlReturn_t number(const json* obj, const char* key, unsigned long long& out) {
    if (!obj) return NVML_ERROR_NOT_SUPPORTED;
    auto it = obj->find(key);
    if (it == obj->end() || !it->is_number_unsigned()) return NVML_ERROR_NOT_SUPPORTED;
    out = it->get<unsigned long long>();
    return NVML_SUCCESS;
}

// A health call on a device: faults first, then the device's own answer.
template <class Fn>
nvmlReturn_t health_call(nvmlDevice_t h, const char* call, Fn&& answer) {
    auto* d = dev(h);
    if (!d || !d->doc) return NVML_ERROR_INVALID_ARGUMENT;
    if (auto f = standin::fault(call, d->index)) return *f;
    if (unsupported(d, call)) return NVML_ERROR_NOT_SUPPORTED;
    return answer(d);
}

const json* link_of(const Device* d, unsigned link, nvmlReturn_t& rc) {
    rc = NVML_SUCCESS;
    if (!d->doc->contains("nvlinks") || !(*d->doc)["nvlinks"].is_array() || (*d->doc)["nvlinks"].empty()) {
        rc = NVML_ERROR_NOT_SUPPORTED;
        return nullptr;
    }
    for (auto& l : (*d->doc)["nvlinks"])
        if (l.value("link", 999u) == link) return &l;
    rc = NVML_ERROR_INVALID_ARGUMENT;  // past the GPU's last link
    return nullptr;
}

// One NVLink field of `link`: a fact of the link, or an error counter of the current sample.
nvmlReturn_t link_field(const Device* d, unsigned field, unsigned link, unsigned long long& out) {
    if (auto f = standin::fault("nvmlDeviceGetNvLinkState", d->index)) return *f;
    if (unsupported(d, "nvmlDeviceGetNvLinkState")) return NVML_ERROR_NOT_SUPPORTED;
    nvmlReturn_t rc;
    const json* l = link_of(d, link, rc);
    if (!l) return rc;
    switch (field) {
        case NVML_FI_DEV_NVLINK_GET_STATE: out = l->value("active", false) ? 1 : 0; return NVML_SUCCESS;
        case NVML_FI_DEV_NVLINK_GET_VERSION: return number(l, "version", out);
        case NVML_FI_DEV_NVLINK_GET_SPEED: return number(l, "speed_mbps", out);
        default: break;
    }
    const char* key = nullptr;
    switch (field) {
        case NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: key = "replay"; break;
        case NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: key = "recovery"; break;
        case NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: key = "crc_flit"; break;
        case NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL: key = "crc_data"; break;
        case NVML_FI_DEV_NVLINK_ECC_DATA_ERROR_COUNT_TOTAL: key = "ecc_data"; break;
        case NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS: key = "recovery_failed"; break;
        case NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS: key = "recovery_events"; break;
        case NVML_FI_DEV_NVLINK_COUNT_RCV_ERRORS: key = "receive_errors"; break;
        case NVML_FI_DEV_NVLINK_COUNT_LOCAL_LINK_INTEGRITY_ERRORS: key = "link_integrity"; break;
        default: return NVML_ERROR_NOT_SUPPORTED;
    }
    if (auto f = standin::fault("nvmlDeviceGetNvLinkErrorCounter", d->index)) return *f;
    const json* sample = current_sample(d);
    if (!sample || !sample->contains("nvlink_errors")) return NVML_ERROR_NOT_SUPPORTED;
    for (auto& c : (*sample)["nvlink_errors"])
        if (c.value("link", 999u) == link) return number(&c, key, out);
    // A link the scenario lists without counters: a clean link when others have counters.
    out = 0;
    return (*sample)["nvlink_errors"].empty() ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

// The ECC count by location a field id stands for, as "location", "member".
std::optional<std::pair<const char*, const char*>> ecc_field(unsigned id) {
    switch (id) {
        case 3: return std::pair{"total", "corrected_volatile"};
        case 5: return std::pair{"total", "corrected_aggregate"};
        case 7: return std::pair{"l1_cache", "corrected_volatile"};
        case 8: return std::pair{"l1_cache", "uncorrected_volatile"};
        case 9: return std::pair{"l2_cache", "corrected_volatile"};
        case 10: return std::pair{"l2_cache", "uncorrected_volatile"};
        case 11: return std::pair{"device_memory", "corrected_volatile"};
        case 12: return std::pair{"device_memory", "uncorrected_volatile"};
        case 13: return std::pair{"register_file", "corrected_volatile"};
        case 14: return std::pair{"register_file", "uncorrected_volatile"};
        case 15: return std::pair{"texture_memory", "corrected_volatile"};
        case 16: return std::pair{"texture_memory", "uncorrected_volatile"};
        case 17: return std::pair{"cbu", "uncorrected_volatile"};
        case 18: return std::pair{"l1_cache", "corrected_aggregate"};
        case 19: return std::pair{"l1_cache", "uncorrected_aggregate"};
        case 20: return std::pair{"l2_cache", "corrected_aggregate"};
        case 21: return std::pair{"l2_cache", "uncorrected_aggregate"};
        case 22: return std::pair{"device_memory", "corrected_aggregate"};
        case 23: return std::pair{"device_memory", "uncorrected_aggregate"};
        case 24: return std::pair{"register_file", "corrected_aggregate"};
        case 25: return std::pair{"register_file", "uncorrected_aggregate"};
        case 26: return std::pair{"texture_memory", "corrected_aggregate"};
        case 27: return std::pair{"texture_memory", "uncorrected_aggregate"};
        case 28: return std::pair{"cbu", "uncorrected_aggregate"};
        default: return std::nullopt;
    }
}

nvmlReturn_t ecc_location_field(const Device* d, unsigned id, unsigned long long& out) {
    auto which = ecc_field(id);
    const json* h = health(d);
    if (!which || !h || !h->contains("ecc")) return NVML_ERROR_NOT_SUPPORTED;
    for (auto& e : (*h)["ecc"])
        if (e.value("location", std::string()) == which->first) return number(&e, which->second, out);
    return NVML_ERROR_NOT_SUPPORTED;
}

}  // namespace

EXPORT nvmlReturn_t nvmlInit_v2() {
    if (auto f = standin::fault("nvmlInit")) return *f;
    if (!standin::scenario().problem.empty()) return NVML_ERROR_LIBRARY_NOT_FOUND;
    const auto& n = nvml_doc();
    if (n.contains("init_result") && n["init_result"].is_number_integer() && n["init_result"].get<int>() != 0)
        return n["init_result"].get<int>();
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlInit() { return nvmlInit_v2(); }
EXPORT nvmlReturn_t nvmlShutdown() { return NVML_SUCCESS; }

EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
        case NVML_SUCCESS: return "Success";
        case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
        case NVML_ERROR_NOT_FOUND: return "Not Found";
        case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
        case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
        case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
        case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
        default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* buf, unsigned len) {
    return system_string("nvmlSystemGetDriverVersion", "driver_version", buf, len);
}
EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* buf, unsigned len) {
    return system_string("nvmlSystemGetNVMLVersion", "nvml_version", buf, len);
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) {
    if (auto f = standin::fault("nvmlSystemGetCudaDriverVersion")) return *f;
    const auto& n = nvml_doc();
    if (!v) return NVML_ERROR_INVALID_ARGUMENT;
    if (!n.contains("cuda_driver_version") || !n["cuda_driver_version"].is_number_integer())
        return NVML_ERROR_NOT_SUPPORTED;
    *v = n["cuda_driver_version"].get<int>();
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* v) { return nvmlSystemGetCudaDriverVersion_v2(v); }

EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned pid, char* name, unsigned len) {
    if (auto f = standin::fault("nvmlSystemGetProcessName")) return *f;
    for (auto& d : devices())
        if (d.doc && d.doc->contains("processes"))
            for (auto& p : (*d.doc)["processes"])
                if (p.value("pid", 0u) == pid) return copy_string(p.value("name", std::string()), name, len);
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
    if (auto f = standin::fault("nvmlDeviceGetCount")) return *f;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = static_cast<unsigned>(devices().size());
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned* count) { return nvmlDeviceGetCount_v2(count); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* h) {
    if (auto f = standin::fault("nvmlDeviceGetHandleByIndex", static_cast<int>(index))) return *f;
    if (!h || index >= devices().size()) return NVML_ERROR_INVALID_ARGUMENT;
    *h = reinterpret_cast<nvmlDevice_t>(&devices()[index]);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned index, nvmlDevice_t* h) {
    return nvmlDeviceGetHandleByIndex_v2(index, h);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* h) {
    if (auto f = standin::fault("nvmlDeviceGetHandleByUUID")) return *f;
    if (!uuid || !h) return NVML_ERROR_INVALID_ARGUMENT;
    for (auto& d : devices())
        if (d.doc && d.doc->value("uuid", std::string()) == uuid) {
            *h = reinterpret_cast<nvmlDevice_t>(&d);
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus, nvmlDevice_t* h) {
    if (auto f = standin::fault("nvmlDeviceGetHandleByPciBusId")) return *f;
    unsigned a, b, c, e;
    if (!bus || !h || !standin::parse_bus_id(bus, a, b, c, e)) return NVML_ERROR_INVALID_ARGUMENT;
    for (auto& d : devices()) {
        unsigned x, y, z, w;
        if (d.doc && standin::parse_bus_id(d.doc->value("bus_id", std::string()), x, y, z, w) && a == x && b == y &&
            c == z && e == w) {
            *h = reinterpret_cast<nvmlDevice_t>(&d);
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* bus, nvmlDevice_t* h) {
    return nvmlDeviceGetHandleByPciBusId_v2(bus, h);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char* buf, unsigned len) {
    auto* d = dev(h);
    if (d && !d->doc) {
        if (auto f = standin::fault("nvmlDeviceGetUUID", d->index)) return *f;
        return copy_string(d->mig_uuid, buf, len);
    }
    return string_field(h, "nvmlDeviceGetUUID", "uuid", buf, len);
}
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char* buf, unsigned len) {
    return string_field(h, "nvmlDeviceGetName", "name", buf, len);
}
EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t h, char* buf, unsigned len) {
    return string_field(h, "nvmlDeviceGetSerial", "serial", buf, len);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t* pci) {
    std::string bus;
    nvmlReturn_t rc = field(h, "nvmlDeviceGetPciInfo", "bus_id", bus);
    if (rc != NVML_SUCCESS) return rc;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    std::memset(pci, 0, sizeof *pci);
    unsigned a = 0, b = 0, c = 0, e = 0;
    standin::parse_bus_id(bus, a, b, c, e);
    pci->domain = a;
    pci->bus = b;
    pci->device = c;
    std::snprintf(pci->busId, sizeof pci->busId, "%s", bus.c_str());
    std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", a, b, c, e);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t h, nvmlPciInfo_t* pci) { return nvmlDeviceGetPciInfo_v3(h, pci); }

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t h, unsigned* v) {
    return v ? field(h, "nvmlDeviceGetMinorNumber", "minor", *v) : NVML_ERROR_INVALID_ARGUMENT;
}

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t h, nvmlEnableState_t* v) {
    bool on = false;
    nvmlReturn_t rc = field(h, "nvmlDeviceGetPersistenceMode", "persistence_mode", on);
    if (rc == NVML_SUCCESS) *v = on ? 1 : 0;
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t h, unsigned* current, unsigned* pending) {
    bool on = false;
    nvmlReturn_t rc = field(h, "nvmlDeviceGetMigMode", "mig_mode", on);
    if (rc == NVML_SUCCESS) *current = *pending = on ? 1 : 0;
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t h, unsigned* count) {
    std::vector<std::string> uuids;
    nvmlReturn_t rc = field(h, "nvmlDeviceGetMaxMigDeviceCount", "mig_uuids", uuids);
    if (rc == NVML_SUCCESS) *count = static_cast<unsigned>(uuids.size());
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t h, unsigned index, nvmlDevice_t* mig) {
    std::vector<std::string> uuids;
    nvmlReturn_t rc = field(h, "nvmlDeviceGetMigDeviceHandleByIndex", "mig_uuids", uuids);
    if (rc != NVML_SUCCESS) return rc;
    if (index >= uuids.size()) return NVML_ERROR_NOT_FOUND;
    mig_devices().push_back({nullptr, uuids[index], dev(h)->index});
    *mig = reinterpret_cast<nvmlDevice_t>(&mig_devices().back());
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t h, nvmlEnableState_t* current, nvmlEnableState_t* pending) {
    bool on = false;
    nvmlReturn_t rc = field(h, "nvmlDeviceGetEccMode", "ecc_enabled", on);
    if (rc == NVML_SUCCESS) *current = *pending = on ? 1 : 0;
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t h, int type, int counter, unsigned long long* n) {
    if (type != NVML_MEMORY_ERROR_TYPE_UNCORRECTED) return NVML_ERROR_NOT_SUPPORTED;
    return field(h, "nvmlDeviceGetTotalEccErrors",
                 counter == NVML_VOLATILE_ECC ? "ecc_uncorrected_volatile" : "ecc_uncorrected_aggregate", *n);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t h, nvmlEnableState_t* v) {
    unsigned n = 0;
    nvmlReturn_t rc = field(h, "nvmlDeviceGetRetiredPagesPendingStatus", "retired_pages_pending", n);
    if (rc == NVML_SUCCESS) *v = n ? 1 : 0;
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t h, unsigned* corr, unsigned* unc, unsigned* pending,
                                              unsigned* failure) {
    unsigned c = 0, u = 0;
    nvmlReturn_t rc = field(h, "nvmlDeviceGetRemappedRows", "remapped_rows_correctable", c);
    if (rc != NVML_SUCCESS) return rc;
    auto* d = dev(h)->doc;
    u = d->value("remapped_rows_uncorrectable", 0u);
    *corr = c;
    *unc = u;
    *pending = d->contains("remapped_rows_pending") && (*d)["remapped_rows_pending"] == true ? 1 : 0;
    *failure = d->contains("remapped_rows_failure") && (*d)["remapped_rows_failure"] == true ? 1 : 0;
    return NVML_SUCCESS;
}

// Answers each field through the call it stands for, so a fault on that call (a hang, an error, Not Supported)
// shows in the field; a fault on nvmlDeviceGetFieldValues itself fails the whole call.
EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t h, int count, nvmlFieldValue_t* values) {
    auto* d = dev(h);
    if (!d || count < 0 || (count > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
    if (auto f = standin::fault("nvmlDeviceGetFieldValues", d->index)) return *f;
    for (int i = 0; i < count; ++i) {
        auto& v = values[i];
        v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        v.value.ullVal = 0;
        nvmlEnableState_t a = 0, b = 0;
        unsigned long long n = 0;
        unsigned rows[4] = {};
        switch (v.fieldId) {
            case NVML_FI_DEV_ECC_CURRENT:
                v.nvmlReturn = nvmlDeviceGetEccMode(h, &a, &b);
                n = static_cast<unsigned long long>(a);
                break;
            case NVML_FI_DEV_ECC_DBE_VOL_TOTAL:
            case NVML_FI_DEV_ECC_DBE_AGG_TOTAL:
                v.nvmlReturn = nvmlDeviceGetTotalEccErrors(
                    h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                    v.fieldId == NVML_FI_DEV_ECC_DBE_VOL_TOTAL ? NVML_VOLATILE_ECC : NVML_AGGREGATE_ECC, &n);
                break;
            case NVML_FI_DEV_RETIRED_PENDING:
                v.nvmlReturn = nvmlDeviceGetRetiredPagesPendingStatus(h, &a);
                n = static_cast<unsigned long long>(a);
                break;
            case NVML_FI_DEV_REMAPPED_COR:
            case NVML_FI_DEV_REMAPPED_UNC:
            case NVML_FI_DEV_REMAPPED_PENDING:
            case NVML_FI_DEV_REMAPPED_FAILURE:
                v.nvmlReturn = nvmlDeviceGetRemappedRows(h, &rows[0], &rows[1], &rows[2], &rows[3]);
                n = rows[v.fieldId - NVML_FI_DEV_REMAPPED_COR];
                break;
            case NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: {
                // "gpu_recovery_action": N in the device's answers; without it the device answers the way a
                // driver older than the field does.
                unsigned action = 0;
                v.nvmlReturn = field(h, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", "gpu_recovery_action", action);
                n = action;
                break;
            }
            case NVML_FI_DEV_RETIRED_SBE:
            case NVML_FI_DEV_RETIRED_DBE:
                v.nvmlReturn = health_call(h, "nvmlDeviceGetRetiredPages", [&](const Device* dd) {
                    return number(health(dd), v.fieldId == NVML_FI_DEV_RETIRED_SBE ? "retired_pages_single_bit"
                                                                                    : "retired_pages_double_bit", n);
                });
                break;
            case NVML_FI_DEV_NVLINK_LINK_COUNT:
                v.nvmlReturn = number(health(d), "nvlink_count", n);
                break;
            case NVML_FI_DEV_POWER_CURRENT_LIMIT:
                v.nvmlReturn = health_call(h, "nvmlDeviceGetEnforcedPowerLimit",
                                           [&](const Device* dd) { return number(health(dd), "power_limit_mw", n); });
                break;
            case NVML_FI_DEV_MEMORY_TEMP:
                v.nvmlReturn = number(current_sample(d), "memory_temperature_c", n);
                break;
            case NVML_FI_DEV_POWER_INSTANT:
                v.nvmlReturn = health_call(h, "nvmlDeviceGetPowerUsage",
                                           [&](const Device* dd) { return number(current_sample(dd), "power_mw", n); });
                break;
            case NVML_FI_DEV_PCIE_REPLAY_COUNTER:
                v.nvmlReturn = health_call(h, "nvmlDeviceGetPcieReplayCounter", [&](const Device* dd) {
                    return number(current_sample(dd), "pcie_replays", n);
                });
                break;
            default:
                if (ecc_field(v.fieldId))
                    v.nvmlReturn = ecc_location_field(d, v.fieldId, n);
                else if ((v.fieldId >= 38 && v.fieldId <= 59) || (v.fieldId >= 160 && v.fieldId <= 166) ||
                         (v.fieldId >= 208 && v.fieldId <= 215))
                    v.nvmlReturn = d->doc ? link_field(d, v.fieldId, v.scopeId, n) : NVML_ERROR_NOT_SUPPORTED;
                else
                    v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
        if (v.nvmlReturn == NVML_SUCCESS) v.value.ullVal = n;
    }
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t h, nvmlGpuFabricInfo_v2_t* info) {
    unsigned state = 0;
    nvmlReturn_t rc = field(h, "nvmlDeviceGetGpuFabricInfo", "fabric_state", state);
    if (rc != NVML_SUCCESS) return rc;
    if (!info || info->version != nvmlGpuFabricInfo_v2) return 25 /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */;
    info->state = static_cast<unsigned char>(state);
    info->status = static_cast<nvmlReturn_t>(dev(h)->doc->value("fabric_status", 0u));
    info->cliqueId = dev(h)->doc->value("fabric_clique_id", 0u);
    standin::parse_uuid("GPU-" + dev(h)->doc->value("fabric_cluster_uuid", std::string()), info->clusterUuid);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t h, unsigned link, nvmlEnableState_t* active) {
    std::vector<json> links;
    nvmlReturn_t rc = field(h, "nvmlDeviceGetNvLinkState", "nvlinks", links);
    if (rc != NVML_SUCCESS) return rc;
    if (links.empty()) return NVML_ERROR_NOT_SUPPORTED;
    for (auto& l : links)
        if (l.value("link", 999u) == link) {
            *active = l.value("active", false) ? 1 : 0;
            return NVML_SUCCESS;
        }
    return NVML_ERROR_INVALID_ARGUMENT;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t h, unsigned link, nvmlPciInfo_t* pci) {
    return health_call(h, "nvmlDeviceGetNvLinkRemotePciInfo", [&](const Device* d) {
        nvmlReturn_t rc;
        const json* l = link_of(d, link, rc);
        if (!l) return rc;
        std::string bus = l->value("remote_pci", std::string());
        unsigned a = 0, b = 0, c = 0, e = 0;
        if (bus.empty() || !standin::parse_bus_id(bus, a, b, c, e)) return NVML_ERROR_NOT_SUPPORTED;
        if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
        std::memset(pci, 0, sizeof *pci);
        pci->domain = a;
        pci->bus = b;
        pci->device = c;
        std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.%X", a, b, c, e);
        return NVML_SUCCESS;
    });
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t h, unsigned link, int* type) {
    return health_call(h, "nvmlDeviceGetNvLinkRemoteDeviceType", [&](const Device* d) {
        nvmlReturn_t rc;
        const json* l = link_of(d, link, rc);
        if (!l) return rc;
        std::string t = l->value("remote_type", std::string());
        if (t.empty() || t == "not_read") return NVML_ERROR_NOT_SUPPORTED;
        *type = t == "gpu" ? NVML_NVLINK_DEVICE_TYPE_GPU
              : t == "nvswitch" ? NVML_NVLINK_DEVICE_TYPE_SWITCH
              : t == "ibmnpu" ? NVML_NVLINK_DEVICE_TYPE_IBMNPU
                              : NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
        return NVML_SUCCESS;
    });
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t h, unsigned long long* reasons) {
    if (auto* d = dev(h)) ++d->samples_begun;
    return health_call(h, "nvmlDeviceGetCurrentClocksEventReasons",
                       [&](const Device* d) { return number(current_sample(d), "clock_event_reasons", *reasons); });
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t h, int sensor, unsigned* celsius) {
    if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    return health_call(h, "nvmlDeviceGetTemperature", [&](const Device* d) {
        unsigned long long t = 0;
        nvmlReturn_t rc = number(current_sample(d), "temperature_c", t);
        if (rc == NVML_SUCCESS) *celsius = static_cast<unsigned>(t);
        return rc;
    });
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t h, int threshold, unsigned* celsius) {
    const char* key = threshold == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN   ? "temperature_slowdown_c"
                      : threshold == NVML_TEMPERATURE_THRESHOLD_SHUTDOWN ? "temperature_shutdown_c"
                                                                         : nullptr;
    if (!key) return NVML_ERROR_NOT_SUPPORTED;
    return health_call(h, "nvmlDeviceGetTemperatureThreshold", [&](const Device* d) {
        unsigned long long t = 0;
        nvmlReturn_t rc = number(health(d), key, t);
        if (rc == NVML_SUCCESS) *celsius = static_cast<unsigned>(t);
        return rc;
    });
}

EXPORT nvmlReturn_t nvmlDeviceGetRowRemapperHistogram(nvmlDevice_t h, nvmlRowRemapperHistogramValues_t* values) {
    return health_call(h, "nvmlDeviceGetRowRemapperHistogram", [&](const Device* d) {
        const json* hl = health(d);
        if (!hl || !hl->contains("row_remap_histogram") || !(*hl)["row_remap_histogram"].is_object())
            return NVML_ERROR_NOT_SUPPORTED;
        const auto& r = (*hl)["row_remap_histogram"];
        *values = {r.value("max", 0u), r.value("high", 0u), r.value("partial", 0u), r.value("low", 0u),
                   r.value("none", 0u)};
        return NVML_SUCCESS;
    });
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t h, unsigned* value) {
    return health_call(h, "nvmlDeviceGetPcieReplayCounter", [&](const Device* d) {
        unsigned long long n = 0;
        nvmlReturn_t rc = number(current_sample(d), "pcie_replays", n);
        if (rc == NVML_SUCCESS) *value = static_cast<unsigned>(n);
        return rc;
    });
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned* count, nvmlProcessInfo_t* infos) {
    std::vector<json> procs;
    nvmlReturn_t rc = field(h, "nvmlDeviceGetComputeRunningProcesses", "processes", procs);
    if (rc != NVML_SUCCESS) return rc;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (*count < procs.size()) {
        *count = static_cast<unsigned>(procs.size());
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (size_t i = 0; i < procs.size(); ++i) {
        infos[i] = {};
        infos[i].pid = procs[i].value("pid", 0u);
        infos[i].usedGpuMemory =
            procs[i].contains("used_memory") && procs[i]["used_memory"].is_number() ? procs[i]["used_memory"].get<unsigned long long>() : ~0ull;
    }
    *count = static_cast<unsigned>(procs.size());
    return NVML_SUCCESS;
}

// ---- Events. Scenario controls (docs/driver-layers.md):
//   "nvml_events": [{"after_ms": 300, "device": 1, "type": 8, "data": 79}, ...]   delivered in order, each once
//       its time since nvmlEventSetCreate has come, to an event set that registered that device and type bit;
//   a device's "supported_events": a mask (default: every type but P-state and clock changes);
//   faults on nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlDeviceGetSupportedEventTypes, nvmlEventSetWait.
namespace {

constexpr unsigned long long kDefaultSupported = 0xff8bull;  // every known type but P-state (0x4) and clock (0x10)

struct EventSet {
    std::vector<std::pair<const Device*, unsigned long long>> registered;
    std::chrono::steady_clock::time_point created = std::chrono::steady_clock::now();
    size_t next = 0;  // the scenario's next event
};

unsigned long long registered_mask(const EventSet& s, const Device* d) {
    unsigned long long m = 0;
    for (auto& [dev, mask] : s.registered)
        if (dev == d) m |= mask;
    return m;
}

}  // namespace

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
    if (auto f = standin::fault("nvmlEventSetCreate")) return *f;
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    *set = reinterpret_cast<nvmlEventSet_t>(new EventSet);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    delete reinterpret_cast<EventSet*>(set);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t h, unsigned long long* types) {
    auto* d = dev(h);
    if (!d || !types) return NVML_ERROR_INVALID_ARGUMENT;
    if (auto f = standin::fault("nvmlDeviceGetSupportedEventTypes", d->index)) return *f;
    *types = d->doc && d->doc->contains("supported_events") ? (*d->doc)["supported_events"].get<unsigned long long>()
                                                            : kDefaultSupported;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t h, unsigned long long types, nvmlEventSet_t set) {
    auto* d = dev(h);
    if (!d || !set) return NVML_ERROR_INVALID_ARGUMENT;
    if (auto f = standin::fault("nvmlDeviceRegisterEvents", d->index)) return *f;
    unsigned long long supported = 0;
    nvmlDeviceGetSupportedEventTypes(h, &supported);
    if (types & ~supported) return NVML_ERROR_NOT_SUPPORTED;  // as the driver: the whole call fails
    reinterpret_cast<EventSet*>(set)->registered.emplace_back(d, types);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t handle, nvmlEventData_t* data, unsigned timeoutms) {
    if (auto f = standin::fault("nvmlEventSetWait")) return *f;
    auto* set = reinterpret_cast<EventSet*>(handle);
    if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& doc = standin::scenario().doc;
    static const json none = json::array();
    const json& events = doc.is_object() && doc.contains("nvml_events") ? doc["nvml_events"] : none;
    auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutms);
    for (; set->next < events.size(); ++set->next) {
        const json& e = events[set->next];
        size_t index = e.value("device", 0u);
        const Device* d = index < devices().size() ? &devices()[index] : nullptr;
        unsigned long long type = e.value("type", 0ull);
        if (!d || !(registered_mask(*set, d) & type)) continue;  // not asked for: never delivered
        auto due = set->created + std::chrono::milliseconds(e.value("after_ms", 0));
        if (due > give_up) {
            std::this_thread::sleep_until(give_up);
            return NVML_ERROR_TIMEOUT;
        }
        std::this_thread::sleep_until(due);
        *data = {};
        data->device = reinterpret_cast<nvmlDevice_t>(const_cast<Device*>(d));
        data->eventType = type;
        data->eventData = e.value("data", 0ull);
        data->gpuInstanceId = e.value("gpu_instance", 0xFFFFFFFFu);
        data->computeInstanceId = e.value("compute_instance", 0xFFFFFFFFu);
        ++set->next;
        return NVML_SUCCESS;
    }
    std::this_thread::sleep_until(give_up);
    return NVML_ERROR_TIMEOUT;
}

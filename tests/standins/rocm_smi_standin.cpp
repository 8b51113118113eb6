// Stand-in librocm_smi64.so.7: serves the "rocm_smi" answers of a scenario (standin_scenario.hpp), which have
// the shape of gpudx's RocmSmiLayer JSON, and its faults ("call": "rsmi_dev_pci_id_get", "device": 3, ...).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "abi/rocm_smi.hpp"
#include "standin_scenario.hpp"

using namespace gpudx;
using nlohmann::json;

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

const json& smi_doc() {
    static const json empty = json::object();
    const auto& doc = standin::scenario().doc;
    return doc.is_object() && doc.contains("rocm_smi") && doc["rocm_smi"].is_object() ? doc["rocm_smi"] : empty;
}

const json* device(uint32_t index) {
    const auto& d = smi_doc();
    if (!d.contains("devices") || !d["devices"].is_array() || index >= d["devices"].size()) return nullptr;
    return &d["devices"][index];
}

bool unsupported(const json& dev, const char* call) {
    if (!dev.contains("unsupported")) return false;
    for (auto& u : dev["unsupported"])
        if (u.is_string() && u.get<std::string>().rfind(call, 0) == 0) return true;
    return false;
}

// The device's field, after faults; NOT_SUPPORTED when the scenario has none.
template <class Read>
rsmi::Status field(const char* call, uint32_t index, const char* key, Read&& read) {
    if (auto f = standin::fault(call, static_cast<int>(index))) return *f;
    const json* dev = device(index);
    if (!dev) return rsmi::INVALID_ARGS;
    if (unsupported(*dev, call)) return rsmi::NOT_SUPPORTED;
    auto it = dev->find(key);
    if (it == dev->end() || it->is_null()) return rsmi::NOT_SUPPORTED;
    try {
        return read(*it);
    } catch (...) {
        return rsmi::UNEXPECTED_DATA;
    }
}

rsmi::Status copy_string(const std::string& s, char* buf, size_t len) {
    if (!buf) return rsmi::INVALID_ARGS;
    if (s.size() + 1 > len) return rsmi::INSUFFICIENT_SIZE;
    std::memcpy(buf, s.c_str(), s.size() + 1);
    return rsmi::SUCCESS;
}

rsmi::Status string_field(const char* call, uint32_t index, const char* key, char* buf, size_t len) {
    return field(call, index, key, [&](const json& v) { return copy_string(v.get<std::string>(), buf, len); });
}

rsmi::Status hex_field(const char* call, uint32_t index, const char* key, uint64_t* out) {
    return field(call, index, key, [&](const json& v) {
        auto text = v.get<std::string>();
        if (text.empty()) return rsmi::NOT_SUPPORTED;
        *out = std::stoull(text, nullptr, 16);
        return rsmi::SUCCESS;
    });
}

// "0000:c1:00.0" -> BDFID, with the partition id in bits 31:28.
uint64_t bdfid_of(const json& dev) {
    unsigned domain = 0, bus = 0, dv = 0, fn = 0;
    standin::parse_bus_id(dev.value("pci", std::string()), domain, bus, dv, fn);
    uint64_t partition = dev.contains("partition") && dev["partition"].is_number_unsigned()
                             ? dev["partition"].get<uint64_t>()
                             : 0;
    return (uint64_t{domain} << 32) | (partition << 28) | (uint64_t{bus} << 8) | (uint64_t{dv} << 3) | fn;
}

}  // namespace

// ---- The GPU's health. A device's "health" (RocmSmiHealth JSON) answers the limits, the XGMI status and links,
// and sample by sample the temperatures, throttle status and ECC counts. gpudx's probe reads each sample's
// temperatures before its gpu metrics, so the metrics calls made so far say which sample is being read.

namespace {

std::map<uint32_t, size_t>& metrics_calls() {
    static std::map<uint32_t, size_t> calls;
    return calls;
}

const json* health(uint32_t index) {
    const json* dev = device(index);
    if (!dev || !dev->contains("health") || !(*dev)["health"].is_object()) return nullptr;
    return &(*dev)["health"];
}

// The sample `n` (the last one when there are fewer), or null.
const json* sample(uint32_t index, size_t n) {
    const json* h = health(index);
    if (!h || !h->contains("samples") || !(*h)["samples"].is_array() || (*h)["samples"].empty()) return nullptr;
    const auto& samples = (*h)["samples"];
    return &samples[std::min(n, samples.size() - 1)];
}

bool listed_unsupported(uint32_t index, const std::string& label) {
    const json* dev = device(index);
    return dev && unsupported(*dev, label.c_str());
}

const char* sensor_name(uint32_t sensor) {
    switch (sensor) {
        case rsmi::TEMP_TYPE_EDGE: return "edge";
        case rsmi::TEMP_TYPE_JUNCTION: return "junction";
        case rsmi::TEMP_TYPE_MEMORY: return "memory";
        default: return nullptr;
    }
}

const char* metric_name(int metric) {
    switch (metric) {
        case rsmi::TEMP_CURRENT: return "current";
        case rsmi::TEMP_CRITICAL: return "critical";
        case rsmi::TEMP_EMERGENCY: return "emergency";
        default: return nullptr;
    }
}

}  // namespace

EXPORT rsmi::Status rsmi_init(uint64_t) {
    if (auto f = standin::fault("rsmi_init")) return *f;
    const auto& d = smi_doc();
    if (d.contains("init_result") && d["init_result"].is_number_integer()) return d["init_result"].get<int>();
    return rsmi::SUCCESS;
}

EXPORT rsmi::Status rsmi_shut_down() { return rsmi::SUCCESS; }

EXPORT rsmi::Status rsmi_status_string(rsmi::Status s, const char** text) {
    if (!text) return rsmi::INVALID_ARGS;
    *text = s == rsmi::SUCCESS ? "RSMI_STATUS_SUCCESS: The function has been executed successfully."
                               : "stand-in librocm_smi64: simulated status";
    return rsmi::SUCCESS;
}

EXPORT rsmi::Status rsmi_version_get(rsmi::Version* v) {
    if (auto f = standin::fault("rsmi_version_get")) return *f;
    if (!v) return rsmi::INVALID_ARGS;
    // "7.4.0" from the scenario's library_version.
    unsigned major = 0, minor = 0, patch = 0;
    std::sscanf(smi_doc().value("library_version", std::string("7.0.0")).c_str(), "%u.%u.%u", &major, &minor, &patch);
    *v = {major, minor, patch, "stand-in"};
    return rsmi::SUCCESS;
}

EXPORT rsmi::Status rsmi_version_str_get(int component, char* buf, uint32_t len) {
    if (auto f = standin::fault("rsmi_version_str_get")) return *f;
    if (component != rsmi::SW_COMP_DRIVER) return rsmi::INVALID_ARGS;
    auto v = smi_doc().value("driver_version", std::string());
    if (v.empty()) return rsmi::NOT_SUPPORTED;
    return copy_string(v, buf, len);
}

EXPORT rsmi::Status rsmi_num_monitor_devices(uint32_t* count) {
    if (auto f = standin::fault("rsmi_num_monitor_devices")) return *f;
    if (!count) return rsmi::INVALID_ARGS;
    const auto& d = smi_doc();
    *count = d.contains("devices") && d["devices"].is_array() ? static_cast<uint32_t>(d["devices"].size()) : 0;
    return rsmi::SUCCESS;
}

EXPORT rsmi::Status rsmi_dev_pci_id_get(uint32_t i, uint64_t* out) {
    return field("rsmi_dev_pci_id_get", i, "pci", [&](const json&) {
        *out = bdfid_of(*device(i));
        return rsmi::SUCCESS;
    });
}

EXPORT rsmi::Status rsmi_dev_unique_id_get(uint32_t i, uint64_t* out) {
    return hex_field("rsmi_dev_unique_id_get", i, "unique_id", out);
}

EXPORT rsmi::Status rsmi_dev_xgmi_hive_id_get(uint32_t i, uint64_t* out) {
    return hex_field("rsmi_dev_xgmi_hive_id_get", i, "xgmi_hive_id", out);
}

EXPORT rsmi::Status rsmi_dev_name_get(uint32_t i, char* buf, size_t len) {
    return string_field("rsmi_dev_name_get", i, "name", buf, len);
}

EXPORT rsmi::Status rsmi_dev_serial_number_get(uint32_t i, char* buf, uint32_t len) {
    return string_field("rsmi_dev_serial_number_get", i, "serial", buf, len);
}

EXPORT rsmi::Status rsmi_dev_vbios_version_get(uint32_t i, char* buf, uint32_t len) {
    return string_field("rsmi_dev_vbios_version_get", i, "vbios_version", buf, len);
}

EXPORT rsmi::Status rsmi_dev_drm_render_minor_get(uint32_t i, uint32_t* out) {
    return field("rsmi_dev_drm_render_minor_get", i, "render_minor", [&](const json& v) {
        *out = v.get<uint32_t>();
        return rsmi::SUCCESS;
    });
}

EXPORT rsmi::Status rsmi_dev_memory_total_get(uint32_t i, int type, uint64_t* out) {
    if (type != rsmi::MEM_TYPE_VRAM) return rsmi::NOT_SUPPORTED;
    return field("rsmi_dev_memory_total_get", i, "vram_total", [&](const json& v) {
        *out = v.get<uint64_t>();
        return rsmi::SUCCESS;
    });
}

EXPORT rsmi::Status rsmi_dev_ecc_enabled_get(uint32_t i, uint64_t* out) {
    return field("rsmi_dev_ecc_enabled_get", i, "ecc_enabled_blocks", [&](const json& v) {
        *out = v.get<uint64_t>();
        return rsmi::SUCCESS;
    });
}

EXPORT rsmi::Status rsmi_dev_ecc_count_get(uint32_t i, uint64_t block, rsmi::ErrorCount* out) {
    if (!out) return rsmi::INVALID_ARGS;
    const char* name = nullptr;
    for (const auto& b : rsmi::kEccBlocks)
        if (b.bit == block) name = b.name;
    if (!name) return rsmi::INVALID_ARGS;
    // After the second sample's metrics call, its "ecc" answers the blocks it lists.
    size_t calls = metrics_calls()[i];
    if (calls >= 2 && !standin::fault("rsmi_dev_ecc_count_get", static_cast<int>(i)))
        if (const json* smp = sample(i, calls - 1); smp && smp->contains("ecc"))
            for (auto& b : (*smp)["ecc"])
                if (b.value("block", std::string()) == name) {
                    *out = {};
                    out->correctable_err = b.value("correctable", uint64_t{0});
                    out->uncorrectable_err = b.value("uncorrectable", uint64_t{0});
                    return rsmi::SUCCESS;
                }
    return field("rsmi_dev_ecc_count_get", i, "ecc", [&](const json& blocks) {
        for (auto& b : blocks)
            if (b.value("block", std::string()) == name) {
                *out = {};
                out->correctable_err = b.value("correctable", uint64_t{0});
                out->uncorrectable_err = b.value("uncorrectable", uint64_t{0});
                return rsmi::SUCCESS;
            }
        return rsmi::NOT_SUPPORTED;
    });
}


EXPORT rsmi::Status rsmi_dev_temp_metric_get(uint32_t i, uint32_t sensor, int metric, int64_t* out) {
    if (auto f = standin::fault("rsmi_dev_temp_metric_get", static_cast<int>(i))) return *f;
    if (!out || !device(i)) return rsmi::INVALID_ARGS;
    const char* s = sensor_name(sensor);
    const char* m = metric_name(metric);
    if (!s || !m) return rsmi::NOT_SUPPORTED;
    if (listed_unsupported(i, std::string("rsmi_dev_temp_metric_get(") + s + ", " + m + ")")) return rsmi::NOT_SUPPORTED;
    if (metric == rsmi::TEMP_CURRENT) {
        const json* smp = sample(i, metrics_calls()[i]);
        if (!smp || !smp->contains("temperatures")) return rsmi::NOT_SUPPORTED;
        for (auto& t : (*smp)["temperatures"])
            if (t.value("sensor", std::string()) == s) {
                *out = t.value("current_mc", int64_t{0});
                return rsmi::SUCCESS;
            }
        return rsmi::NOT_SUPPORTED;
    }
    const json* h = health(i);
    if (!h || !h->contains("temperature_limits")) return rsmi::NOT_SUPPORTED;
    const std::string key = std::string(m) + "_mc";
    for (auto& l : (*h)["temperature_limits"])
        if (l.value("sensor", std::string()) == s) {
            if (!l.contains(key) || !l[key].is_number_integer()) return rsmi::NOT_SUPPORTED;
            *out = l[key].get<int64_t>();
            return rsmi::SUCCESS;
        }
    return rsmi::NOT_SUPPORTED;
}

// Writes what a librocm_smi64 of 7.1 or later writes at the offsets gpudx reads (abi/rocm_smi.hpp); the rest of
// the caller's buffer is left as it was.
EXPORT rsmi::Status rsmi_dev_gpu_metrics_info_get(uint32_t i, void* metrics) {
    if (auto f = standin::fault("rsmi_dev_gpu_metrics_info_get", static_cast<int>(i))) return *f;
    if (!metrics || !device(i)) return rsmi::INVALID_ARGS;
    size_t n = metrics_calls()[i]++;
    const json* h = health(i);
    if (!h || h->value("gpu_metrics_version", std::string()).empty()) return rsmi::NOT_SUPPORTED;
    unsigned format = 0, content = 0;
    std::sscanf(h->value("gpu_metrics_version", std::string()).c_str(), "%u.%u", &format, &content);
    auto* bytes = static_cast<unsigned char*>(metrics);
    uint16_t size = 120;
    std::memcpy(bytes, &size, sizeof size);
    bytes[rsmi::kGpuMetricsFormatRevision] = static_cast<unsigned char>(format);
    bytes[rsmi::kGpuMetricsContentRevision] = static_cast<unsigned char>(content);
    const json* smp = sample(i, n);
    uint32_t status = UINT32_MAX;
    uint64_t indep = UINT64_MAX;
    if (smp && smp->contains("throttle_status") && (*smp)["throttle_status"].is_number_unsigned())
        status = (*smp)["throttle_status"].get<uint32_t>();
    if (smp && smp->contains("indep_throttle_status") && (*smp)["indep_throttle_status"].is_number_unsigned())
        indep = (*smp)["indep_throttle_status"].get<uint64_t>();
    std::memcpy(bytes + rsmi::kGpuMetricsThrottleStatus, &status, sizeof status);
    std::memcpy(bytes + rsmi::kGpuMetricsIndepThrottleStatus, &indep, sizeof indep);
    return rsmi::SUCCESS;
}

EXPORT rsmi::Status rsmi_dev_xgmi_error_status(uint32_t i, int* status) {
    if (auto f = standin::fault("rsmi_dev_xgmi_error_status", static_cast<int>(i))) return *f;
    if (!status || !device(i)) return rsmi::INVALID_ARGS;
    if (listed_unsupported(i, "rsmi_dev_xgmi_error_status")) return rsmi::NOT_SUPPORTED;
    const json* h = health(i);
    if (!h || !h->contains("xgmi_error_status") || !(*h)["xgmi_error_status"].is_string()) return rsmi::NOT_SUPPORTED;
    auto v = (*h)["xgmi_error_status"].get<std::string>();
    if (v == "no_errors") *status = rsmi::XGMI_STATUS_NO_ERRORS;
    else if (v == "error") *status = rsmi::XGMI_STATUS_ERROR;
    else if (v == "multiple_errors") *status = rsmi::XGMI_STATUS_MULTIPLE_ERRORS;
    else return rsmi::UNEXPECTED_DATA;
    return rsmi::SUCCESS;
}

EXPORT rsmi::Status rsmi_topo_get_link_type(uint32_t src, uint32_t dst, uint64_t* hops, uint32_t* type) {
    if (auto f = standin::fault("rsmi_topo_get_link_type", static_cast<int>(src))) return *f;
    if (!hops || !type || !device(src) || !device(dst)) return rsmi::INVALID_ARGS;
    const json* h = health(src);
    if (!h || !h->contains("links")) return rsmi::NOT_SUPPORTED;
    for (auto& l : (*h)["links"]) {
        if (l.value("peer", uint32_t{UINT32_MAX}) != dst) continue;
        auto t = l.value("type", std::string());
        *type = t == "xgmi" ? rsmi::IOLINK_TYPE_XGMI : t == "pcie" ? rsmi::IOLINK_TYPE_PCIEXPRESS : rsmi::IOLINK_TYPE_UNDEFINED;
        *hops = l.value("hops", uint64_t{0});
        return rsmi::SUCCESS;
    }
    return rsmi::NOT_SUPPORTED;
}

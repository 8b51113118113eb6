// Stand-in librocm_smi64.so.7: serves the "rocm_smi" answers of a scenario (standin_scenario.hpp), which have
// the shape of gpudx's RocmSmiLayer JSON, and its faults ("call": "rsmi_dev_pci_id_get", "device": 3, ...).
#include <cstring>
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

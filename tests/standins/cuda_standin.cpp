// Stand-in libcuda.so.1: serves the CUDA answers of a scenario (standin_scenario.hpp), applying
// CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER at cuInit the way the real driver does.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "abi/cuda.hpp"
#include "standin_scenario.hpp"

using namespace gpudx;
using nlohmann::json;

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

bool g_initialized = false;
std::vector<const json*> g_visible;  // ordinals -> recorded CudaDevice JSON

const json& cuda_doc() {
    static const json empty = json::object();
    const auto& doc = standin::scenario().doc;
    return doc.is_object() && doc.contains("cuda") ? doc["cuda"] : empty;
}

std::string trim(std::string s) {
    auto b = s.find_first_not_of(" \t");
    auto e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

unsigned long long bus_key(const json* d) {
    unsigned a = 0, b = 0, c = 0, e = 0;
    standin::parse_bus_id(d->value("bus_id", std::string()), a, b, c, e);
    return (static_cast<unsigned long long>(a) << 32) | (b << 16) | (c << 8) | e;
}

// CUDA's rules: entries are indices or UUID prefixes; the list ends at the first entry that names no
// device (or repeats one); an empty value hides every device.
std::vector<const json*> visible_devices() {
    std::vector<const json*> all;
    if (cuda_doc().contains("devices"))
        for (auto& d : cuda_doc()["devices"]) all.push_back(&d);
    const char* order = std::getenv("CUDA_DEVICE_ORDER");
    if (order && std::string(order) == "PCI_BUS_ID")
        std::stable_sort(all.begin(), all.end(), [](auto* a, auto* b) { return bus_key(a) < bus_key(b); });
    const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
    if (!cvd) return all;
    std::vector<const json*> out;
    std::string list = cvd;
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        std::string tok = trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        start = comma == std::string::npos ? list.size() + 1 : comma + 1;
        if (tok.empty()) break;
        const json* hit = nullptr;
        if (std::all_of(tok.begin(), tok.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            size_t i = std::strtoul(tok.c_str(), nullptr, 10);
            if (i < all.size()) hit = all[i];
        } else {
            std::string want = tok.rfind("GPU-", 0) == 0 ? tok : "GPU-" + tok;
            int matches = 0;
            for (auto* d : all)
                if (d->value("uuid", std::string()).rfind(want, 0) == 0) {
                    hit = d;
                    ++matches;
                }
            if (matches != 1) hit = nullptr;
        }
        if (!hit || std::find(out.begin(), out.end(), hit) != out.end()) break;
        out.push_back(hit);
    }
    return out;
}

const json* device(CUdevice d) {
    if (!g_initialized || d < 0 || static_cast<size_t>(d) >= g_visible.size()) return nullptr;
    return g_visible[static_cast<size_t>(d)];
}

template <class T>
CUresult device_field(const char* call, CUdevice d, const char* key, T& out) {
    if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto f = standin::fault(call, d)) return *f;
    auto* j = device(d);
    if (!j) return CUDA_ERROR_INVALID_DEVICE;
    if (!j->contains(key) || (*j)[key].is_null()) return CUDA_ERROR_NOT_SUPPORTED;
    try {
        out = (*j)[key].get<T>();
    } catch (...) {
        return CUDA_ERROR_UNKNOWN;
    }
    return CUDA_SUCCESS;
}

}  // namespace

EXPORT CUresult cuDriverGetVersion(int* v) {
    if (auto f = standin::fault("cuDriverGetVersion")) return *f;
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    const auto& c = cuda_doc();
    if (!c.contains("driver_version") || !c["driver_version"].is_number_integer()) return CUDA_ERROR_NOT_SUPPORTED;
    *v = c["driver_version"].get<int>();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuInit(unsigned flags) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (auto f = standin::fault("cuInit")) return *f;
    if (!standin::scenario().problem.empty()) return CUDA_ERROR_UNKNOWN;
    const auto& c = cuda_doc();
    if (c.contains("init_result") && c["init_result"].is_number_integer() && c["init_result"].get<int>() != 0)
        return c["init_result"].get<int>();
    g_visible = visible_devices();
    if (g_visible.empty()) return CUDA_ERROR_NO_DEVICE;
    g_initialized = true;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int* n) {
    if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto f = standin::fault("cuDeviceGetCount")) return *f;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = static_cast<int>(g_visible.size());
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) {
    if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto f = standin::fault("cuDeviceGet", ordinal)) return *f;
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || static_cast<size_t>(ordinal) >= g_visible.size()) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
    std::string s;
    CUresult rc = device_field("cuDeviceGetName", d, "name", s);
    if (rc != CUDA_SUCCESS) return rc;
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    std::snprintf(name, static_cast<size_t>(len), "%s", s.c_str());
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice d) {
    std::string s;
    CUresult rc = device_field("cuDeviceGetUuid", d, "uuid", s);
    if (rc != CUDA_SUCCESS) return rc;
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    unsigned char bytes[16];
    if (!standin::parse_uuid(s, bytes)) return CUDA_ERROR_UNKNOWN;
    std::memcpy(uuid->bytes, bytes, 16);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice d) { return cuDeviceGetUuid_v2(uuid, d); }

EXPORT CUresult cuDeviceGetPCIBusId(char* bus, int len, CUdevice d) {
    std::string s;
    CUresult rc = device_field("cuDeviceGetPCIBusId", d, "bus_id", s);
    if (rc != CUDA_SUCCESS) return rc;
    unsigned a = 0, b = 0, c = 0, e = 0;
    if (!bus || len < 13 || !standin::parse_bus_id(s, a, b, c, e)) return CUDA_ERROR_INVALID_VALUE;
    std::snprintf(bus, static_cast<size_t>(len), "%04X:%02X:%02X.%X", a, b, c, e);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice* d, const char* bus) {
    if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto f = standin::fault("cuDeviceGetByPCIBusId")) return *f;
    unsigned a, b, c, e;
    if (!d || !bus || !standin::parse_bus_id(bus, a, b, c, e)) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < g_visible.size(); ++i) {
        unsigned x, y, z, w;
        if (standin::parse_bus_id(g_visible[i]->value("bus_id", std::string()), x, y, z, w) && x == a && y == b &&
            z == c && w == e) {
            *d = static_cast<CUdevice>(i);
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuDeviceGetAttribute(int* value, int attr, CUdevice d) {
    if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto f = standin::fault("cuDeviceGetAttribute", d)) return *f;
    auto* j = device(d);
    if (!j) return CUDA_ERROR_INVALID_DEVICE;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    unsigned a = 0, b = 0, c = 0, e = 0;
    standin::parse_bus_id(j->value("bus_id", std::string()), a, b, c, e);
    auto pick = [&](const char* key, int fallback) {
        return j->contains(key) && (*j)[key].is_number_integer() ? (*j)[key].get<int>() : fallback;
    };
    switch (attr) {
        case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = pick("attr_bus", static_cast<int>(b)); return CUDA_SUCCESS;
        case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = pick("attr_device", static_cast<int>(c)); return CUDA_SUCCESS;
        case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *value = pick("attr_domain", static_cast<int>(a)); return CUDA_SUCCESS;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = pick("cc_major", 9); return CUDA_SUCCESS;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = pick("cc_minor", 0); return CUDA_SUCCESS;
        case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = pick("multiprocessor_count", 132); return CUDA_SUCCESS;
        default: *value = 0; return CUDA_SUCCESS;
    }
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) {
    unsigned long long n = 0;
    CUresult rc = device_field("cuDeviceTotalMem", d, "total_memory", n);
    if (rc == CUDA_SUCCESS) *bytes = static_cast<size_t>(n);
    return rc;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char** str) {
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    auto* r = find_cu_result(error);
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    *str = r->name;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char** str) {
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    auto* r = find_cu_result(error);
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    *str = r->meaning;
    return CUDA_SUCCESS;
}

namespace {
struct Entry {
    const char* name;
    void* fn;
};
CUresult lookup(const char* symbol, void** pfn, int version);
}  // namespace

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t,
                                    CUdriverProcAddressQueryResult* status) {
    CUresult rc = lookup(symbol, pfn, version);
    if (status) *status = rc == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return rc;
}
EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t) {
    return lookup(symbol, pfn, version);
}

namespace {
// cuGetProcAddress takes the base name and an ABI version; the newest variant the version allows answers.
CUresult lookup(const char* symbol, void** pfn, int version) {
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    static const Entry table[] = {
        {"cuInit", reinterpret_cast<void*>(&cuInit)},
        {"cuDriverGetVersion", reinterpret_cast<void*>(&cuDriverGetVersion)},
        {"cuDeviceGetCount", reinterpret_cast<void*>(&cuDeviceGetCount)},
        {"cuDeviceGet", reinterpret_cast<void*>(&cuDeviceGet)},
        {"cuDeviceGetName", reinterpret_cast<void*>(&cuDeviceGetName)},
        {"cuDeviceGetUuid", reinterpret_cast<void*>(&cuDeviceGetUuid)},
        {"cuDeviceGetUuid_v2", reinterpret_cast<void*>(&cuDeviceGetUuid_v2)},
        {"cuDeviceGetPCIBusId", reinterpret_cast<void*>(&cuDeviceGetPCIBusId)},
        {"cuDeviceGetByPCIBusId", reinterpret_cast<void*>(&cuDeviceGetByPCIBusId)},
        {"cuDeviceGetAttribute", reinterpret_cast<void*>(&cuDeviceGetAttribute)},
        {"cuDeviceTotalMem_v2", reinterpret_cast<void*>(&cuDeviceTotalMem_v2)},
        {"cuGetErrorName", reinterpret_cast<void*>(&cuGetErrorName)},
        {"cuGetErrorString", reinterpret_cast<void*>(&cuGetErrorString)},
        {"cuGetProcAddress", reinterpret_cast<void*>(&cuGetProcAddress)},
        {"cuGetProcAddress_v2", reinterpret_cast<void*>(&cuGetProcAddress_v2)},
    };
    std::string want = symbol;
    if ((want == "cuDeviceGetUuid" && version >= 11040) || (want == "cuGetProcAddress" && version >= 12000) ||
        want == "cuDeviceTotalMem")
        want += "_v2";
    for (auto& e : table)
        if (want == e.name) {
            *pfn = e.fn;
            return CUDA_SUCCESS;
        }
    *pfn = nullptr;
    return CUDA_ERROR_NOT_FOUND;
}
}  // namespace

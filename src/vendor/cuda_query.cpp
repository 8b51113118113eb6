// Runs in a CUDA probe child: sets the job's CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER, then cuInit.
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "core/child_probe.hpp"
#include "abi/cuda.hpp"
#include "vendor/library.hpp"
#include "vendor/queries.hpp"
#include "model/layer_json.hpp"

namespace gpudx {

std::string format_gpu_uuid(const std::array<unsigned char, 16>& b, std::string_view prefix) {
    return fmt::format("{}{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                       prefix, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                       b[14], b[15]);
}

namespace {

void send(ProbeChannel& ch, const CudaLayer& layer) {
    nlohmann::json j;
    layer_to_json(j, layer);
    ch.result(j);
}

void set_or_unset(const char* name, const std::optional<std::string>& value) {
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
}

}  // namespace

void query_cuda(const CudaQueryOptions& o, ProbeChannel& ch) {
    CudaLayer layer;
    CudaView& view = layer.caller;
    // The child is single-threaded here, so changing its environment is safe; cuInit reads it.
    set_or_unset("CUDA_VISIBLE_DEVICES", o.cuda_visible_devices);
    set_or_unset("CUDA_DEVICE_ORDER", o.cuda_device_order);
    view.cuda_visible_devices = o.cuda_visible_devices.value_or("<unset>");
    view.cuda_device_order = o.cuda_device_order.value_or("<unset>");

    ch.progress("dlopen(libcuda.so.1)");
    auto lib = DriverLibrary::open("libcuda.so.1", o.library_dir);
    if (!lib) {
        layer.load_error = lib.error().message;
        send(ch, layer);
        return;
    }
    layer.library_path = lib->path();
    auto init = lib->get<cu::Init>("cuInit");
    auto driver_version = lib->get<cu::DriverGetVersion>("cuDriverGetVersion");
    auto error_name = lib->get<cu::GetErrorName>("cuGetErrorName");
    auto get_count = lib->get<cu::DeviceGetCount>("cuDeviceGetCount");
    auto get_device = lib->get<cu::DeviceGet>("cuDeviceGet");
    auto get_uuid = lib->get<cu::DeviceGetUuid>("cuDeviceGetUuid", {"_v2", ""});
    auto get_bus_id = lib->get<cu::DeviceGetPCIBusId>("cuDeviceGetPCIBusId");
    auto get_attr = lib->get<cu::DeviceGetAttribute>("cuDeviceGetAttribute");
    auto get_name = lib->get<cu::DeviceGetName>("cuDeviceGetName");
    auto total_mem = lib->get<cu::DeviceTotalMem>("cuDeviceTotalMem", {"_v2"});
    if (!init) {
        layer.load_error = "cuInit not found in " + lib->path();
        send(ch, layer);
        return;
    }
    if (driver_version) {
        int v = 0;
        ch.progress("cuDriverGetVersion");
        if (driver_version(&v) == CUDA_SUCCESS) layer.driver_version = v;
    }
    ch.progress("cuInit(0)");
    CUresult rc = init(0);
    view.init_result = rc;
    const char* name = nullptr;
    if (error_name && error_name(rc, &name) == CUDA_SUCCESS && name) view.init_name = name;
    else view.init_name = cu_result_name(rc);
    view.init_meaning = cu_result_meaning(rc);
    if (rc != CUDA_SUCCESS || !get_count || !get_device) {
        send(ch, layer);
        return;
    }
    int count = 0;
    ch.progress("cuDeviceGetCount");
    if (get_count(&count) != CUDA_SUCCESS) {
        send(ch, layer);
        return;
    }
    view.device_count = count;
    send(ch, layer);
    for (int ordinal = 0; ordinal < count && ordinal < 1024; ++ordinal) {
        CudaDevice dev;
        dev.ordinal = ordinal;
        CUdevice d = 0;
        ch.progress(fmt::format("cuDeviceGet({})", ordinal));
        if (get_device(&d, ordinal) != CUDA_SUCCESS) {
            view.devices.push_back(std::move(dev));
            continue;
        }
        if (get_uuid) {
            CUuuid u{};
            ch.progress(fmt::format("cuDeviceGetUuid_v2({})", ordinal));
            if (get_uuid(&u, d) == CUDA_SUCCESS) {
                std::array<unsigned char, 16> bytes;
                std::memcpy(bytes.data(), u.bytes, 16);
                dev.uuid = format_gpu_uuid(bytes);
            }
        }
        if (get_bus_id) {
            char bus[64] = {};
            ch.progress(fmt::format("cuDeviceGetPCIBusId({})", ordinal));
            if (get_bus_id(bus, sizeof bus - 1, d) == CUDA_SUCCESS) {
                dev.bus_id = sanitize_utf8(std::string_view(bus, strnlen(bus, sizeof bus)));
                dev.pci = normalize_pci(dev.bus_id);
            }
        }
        if (get_attr) {
            auto attr = [&](int a) -> std::optional<int> {
                int v = 0;
                ch.progress(fmt::format("cuDeviceGetAttribute({}, {})", a, ordinal));
                if (get_attr(&v, a, d) == CUDA_SUCCESS) return v;
                return std::nullopt;
            };
            dev.attr_bus = attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
            dev.attr_device = attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
            dev.attr_domain = attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
            dev.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
            dev.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
            dev.multiprocessor_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
        }
        if (get_name) {
            char nm[256] = {};
            ch.progress(fmt::format("cuDeviceGetName({})", ordinal));
            if (get_name(nm, sizeof nm - 1, d) == CUDA_SUCCESS)
                dev.name = sanitize_utf8(std::string_view(nm, strnlen(nm, sizeof nm)));
        }
        if (total_mem) {
            size_t bytes = 0;
            ch.progress(fmt::format("cuDeviceTotalMem_v2({})", ordinal));
            if (total_mem(&bytes, d) == CUDA_SUCCESS) dev.total_memory = bytes;
        }
        view.devices.push_back(std::move(dev));
        send(ch, layer);
    }
}

}  // namespace gpudx

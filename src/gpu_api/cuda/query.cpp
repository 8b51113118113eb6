// Runs in a CUDA probe child: sets the job's CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER, then cuInit.
#include <cstdlib>
#include <cstring>

#include "core/pci_address.hpp"
#include "gpu_api/cuda/api.hpp"
#include "gpu_api/probe.hpp"
#include "gpu_api/queries.hpp"

namespace gpudx {

namespace {

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
    view.cuda_visible_devices = o.cuda_visible_devices;
    view.cuda_device_order = o.cuda_device_order;

    ch.progress("dlopen(libcuda.so.1)");
    auto opened = CudaApi::open(o.library_dir);
    if (!opened) {
        layer.load_error = opened.error().message;
        send_layer(ch, layer);
        return;
    }
    const CudaApi& api = *opened;
    layer.library_path = api.library.path();
    if (!api.init) {
        layer.load_error = "cuInit not found in " + api.library.path();
        send_layer(ch, layer);
        return;
    }
    if (api.driver_get_version) {
        int v = 0;
        ch.progress("cuDriverGetVersion");
        if (api.driver_get_version(&v) == CUDA_SUCCESS) layer.driver_version = v;
    }
    ch.progress("cuInit(0)");
    CUresult rc = api.init(0);
    view.init_result = rc;
    view.init_name = api.error_name(rc);
    // gpudx's own words rather than cuGetErrorString's: they name what to check next.
    view.init_meaning = cu_result_meaning(rc);
    if (rc != CUDA_SUCCESS || !api.device_get_count || !api.device_get) {
        send_layer(ch, layer);
        return;
    }
    int count = 0;
    ch.progress("cuDeviceGetCount");
    if (api.device_get_count(&count) != CUDA_SUCCESS) {
        send_layer(ch, layer);
        return;
    }
    view.device_count = count;
    send_layer(ch, layer);
    for (int ordinal = 0; ordinal < count && ordinal < 1024; ++ordinal) {
        const auto device = static_cast<unsigned>(ordinal);
        CudaDevice dev;
        dev.ordinal = ordinal;
        CUdevice d = 0;
        ch.progress(driver_call_label("cuDeviceGet", device));
        if (api.device_get(&d, ordinal) != CUDA_SUCCESS) {
            view.devices.push_back(std::move(dev));
            continue;
        }
        if (api.device_get_uuid) {
            CUuuid u{};
            ch.progress(driver_call_label("cuDeviceGetUuid_v2", device));
            if (api.device_get_uuid(&u, d) == CUDA_SUCCESS) dev.uuid = format_gpu_uuid(u);
        }
        if (api.device_get_pci_bus_id) {
            char bus[64] = {};
            ch.progress(driver_call_label("cuDeviceGetPCIBusId", device));
            if (api.device_get_pci_bus_id(bus, sizeof bus - 1, d) == CUDA_SUCCESS) {
                dev.bus_id = library_string(bus, sizeof bus);
                dev.pci = normalize_pci(dev.bus_id);
            }
        }
        if (api.device_get_attribute) {
            auto attr = [&](int a) -> std::optional<int> {
                int v = 0;
                ch.progress(driver_call_label("cuDeviceGetAttribute", device, std::to_string(a)));
                if (api.device_get_attribute(&v, a, d) == CUDA_SUCCESS) return v;
                return std::nullopt;
            };
            dev.attr_bus = attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
            dev.attr_device = attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
            dev.attr_domain = attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
            dev.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
            dev.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
            dev.multiprocessor_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
        }
        if (api.device_get_name) {
            char nm[256] = {};
            ch.progress(driver_call_label("cuDeviceGetName", device));
            if (api.device_get_name(nm, sizeof nm - 1, d) == CUDA_SUCCESS) dev.name = library_string(nm, sizeof nm);
        }
        if (api.device_total_mem) {
            size_t bytes = 0;
            ch.progress(driver_call_label("cuDeviceTotalMem_v2", device));
            if (api.device_total_mem(&bytes, d) == CUDA_SUCCESS) dev.total_memory = bytes;
        }
        view.devices.push_back(std::move(dev));
        send_layer(ch, layer);
    }
}

}  // namespace gpudx

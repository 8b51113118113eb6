#include "model/json_support.hpp"
#include "model/layer_json.hpp"

namespace gpudx {
GPUDX_JSON(LoadedModule, name, size, state, taint, version)
GPUDX_JSON(ModuleFile, name, path, version, vermagic, srcversion, signer, found_by, error)
GPUDX_JSON(NvidiaProcGpu, address, model, uuid, vbios, bus_type, minor, firmware, excluded, fields)
GPUDX_JSON(DkmsEntry, module, version, kernel, arch, state, log)
GPUDX_JSON(KfdNode, node, gpu_id, name, pci, unique_id, drm_render_minor, vendor_id, device_id, simd_count,
           gfx_target_version, properties)
GPUDX_JSON(AmdGpu, pci, card, render_minor, unique_id, uuid, vbios_version, product_name, firmware, in_kfd, kfd_node,
           kfd_gpu_id, gfx_target, simd_count, rocr_index)
GPUDX_JSON(ModuleLayer, kernel_release, loaded, nvidia_proc_version, nvidia_driver_version, nvidia_gpus,
           nvidia_gpus_listed, module_dir, files_unavailable, files, dkms,
           amdgpu_version, amdgpu_firmware, amd_gpus, kfd_nodes, kfd_topology_listed)
GPUDX_DEFINE_LAYER_JSON(ModuleLayer)
}  // namespace gpudx

#include "model/json_support.hpp"
#include "model/layer_json.hpp"

namespace gpudx {
GPUDX_JSON(LoadedModule, name, size, state, taint, version)
GPUDX_JSON(ModuleFile, name, path, version, vermagic, srcversion, signer, found_by, error)
GPUDX_JSON(NvidiaProcGpu, address, model, uuid, vbios, bus_type, minor, firmware, excluded, fields)
GPUDX_JSON(DkmsEntry, module, version, kernel, arch, state, log)
GPUDX_JSON(ModuleLayer, kernel_release, loaded, nvidia_proc_version, nvidia_driver_version, nvidia_gpus,
           nvidia_gpus_listed, module_dir, files_unavailable, files, dkms,
           amdgpu_version, amdgpu_firmware)
GPUDX_DEFINE_LAYER_JSON(ModuleLayer)
}  // namespace gpudx

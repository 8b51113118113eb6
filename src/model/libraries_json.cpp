#include "model/json_support.hpp"
#include "model/layer_json.hpp"

namespace gpudx {
GPUDX_JSON(LibraryCopy, path, real_path, version, found_by, present)
GPUDX_JSON(ResolvedLibrary, soname, chosen, reason, copies)
GPUDX_JSON(RocmInstall, path, real_path, version)
GPUDX_JSON(LibrariesLayer, ld_library_path, ld_so_cache_format, ld_so_cache_source, ld_so_conf_dirs, libraries,
           cuda_symlink_target, rocm_installs, rocm_release)
GPUDX_DEFINE_LAYER_JSON(LibrariesLayer)
}  // namespace gpudx

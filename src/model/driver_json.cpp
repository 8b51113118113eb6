#include "model/json_support.hpp"
#include "model/layer_json.hpp"

namespace gpudx {
GPUDX_DEFINE_LAYER_JSON(NvmlLayer)
GPUDX_DEFINE_LAYER_JSON(CudaLayer)
// Present in a snapshot only when ROCm SMI was asked, so reading it back means it was.
void layer_from_json(const nlohmann::json& j, RocmSmiLayer& v) {
    v = j.get<RocmSmiLayer>();
    v.probed = true;
}
void layer_to_json(nlohmann::json& j, const RocmSmiLayer& v) { j = v; }
}  // namespace gpudx

#include "model/json_support.hpp"
#include "model/layer_json.hpp"

namespace gpudx {
GPUDX_DEFINE_LAYER_JSON(InfinibandLayer)
GPUDX_DEFINE_LAYER_JSON(ServicesLayer)
}  // namespace gpudx

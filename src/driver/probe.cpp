#include "collect/collectors.hpp"

namespace gpudx {

std::vector<CollectorStatus> collect_driver(const CollectContext&, NvmlLayer&, CudaLayer&) {
    return {status_no_data("nvml", "not implemented yet"), status_no_data("cuda", "not implemented yet")};
}

}  // namespace gpudx

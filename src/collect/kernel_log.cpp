#include "collect/collectors.hpp"

namespace gpudx {

CollectorStatus collect_kernel_log(const CollectContext&, KernelLog&) { return status_no_data("kernel_log", "not implemented yet"); }

}  // namespace gpudx

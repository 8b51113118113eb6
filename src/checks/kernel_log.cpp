#include "checks/check_context.hpp"

namespace gpudx {

void check_kernel_log(const CheckContext&, std::vector<Finding>&) {}

}  // namespace gpudx

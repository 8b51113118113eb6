#include "checks/check_context.hpp"

namespace gpudx {

void check_allocation(const CheckContext&, std::vector<Finding>&) {}

}  // namespace gpudx

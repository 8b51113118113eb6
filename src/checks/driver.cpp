#include "checks/check_context.hpp"

namespace gpudx {

void check_driver(const CheckContext&, std::vector<Finding>&) {}

}  // namespace gpudx

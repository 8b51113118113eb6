#include "checks/check_context.hpp"

namespace gpudx {

void check_libraries(const CheckContext&, std::vector<Finding>&) {}

}  // namespace gpudx

#include "rules/engine/families.hpp"

namespace gpudx {

const std::vector<RuleFamily>& check_families() {
    static const std::vector<RuleFamily> families = {
        kPcieFamily,   kModuleFamily,   kKernelLogFamily, kLibrariesFamily,  kDevicesFamily,
        kDriverFamily, kGpuHealthFamily, kIdentityFamily, kContainerFamily, kAllocationFamily, kAmdFamily, kAmdHealthFamily, kProcessFamily,
        kInfinibandFamily, kServicesFamily,
    };
    return families;
}

}  // namespace gpudx

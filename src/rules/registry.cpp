#include "rules/check_context.hpp"

namespace gpudx {

// One family per file in this folder.
void check_pcie(const CheckContext&, std::vector<Finding>&);
void check_module(const CheckContext&, std::vector<Finding>&);
void check_kernel_log(const CheckContext&, std::vector<Finding>&);
void check_libraries(const CheckContext&, std::vector<Finding>&);
void check_devices(const CheckContext&, std::vector<Finding>&);
void check_driver(const CheckContext&, std::vector<Finding>&);
void check_identity(const CheckContext&, std::vector<Finding>&);
void check_container(const CheckContext&, std::vector<Finding>&);
void check_allocation(const CheckContext&, std::vector<Finding>&);
void check_amd(const CheckContext&, std::vector<Finding>&);

const std::vector<CheckFamilyEntry>& check_families() {
    static const std::vector<CheckFamilyEntry> families = {
        {"pcie", check_pcie},           {"module", check_module},       {"kernel_log", check_kernel_log},
        {"libraries", check_libraries}, {"devices", check_devices},     {"driver", check_driver},
        {"identity", check_identity},   {"container", check_container}, {"allocation", check_allocation},
        {"amd", check_amd},
    };
    return families;
}

}  // namespace gpudx

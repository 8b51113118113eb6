#include "collect/collectors.hpp"

namespace gpudx {

CollectorStatus collect_pcie(const CollectContext&, PcieLayer&) { return status_no_data("pcie", "not implemented yet"); }

}  // namespace gpudx

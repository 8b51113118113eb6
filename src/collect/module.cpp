#include "collect/collectors.hpp"

namespace gpudx {

CollectorStatus collect_module(const CollectContext&, ModuleLayer&) { return status_no_data("module", "not implemented yet"); }

}  // namespace gpudx

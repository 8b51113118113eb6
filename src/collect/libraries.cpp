#include "collect/collectors.hpp"

namespace gpudx {

CollectorStatus collect_libraries(const CollectContext&, LibrariesLayer&) { return status_no_data("libraries", "not implemented yet"); }

}  // namespace gpudx

#include "collect/collectors.hpp"

namespace gpudx {

CollectorStatus collect_host(const CollectContext&, HostInfo&) { return status_no_data("host", "not implemented yet"); }

}  // namespace gpudx

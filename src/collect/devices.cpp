#include "collect/collectors.hpp"

namespace gpudx {

CollectorStatus collect_devices(const CollectContext&, DevicesLayer&) { return status_no_data("devices", "not implemented yet"); }

}  // namespace gpudx

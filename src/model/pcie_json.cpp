#include "model/json_support.hpp"
#include "model/layer_json.hpp"

namespace gpudx {
GPUDX_JSON(PcieLink, speed_gts, width, speed_text)
GPUDX_JSON(PciDevice, address, vendor_id, device_id, subsystem_vendor_id, subsystem_device_id, class_code, revision,
           vendor_name, device_name, driver, numa_node, link_current, link_max, aer_fatal, aer_nonfatal,
           aer_correctable, iommu_group, slot, parent, config_unreadable, is_gpu, is_nvswitch)
GPUDX_JSON(PcieLayer, devices, gpus, nvswitches)
GPUDX_DEFINE_LAYER_JSON(PcieLayer)
}  // namespace gpudx

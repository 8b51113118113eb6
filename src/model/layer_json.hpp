#pragma once
// Each layer's JSON lives beside it (model/<layer>_json.cpp); the snapshot joins them.
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "model/snapshot.hpp"

namespace gpudx {

#define GPUDX_DECLARE_LAYER_JSON(Type)                       \
    void layer_to_json(nlohmann::json& j, const Type& v);    \
    void layer_from_json(const nlohmann::json& j, Type& v);

GPUDX_DECLARE_LAYER_JSON(HostInfo)
GPUDX_DECLARE_LAYER_JSON(PcieLayer)
GPUDX_DECLARE_LAYER_JSON(ModuleLayer)
GPUDX_DECLARE_LAYER_JSON(KernelLog)
GPUDX_DECLARE_LAYER_JSON(LibrariesLayer)
GPUDX_DECLARE_LAYER_JSON(DevicesLayer)
GPUDX_DECLARE_LAYER_JSON(EnvironmentLayer)
GPUDX_DECLARE_LAYER_JSON(InfinibandLayer)
GPUDX_DECLARE_LAYER_JSON(ServicesLayer)
GPUDX_DECLARE_LAYER_JSON(NvmlLayer)
GPUDX_DECLARE_LAYER_JSON(CudaLayer)
GPUDX_DECLARE_LAYER_JSON(RocmSmiLayer)
GPUDX_DECLARE_LAYER_JSON(CollectorStatus)
GPUDX_DECLARE_LAYER_JSON(ProcessView)
GPUDX_DECLARE_LAYER_JSON(NvmlEvent)

#undef GPUDX_DECLARE_LAYER_JSON

// An enum of the snapshot from the name it is written under, as layer_from_json reads it: for readers that build
// no document (the fleet's streaming reader). False for a name the enum does not have and layer_from_json
// refuses (an NVML event type); the others take an unknown name as the first value of the enum's table.
bool enum_from_name(std::string_view name, CollectorState& v);
bool enum_from_name(std::string_view name, KernelLogFormat& v);
bool enum_from_name(std::string_view name, NvmlEventType& v);

}  // namespace gpudx

// Defines layer_to_json / layer_from_json for a type whose nlohmann serializer is visible in this file.
#define GPUDX_DEFINE_LAYER_JSON(Type)                                             \
    void layer_to_json(nlohmann::json& j, const Type& v) { j = v; }               \
    void layer_from_json(const nlohmann::json& j, Type& v) { v = j.get<Type>(); }

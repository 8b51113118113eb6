#pragma once
// JSON helpers shared by the model's serializers: std::optional as null, and the macro every
// model struct uses so that missing keys keep their defaults (older snapshots still load).
#include <nlohmann/json.hpp>
#include <optional>

namespace nlohmann {
template <class T>
struct adl_serializer<std::optional<T>> {
    static void to_json(json& j, const std::optional<T>& v) {
        if (v) j = *v; else j = nullptr;
    }
    static void from_json(const json& j, std::optional<T>& v) {
        if (j.is_null()) v.reset(); else v = j.get<T>();
    }
};
}  // namespace nlohmann

#define GPUDX_JSON(Type, ...) NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Type, __VA_ARGS__)

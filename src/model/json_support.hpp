#pragma once
// JSON helpers shared by the model's serializers: std::optional as null, and the macro every
// model struct uses so that missing keys keep their defaults (older snapshots still load).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/text.hpp"

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

namespace gpudx {

// Every string and key of a document made valid UTF-8 (invalid bytes become U+FFFD). nlohmann::json::dump()
// throws on invalid UTF-8, so one stray byte in a file of the node (a path, a variable, a process name) would
// otherwise lose the whole report. Applied by each top-level *_to_json of a document gpudx prints.
inline void repair_utf8(nlohmann::json& j) {
    if (j.is_string()) {
        auto& s = j.get_ref<std::string&>();
        std::string fixed = sanitize_utf8(s);
        if (fixed != s) s = std::move(fixed);
    } else if (j.is_array()) {
        for (auto& e : j) repair_utf8(e);
    } else if (j.is_object()) {
        bool keys_valid = true;
        for (auto it = j.begin(); it != j.end(); ++it) {
            repair_utf8(it.value());
            if (keys_valid && sanitize_utf8(it.key()) != it.key()) keys_valid = false;
        }
        if (!keys_valid) {
            nlohmann::json fixed = nlohmann::json::object();
            for (auto it = j.begin(); it != j.end(); ++it) fixed[sanitize_utf8(it.key())] = std::move(it.value());
            j = std::move(fixed);
        }
    }
}

}  // namespace gpudx

#define GPUDX_JSON(Type, ...) NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Type, __VA_ARGS__)

#pragma once
// JSON helpers shared by the model's serializers: std::optional as null, every snapshot struct written and read
// by its Schema (model/snapshot_keys.hpp), and a macro for the other documents' structs. Missing keys keep their
// defaults, so older snapshots still load.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/named_enum.hpp"
#include "core/text.hpp"
#include "model/snapshot_keys.hpp"

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

// Numbers of a document read into the model. nlohmann converts a floating-point number to an integer field
// with a plain cast, undefined behaviour when the value does not fit (the fuzzer's node record put -1e79 in
// an int). So before reading: a float that is a whole number becomes that integer (lossless; a double field
// reads it back the same), and any other float must lie in (-1, 2^31), where every integer field takes its
// truncation. No float gpudx writes lies outside. Returns why the document is refused, or nothing.
inline std::optional<std::string> normalise_numbers(nlohmann::json& j) {
    if (j.is_number_float()) {
        double x = j.get<double>();
        if (!std::isfinite(x)) return "a number that is not finite";
        if (x == std::trunc(x)) {
            if (x >= 0 && x < 18446744073709551616.0) j = static_cast<uint64_t>(x);
            else if (x < 0 && x >= -9223372036854775808.0) j = static_cast<int64_t>(x);
            else return "the number " + j.dump() + " is out of range";
        } else if (!(x > -1 && x < 2147483648.0)) {
            return "the number " + j.dump() + " is out of range for any field";
        }
    } else if (j.is_structured()) {
        for (auto& e : j)
            if (auto bad = normalise_numbers(e)) return bad;
    }
    return std::nullopt;
}

// A name read back that its enum's table does not declare: the reader stops there and names the value, as it does
// for a value of the wrong type (snapshot_from_json's fault-isolation boundary catches both).
struct UnknownName : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// An enum with a table (core/named_enum.hpp) is written as its name and read back only from one.
template <NamedEnum E>
void to_json(nlohmann::json& j, E value) {
    j = name_of(value);
}
template <NamedEnum E>
void from_json(const nlohmann::json& j, E& value) {
    auto name = j.get<std::string>();
    auto parsed = parse_name<E>(name);
    if (!parsed) throw UnknownName(nlohmann::json(name).dump() + " is not " + names_listed<E>(" or "));
    value = *parsed;
}

// Unset is written as kUnsetVariable, as it always was, and read back as unset.
inline void to_json(nlohmann::json& j, const EnvValue& value) { j = value_or_unset(value); }
inline void from_json(const nlohmann::json& j, EnvValue& value) {
    auto text = j.get<std::string>();
    if (text == kUnsetVariable) value = std::nullopt;
    else value = std::move(text);
}

// The kernel log's topics and tally kinds: a name this gpudx does not know reads as `other` (a snapshot of a
// newer gpudx), as any string did before they were enums, instead of stopping the reader.
template <NamedEnum E>
void named_enum_or_other_from_json(const nlohmann::json& j, E& value) {
    value = parse_name<E>(j.get<std::string>()).value_or(E::other);
}
inline void from_json(const nlohmann::json& j, LogTopic& t) { named_enum_or_other_from_json(j, t); }
inline void from_json(const nlohmann::json& j, TallyKind& k) { named_enum_or_other_from_json(j, k); }
// A remote end a newer gpudx names reads as unknown rather than stopping the reader.
inline void from_json(const nlohmann::json& j, NvlinkRemote& r) {
    r = parse_name<NvlinkRemote>(j.get<std::string>()).value_or(NvlinkRemote::unknown);
}

// Each field under its key. Reading: a missing key keeps the field's default.
template <FieldwiseJson T>
void to_json(nlohmann::json& j, const T& v) {
    std::apply([&](const auto&... f) { ((j[f.key.data()] = v.*f.member), ...); }, Schema<T>::fields);
}
template <FieldwiseJson T>
void from_json(const nlohmann::json& j, T& v) {
    const T defaults{};
    std::apply([&](const auto&... f) { ((v.*f.member = j.value(f.key.data(), defaults.*f.member)), ...); },
               Schema<T>::fields);
}

}  // namespace gpudx

// For structs of documents other than the snapshot (baselines, accept reports): keys are the member names.
#define GPUDX_JSON(Type, ...) NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Type, __VA_ARGS__)

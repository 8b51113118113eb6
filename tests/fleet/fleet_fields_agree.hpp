#pragma once
// Holds the fleet's streaming reader (read_fleet_fields) to the full reader (snapshot_from_json) on every field
// the fleet reads, walking FleetFields (model/snapshot_keys.hpp) over both results side by side.
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fleet/fleet.hpp"
#include "model/snapshot_keys.hpp"

namespace gpudx::testdata {

struct ReadersAgreement {
    std::optional<std::string> fleet_error, full_error;  // why a reader refused the text
    std::vector<std::string> differences;  // "nvml.devices[1].uuid: fleet \"\" full \"GPU-...\""
    std::set<std::string> covered;         // leaves that held a value other than the default: "nvml.devices[].uuid"
};

namespace agree_detail {

struct Paths {
    std::string exact;  // with indices, for differences
    std::string leaf;   // without, for coverage
    Paths member(std::string_view key) const {
        auto join = [&](const std::string& p) { return p.empty() ? std::string(key) : p + "." + std::string(key); };
        return {join(exact), join(leaf)};
    }
    Paths element(size_t i) const { return {fmt::format("{}[{}]", exact, i), leaf + "[]"}; }
};

template <class T>
std::string show(const T& v) {
    return nlohmann::json(v).dump();
}
template <class T>
std::string show(const std::optional<T>& v) {
    return v ? show(*v) : "null";
}

template <class T>
void compare(const T& fleet, const T& full, const Paths& at, ReadersAgreement& out);

template <class T>
void compare_field(const T& fleet, const T& full, const Paths& at, ReadersAgreement& out) {
    if constexpr (FleetRead<T>) {
        compare(fleet, full, at, out);
    } else {
        if (fleet != full) out.differences.push_back(fmt::format("{}: fleet {} full {}", at.exact, show(fleet), show(full)));
        if (full != T{}) out.covered.insert(at.leaf);
    }
}
template <FleetRead T>
void compare_field(const std::optional<T>& fleet, const std::optional<T>& full, const Paths& at, ReadersAgreement& out) {
    if (fleet.has_value() != full.has_value()) {
        out.differences.push_back(fmt::format("{}: fleet {} full {}", at.exact, fleet ? "present" : "absent",
                                              full ? "present" : "absent"));
        return;
    }
    if (full) compare(*fleet, *full, at, out);
}
template <FleetRead T>
void compare_field(const std::vector<T>& fleet, const std::vector<T>& full, const Paths& at, ReadersAgreement& out) {
    if (fleet.size() != full.size()) {
        out.differences.push_back(fmt::format("{}: fleet {} elements full {}", at.exact, fleet.size(), full.size()));
        return;
    }
    for (size_t i = 0; i < full.size(); ++i) compare(fleet[i], full[i], at.element(i), out);
}

template <class T, auto... Member>
void compare_members(const T& fleet, const T& full, const Paths& at, ReadersAgreement& out, FieldList<Member...>) {
    (compare_field(fleet.*Member, full.*Member, at.member(snapshot_key<Member>), out), ...);
}
template <class T>
void compare(const T& fleet, const T& full, const Paths& at, ReadersAgreement& out) {
    compare_members(fleet, full, at, out, FleetFields<T>{});
}

// Every leaf FleetFields reaches, as ReadersAgreement::covered names them.
template <class T>
void leaves(const std::string& at, std::set<std::string>& out);

template <class T>
struct Shape {
    static void add(const std::string& at, std::set<std::string>& out) {
        if constexpr (FleetRead<T>) leaves<T>(at, out);
        else out.insert(at);
    }
};
template <FleetRead T>
struct Shape<std::optional<T>> {
    static void add(const std::string& at, std::set<std::string>& out) { leaves<T>(at, out); }
};
template <FleetRead T>
struct Shape<std::vector<T>> {
    static void add(const std::string& at, std::set<std::string>& out) { leaves<T>(at + "[]", out); }
};

template <class T, auto... Member>
void member_leaves(const std::string& at, std::set<std::string>& out, FieldList<Member...>) {
    auto join = [&](std::string_view key) { return at.empty() ? std::string(key) : at + "." + std::string(key); };
    (Shape<std::remove_cvref_t<decltype(std::declval<T>().*Member)>>::add(join(snapshot_key<Member>), out), ...);
}
template <class T>
void leaves(const std::string& at, std::set<std::string>& out) {
    member_leaves<T>(at, out, FleetFields<T>{});
}

}  // namespace agree_detail

// Reads `text` with both readers and compares every field the fleet reads.
inline ReadersAgreement compare_readers(std::string_view text) {
    ReadersAgreement out;
    auto fleet = read_fleet_fields(text);
    if (!fleet) out.fleet_error = fleet.error().message;
    auto j = nlohmann::json::parse(text, nullptr, false);
    Result<Snapshot> full = j.is_discarded() ? Result<Snapshot>(fail("not valid JSON")) : snapshot_from_json(j);
    if (!full) out.full_error = full.error().message;
    if (fleet && full) agree_detail::compare(*fleet, *full, {}, out);
    return out;
}

inline std::set<std::string> fleet_field_leaves() {
    std::set<std::string> out;
    agree_detail::leaves<Snapshot>("", out);
    return out;
}

}  // namespace gpudx::testdata

#pragma once
// A set of names declared once: an enum, its values in order and the word gpudx writes for each (in JSON, on the
// command line, in reports), in one table beside the enum:
//
//     enum class Verdict { healthy, degraded, unhealthy, unknown };
//     inline constexpr EnumName<Verdict> kVerdicts[] = {{Verdict::healthy, "healthy"}, ...};
//     constexpr std::span<const EnumName<Verdict>> enum_names(Verdict) { return kVerdicts; }
//
// or, where every name is the enumerator's own spelling, from one list macro (GPUDX_NAMED_ENUM below), which
// writes the enum and its table from the same list so neither can miss a value.
//
// Code compares values, so a misspelt name does not compile; the words appear only where text is written or read
// (name_of, parse_name), and a word no table declares is an error where it is read, never a value that silently
// matches nothing.
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace gpudx {

template <class E>
struct EnumName {
    E value;
    std::string_view name;
};

// An enum with a table: enum_names(E), found beside the enum, hands it out.
template <class E>
concept NamedEnum = std::is_enum_v<E> && requires(E e) {
    { enum_names(e) } -> std::convertible_to<std::span<const EnumName<E>>>;
};

template <NamedEnum E>
constexpr std::span<const EnumName<E>> names_of() {
    return enum_names(E{});
}

template <NamedEnum E>
constexpr std::string_view name_of(E value) {
    for (const auto& n : names_of<E>())
        if (n.value == value) return n.name;
    return "?";  // a value cast from outside the table
}

template <NamedEnum E>
constexpr std::optional<E> parse_name(std::string_view name) {
    for (const auto& n : names_of<E>())
        if (n.name == name) return n.value;
    return std::nullopt;
}

// Every name in the table's order: the choices of a command-line option (CLI::IsMember).
template <NamedEnum E>
std::vector<std::string> all_names() {
    std::vector<std::string> out;
    for (const auto& n : names_of<E>()) out.emplace_back(n.name);
    return out;
}

// The names for a message: "text, json, prom" with ", " between them, or "read, gone or denied" with last_sep
// " or " before the last.
template <NamedEnum E>
std::string names_listed(std::string_view last_sep = ", ") {
    std::string out;
    auto names = names_of<E>();
    for (size_t i = 0; i < names.size(); ++i) {
        if (i > 0) out += i + 1 == names.size() ? last_sep : std::string_view(", ");
        out += names[i].name;
    }
    return out;
}

// Every value in the table's order, as a constant array (GPUDX_NAMED_ENUM's enums: the table lists each once).
template <NamedEnum E, size_t N>
constexpr std::array<E, N> values_of(const EnumName<E> (&table)[N]) {
    std::array<E, N> out{};
    for (size_t i = 0; i < N; ++i) out[i] = table[i].value;
    return out;
}

}  // namespace gpudx

// GPUDX_NAMED_ENUM(Enum, LIST): LIST(X) applies X to each enumerator; makes `enum class Enum`, its table
// k<Enum>Names (each value under its own spelling) and the enum_names() that name_of and parse_name find.
#define GPUDX_NAMED_ENUM_ENUMERATOR(name) name,
#define GPUDX_NAMED_ENUM_ROW(name) {Enum_::name, #name},
#define GPUDX_NAMED_ENUM(Enum, LIST)                                                                   \
    enum class Enum : uint8_t { LIST(GPUDX_NAMED_ENUM_ENUMERATOR) };                                   \
    namespace named_enum_detail_##Enum {                                                               \
    using Enum_ = Enum;                                                                                \
    inline constexpr ::gpudx::EnumName<Enum> kNames[] = {LIST(GPUDX_NAMED_ENUM_ROW)};                 \
    }                                                                                                  \
    inline constexpr const auto& k##Enum##Names = named_enum_detail_##Enum::kNames;                    \
    constexpr std::span<const ::gpudx::EnumName<Enum>> enum_names(Enum) { return k##Enum##Names; }

#pragma once
// A set of names declared once. A list macro LIST(X) applies X to each enumerator; GPUDX_NAMED_ENUM(Enum, LIST)
// makes of it the enum, its names in order (enum_names<Enum>, each the enumerator's spelling) and, through the
// functions below, every value and the way back from a name. Code compares enumerators, so a misspelt name does
// not compile; the names are for the documents gpudx writes and reads.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace gpudx {

template <class Enum>
inline constexpr std::span<const std::string_view> enum_names{};

#define GPUDX_NAMED_ENUM_ENUMERATOR(name) name,
#define GPUDX_NAMED_ENUM_NAME(name) #name,
#define GPUDX_NAMED_ENUM(Enum, LIST)                                                          \
    enum class Enum : uint8_t { LIST(GPUDX_NAMED_ENUM_ENUMERATOR) };                          \
    inline constexpr std::string_view k##Enum##Names[] = {LIST(GPUDX_NAMED_ENUM_NAME)};       \
    template <>                                                                               \
    inline constexpr std::span<const std::string_view> enum_names<Enum> = k##Enum##Names;

template <class Enum>
constexpr std::string_view enum_name(Enum e) {
    return enum_names<Enum>[static_cast<size_t>(e)];
}

// Every value, in declaration order.
template <class Enum>
constexpr auto enum_values() {
    std::array<Enum, enum_names<Enum>.size()> all{};
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<Enum>(i);
    return all;
}

template <class Enum>
constexpr std::optional<Enum> parse_enum(std::string_view name) {
    for (size_t i = 0; i < enum_names<Enum>.size(); ++i)
        if (enum_names<Enum>[i] == name) return static_cast<Enum>(i);
    return std::nullopt;
}

}  // namespace gpudx

#pragma once
// Pure parsers behind collect_infiniband (collectors.hpp), exposed for unit tests.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpudx {

// A port's state or phys_state file: "4: ACTIVE" -> {4, "ACTIVE"}, "5: LinkUp" -> {5, "LinkUp"}; a word without
// a number keeps the word alone.
struct IbStateText {
    std::optional<uint32_t> code;
    std::string name;
};
IbStateText parse_ib_state(std::string_view text);
// A port's rate file: "400 Gb/sec (4X NDR)" -> 400, "2.5 Gb/sec (1X SDR)" -> 2.5; anything else -> nullopt.
std::optional<double> parse_ib_rate(std::string_view text);

}  // namespace gpudx

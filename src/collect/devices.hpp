#pragma once
// Pure parsers behind collect_devices (collectors.hpp), exposed for unit tests.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace gpudx {

// /etc/group: "name:password:gid:members" per line -> gid to name (first name wins for a gid); malformed lines skipped.
std::map<uint32_t, std::string> parse_etc_group(std::string_view text);

}  // namespace gpudx

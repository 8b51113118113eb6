#pragma once
// The dynamic loader's cache (/etc/ld.so.cache) read without glibc: both layouts ldconfig writes
// (the old "ld.so-1.7.0" table followed by the "glibc-ld.so.cache1.1" table, and the new table alone),
// and the text `ldconfig -p` prints, for captures that recorded only that.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace gpudx {

// Entry flags as glibc's ldconfig writes them (elf/cache.h).
inline constexpr int32_t kLdCacheFlagTypeMask = 0x00ff;
inline constexpr int32_t kLdCacheFlagElfLibc6 = 0x0003;
inline constexpr int32_t kLdCacheFlagRequiredMask = 0xff00;
inline constexpr int32_t kLdCacheFlagX8664Lib64 = 0x0300;
// hwcap bit marking an entry that lives in a glibc-hwcaps subdirectory (used only on matching CPUs).
inline constexpr uint64_t kLdCacheHwcapExtension = uint64_t{1} << 62;

struct LdCacheEntry {
    std::string name;  // the soname the loader looks up, e.g. libcuda.so.1
    std::string path;  // the file it maps to
    int32_t flags = 0;
    uint32_t osversion = 0;
    uint64_t hwcap = 0;
};

struct LdCache {
    // "glibc-ld.so.cache1.1", "ld.so-1.7.0", "ld.so-1.7.0+glibc-ld.so.cache1.1" or "ldconfig -p"
    std::string format;
    // File order, which is the loader's order of preference among entries of one name.
    std::vector<LdCacheEntry> entries;
    // Entries skipped for bad string offsets and the like; the rest of the cache still counts.
    std::vector<std::string> problems;
};

// Parses the bytes of an ld.so.cache. A header or table that does not fit the bytes is an error;
// a single entry whose strings are out of bounds is skipped and recorded in problems.
Result<LdCache> parse_ld_so_cache(std::string_view bytes);

// Parses `ldconfig -p` output: "\tNAME (libc6,x86-64[, hwcap: 0x...][, OS ABI: ...]) => PATH".
Result<LdCache> parse_ldconfig_p(std::string_view text);

// /etc/ld.so.conf: directories in order, and `include` patterns (relative ones are relative to the file's folder).
struct LdSoConf {
    std::vector<std::string> dirs;
    std::vector<std::string> includes;
};
LdSoConf parse_ld_so_conf(std::string_view text);

// Version carried by a library's resolved file name: ("libcuda.so.580.159.04", "libcuda.so.1") -> "580.159.04",
// ("libcudart.so.12.4.127", "libcudart.so.12") -> "12.4.127". A name that is only the soname gives "" unless
// keep_soname_version (libcudart.so.13 -> "13": for the runtime the soname carries the major version).
std::string library_version_from_name(std::string_view file_name, std::string_view soname, bool keep_soname_version);

// The soname of a library whose soname carries its major version: ("libcudart.so.12.4.127", "libcudart.so") ->
// "libcudart.so.12"; nullopt when the name is not the stem followed by a number.
std::optional<std::string> versioned_soname(std::string_view name, std::string_view stem);

// True for entries a 64-bit x86 process can load (libc6 type, x86-64 required flag).
bool ld_cache_entry_is_x86_64(int32_t flags);
// "libc6,x86-64" as `ldconfig -p` spells the flags.
std::string describe_ld_cache_flags(int32_t flags);

}  // namespace gpudx

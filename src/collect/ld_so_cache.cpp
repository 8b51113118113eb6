#include "collect/ld_so_cache.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <fmt/format.h>

#include "core/text.hpp"

namespace gpudx {
namespace {

// Layouts from glibc's sysdeps/generic/dl-cache.h.
constexpr std::string_view kOldMagic = "ld.so-1.7.0";               // char[11], then uint32 nlibs at 12
constexpr size_t kOldHeaderSize = 16;
constexpr size_t kOldEntrySize = 12;                                 // int32 flags, uint32 key, value
constexpr std::string_view kNewMagic = "glibc-ld.so.cache1.1";      // magic[17] + version[3]
constexpr size_t kNewHeaderSize = 48;
constexpr size_t kNewEntrySize = 24;                                 // + uint32 osversion, uint64 hwcap
constexpr size_t kNewAlign = 8;                                      // alignof(struct cache_file_new)
constexpr uint8_t kEndianMask = 3, kEndianUnset = 0, kEndianLittle = 2, kEndianBig = 3;
constexpr size_t kMaxStringBytes = 4096;

uint32_t load_u32(std::string_view b, size_t off) {
    uint32_t v;
    std::memcpy(&v, b.data() + off, sizeof v);
    return v;
}

uint64_t load_u64(std::string_view b, size_t off) {
    uint64_t v;
    std::memcpy(&v, b.data() + off, sizeof v);
    return v;
}

// A NUL-terminated string starting at base+offset, entirely inside the bytes.
std::optional<std::string> string_at(std::string_view b, size_t base, uint32_t offset) {
    uint64_t start = uint64_t{base} + offset;
    if (start >= b.size()) return std::nullopt;
    size_t limit = std::min<size_t>(b.size() - static_cast<size_t>(start), kMaxStringBytes);
    auto rest = b.substr(static_cast<size_t>(start), limit);
    auto nul = rest.find('\0');
    if (nul == std::string_view::npos || nul == 0) return std::nullopt;
    return sanitize_utf8(rest.substr(0, nul));
}

// Entries of one table; `strings_base` is where glibc counts string offsets from.
void read_entries(std::string_view b, size_t table, uint32_t count, size_t entry_size, size_t strings_base,
                  bool is_new, LdCache& out) {
    for (uint32_t i = 0; i < count; ++i) {
        size_t off = table + size_t{i} * entry_size;
        LdCacheEntry e;
        e.flags = static_cast<int32_t>(load_u32(b, off));
        uint32_t key = load_u32(b, off + 4), value = load_u32(b, off + 8);
        if (is_new) {
            e.osversion = load_u32(b, off + 12);
            e.hwcap = load_u64(b, off + 16);
        }
        auto name = string_at(b, strings_base, key);
        auto path = string_at(b, strings_base, value);
        if (!name || !path) {
            out.problems.push_back(fmt::format("entry {}: string offset out of bounds (key {}, value {}, cache {} bytes)",
                                               i, key, value, b.size()));
            continue;
        }
        e.name = std::move(*name);
        e.path = std::move(*path);
        out.entries.push_back(std::move(e));
    }
}

Result<LdCache> parse_new_table(std::string_view b, size_t base, LdCache out) {
    if (b.size() - base < kNewHeaderSize)
        return fail(fmt::format("ld.so.cache truncated: new-format header at {} needs {} bytes, {} left", base,
                                kNewHeaderSize, b.size() - base));
    uint32_t nlibs = load_u32(b, base + 20);
    uint8_t endian = static_cast<uint8_t>(b[base + 28]) & kEndianMask;
    if (endian == kEndianBig) return fail("ld.so.cache is big-endian: written for another machine");
    if (endian != kEndianUnset && endian != kEndianLittle)
        return fail(fmt::format("ld.so.cache has an invalid byte-order flag ({})", endian));
    uint64_t table_end = uint64_t{base} + kNewHeaderSize + uint64_t{nlibs} * kNewEntrySize;
    if (table_end > b.size())
        return fail(fmt::format("ld.so.cache truncated: {} entries need {} bytes, the file has {}", nlibs, table_end,
                                b.size()));
    read_entries(b, base + kNewHeaderSize, nlibs, kNewEntrySize, base, true, out);
    return out;
}

}  // namespace

bool ld_cache_entry_is_x86_64(int32_t flags) {
    return (flags & kLdCacheFlagTypeMask) == kLdCacheFlagElfLibc6 &&
           (flags & kLdCacheFlagRequiredMask) == kLdCacheFlagX8664Lib64;
}

std::string describe_ld_cache_flags(int32_t flags) {
    std::string s;
    switch (flags & kLdCacheFlagTypeMask) {
        case 0: s = "libc4"; break;
        case 1: s = "ELF"; break;
        case 2: s = "libc5"; break;
        case 3: s = "libc6"; break;
        default: s = fmt::format("unknown type {:#x}", flags & kLdCacheFlagTypeMask);
    }
    switch (flags & kLdCacheFlagRequiredMask) {
        case 0: break;
        case 0x0300: s += ",x86-64"; break;
        case 0x0800: s += ",x32"; break;
        case 0x0a00: s += ",AArch64"; break;
        default: s += fmt::format(",{:#06x}", flags & kLdCacheFlagRequiredMask);
    }
    return s;
}

Result<LdCache> parse_ld_so_cache(std::string_view b) {
    LdCache out;
    if (b.starts_with(kNewMagic)) {
        out.format = std::string(kNewMagic);
        return parse_new_table(b, 0, std::move(out));
    }
    if (!b.starts_with(kOldMagic))
        return fail(fmt::format("not an ld.so.cache: unknown magic ({} bytes)", b.size()));
    if (b.size() < kOldHeaderSize) return fail(fmt::format("ld.so.cache truncated: {} bytes", b.size()));
    uint32_t nlibs = load_u32(b, 12);
    uint64_t old_end = kOldHeaderSize + uint64_t{nlibs} * kOldEntrySize;
    if (old_end > b.size())
        return fail(fmt::format("ld.so.cache truncated: {} old-format entries need {} bytes, the file has {}", nlibs,
                                old_end, b.size()));
    // glibc prefers the new table when one follows the old one, aligned like struct cache_file_new.
    size_t new_base = static_cast<size_t>((old_end + kNewAlign - 1) & ~uint64_t{kNewAlign - 1});
    if (new_base < b.size() && b.substr(new_base).starts_with(kNewMagic)) {
        out.format = std::string(kOldMagic) + "+" + std::string(kNewMagic);
        return parse_new_table(b, new_base, std::move(out));
    }
    out.format = std::string(kOldMagic);
    read_entries(b, kOldHeaderSize, nlibs, kOldEntrySize, static_cast<size_t>(old_end), false, out);
    return out;
}

LdSoConf parse_ld_so_conf(std::string_view text) {
    LdSoConf conf;
    for (auto line : split_lines(text)) {
        if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
        line = trim(line);
        if (line.empty()) continue;
        if (line.starts_with("include") && line.size() > 7 && (line[7] == ' ' || line[7] == '\t')) {
            for (auto p : split_ws(line.substr(7))) conf.includes.emplace_back(p);
            continue;
        }
        if (line.starts_with("hwcap") && line.size() > 5 && (line[5] == ' ' || line[5] == '\t')) continue;
        // Old ldconfig accepted "DIR=TYPE" and several directories on a line.
        for (auto d : split_ws(line)) {
            for (auto part : split(d, ':')) {
                for (auto p : split(part, ',')) {
                    if (auto eq = p.find('='); eq != std::string_view::npos) p = p.substr(0, eq);
                    while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
                    if (!p.empty()) conf.dirs.emplace_back(p);
                }
            }
        }
    }
    return conf;
}

std::optional<std::string> versioned_soname(std::string_view name, std::string_view stem) {
    if (!name.starts_with(stem) || name.size() < stem.size() + 2 || name[stem.size()] != '.') return std::nullopt;
    auto rest = name.substr(stem.size() + 1);
    auto major = rest.substr(0, rest.find('.'));
    if (major.empty() || !parse_uint(major)) return std::nullopt;
    return std::string(stem) + "." + std::string(major);
}

std::string library_version_from_name(std::string_view file_name, std::string_view soname, bool keep_soname_version) {
    auto so = soname.find(".so");
    if (so == std::string_view::npos) return {};
    auto stem = soname.substr(0, so + 3);  // "libcuda.so"
    if (!file_name.starts_with(stem) || file_name.size() <= stem.size() + 1 || file_name[stem.size()] != '.')
        return {};
    auto version = file_name.substr(stem.size() + 1);
    for (char c : version)
        if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.')) return {};
    if (file_name == soname && !keep_soname_version) return {};
    return std::string(version);
}

Result<LdCache> parse_ldconfig_p(std::string_view text) {
    LdCache out;
    out.format = "ldconfig -p";
    bool saw_header = false;
    size_t lineno = 0;
    for (auto line : split_lines(text)) {
        ++lineno;
        auto t = trim(line);
        if (t.empty()) continue;
        if (t.find(" libs found in cache ") != std::string_view::npos) {
            saw_header = true;
            continue;
        }
        if (t.starts_with("Cache generated by")) continue;
        auto arrow = t.rfind(" => ");
        auto open = t.find(" (");
        auto close = arrow == std::string_view::npos ? arrow : t.rfind(')', arrow);
        if (arrow == std::string_view::npos || open == std::string_view::npos || close == std::string_view::npos ||
            close < open) {
            out.problems.push_back(fmt::format("line {}: not an ldconfig -p entry", lineno));
            continue;
        }
        LdCacheEntry e;
        e.name = std::string(trim(t.substr(0, open)));
        e.path = std::string(trim(t.substr(arrow + 4)));
        auto attrs = split(t.substr(open + 2, close - open - 2), ',');
        int32_t flags = -1;
        for (auto a : attrs) {
            a = trim(a);
            if (a == "libc6") flags = (flags < 0 ? 0 : flags & ~kLdCacheFlagTypeMask) | kLdCacheFlagElfLibc6;
            else if (a == "libc5") flags = (flags < 0 ? 0 : flags & ~kLdCacheFlagTypeMask) | 2;
            else if (a == "ELF") flags = (flags < 0 ? 0 : flags & ~kLdCacheFlagTypeMask) | 1;
            else if (a == "x86-64") flags = (flags < 0 ? 0 : flags) | kLdCacheFlagX8664Lib64;
            else if (a == "x32") flags = (flags < 0 ? 0 : flags) | 0x0800;
            else if (a == "AArch64") flags = (flags < 0 ? 0 : flags) | 0x0a00;
            else if (a.starts_with("hwcap:")) {
                if (auto h = parse_uint(trim(a.substr(6)), 0)) e.hwcap = *h;
            }
        }
        if (flags < 0 || e.name.empty() || e.path.empty()) {
            out.problems.push_back(fmt::format("line {}: not an ldconfig -p entry", lineno));
            continue;
        }
        e.flags = flags;
        out.entries.push_back(std::move(e));
    }
    if (!saw_header && out.entries.empty()) return fail("not ldconfig -p output: no header and no entries");
    return out;
}

}  // namespace gpudx

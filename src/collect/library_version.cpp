#include "collect/library_version.hpp"

#include <elf.h>

#include <array>
#include <cstring>
#include <optional>

#include "core/mapped_file.hpp"

namespace gpudx {
namespace {

constexpr size_t kMaxLibraryBytes = size_t{1} << 30;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "580.159.04" -> {580, 159, 4}; nullopt unless a driver version as driver_version_in_bytes defines it.
std::optional<std::array<unsigned, 3>> parse_driver_version(std::string_view s) {
    std::array<unsigned, 3> parts{};
    size_t n = 0, i = 0;
    while (i < s.size()) {
        size_t start = i;
        while (i < s.size() && is_digit(s[i])) ++i;
        size_t digits = i - start;
        if (digits == 0 || n == parts.size()) return std::nullopt;
        if (n == 0 ? digits != 3 : digits > 3) return std::nullopt;
        unsigned value = 0;
        for (size_t k = start; k < i; ++k) value = value * 10 + static_cast<unsigned>(s[k] - '0');
        parts[n++] = value;
        if (i == s.size()) break;
        if (s[i] != '.' || i + 1 == s.size()) return std::nullopt;
        ++i;
    }
    if (n < 2 || parts[0] < 300) return std::nullopt;
    return parts;
}


}  // namespace

std::string_view elf_rodata(std::string_view file) {
    Elf64_Ehdr eh;
    if (file.size() < sizeof eh) return file;
    std::memcpy(&eh, file.data(), sizeof eh);
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum)
        return file;
    auto section = [&](size_t i) -> std::optional<Elf64_Shdr> {
        uint64_t off = eh.e_shoff + i * sizeof(Elf64_Shdr);
        if (eh.e_shoff > file.size() || off > file.size() - sizeof(Elf64_Shdr)) return std::nullopt;
        Elf64_Shdr sh;
        std::memcpy(&sh, file.data() + off, sizeof sh);
        if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > file.size() || sh.sh_size > file.size() - sh.sh_offset))
            return std::nullopt;
        return sh;
    };
    auto names = section(eh.e_shstrndx);
    if (!names) return file;
    std::string_view strtab = file.substr(names->sh_offset, names->sh_size);
    constexpr std::string_view kRodata{".rodata\0", 8};
    for (size_t i = 0; i < eh.e_shnum; ++i) {
        auto sh = section(i);
        if (!sh) return file;
        if (sh->sh_name < strtab.size() && strtab.substr(sh->sh_name).starts_with(kRodata) && sh->sh_type == SHT_PROGBITS)
            return file.substr(sh->sh_offset, sh->sh_size);
    }
    return file;
}

std::string driver_version_in_bytes(std::string_view bytes) {
    std::optional<std::array<unsigned, 3>> best;
    std::string_view best_text;
    // Each dot is a candidate: the string around it runs from the NUL before to the NUL after.
    const char* begin = bytes.data();
    const char* end = begin + bytes.size();
    for (const char* dot = begin; (dot = static_cast<const char*>(std::memchr(dot, '.', end - dot))); ++dot) {
        if (dot - begin < 4 || !is_digit(dot[-1])) continue;
        const char* start = dot - 1;
        while (start > begin && is_digit(start[-1]) && dot - start < 4) --start;
        if (dot - start != 3 || start == begin || start[-1] != '\0') continue;
        const char* stop = dot + 1;
        while (stop < end && stop - start <= 11 && (is_digit(*stop) || *stop == '.')) ++stop;
        if (stop == end || *stop != '\0') continue;
        std::string_view text(start, static_cast<size_t>(stop - start));
        auto v = parse_driver_version(text);
        if (v && (!best || *v > *best)) {
            best = v;
            best_text = text;
        }
        dot = stop - 1;  // the rest of this string holds no version of its own
    }
    return std::string(best_text);
}

std::string driver_version_in_file(const Root& root, std::string_view path) {
    auto host = root.host_path(path);
    if (!host) return {};
    MappedFile file(*host, kMaxLibraryBytes);
    std::string version = driver_version_in_bytes(elf_rodata(file.bytes()));
    if (!version.empty()) root.note_excerpt(path, std::string(1, '\0') + version + '\0');
    return version;
}

}  // namespace gpudx

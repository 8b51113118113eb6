#include "collect/library_version.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

namespace gpudx {
namespace {

constexpr size_t kMaxLibraryBytes = size_t{1} << 30;

bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }

// "580.159.04" -> {580, 159, 4}; nullopt unless a driver version as driver_version_in_bytes defines it.
std::optional<std::array<unsigned, 3>> parse_driver_version(std::string_view s) {
    std::array<unsigned, 3> parts{};
    size_t n = 0, i = 0;
    while (i < s.size()) {
        size_t start = i;
        while (i < s.size() && is_ascii_digit(s[i])) ++i;
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

// Which file this is, as long as nobody rewrites it: a changed file gets a new device, inode, size or mtime.
using FileIdentity = std::tuple<uint64_t, uint64_t, uint64_t, int64_t, int64_t>;

// The best of two candidates: the higher driver version.
void keep_highest(std::string candidate, std::string& best) {
    if (candidate.empty()) return;
    if (best.empty() || *parse_driver_version(candidate) > *parse_driver_version(best)) best = std::move(candidate);
}

// A file read by offset, never mapped: a library truncated while gpudx reads it gives short reads, not SIGBUS.
class FileReader {
public:
    explicit FileReader(const std::filesystem::path& path)
        : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) {
        struct stat st;
        if (fd_ >= 0 && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) {
            size_ = static_cast<uint64_t>(st.st_size);
            identity_ = {st.st_dev, st.st_ino, size_, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
        }
    }
    ~FileReader() {
        if (fd_ >= 0) ::close(fd_);
    }
    FileReader(const FileReader&) = delete;
    FileReader& operator=(const FileReader&) = delete;
    uint64_t size() const { return size_; }
    const FileIdentity& identity() const { return identity_; }
    // Up to n bytes at offset (fewer at the end of the file or on an error).
    std::string read_at(uint64_t offset, size_t n) const {
        std::string out(n, '\0');
        size_t got = 0;
        while (got < n) {
            ssize_t k = ::pread(fd_, out.data() + got, n - got, static_cast<off_t>(offset + got));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;
            got += static_cast<size_t>(k);
        }
        out.resize(got);
        return out;
    }

private:
    int fd_;
    uint64_t size_ = 0;
    FileIdentity identity_{};
};

// Versions already read, by file: one run reads the same copy for the process's mappings and for its loader's
// view, and the agent reads it at every interval. A few entries are all a node has.
class VersionCache {
public:
    std::optional<std::string> find(const FileIdentity& k) {
        std::lock_guard lock(mu_);
        auto it = versions_.find(k);
        return it == versions_.end() ? std::nullopt : std::optional<std::string>(it->second);
    }
    void add(const FileIdentity& k, const std::string& version) {
        std::lock_guard lock(mu_);
        if (versions_.size() >= 64) versions_.clear();
        versions_[k] = version;
    }

private:
    std::mutex mu_;
    std::map<FileIdentity, std::string> versions_;
};

VersionCache& version_cache() {
    static VersionCache cache;
    return cache;
}

}  // namespace

std::optional<FileRange> elf_rodata_range(uint64_t file_size, const ReadAt& read_at) {
    Elf64_Ehdr eh;
    std::string head = read_at(0, sizeof eh);
    if (head.size() < sizeof eh) return std::nullopt;
    std::memcpy(&eh, head.data(), sizeof eh);
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum || eh.e_shoff > file_size ||
        uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > file_size - eh.e_shoff)
        return std::nullopt;
    std::string table = read_at(eh.e_shoff, size_t{eh.e_shnum} * sizeof(Elf64_Shdr));
    if (table.size() != size_t{eh.e_shnum} * sizeof(Elf64_Shdr)) return std::nullopt;
    auto section = [&](size_t i) {
        Elf64_Shdr sh;
        std::memcpy(&sh, table.data() + i * sizeof sh, sizeof sh);
        return sh;
    };
    auto inside = [&](const Elf64_Shdr& sh) { return sh.sh_offset <= file_size && sh.sh_size <= file_size - sh.sh_offset; };
    Elf64_Shdr names = section(eh.e_shstrndx);
    if (!inside(names) || names.sh_size > (1u << 20)) return std::nullopt;
    std::string strtab = read_at(names.sh_offset, names.sh_size);
    constexpr std::string_view kRodata{".rodata\0", 8};
    for (size_t i = 0; i < eh.e_shnum; ++i) {
        Elf64_Shdr sh = section(i);
        if (sh.sh_type != SHT_PROGBITS || sh.sh_name >= strtab.size() || !inside(sh)) continue;
        if (std::string_view(strtab).substr(sh.sh_name).starts_with(kRodata)) return FileRange{sh.sh_offset, sh.sh_size};
    }
    return std::nullopt;
}

std::string_view elf_rodata(std::string_view file) {
    auto range = elf_rodata_range(file.size(), [&](uint64_t offset, size_t n) {
        return offset > file.size() ? std::string() : std::string(file.substr(offset, n));
    });
    return range ? file.substr(range->offset, range->size) : file;
}

std::string driver_version_in_bytes(std::string_view bytes) {
    std::optional<std::array<unsigned, 3>> best;
    std::string_view best_text;
    // Each dot is a candidate: the string around it runs from the NUL before to the NUL after.
    const char* begin = bytes.data();
    const char* end = begin + bytes.size();
    for (const char* dot = begin; (dot = static_cast<const char*>(std::memchr(dot, '.', end - dot))); ++dot) {
        if (dot - begin < 4 || !is_ascii_digit(dot[-1])) continue;
        const char* start = dot - 1;
        while (start > begin && is_ascii_digit(start[-1]) && dot - start < 4) --start;
        if (dot - start != 3 || start == begin || start[-1] != '\0') continue;
        const char* stop = dot + 1;
        while (stop < end && stop - start <= 11 && (is_ascii_digit(*stop) || *stop == '.')) ++stop;
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
    FileReader file(*host);
    if (file.size() == 0 || file.size() > kMaxLibraryBytes) return {};
    auto note = [&](const std::string& version) {
        if (!version.empty()) root.note_excerpt(path, std::string(1, '\0') + version + '\0');
        return version;
    };
    if (auto known = version_cache().find(file.identity())) return note(*known);
    auto range = elf_rodata_range(file.size(), [&](uint64_t offset, size_t n) { return file.read_at(offset, n); });
    FileRange scan = range.value_or(FileRange{0, file.size()});
    // In chunks, each starting with the last bytes of the one before: a version string (13 bytes with its NULs)
    // that straddles two chunks is whole in the second.
    constexpr size_t kChunk = 1 << 20, kCarry = 16;
    std::string best, carry;
    for (uint64_t offset = scan.offset; offset < scan.offset + scan.size; offset += kChunk) {
        std::string chunk = carry + file.read_at(offset, std::min<uint64_t>(kChunk, scan.offset + scan.size - offset));
        if (chunk.size() <= carry.size()) break;  // the file shrank under us
        keep_highest(driver_version_in_bytes(chunk), best);
        carry = chunk.substr(chunk.size() - std::min(kCarry, chunk.size()));
    }
    version_cache().add(file.identity(), best);
    return note(best);
}

}  // namespace gpudx

#pragma once
// What the checkpoint stand-ins (libcuda.so.1, libnvidia-ml.so.1) read from the environment. Header-only,
// so each stand-in carries its own copy and neither depends on libgpudx.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abi/cuda.hpp"

namespace standin {

struct Gpu {
    std::string uuid_text;  // "GPU-…"
    gpudx::CUuuid uuid{};
    std::string pci;        // "0000:00:06.0"
    std::string model;
    unsigned long long free = 0, total = 0;
};

inline std::vector<std::string> split(std::string_view s, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        size_t end = s.find(sep, start);
        if (end == std::string_view::npos) end = s.size();
        out.emplace_back(s.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

inline bool parse_uuid(std::string_view text, gpudx::CUuuid& out) {
    if (text.substr(0, 4) == "GPU-") text.remove_prefix(4);
    std::string hex;
    for (char c : text)
        if (c != '-') hex.push_back(c);
    if (hex.size() != 32) return false;
    for (size_t i = 0; i < 16; ++i) out.bytes[i] = static_cast<char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
    return true;
}

// Default: the two H200s of tests/fixtures/h200x2, 143156 MiB free of 143771 MiB.
inline const std::vector<Gpu>& gpus() {
    static const std::vector<Gpu> node = [] {
        const char* spec = std::getenv("GPUDX_CKPT_GPUS");
        std::string text = spec ? spec
                                : "GPU-992cb470-9027-88f4-48a9-a9a329d6978d|0000:00:06.0|NVIDIA H200|150110011392|150755000320;"
                                  "GPU-40cd403d-66ba-4608-72b9-5be5031085dc|0000:00:07.0|NVIDIA H200|150110011392|150755000320";
        std::vector<Gpu> out;
        for (const auto& item : split(text, ';')) {
            auto f = split(item, '|');
            if (f.size() < 5) continue;
            Gpu g;
            g.uuid_text = f[0];
            if (!parse_uuid(f[0], g.uuid)) continue;
            g.pci = f[1];
            g.model = f[2];
            g.free = std::stoull(f[3]);
            g.total = std::stoull(f[4]);
            out.push_back(g);
        }
        return out;
    }();
    return node;
}

inline void log_line(const std::string& line) {
    const char* path = std::getenv("GPUDX_CKPT_LOG");
    if (!path) return;
    int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    std::string text = line + "\n";
    ssize_t ignored = ::write(fd, text.data(), text.size());
    (void)ignored;
    ::close(fd);
}

// "STEP" or "STEP@PID" matches this call.
inline bool matches(std::string_view rule, const char* step, int pid) {
    auto at = rule.find('@');
    if (rule.substr(0, at) != step) return false;
    return at == std::string_view::npos || std::string(rule.substr(at + 1)) == std::to_string(pid);
}

inline std::optional<int> injected_failure(const char* step, int pid) {
    const char* spec = std::getenv("GPUDX_CKPT_FAIL");
    if (!spec) return std::nullopt;
    for (const auto& rule : split(spec, ',')) {
        auto colon = rule.rfind(':');
        if (colon == std::string::npos) continue;
        if (matches(std::string_view(rule).substr(0, colon), step, pid)) return std::atoi(rule.c_str() + colon + 1);
    }
    return std::nullopt;
}

inline bool rule_listed(const char* variable, const char* step, int pid) {
    const char* spec = std::getenv(variable);
    if (!spec) return false;
    for (const auto& rule : split(spec, ','))
        if (matches(rule, step, pid)) return true;
    return false;
}

inline bool crash_requested(const char* step, int pid) { return rule_listed("GPUDX_CKPT_CRASH", step, pid); }

inline bool hang_requested(const char* step, int pid) {
    const char* spec = std::getenv("GPUDX_CKPT_HANG");
    if (!spec) return false;
    for (const auto& rule : split(spec, ','))
        if (matches(rule, step, pid)) return true;
    return false;
}

}  // namespace standin

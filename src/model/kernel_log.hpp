#pragma once
#include <optional>
#include <string>
#include <vector>

namespace gpudx {

enum class KernelLogFormat { kmsg, dmesg, dmesg_t, journal_short, journal_iso, syslog, unknown };

// A kept line: about NVRM, Xid, amdgpu, kfd, IOMMU, AER, pcie, lockdown or module signatures.
struct KernelLogLine {
    std::optional<double> monotonic_s;  // seconds since boot when the format carries it
    std::string wall_time;              // as written, when the format carries it
    std::string text;                   // message without the time prefix
    std::string topic;                  // nvrm, xid, amdgpu, kfd, iommu, aer, pcie, lockdown, signature
};

struct XidEvent {
    std::string pci;  // normalised address from the line
    int code = 0;
    std::optional<int> pid;
    std::string process;
    std::string text;
    std::optional<double> monotonic_s;
    std::string wall_time;
};

struct KernelLog {
    std::string source;  // /dev/kmsg or the file read
    KernelLogFormat format = KernelLogFormat::unknown;
    uint64_t lines_read = 0;
    uint64_t lines_skipped = 0;  // unparseable or oversized
    std::vector<KernelLogLine> lines;
    std::vector<XidEvent> xids;
};

}  // namespace gpudx

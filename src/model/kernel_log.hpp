#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpudx {

enum class KernelLogFormat { kmsg, dmesg, dmesg_t, journal_short, journal_iso, syslog, unknown };

// A kept line: about NVRM, Xid, amdgpu, kfd, IOMMU, AER, pcie, lockdown or module signatures.
struct KernelLogLine {
    std::optional<double> monotonic_s;  // seconds since boot when the format carries it
    std::string wall_time;              // as written, when the format carries it
    std::string text;                   // message without the time prefix (invalid UTF-8 replaced)
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
    // wall_time as nominal seconds (a journal's "Nov 30 06:28:08" read in the current year), for time windows
    // between events; nullopt when the format carries no wall time.
    std::optional<int64_t> wall_s;
    std::optional<int> gpu_instance;  // MIG GPU instance from "(PCI:... GPU-I:05)"
};

// Every occurrence of one kind of event on one device, counted over the whole window even when the kept
// lines and Xid events are capped, so an Xid storm is counted exactly.
struct KernelLogTally {
    // xid, fallen_off_bus, aer_corrected, aer_nonfatal, aer_fatal, iommu_fault, module_refused, module_unsigned,
    // sxid_fatal, sxid_nonfatal, sxid_detail, sxid_unstated (code: the SXid; module: the switch's device name)
    std::string kind;
    std::string device;  // normalised PCI address the line names, empty when none
    std::string module;  // module the line names (module_* kinds), empty when none
    int code = 0;        // Xid or SXid code; 0 for other kinds
    uint64_t count = 0;
    std::optional<double> first_monotonic_s, last_monotonic_s;
    std::string first_wall_time, last_wall_time;
    std::string first_text, last_text;
    std::vector<std::string> processes;  // Xid: distinct process names seen, at most 8
};

struct KernelLog {
    std::string source;  // /dev/kmsg or the file read
    KernelLogFormat format = KernelLogFormat::unknown;
    uint64_t lines_read = 0;
    uint64_t lines_skipped = 0;   // longer than 64 KiB
    uint64_t lines_dropped = 0;   // kept-topic lines from earlier boots or before --since
    uint64_t boots_seen = 1;      // boots found in the log; only the last is kept unless --since says otherwise
    std::string window;           // "current boot" or "since <TIME>"
    uint64_t lines_over_cap = 0;  // oldest kept lines left out to bound memory (tallies still count them)
    std::vector<KernelLogLine> lines;
    std::vector<XidEvent> xids;
    std::vector<KernelLogTally> tallies;
};

}  // namespace gpudx

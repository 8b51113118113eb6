#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/named_enum.hpp"

namespace gpudx {

enum class KernelLogFormat { kmsg, dmesg, dmesg_t, journal_short, journal_iso, syslog, unknown };

// What a kept line is about (collect/kernel_log_parse.hpp's classify_topic), under the names the snapshot writes.
// catalogue: a line kept only for a word of the signature catalogue. other: a topic this gpudx does not know,
// read from another version's snapshot.
#define GPUDX_LOG_TOPICS(X)                                                                                 \
    X(xid) X(sxid) X(nvrm) X(amdgpu) X(kfd) X(aer) X(iommu) X(signature) X(lockdown) X(pcie) X(catalogue) \
    X(other)
GPUDX_NAMED_ENUM(LogTopic, GPUDX_LOG_TOPICS)

// What an event of the log counts as, one tally per kind and device, under the names the snapshot writes. other: a
// kind this gpudx does not know, read from another version's snapshot.
#define GPUDX_LOG_TALLY_KINDS(X)                                                                              \
    X(xid) X(fallen_off_bus) X(aer_corrected) X(aer_nonfatal) X(aer_fatal) X(iommu_fault) X(module_refused) \
    X(module_unsigned) X(sxid_fatal) X(sxid_nonfatal) X(sxid_detail) X(sxid_unstated) X(other)
GPUDX_NAMED_ENUM(TallyKind, GPUDX_LOG_TALLY_KINDS)

// The NVSwitch kinds: one SXid report, by the severity its line states (sxid_detail: a report's later lines).
constexpr bool is_sxid(TallyKind k) {
    return k == TallyKind::sxid_fatal || k == TallyKind::sxid_nonfatal || k == TallyKind::sxid_detail ||
           k == TallyKind::sxid_unstated;
}

// A kept line: about NVRM, Xid, amdgpu, kfd, IOMMU, AER, pcie, lockdown or module signatures.
struct KernelLogLine {
    std::optional<double> monotonic_s;  // seconds since boot when the format carries it
    std::string wall_time;              // as written, when the format carries it
    std::string text;                   // message without the time prefix (invalid UTF-8 replaced)
    LogTopic topic = LogTopic::other;
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
    // sxid_*: code is the SXid, module the switch's device name
    TallyKind kind = TallyKind::other;
    std::string device;  // normalised PCI address the line names, empty when none
    std::string module;  // module the line names (module_* kinds); for an NVLink 5 Xid (144-150) the unit, fatality
                         // and link it is counted by ("RLW_RXPIPE Nonfatal Link 11"); empty when none
    int code = 0;        // Xid or SXid code; 0 for other kinds
    uint64_t count = 0;
    std::optional<double> first_monotonic_s, last_monotonic_s;
    std::string first_wall_time, last_wall_time;
    std::string first_text, last_text;
    std::vector<std::string> processes;  // Xid: distinct process names seen, at most 8
    std::vector<int> links;  // SXid: distinct switch links (ports) its lines name, ascending, at most 64
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

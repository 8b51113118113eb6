#pragma once
// Pure kernel-log parsing: the line formats (raw kmsg, dmesg, dmesg -T, journalctl -k short and
// short-iso, syslog kern.log), the topics gpudx keeps, Xid lines, and a scanner fast enough for a
// multi-gigabyte log (docs/kernel-log.md). No I/O here: the collector reads and feeds the bytes.
// One file per section under collect/kernel_log/: line_formats.cpp, events.cpp, since.cpp (--since),
// prefilter.cpp (the SIMD prefilter) and scanner.cpp.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/nvlink_xid.hpp"
#include "model/kernel_log.hpp"

namespace gpudx {

const char* to_string(KernelLogFormat f);

// The prefix of one line split off according to a format.
struct ParsedLogLine {
    bool recognised = false;    // the line has this format's prefix
    bool from_kernel = true;    // false: a journal/syslog line written by another program
    bool continuation = false;  // kmsg dictionary line (" SUBSYSTEM=pci"): metadata, not a message
    std::optional<double> monotonic_s;
    std::string_view wall_time;
    std::string_view message;
};

ParsedLogLine parse_log_line(std::string_view line, KernelLogFormat format);
// The sequence number of a /dev/kmsg record "PRIO,SEQ,USEC,FLAGS;message" (it counts every record the kernel
// logged since boot), or nullopt when the record has no "PRIO,SEQ," prefix.
std::optional<uint64_t> kmsg_sequence(std::string_view record);
// The format whose prefix this one line has, or unknown.
KernelLogFormat detect_line_format(std::string_view line);
// The format most of the first lines of a log have, or unknown (the caller says which are accepted).
KernelLogFormat detect_log_format(std::string_view head);

// The topic gpudx keeps a message for (every LogTopic but catalogue, which is a line kept only for a catalogue
// word, and other), or nullopt when the message is about none of them.
std::optional<LogTopic> classify_topic(std::string_view message);

// "NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus." and the older
// forms (no PCI: prefix, no pid/name, pid='<unknown>', "GPU-I:05" for a MIG instance).
std::optional<XidEvent> parse_xid(std::string_view message);

// What a kept message counts as (a tally kind) beyond its topic, with the device or module it names.
struct LogEventKind {
    TallyKind kind = TallyKind::other;  // any but xid (parse_xid) and other
    std::string device;  // normalised PCI address, empty when the line names none
    std::string module;  // module_*: the module the line names; sxid_*: the switch's device name (nvidia-nvswitch3)
    int code = 0;        // sxid_*: the SXid code
};
std::vector<LogEventKind> classify_events(std::string_view message);

// "nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 46 egress non-posted PRIV error (First)": kind
// sxid_fatal, sxid_nonfatal, sxid_detail (the report's "Severity N ..." and "Data {...}" lines) or sxid_unstated
// (a report line that names no severity), device the switch's PCI address, module its device name.
std::optional<LogEventKind> parse_sxid(std::string_view message);

// The first PCI address written in a message ("nvidia 0000:21:00.0: ...", "GPU 0000:3b:00.0", "device=c1:00.0").
std::optional<std::string> find_pci_address(std::string_view message);

// --since: seconds since boot ("3600", "12.5"), or a wall time as logs write it ("2026-11-30T06:28:08+0000",
// "2026-11-30 06:28:08", "Mon Nov 30 06:28:08 2026", "Nov 30 06:28:08").
struct SinceSpec {
    std::optional<double> monotonic_s;
    std::optional<int64_t> wall_s;  // nominal seconds (see parse_wall_time)
    int year = 0;                   // the year it names, or this year for the short form; lines without one take it
};
Result<SinceSpec> parse_since(std::string_view text);
// Seconds on a nominal UTC scale for the wall-time forms above; an offset is applied when written.
// A form without a year (journal short) takes default_year.
std::optional<int64_t> parse_wall_time(std::string_view text, int default_year);

// The block scanner checks line lengths once per 64-byte vector, so a limit below that would count lines
// differently depending on how the bytes arrive.
inline constexpr size_t kMinMaxLineBytes = 64;

struct KernelLogScanOptions {
    std::string since;  // empty: the current (last) boot only
    size_t max_line_bytes = 64 * 1024;  // at least kMinMaxLineBytes (smaller values are raised to it)
    size_t max_kept_lines = 10000;  // the most recent are kept; tallies count everything
    size_t max_kept_xids = 10000;
    // Literal words (any case) whose lines are kept too, with topic catalogue, from any program of a journal:
    // the signature catalogue's anchors (rules/reference/signatures.hpp), passed in by the caller.
    std::vector<std::string> extra_words;
    bool every_boot = false;  // pasted text (`gpudx explain`): no boot is history
    // Set: each kept line goes here as it is read, in order, instead of into KernelLog::lines (`gpudx explain`
    // streams its text through the rules and keeps none of it). Only with every_boot: a later boot would take
    // back lines already handed on. The tallies still count every event.
    std::function<void(KernelLogLine&&)> line_sink;
};

// Every word whose lines the scanner keeps, any case: the parser's own topics and `extra_words`. A line holding
// none of them is counted and never parsed (`gpudx explain --list --format json` lists them as kernel_log_words).
std::vector<std::string> kernel_log_scanner_words(const std::vector<std::string>& extra_words);

// Streams a log through a prefilter that finds candidate lines in the whole buffer (SIMD where the CPU has
// it) and parses only those. Feed bytes in any chunking; finish() returns the layer.
class KernelLogScanner {
public:
    explicit KernelLogScanner(KernelLogScanOptions options = {});
    ~KernelLogScanner();
    KernelLogScanner(const KernelLogScanner&) = delete;
    KernelLogScanner& operator=(const KernelLogScanner&) = delete;

    // Fixes the format (kmsg for /dev/kmsg) instead of detecting it from the first lines.
    void set_format(KernelLogFormat format);
    void feed(std::string_view bytes);
    // A log in no known format is still read line by line (times unknown; a note says so). `source` names
    // the input.
    Result<KernelLog> finish(std::string source);
    // Notes for the collector status (an unusable --since, oversized lines).
    const std::vector<std::string>& notes() const;

private:
    struct State;
    std::unique_ptr<State> state_;
};

Result<KernelLog> scan_kernel_log(std::string_view text, const KernelLogScanOptions& options = {},
                                  std::string source = "<text>");

}  // namespace gpudx

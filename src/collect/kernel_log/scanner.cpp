// The scanner: streams a log through the prefilter (prefilter.hpp), parses the candidate lines it finds
// (line_formats.cpp, events.cpp), keeps the lines and Xid events of the window (--since, since.cpp; else the
// current boot), and tallies every event. Bytes may arrive in any chunking: a line cut between two feeds is
// carried over, and one longer than the limit is counted and skipped.
#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "collect/kernel_log/lexing.hpp"
#include "collect/kernel_log/prefilter.hpp"
#include "collect/kernel_log/prefilter_image.hpp"
#include "collect/kernel_log_parse.hpp"
#include "core/text.hpp"

namespace gpudx {

using namespace kernel_log_lexing;

namespace {

constexpr size_t kDetectBytes = 64 * 1024;
constexpr size_t kMaxProcesses = 8;
constexpr size_t kMaxLinks = 64;  // an NVSwitch has at most 64 NVLink ports

}  // namespace

struct KernelLogScanner::State {
    using Prefilter = kernel_log_prefilter::Prefilter;
    using ScanTotals = kernel_log_prefilter::ScanTotals;
    using LineRange = kernel_log_prefilter::LineRange;

    KernelLogScanOptions options;
    kernel_log_prefilter::BlockScanner block_scanner = kernel_log_prefilter::pick_block_scanner();
    std::unique_ptr<Prefilter> prefilter;
    WordSetCi extra_words;
    std::optional<SinceSpec> since;
    KernelLogFormat format = KernelLogFormat::unknown;
    bool detecting = true;
    std::string head;       // bytes kept until the format is known
    std::string carry;      // a line not yet ended by a newline
    bool carry_oversized = false;
    int64_t carry_start = 0;
    int64_t offset = 0;  // absolute offset of the next byte
    ScanTotals totals;
    std::vector<LineRange> hits;
    KernelLog log;
    size_t oldest_line = 0, oldest_xid = 0;  // where the next kept line and Xid event go once the caps are reached
    std::map<std::tuple<TallyKind, std::string, std::string, int>, size_t> tally_index;
    std::optional<double> last_monotonic;
    uint64_t lines_this_boot = 0;
    bool boot_has_lines = false;
    bool warned_since_monotonic = false, warned_since_wall = false;
    std::vector<std::string> notes;

    void scan_block(const char* p, size_t n, int64_t base) {
        hits.clear();
        block_scanner(*prefilter, p, n, base, options.max_line_bytes, totals, hits);
        for (auto& h : hits) {
            if (h.end - h.begin > options.max_line_bytes) continue;  // counted by the block scanner
            process_line(std::string_view(p + h.begin, h.end - h.begin));
        }
    }

    void process(std::string_view data) {
        if (data.empty()) return;
        size_t pos = 0;
        if (!carry.empty() || carry_oversized) {
            const void* nl = std::memchr(data.data(), '\n', data.size());
            if (!nl) {
                append_carry(data);
                offset += static_cast<int64_t>(data.size());
                return;
            }
            size_t k = static_cast<size_t>(static_cast<const char*>(nl) - data.data());
            if (carry_oversized) {
                ++totals.oversized;
                ++totals.newlines;
                totals.last_newline = offset + static_cast<int64_t>(k);
                carry_oversized = false;
            } else {
                carry.append(data.substr(0, k + 1));
                if (carry.size() - 1 > options.max_line_bytes) {
                    ++totals.oversized;
                    ++totals.newlines;
                    totals.last_newline = offset + static_cast<int64_t>(k);
                } else {
                    scan_block(carry.data(), carry.size(), carry_start);
                }
            }
            carry.clear();
            pos = k + 1;
        }
        const void* last = pos < data.size() ? memrchr(data.data() + pos, '\n', data.size() - pos) : nullptr;
        size_t end = last ? static_cast<size_t>(static_cast<const char*>(last) - data.data()) + 1 : pos;
        if (end > pos) scan_block(data.data() + pos, end - pos, offset + static_cast<int64_t>(pos));
        carry_start = offset + static_cast<int64_t>(end);
        append_carry(data.substr(end));
        offset += static_cast<int64_t>(data.size());
    }

    void append_carry(std::string_view tail) {
        if (tail.empty()) return;
        if (carry_oversized) return;
        if (carry.size() + tail.size() > options.max_line_bytes + 1) {
            carry.clear();
            carry.shrink_to_fit();
            carry_oversized = true;
            return;
        }
        carry.append(tail);
    }

    // The format, read from the log's first bytes (kDetectBytes of them).
    void detect_format(std::string_view first_bytes) {
        detecting = false;
        format = detect_log_format(first_bytes.substr(0, kDetectBytes));
        // Text pasted from a terminal, `journalctl -o cat`, lines whose time was cut off: a line gpudx
        // cannot date is still a line, so each one is tried against every format and else read whole.
        if (format == KernelLogFormat::unknown && !trim(first_bytes).empty())
            notes.push_back("no known time prefix on most lines: every line is read, its time left unknown");
    }

    void start_detection_if_ready(bool at_end) {
        if (!detecting) return;
        if (!at_end && head.size() < kDetectBytes) return;
        detect_format(head);
        std::string buffered;
        buffered.swap(head);
        process(buffered);
    }

    void new_boot() {
        if (!boot_has_lines || options.every_boot) return;
        ++log.boots_seen;
        boot_has_lines = false;
        last_monotonic.reset();
        if (since && since->wall_s) return;  // a wall-time window spans boots
        log.lines_dropped += lines_this_boot;
        lines_this_boot = 0;
        log.lines.clear();
        log.xids.clear();
        oldest_line = oldest_xid = 0;
        log.tallies.clear();
        log.lines_over_cap = 0;
        tally_index.clear();
    }

    KernelLogTally& tally(TallyKind kind, const std::string& device, const std::string& module, int code,
                          const ParsedLogLine& pl, const std::string& text, const std::string& process) {
        auto key = std::make_tuple(kind, device, module, code);
        auto [it, inserted] = tally_index.try_emplace(key, log.tallies.size());
        if (inserted) {
            KernelLogTally t;
            t.kind = kind;
            t.device = device;
            t.module = module;
            t.code = code;
            t.first_monotonic_s = pl.monotonic_s;
            t.first_wall_time = std::string(pl.wall_time);
            t.first_text = text;
            log.tallies.push_back(std::move(t));
        }
        auto& t = log.tallies[it->second];
        ++t.count;
        t.last_monotonic_s = pl.monotonic_s;
        t.last_wall_time = std::string(pl.wall_time);
        t.last_text = text;
        if (!process.empty() && t.processes.size() < kMaxProcesses &&
            std::find(t.processes.begin(), t.processes.end(), process) == t.processes.end())
            t.processes.push_back(process);
        return t;
    }

    bool outside_window(const ParsedLogLine& pl) {
        if (!since) return false;
        if (since->monotonic_s) {
            if (!pl.monotonic_s) {
                if (!warned_since_monotonic)
                    notes.push_back("--since in seconds since boot needs a log with monotonic times; this one has "
                                    "wall times only, so the current boot is kept");
                warned_since_monotonic = true;
                return false;
            }
            return *pl.monotonic_s < *since->monotonic_s;
        }
        if (pl.wall_time.empty()) {
            if (!warned_since_wall)
                notes.push_back("--since as a wall time needs a log with wall times (dmesg -T, journalctl, syslog); "
                                "this one counts seconds since boot, so the current boot is kept");
            warned_since_wall = true;
            return false;
        }
        auto t = parse_wall_time(pl.wall_time, since->year);
        return t && *t < *since->wall_s;
    }

    void process_line(std::string_view line) {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        ParsedLogLine pl = parse_log_line(line, format);
        if (!pl.recognised) {
            if (line.starts_with("-- ")) {  // journalctl separators
                if (line.starts_with("-- Boot ") || line.starts_with("-- Reboot --")) new_boot();
                return;
            }
            if (auto f = detect_line_format(line); f != KernelLogFormat::unknown) pl = parse_log_line(line, f);
            if (!pl.recognised) pl.message = line;  // an unprefixed line in a saved log still counts
        }
        if (pl.continuation) return;
        if (!pl.from_kernel) {
            // Another program's line in a journal is kept only for a catalogue word ("modprobe: ERROR: could
            // not insert 'nvidia'" from a display manager, nv-fabricmanager failing).
            if (holds_extra_word(pl.message)) keep_catalogue_line(pl, sanitize_utf8(pl.message));
            return;
        }
        if (pl.message.starts_with("Linux version ")) {
            new_boot();
            if (pl.monotonic_s) last_monotonic = pl.monotonic_s;
            return;
        }
        if (pl.monotonic_s) {
            // dmesg times from different CPUs interleave a little; a restart goes back much further.
            if (last_monotonic && *pl.monotonic_s + 1.0 < *last_monotonic) new_boot();
            last_monotonic = pl.monotonic_s;
        }
        const MessageReading& m = read_message(pl.message);
        if (!m.topic) {
            if (m.extra_word) keep_catalogue_line(pl, m.text);
            return;
        }
        auto admitted = admit(pl, *m.topic, m.text);
        if (!admitted) return;
        KernelLogLine& kept = *admitted;
        if (m.xid) {
            XidEvent ev = *m.xid;
            ev.monotonic_s = pl.monotonic_s;
            ev.wall_time = kept.wall_time;
            if (!kept.wall_time.empty()) ev.wall_s = parse_wall_time(kept.wall_time, current_utc_year());
            tally(TallyKind::xid, ev.pci, m.xid_detail, ev.code, pl, kept.text, ev.process);
            keep_newest(log.xids, oldest_xid, std::move(ev), options.max_kept_xids, nullptr);
        }
        for (size_t k = 0; k < m.events.size(); ++k) {
            const LogEventKind& e = m.events[k];
            auto& t = tally(e.kind, e.device, e.module, e.code, pl, kept.text, {});
            // The switch ports a storm of one SXid touched, each once.
            if (auto link = m.sxid_links[k]) {
                auto at = std::lower_bound(t.links.begin(), t.links.end(), *link);
                if ((at == t.links.end() || *at != *link) && t.links.size() < kMaxLinks) t.links.insert(at, *link);
            }
        }
        keep_line(std::move(kept));
    }

    // What a message says, worked out once per distinct message: in a storm one message repeats line after line
    // with only its time prefix changing (1,000,000 Xid 95 lines of 29 events), so the previous line's reading is
    // reused when its message is the same bytes. A pure function of the message: the same results either way.
    struct MessageReading {
        std::string message;
        std::optional<LogTopic> topic;
        bool extra_word = false;  // no topic, but a catalogue word
        std::string text;         // the message as kept (valid UTF-8)
        std::optional<XidEvent> xid;
        std::string xid_detail;  // an NVLink 5 Xid is counted per unit, fatality and link (nvlink_xid.hpp)
        std::vector<LogEventKind> events;
        std::vector<std::optional<int>> sxid_links;  // per event: the switch port an SXid names
    };
    MessageReading reading;
    bool reading_valid = false;

    const MessageReading& read_message(std::string_view message) {
        if (reading_valid && reading.message == message) return reading;
        reading_valid = false;
        MessageReading r;
        r.message = std::string(message);
        r.topic = classify_topic(message);
        if (!r.topic) r.extra_word = holds_extra_word(message);
        if (r.topic || r.extra_word) r.text = sanitize_utf8(message);
        if (r.topic == LogTopic::xid) {
            if ((r.xid = parse_xid(message)) && is_nvlink5_xid(r.xid->code))
                if (auto d = parse_nvlink_xid(message)) r.xid_detail = d->key();
        }
        if (r.topic) {
            r.events = classify_events(message);
            for (auto& e : r.events) r.sxid_links.push_back(is_sxid(e.kind) ? sxid_link(message) : std::nullopt);
        }
        reading = std::move(r);
        reading_valid = true;
        return reading;
    }

    bool holds_extra_word(std::string_view message) const {
        return extra_words.any_in(message);
    }

    void keep_catalogue_line(const ParsedLogLine& pl, std::string text) {
        if (auto kept = admit(pl, LogTopic::catalogue, std::move(text)))
            keep_line(std::move(*kept));
    }

    void keep_line(KernelLogLine&& line) {
        if (options.line_sink) options.line_sink(std::move(line));
        else keep_newest(log.lines, oldest_line, std::move(line), options.max_kept_lines, &log.lines_over_cap);
    }

    // A line that counts for its boot: the line to keep, or nullopt when it falls outside the window (counted
    // as dropped).
    std::optional<KernelLogLine> admit(const ParsedLogLine& pl, LogTopic topic, std::string text) {
        boot_has_lines = true;
        if (outside_window(pl)) {
            ++log.lines_dropped;
            return std::nullopt;
        }
        ++lines_this_boot;
        KernelLogLine kept;
        kept.monotonic_s = pl.monotonic_s;
        kept.wall_time = std::string(pl.wall_time);
        kept.text = std::move(text);
        kept.topic = topic;
        return kept;
    }

    // Keeps the newest `cap` entries (cap 0: every entry) in a vector that never holds more: once it is full, each
    // new entry takes the slot of the oldest, at `oldest`. A storm of 1,000,000 Xid lines holds 10,000 events
    // here, not up to twice that as a vector trimmed in halves would. Its slots are taken once, at the first
    // entry: a vector grown by doubling holds the old slots and the new ones at once as it grows, and the slots
    // a quiet log never writes are pages the kernel never gives it.
    template <class T>
    static void keep_newest(std::vector<T>& v, size_t& oldest, T&& item, size_t cap, uint64_t* dropped) {
        if (cap == 0 || v.size() < cap) {
            if (cap > 0 && v.capacity() < cap) v.reserve(cap);
            v.push_back(std::move(item));
            return;
        }
        v[oldest] = std::move(item);
        oldest = (oldest + 1) % cap;
        if (dropped) ++*dropped;
    }
    // The kept entries oldest first, as the log wrote them, in little more room than they take: whoever holds the
    // log (many of them, perhaps) does not hold the slots a quiet log left unused.
    template <class T>
    static void oldest_first(std::vector<T>& v, size_t& oldest) {
        std::rotate(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(oldest), v.end());
        oldest = 0;
        if (v.capacity() > 2 * v.size()) v.shrink_to_fit();
    }
};

KernelLogScanner::KernelLogScanner(KernelLogScanOptions options) : state_(std::make_unique<State>()) {
    auto& s = *state_;
    s.options = std::move(options);
    s.options.max_line_bytes = std::max(s.options.max_line_bytes, kMinMaxLineBytes);
    if (s.options.line_sink && !s.options.every_boot)
        throw std::logic_error("KernelLogScanOptions' line sink needs every_boot: a later boot would take lines back");
    s.prefilter = kernel_log_prefilter::make_prefilter(s.options.extra_words);
    s.extra_words = WordSetCi(s.options.extra_words);
    if (!trim(s.options.since).empty()) {
        auto spec = parse_since(s.options.since);
        if (spec) {
            s.since = *spec;
            s.log.window = "since " + std::string(trim(s.options.since));
        } else {
            s.notes.push_back(spec.error().message + "; the current boot is kept");
        }
    }
    if (s.log.window.empty()) s.log.window = s.options.every_boot ? "every boot" : "current boot";
}

KernelLogScanner::~KernelLogScanner() = default;

void KernelLogScanner::set_format(KernelLogFormat format) {
    state_->format = format;
    state_->detecting = false;
}

void KernelLogScanner::feed(std::string_view bytes) {
    auto& s = *state_;
    if (s.detecting && s.head.empty() && bytes.size() >= kDetectBytes) {
        // The first feed holds enough to tell the format: it is read where it is, not copied into `head` first.
        s.detect_format(bytes);
        s.process(bytes);
        return;
    }
    if (s.detecting) {
        s.head.append(bytes);
        s.start_detection_if_ready(false);
        return;
    }
    s.process(bytes);
}

const std::vector<std::string>& KernelLogScanner::notes() const { return state_->notes; }

Result<KernelLog> KernelLogScanner::finish(std::string source) {
    auto& s = *state_;
    s.start_detection_if_ready(true);
    if (s.carry_oversized) {
        ++s.totals.oversized;
        ++s.totals.newlines;
    } else if (!s.carry.empty()) {
        s.carry.push_back('\n');
        s.scan_block(s.carry.data(), s.carry.size(), s.carry_start);
    }
    s.carry.clear();
    s.carry_oversized = false;
    State::oldest_first(s.log.lines, s.oldest_line);
    State::oldest_first(s.log.xids, s.oldest_xid);
    s.log.source = std::move(source);
    s.log.format = s.format;
    s.log.lines_read = s.totals.newlines;
    s.log.lines_skipped = s.totals.oversized;
    if (s.totals.oversized > 0)
        s.notes.push_back(fmt::format("{} line(s) longer than {} bytes skipped", s.totals.oversized,
                                      s.options.max_line_bytes));
    return std::move(s.log);
}

std::vector<std::string> kernel_log_scanner_words(const std::vector<std::string>& extra_words) {
    std::vector<std::string> words = kernel_log_prefilter::builtin_words();
    for (auto& w : extra_words)
        if (std::find(words.begin(), words.end(), w) == words.end()) words.push_back(w);
    return words;
}

Result<KernelLog> scan_kernel_log(std::string_view text, const KernelLogScanOptions& options, std::string source) {
    KernelLogScanner scanner(options);
    scanner.feed(text);
    return scanner.finish(std::move(source));
}

}  // namespace gpudx

#pragma once
// Following the kernel log as it is written (`gpudx agent`, docs/agent.md): /dev/kmsg, or a file followed
// like `tail -F` (appends, truncation, rotation, a file that vanishes and comes back). Each follower runs in its
// own thread and sleeps in poll(2) on its source and a stop descriptor: no timer wakes it while the kernel is
// quiet. New lines and what went wrong (a record lost to a ring-buffer overrun, a file that vanished) reach the
// caller through the sink as they happen.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace gpudx {

struct FollowSink {
    std::function<void(std::string_view line)> line;     // one line, without its newline
    std::function<void(std::string note)> note;          // for the operator: what happened to the source
    std::function<void(uint64_t lost_records)> lost;     // /dev/kmsg records the ring overwrote before we read them
    // A followed file: the lines it held when the follow began (already judged by the first diagnosis), so the
    // caller knows the whole of each generation. May be empty.
    std::function<void(std::string_view line)> initial_line;
    // A followed file: the generation read so far will not be under the name again (rotated away, truncated,
    // rewritten in place). Every line of it went to line() or initial_line() first. May be empty.
    std::function<void()> generation_ended;
};

// /dev/kmsg hands out records "PRIO,SEQ,USEC,FLAGS;message" with a sequence number that counts every record
// the kernel logged; a read after the ring overwrote the next unread records fails with EPIPE and the next
// read returns the oldest record still there. The gap in sequence numbers is what was lost.
class KmsgSequence {
public:
    // The record's sequence number, or nullopt when the record has no "PRIO,SEQ," prefix.
    static std::optional<uint64_t> parse(std::string_view record);
    // Records lost between the previous record seen and this one (0 for the first one seen).
    uint64_t advance(uint64_t seq);

private:
    std::optional<uint64_t> last_;
};

// Follows /dev/kmsg (or `path`, the device under a --root that mounts a live host) from its end: what was
// already in the ring is the initial diagnosis's to read. Returns when stop_fd becomes readable; an error
// (cannot open, a read failing other than with EPIPE or EAGAIN) is a note and ends the follow.
void follow_kmsg(const std::string& path, int stop_fd, const FollowSink& sink);

// Follows a file like `tail -F`, its present lines handed to initial_line, then appended lines as they are
// written; a file truncated shorter than what was read, or rewritten in place (its first bytes, or the last
// ones read, are no longer what they were: a copytruncate followed at once by a larger write, a same-size
// rewrite), is read again from its start; a file replaced under its name (rotation: renamed away and created
// anew, or a new file moved over it) is read to its end and the new file from its start; each of these ends a
// generation (generation_ended); a file that vanishes or cannot be read is a note, and is followed again when
// it reappears. Watches the
// file's directory with inotify; only while the directory itself is missing does it look again once a second.
void follow_file(const std::string& path, int stop_fd, const FollowSink& sink);

// Splits a byte stream into lines for a sink, holding a partial last line until its newline arrives. A line
// longer than max_line bytes is handed over in pieces of that size.
class LineSplitter {
public:
    explicit LineSplitter(size_t max_line = 64 * 1024) : max_line_(max_line) {}
    void feed(std::string_view bytes, const std::function<void(std::string_view)>& line);
    // The partial line, as a line (the source ended without a newline: a file rotated away).
    void flush(const std::function<void(std::string_view)>& line);
    void clear() { partial_.clear(); }

private:
    size_t max_line_;
    std::string partial_;
};

}  // namespace gpudx

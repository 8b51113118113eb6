#pragma once
// What the agent reads of the node. The whole node, collected by a child (`gpudx snapshot ...`), so a wedged
// driver wedges the child, never the agent; and the kernel log, followed in a thread of its own and re-read here
// when a line that matters arrives, with what earlier generations of a followed file held (a rotation must not
// hide an Xid). The follower hands its news to the main loop through an inbox under one mutex and an eventfd
// that wakes the loop.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/agent.hpp"
#include "agent/recorder.hpp"
#include "core/root.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

// What a full collection in the child gave.
struct Collected {
    std::optional<Snapshot> snapshot;
    std::string problem;    // why there is none
    bool stopping = false;  // a signal came while it ran
};

// Runs `command` and reads its stdout (a snapshot) until it ends, `timeout` passes (the child is killed) or
// `signal_fd` is readable (a signal to stop: the child is killed, `stopping` set).
Collected collect_in_child(const std::vector<std::string>& command, std::chrono::milliseconds timeout, int signal_fd);

// The followed kernel log: the follower thread, what it hands over, and the lines of it the agent keeps.
class FollowedLog {
public:
    FollowedLog(const AgentOptions& o, const Root& root, Recorder& recorder)
        : o_(o), root_(root), recorder_(recorder) {}
    ~FollowedLog() { stop(); }
    FollowedLog(const FollowedLog&) = delete;
    FollowedLog& operator=(const FollowedLog&) = delete;

    // Starts following (the file of --kernel-log-file, a capture's saved log, or /dev/kmsg) in a thread. `saved`:
    // what the previous run saved of a followed file's earlier generations (saved_state_key()).
    void start(const nlohmann::json& saved);
    void stop();
    static const char* saved_state_key();

    const std::string& source() const { return source_; }
    // Readable when the follower has lines or notes to take.
    int wake_fd() const { return wake_; }
    // Takes what the follower handed over: its notes are noted here; true when lines that matter arrived (or a
    // generation ended) since the last take, so the kernel-log layer is due to be read again.
    bool take();
    // Whether a re-read has kept lines to add to what the file (or the ring) holds now.
    bool has_earlier_lines();
    // Reads the kernel-log layer into `s` here, a followed file's earlier generations included.
    void read_into(Snapshot& s);
    // For /v1/status and /metrics.
    void describe(AgentStatus& s) const;

private:
    // Under inbox_mutex_. The oldest go past the bound: they are still in the file until it is rotated.
    void keep_generation_line(std::string_view line);
    void wake();

    const AgentOptions& o_;
    const Root& root_;
    Recorder& recorder_;
    std::thread follower_;
    int stop_ = -1;  // eventfd: the follower stops when it is readable
    int wake_ = -1;  // eventfd: the main loop has lines or notes to take
    std::string source_;
    bool following_file_ = false;  // set before the follower starts

    // The inbox, and the lines kept: the follower writes, the main loop reads.
    std::mutex inbox_mutex_;
    uint64_t inbox_matched_ = 0;
    std::vector<std::string> inbox_notes_;
    // The followed log's lines that matter: a file's, those of the generation under the name now and those of
    // earlier generations (rotated, truncated or rewritten away), judged before the file at each read;
    // /dev/kmsg's, every record since start (generation_lines_), judged where the ring lost them. Each holds the
    // newest kKeptEarlierLines at most (collection.cpp).
    std::deque<std::string> generation_lines_;
    std::vector<std::string> earlier_lines_;
    uint64_t earlier_lines_dropped_ = 0;

    // Main thread only (or the scratch thread, while the main thread waits): how many earlier lines the last save to
    // the store held (a restart would lose them).
    size_t saved_earlier_lines_ = 0;
    // Counted by the follower, read by the servers' threads.
    std::atomic<uint64_t> lines_read_{0}, lines_matched_{0}, kmsg_lost_{0};
};

}  // namespace gpudx

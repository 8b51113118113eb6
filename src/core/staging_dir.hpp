#pragma once
// A temporary folder for work that is published only when whole (`gpudx gather`'s capture): made by mkdtemp,
// its entries moved into place by publish_into, and otherwise removed however gpudx ends:
//  - an error or an exception: the destructor removes it;
//  - a signal (SIGINT from a terminal's Ctrl-C, SIGTERM from a scheduler), and even SIGKILL or the OOM killer,
//    where no handler runs at all: a watcher process, forked when the folder is made, removes it once gpudx is
//    gone without having said it settled the folder. A signal handler could not do it: removing a tree is not
//    async-signal-safe, threads may be writing into it, and SIGKILL has no handler.
// The watcher ignores the signals a terminal or a scheduler sends a whole process group (so it outlives gpudx by
// the moment it takes to clean), holds none of gpudx's descriptors (a reader waiting for the end of gpudx's
// output is not kept waiting), and learns of gpudx's end from PR_SET_PDEATHSIG, with a poll of its parent
// behind it.
#include <sys/types.h>

#include <string>
#include <string_view>

#include "core/error.hpp"

namespace gpudx {

class StagingDirectory {
public:
    // DIR/PREFIX followed by six random characters. `remove_dir_if_empty`: DIR itself is gpudx's too (made for
    // the output just before) and goes with the folder when nothing was published into it.
    // Forks the watcher: call before any thread starts (a child of a threaded process may inherit a lock
    // another thread holds, and the watcher allocates).
    static Result<StagingDirectory> create(const std::string& dir, std::string_view prefix, bool remove_dir_if_empty);

    StagingDirectory(StagingDirectory&& other) noexcept;
    StagingDirectory& operator=(StagingDirectory&&) = delete;
    StagingDirectory(const StagingDirectory&) = delete;
    ~StagingDirectory();

    const std::string& path() const { return path_; }

    // Every entry renamed into `dest` (an existing folder on the same filesystem, empty of those names), then
    // the folder itself removed; nothing is left for the watcher.
    Result<void> publish_into(const std::string& dest);
    // Removes the folder (and DIR when it is gpudx's and empty) now; the destructor does the same when neither
    // this nor publish_into ran.
    void remove();

private:
    StagingDirectory(std::string path, std::string parent, bool remove_parent, pid_t watcher, int settled_fd)
        : path_(std::move(path)), parent_(std::move(parent)), remove_parent_(remove_parent), watcher_(watcher),
          settled_fd_(settled_fd) {}
    // Tells the watcher there is nothing left to remove, and reaps it.
    void settle();

    std::string path_;
    std::string parent_;
    bool remove_parent_ = false;
    pid_t watcher_ = -1;
    int settled_fd_ = -1;  // the write end of the watcher's pipe; -1 once settled
};

}  // namespace gpudx

#pragma once
// A kernel-log follower on its own thread for a test, as the agent runs one: stopped through its stop
// descriptor and joined when the test's fixture goes.
#include <sys/eventfd.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <utility>

#include "agent/follow.hpp"

namespace gpudx::test {

class FollowerThread {
public:
    FollowerThread(std::string path, FollowSink sink) : path_(std::move(path)), sink_(std::move(sink)) {
        stop_ = ::eventfd(0, EFD_CLOEXEC);
        thread_ = std::thread([this] { follow_file(path_, stop_, sink_); });
    }
    ~FollowerThread() {
        uint64_t one = 1;
        (void)!::write(stop_, &one, sizeof one);
        thread_.join();
        ::close(stop_);
    }
    FollowerThread(const FollowerThread&) = delete;
    FollowerThread& operator=(const FollowerThread&) = delete;

private:
    std::string path_;
    FollowSink sink_;
    int stop_ = -1;
    std::thread thread_;
};

}  // namespace gpudx::test

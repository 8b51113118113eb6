#pragma once
#include <string>
#include <vector>

namespace gpudx {

enum class CollectorState { ok, no_data, error, timed_out };

// One file or call a collector could not read, and why; the rest of its layer still counts.
struct ReadProblem {
    std::string path;
    std::string message;
};

// Every collector records how it went, so one failure never hides the others' results.
struct CollectorStatus {
    std::string name;
    CollectorState state = CollectorState::no_data;
    std::string message;  // for no_data, error and timed_out: why
    std::string path;     // the file or call it concerns, when one
    double duration_ms = 0;
    std::vector<ReadProblem> problems;
};

const char* to_string(CollectorState s);

}  // namespace gpudx

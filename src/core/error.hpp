#pragma once
// The error policy (docs/error-policy.md). Errors travel as values: a function that can fail returns
// Result<T> (std::expected<T, Error>), a collector returns a CollectorStatus with its ReadProblems, a
// child's unreadable output becomes a read problem. gpudx's own code does not throw, except UsageError and
// OutputError from app/ to main().
//
// Exceptions still arise from what gpudx uses (nlohmann::json, toml++, CLI11, std::thread, std::bad_alloc)
// and from bugs. They stop only at these fault-isolation boundaries, where a comment at the catch names the
// boundary:
//   - main() (app/main.cpp): UsageError exits 64, OutputError 74, anything else is an internal error (exit 3);
//   - each collector (collect/snapshot.cpp run_collector, which capture/record.cpp uses too, and the driver
//     probes' start and finish): a throwing collector loses its own layer, as an error
//     status;
//   - each rule family (rules/engine/diagnose.cpp diagnose): a throwing family becomes gpudx.check_failed;
//   - each child's body (core/supervisor.cpp run_child, core/child_probe.cpp start_probes): the exception
//     ends the child, which the parent reports;
//   - each acceptance sub-test (actions/accept_run.cpp Acceptance::run_step): it fails, the others run;
//   - the readers of third-party formats (JSON and TOML input, a child's JSON result): nlohmann's and
//     toml++'s exceptions become a Result error or a read problem at the function that parses;
//   - library calls that report failure only by throwing (std::thread's constructor in
//     gpu_api/nvml/query.cpp query_devices).
// Anything else lets the exception pass to the nearest boundary: a catch elsewhere is a bug.
#include <expected>
#include <string>

namespace gpudx {

struct Error {
    std::string message;  // what went wrong, for a person
    std::string path;     // the file or call it concerns, empty when none
    int sys_errno = 0;    // errno when the failure came from the OS
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(std::string message, std::string path = {}, int sys_errno = 0) {
    return std::unexpected(Error{std::move(message), std::move(path), sys_errno});
}

// A user's mistake on the command line or in an input file: main() prints it and exits 64.
struct UsageError {
    std::string message;
};

// What gpudx had to say could not be written whole: standard output or the file named failed mid-write (a full
// disk, an I/O error, a closed descriptor). main() prints it and exits 74, so a script never takes an empty or
// cut report, exit 0, for a verdict.
struct OutputError {
    std::string message;
};

}  // namespace gpudx

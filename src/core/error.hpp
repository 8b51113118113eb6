#pragma once
// Recoverable errors travel as values; only main() catches exceptions (usage errors).
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

}  // namespace gpudx

// The acceptance record's names and keys.
#include "model/accept.hpp"

namespace gpudx {

const char* to_string(TestStatus s) {
    switch (s) {
    case TestStatus::pass: return "pass";
    case TestStatus::warn: return "warn";
    case TestStatus::fail: return "fail";
    case TestStatus::not_run: return "not_run";
    }
    return "fail";
}

std::optional<TestStatus> parse_test_status(std::string_view s) {
    for (auto st : {TestStatus::pass, TestStatus::warn, TestStatus::fail, TestStatus::not_run})
        if (s == to_string(st)) return st;
    return std::nullopt;
}

std::string SubTest::key() const {
    std::string k = id;
    for (auto& s : subjects) k += " " + s;
    return k;
}

}  // namespace gpudx

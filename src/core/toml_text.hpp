#pragma once
// A guard in front of toml++ 3.3 (Debian bookworm's): its whitespace test reaches __builtin_unreachable() for
// some non-ASCII code points where whitespace may stand (marzer/tomlplusplus issues 190 and 295, fixed after
// 3.3), undefined behaviour on a malformed file. TOML allows non-ASCII characters only inside strings and
// comments, so text with one anywhere else is refused here, with its line, before toml++ reads it; so is
// the one valid place that still reaches the bug: a non-ASCII character first after a line-ending
// backslash in a multi-line basic string. Found by fuzz/fuzz_matrix.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gpudx {

struct TomlTextProblem {
    size_t line = 0, column = 0;  // 1-based; the column counts bytes
    std::string message;
};

std::optional<TomlTextProblem> check_toml_text(std::string_view text);

}  // namespace gpudx

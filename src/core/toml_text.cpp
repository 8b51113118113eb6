#include "core/toml_text.hpp"

namespace gpudx {

std::optional<TomlTextProblem> check_toml_text(std::string_view t) {
    enum class State { normal, comment, basic, literal, ml_basic, ml_literal };
    State state = State::normal;
    size_t line = 1, line_start = 0;
    auto at = [&](size_t i) { return i < t.size() ? t[i] : '\0'; };
    auto problem = [&](size_t i, std::string message) {
        return TomlTextProblem{line, i - line_start + 1, std::move(message)};
    };
    size_t i = t.starts_with("\xEF\xBB\xBF") ? 3 : 0;  // a byte-order mark is allowed
    for (; i < t.size(); ++i) {
        char c = t[i];
        if (c == '\n') {
            ++line;
            line_start = i + 1;
            if (state == State::comment || state == State::basic || state == State::literal) state = State::normal;
            continue;
        }
        switch (state) {
            case State::normal:
                if (c == '#') state = State::comment;
                else if (c == '"' && at(i + 1) == '"' && at(i + 2) == '"') state = State::ml_basic, i += 2;
                else if (c == '"') state = State::basic;
                else if (c == '\'' && at(i + 1) == '\'' && at(i + 2) == '\'') state = State::ml_literal, i += 2;
                else if (c == '\'') state = State::literal;
                else if (static_cast<unsigned char>(c) >= 0x80)
                    return problem(i, "non-ASCII character outside a string or comment (TOML allows it only there)");
                break;
            case State::comment:
                break;
            case State::basic:
                if (c == '\\' && at(i + 1) != '\n') ++i;
                else if (c == '"') state = State::normal;
                break;
            case State::literal:
                if (c == '\'') state = State::normal;
                break;
            case State::ml_basic:
                if (c == '"' && at(i + 1) == '"' && at(i + 2) == '"') {
                    state = State::normal;
                    i += 2;
                } else if (c == '\\') {
                    size_t j = i + 1;
                    while (at(j) == ' ' || at(j) == '\t') ++j;
                    if (at(j) == '\r') ++j;
                    if (at(j) != '\n') {
                        ++i;  // an escape: the next byte is its own
                        break;
                    }
                    // A line-ending backslash: whitespace and newlines up to the next character are trimmed.
                    while (at(j) == ' ' || at(j) == '\t' || at(j) == '\r' || at(j) == '\n') {
                        if (at(j) == '\n') ++line, line_start = j + 1;
                        ++j;
                    }
                    if (static_cast<unsigned char>(at(j)) >= 0x80)
                        return problem(j, "a non-ASCII character right after a line-ending backslash cannot be read "
                                          "safely (toml++ 3.3); begin that line with an ASCII character");
                    i = j - 1;
                }
                break;
            case State::ml_literal:
                if (c == '\'' && at(i + 1) == '\'' && at(i + 2) == '\'') state = State::normal, i += 2;
                break;
        }
    }
    return std::nullopt;
}

}  // namespace gpudx

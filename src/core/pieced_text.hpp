#pragma once
// A text made of what comes before a list, the list's items and what comes after, given in pieces of about a size
// as they are asked for: an answer of any length sent as it is made (the agent's /v1/status and page), which holds
// one piece at a time instead of the whole text. The same object gives the whole text, so a renderer is written once.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

namespace gpudx {

class PiecedText {
public:
    // item(i, out) appends the i-th item's text to `out` (possibly nothing); the items are asked for in order, once.
    using Item = std::function<void(size_t i, std::string& out)>;
    PiecedText(std::string before, size_t items, Item item, std::string after)
        : before_(std::move(before)), after_(std::move(after)), items_(items), item_(std::move(item)) {}

    // The next piece: at least `min_bytes` where that much is left (an item is never cut); nullopt after the last.
    std::optional<std::string> next(size_t min_bytes) {
        if (done_) return std::nullopt;
        std::string out = std::exchange(before_, std::string());
        while (next_ < items_ && out.size() < min_bytes) item_(next_++, out);
        if (next_ == items_) {
            out += after_;
            done_ = true;
        }
        return out;
    }
    std::string whole() && {
        std::string out;
        while (auto piece = next(SIZE_MAX)) out.empty() ? void(out = std::move(*piece)) : void(out += *piece);
        return out;
    }

private:
    std::string before_, after_;
    size_t items_ = 0, next_ = 0;
    Item item_;
    bool done_ = false;
};

}  // namespace gpudx

#pragma once
// std::optional's interface for a large member that is seldom set: the value lives on the heap, so an unset one
// costs a pointer instead of the value's room. Copies copy the value (a value type, like std::optional).
// Finding::process is one: only the per-process rules name a process, and a storm's findings (one per GPU and
// code, 10,000 of them at a time in a stress test) would each carry 144 bytes for it inline.
#include <memory>
#include <optional>
#include <utility>

namespace gpudx {

template <class T>
class HeapOptional {
public:
    HeapOptional() = default;
    HeapOptional(std::nullopt_t) {}
    HeapOptional(T value) : value_(std::make_unique<T>(std::move(value))) {}
    HeapOptional(const HeapOptional& other) : value_(other ? std::make_unique<T>(*other) : nullptr) {}
    HeapOptional(HeapOptional&&) noexcept = default;
    HeapOptional& operator=(const HeapOptional& other) {
        if (this != &other) value_ = other ? std::make_unique<T>(*other) : nullptr;
        return *this;
    }
    HeapOptional& operator=(HeapOptional&&) noexcept = default;
    HeapOptional& operator=(T value) {
        value_ = std::make_unique<T>(std::move(value));
        return *this;
    }
    HeapOptional& operator=(std::nullopt_t) {
        value_.reset();
        return *this;
    }

    bool has_value() const { return value_ != nullptr; }
    explicit operator bool() const { return has_value(); }
    const T& operator*() const { return *value_; }
    T& operator*() { return *value_; }
    const T* operator->() const { return value_.get(); }
    T* operator->() { return value_.get(); }

private:
    std::unique_ptr<T> value_;
};

}  // namespace gpudx

#include "rules/engine/rule.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace gpudx {

namespace {

Finding build(const Rule& r, Layer layer, Severity severity, std::string message, FindingDetails details) {
    Finding f;
    f.id = std::string(r.id);
    f.layer = layer;
    f.severity = severity;
    f.subjects = std::move(details.subjects);
    f.message = std::move(message);
    f.evidence = std::move(details.evidence);
    f.next_step = std::move(details.next_step);
    return f;
}

void require_declared(const Rule& r, Layer l) {
    if (!r.files_under(l))
        throw std::logic_error(fmt::format("{} is not declared in the {} layer", r.id, to_string(l)));
}

Layer declared_layer(const Rule& r) {
    if (!r.layer) throw std::logic_error(fmt::format("{} declares no layer of its own: name the layer", r.id));
    return *r.layer;
}

}  // namespace

Finding Rule::finding(std::string message, FindingDetails details) const {
    return build(*this, declared_layer(*this), severity, std::move(message), std::move(details));
}

Finding Rule::finding(Severity actual, std::string message, FindingDetails details) const {
    return build(*this, declared_layer(*this), actual, std::move(message), std::move(details));
}

Finding Rule::finding_in(Layer filed_under, Severity actual, std::string message, FindingDetails details) const {
    require_declared(*this, filed_under);
    return build(*this, filed_under, actual, std::move(message), std::move(details));
}

void Rule::file_under(Finding& f, Layer filed_under) const {
    if (f.id != id) throw std::logic_error(fmt::format("{} cannot refile a finding of {}", id, f.id));
    require_declared(*this, filed_under);
    f.layer = filed_under;
}

}  // namespace gpudx

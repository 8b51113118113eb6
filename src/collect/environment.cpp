#include "collect/collectors.hpp"

extern char** environ;

namespace gpudx {

std::map<std::string, std::string> load_environment(const Root& root) {
    std::map<std::string, std::string> env;
    if (root.is_live()) {
        for (char** e = environ; e && *e; ++e) {
            std::string_view kv = *e;
            auto pos = kv.find('=');
            if (pos != std::string_view::npos) env.emplace(std::string(kv.substr(0, pos)), std::string(kv.substr(pos + 1)));
        }
        return env;
    }
    auto text = root.read_file("/_commands/environment.txt");
    if (!text) return env;
    size_t start = 0;
    while (start < text->size()) {
        size_t end = text->find('\n', start);
        if (end == std::string::npos) end = text->size();
        std::string_view kv(text->data() + start, end - start);
        auto pos = kv.find('=');
        if (pos != std::string_view::npos && pos > 0)
            env.emplace(std::string(kv.substr(0, pos)), std::string(kv.substr(pos + 1)));
        start = end + 1;
    }
    return env;
}

CollectorStatus collect_environment(const CollectContext&, EnvironmentLayer&) {
    return status_no_data("environment", "not implemented yet");
}

}  // namespace gpudx

// The fleet report's names.
#include "model/fleet.hpp"

namespace gpudx {

const char* to_string(HealthSource s) {
    switch (s) {
        case HealthSource::none: return "unknown";
        case HealthSource::diagnosis: return "diagnosis";
        case HealthSource::snapshot: return "snapshot";
    }
    return "?";
}

}  // namespace gpudx

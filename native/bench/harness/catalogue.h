// The experiments' declarations compiled into every driver (catalogue.py generates the JSON text
// from config/experiments at build time; find_experiment_spec in params.h reads it).
#pragma once

namespace gicomm::bench {

extern const char* const kCatalogueJson;

}  // namespace gicomm::bench

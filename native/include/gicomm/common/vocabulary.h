// The transports and NIC backends gicomm names, as enums. The list is config/vocabulary.def, which
// Python reads too; the build copies it beside this header (native/CMakeLists.txt). Names are
// parsed once, where they enter a program; inside it only the enums travel.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gicomm {

#define GICOMM_NIC_BACKEND(id, name, what) id,
#define GICOMM_TRANSPORT(id, name, backend, what)
enum class NicBackend {
#include "gicomm/common/vocabulary.def"
};
#undef GICOMM_NIC_BACKEND
#undef GICOMM_TRANSPORT

#define GICOMM_NIC_BACKEND(id, name, what)
#define GICOMM_TRANSPORT(id, name, backend, what) id,
enum class Transport {
#include "gicomm/common/vocabulary.def"
};
#undef GICOMM_NIC_BACKEND
#undef GICOMM_TRANSPORT

struct NicBackendEntry {
  NicBackend id;
  const char* name;
};
struct TransportEntry {
  Transport id;
  const char* name;
  NicBackend default_backend;  // what a point of this transport runs on when it names none
};

#define GICOMM_NIC_BACKEND(id, name, what) {NicBackend::id, name},
#define GICOMM_TRANSPORT(id, name, backend, what)
inline constexpr NicBackendEntry kNicBackends[] = {
#include "gicomm/common/vocabulary.def"
};
#undef GICOMM_NIC_BACKEND
#undef GICOMM_TRANSPORT

#define GICOMM_NIC_BACKEND(id, name, what)
#define GICOMM_TRANSPORT(id, name, backend, what) {Transport::id, name, NicBackend::backend},
inline constexpr TransportEntry kTransports[] = {
#include "gicomm/common/vocabulary.def"
};
#undef GICOMM_NIC_BACKEND
#undef GICOMM_TRANSPORT

inline const char* name_of(NicBackend b) { return kNicBackends[static_cast<int>(b)].name; }
inline const char* name_of(Transport t) { return kTransports[static_cast<int>(t)].name; }
inline NicBackend default_backend(Transport t) { return kTransports[static_cast<int>(t)].default_backend; }

inline std::optional<NicBackend> nic_backend_named(std::string_view s) {
  for (const auto& e : kNicBackends)
    if (s == e.name) return e.id;
  return std::nullopt;
}
inline std::optional<Transport> transport_named(std::string_view s) {
  for (const auto& e : kTransports)
    if (s == e.name) return e.id;
  return std::nullopt;
}

// "softnic-cpu, softnic-gpu, ..." for messages that say what is allowed.
template <class Table>
std::string names_of(const Table& table) {
  std::string out;
  for (const auto& e : table) out += std::string(out.empty() ? "" : ", ") + e.name;
  return out;
}

}  // namespace gicomm

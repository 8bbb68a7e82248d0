// Prints the PRM table of gicomm/mlx5dev/prm.h (the offsets the DEVX backend writes and the
// emulated device parses), one entry per line, for check_prm_layout.py:
//   field <struct> <field> <bit offset> <bits>     named by the kernel's mlx5_ifc.h
//   devx <struct> <field> <bit offset> <bits>      DEVX-only (reserved bits in the kernel header)
//   const <kernel name> <value>                    an enum value of mlx5_ifc.h
//   status <kernel name> <value>                   a command status of mlx5/device.h
#include <cstdio>

#include "gicomm/mlx5dev/prm.h"

int main() {
#define FIELD(s, f, o, b) std::printf("field %s %s %u %u\n", #s, #f, static_cast<unsigned>(o), static_cast<unsigned>(b));
#define DEVX(s, f, o, b) std::printf("devx %s %s %u %u\n", #s, #f, static_cast<unsigned>(o), static_cast<unsigned>(b));
#define CONSTANT(n, k, v) std::printf("const %s %u\n", #k, static_cast<unsigned>(v));
#define STATUS(n, k, v) std::printf("status %s %u\n", #k, static_cast<unsigned>(v));
  GICOMM_PRM_FIELDS(FIELD, DEVX)
  GICOMM_PRM_CONSTANTS(CONSTANT)
  GICOMM_PRM_STATUSES(STATUS)
  return 0;
}

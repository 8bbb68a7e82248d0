/* Lets the kernel's include/linux/mlx5/mlx5_ifc.h compile in user space (check_prm_layout.py),
   and the two checks it generates: FIELD compares offsetof/sizeof of a struct mlx5_ifc_*_bits
   member (one u8 per bit) with our bit offset and width, CONSTANT an enum value with ours. */
#include <stddef.h>
#include <stdio.h>

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef u16 __be16;
typedef u32 __be32;
typedef u64 __be64;
#define BIT(n) (1UL << (n))
#define BIT_ULL(n) (1ULL << (n))
#define DECLARE_FLEX_ARRAY(T, name) \
  struct {                          \
    struct {                        \
    } __empty_##name;               \
    T name[];                       \
  }

#include "linux/mlx5/mlx5_ifc.h"

static int bad = 0;

#define FIELD(s, f, o, b)                                                                     \
  do {                                                                                        \
    size_t off_ = offsetof(struct mlx5_ifc_##s##_bits, f);                                    \
    size_t w_ = sizeof(((struct mlx5_ifc_##s##_bits *)0)->f);                                 \
    if (off_ != (o) || w_ != (b)) {                                                           \
      printf("MISMATCH field %s.%s: ours 0x%x/%u, kernel 0x%zx/%zu\n", #s, #f, (o), (b), off_, w_); \
      bad = 1;                                                                                \
    }                                                                                         \
  } while (0)

#define CONSTANT(k, v)                                                                        \
  do {                                                                                        \
    if ((long long)(k) != (long long)(v)) {                                                   \
      printf("MISMATCH const %s: ours 0x%x, kernel 0x%llx\n", #k, (v), (long long)(k));      \
      bad = 1;                                                                                \
    }                                                                                         \
  } while (0)

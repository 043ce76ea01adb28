//===- Elements.h - one element of a device dtype in memory -----*- C++ -*-===//
//
// How a value is stored in and read from the bytes of f32, bf16 (rounded to
// nearest even), f16 or i32 (truncated toward zero, NaN as 0): the rule the
// simulator's memories use and that anything preparing or checking device
// buffers must share.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_ELEMENTS_H
#define KILN_COMPILER_TARGET_ELEMENTS_H

#include "compiler/target/FloatFormats.h"
#include "compiler/target/Isa.h"

#include <cmath>
#include <cstring>

namespace kiln::isa {

inline void encodeElement(DType dtype, double value, void *out) {
  switch (dtype) {
  case DType::F32: {
    float f = static_cast<float>(value);
    std::memcpy(out, &f, 4);
    return;
  }
  case DType::BF16: {
    uint16_t b = numerics::floatToBF16Bits(static_cast<float>(value));
    std::memcpy(out, &b, 2);
    return;
  }
  case DType::F16: {
    uint16_t b = numerics::floatToHalfBits(static_cast<float>(value));
    std::memcpy(out, &b, 2);
    return;
  }
  case DType::I32: {
    int32_t i = std::isnan(value) ? 0 : static_cast<int32_t>(std::trunc(value));
    std::memcpy(out, &i, 4);
    return;
  }
  }
}

inline double decodeElement(DType dtype, const void *in) {
  switch (dtype) {
  case DType::F32: {
    float f;
    std::memcpy(&f, in, 4);
    return f;
  }
  case DType::BF16: {
    uint16_t b;
    std::memcpy(&b, in, 2);
    return numerics::bf16BitsToFloat(b);
  }
  case DType::F16: {
    uint16_t b;
    std::memcpy(&b, in, 2);
    return numerics::halfBitsToFloat(b);
  }
  case DType::I32: {
    int32_t i;
    std::memcpy(&i, in, 4);
    return i;
  }
  }
  return NAN;
}

} // namespace kiln::isa

#endif // KILN_COMPILER_TARGET_ELEMENTS_H

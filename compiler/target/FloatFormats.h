//===- FloatFormats.h - bf16 and f16 bit conversions ------------*- C++ -*-===//
//
// The one implementation of the 16-bit float formats, shared by the
// reference interpreter, the simulator's memories and the tools. Inline:
// the simulator converts on every element it writes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_FLOATFORMATS_H
#define KILN_COMPILER_TARGET_FLOATFORMATS_H

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln::numerics {

/// f32 -> bf16, round to nearest even; NaN stays a (quiet) NaN.
inline uint16_t floatToBF16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value)) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  }
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

inline float bf16BitsToFloat(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

/// f32 -> IEEE half, round to nearest even.
inline uint16_t floatToHalfBits(float value) {
  llvm::APFloat f(value);
  bool losesInfo = false;
  f.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return static_cast<uint16_t>(f.bitcastToAPInt().getZExtValue());
}

inline float halfBitsToFloat(uint16_t bits) {
  return llvm::APFloat(llvm::APFloat::IEEEhalf(), llvm::APInt(16, bits))
      .convertToFloat();
}

} // namespace kiln::numerics

#endif // KILN_COMPILER_TARGET_FLOATFORMATS_H

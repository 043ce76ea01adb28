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
#include <string>

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

/// A buffer of f32 values as bf16 values (rounded), and back: how host f32
/// arrays meet device bf16 buffers (`kiln run`, runtime sessions).
inline std::string f32BytesToBF16Bytes(const char *f32, size_t bytes) {
  std::string out(bytes / 2, '\0');
  for (size_t i = 0; i < bytes / 4; ++i) {
    float value;
    std::memcpy(&value, f32 + 4 * i, 4);
    uint16_t bits = floatToBF16Bits(value);
    std::memcpy(out.data() + 2 * i, &bits, 2);
  }
  return out;
}

inline std::string bf16BytesToF32Bytes(const char *bf16, size_t bytes) {
  std::string out(bytes * 2, '\0');
  for (size_t i = 0; i < bytes / 2; ++i) {
    uint16_t bits;
    std::memcpy(&bits, bf16 + 2 * i, 2);
    float value = bf16BitsToFloat(bits);
    std::memcpy(out.data() + 4 * i, &value, 4);
  }
  return out;
}

} // namespace kiln::numerics

#endif // KILN_COMPILER_TARGET_FLOATFORMATS_H

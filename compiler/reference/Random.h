//===- Random.h - Kiln's counter-based random numbers -----------*- C++ -*-===//
//
// Dropout draws element i's number from (seed, stream, i) alone, so any
// evaluator — this interpreter, the compiled engine code, any worker — gets
// the same mask for the same seed without carrying generator state. The mixer
// is SplitMix64's finaliser, which passes BigCrush as a counter-based
// generator.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_REFERENCE_RANDOM_H
#define KILN_COMPILER_REFERENCE_RANDOM_H

#include <cstdint>

namespace kiln::reference {

inline uint64_t splitMix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The uniform numbers of one dropout op: uniform(i) is in [0, 1) with 24
/// random bits, exactly representable in f32.
class DropoutStream {
public:
  DropoutStream(uint64_t seed, uint64_t stream)
      : key(splitMix64(seed ^ (stream * 0xD1B54A32D192ED03ull))) {}

  double uniform(uint64_t index) const {
    return static_cast<double>(splitMix64(key + index) >> 40) * 0x1p-24;
  }

private:
  uint64_t key;
};

} // namespace kiln::reference

#endif // KILN_COMPILER_REFERENCE_RANDOM_H

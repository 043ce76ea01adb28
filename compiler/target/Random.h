//===- Random.h - Kiln's counter-based random numbers -----------*- C++ -*-===//
//
// Dropout draws element i's number from (seed, stream, i) alone, so any
// evaluator — this interpreter, the compiled engine code, any worker — gets
// the same mask for the same seed without carrying generator state. The mixer
// is SplitMix64's finaliser, which passes BigCrush as a counter-based
// generator.
//
// The stream is part of the counter, not of the key: stream s owns counters
// [s * 2^40, (s + 1) * 2^40). That lets the device's `random` instruction,
// which reads the seed from memory at run time, take one compile-time
// counter base per tile instead of a second 64-bit mixing step.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_RANDOM_H
#define KILN_COMPILER_TARGET_RANDOM_H

#include <cstdint>

namespace kiln::reference {

inline uint64_t splitMix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Counters per stream; a dropout's tensor must have fewer elements.
inline constexpr uint64_t kCountersPerStream = uint64_t(1) << 40;

/// The uniform number of `counter` under `seed`: in [0, 1) with 24 random
/// bits, exactly representable in f32. What the device's `random`
/// instruction computes.
inline double uniformAt(uint64_t seed, uint64_t counter) {
  return static_cast<double>(splitMix64(splitMix64(seed) + counter) >> 40) *
         0x1p-24;
}

/// The uniform numbers of one dropout op.
class DropoutStream {
public:
  DropoutStream(uint64_t seed, uint64_t stream)
      : seed(seed), first(stream * kCountersPerStream) {}

  double uniform(uint64_t index) const { return uniformAt(seed, first + index); }

private:
  uint64_t seed, first;
};

/// The smallest f32-exact threshold t with (u >= t) == (u >= p) for every
/// 24-bit uniform u: the device compares in f32, where p itself may round
/// across a multiple of 2^-24.
inline double dropoutThreshold(double p) {
  double scaled = p * 0x1p24;
  auto whole = static_cast<double>(static_cast<int64_t>(scaled));
  return (whole < scaled ? whole + 1 : whole) * 0x1p-24;
}

} // namespace kiln::reference

#endif // KILN_COMPILER_TARGET_RANDOM_H

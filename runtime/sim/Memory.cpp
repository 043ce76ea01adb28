//===- Memory.cpp - the simulated memories -------------------------------===//

#include "runtime/sim/Memory.h"

#include "compiler/target/Elements.h"
#include "compiler/target/FloatFormats.h"

#include <algorithm>
#include <cmath>
#include <new>

#include <sys/mman.h>
#include <cstring>

namespace kiln::sim {

using numerics::bf16BitsToFloat;
using numerics::floatToHalfBits;
using numerics::halfBitsToFloat;

MemoryArray::Storage MemoryArray::zeroed(int64_t size) {
  size_t length = static_cast<size_t>(std::max<int64_t>(size, 1));
  void *p = mmap(nullptr, length, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    throw std::bad_alloc();
  }
  madvise(p, length, MADV_HUGEPAGE); // advice: failure changes nothing
  return Storage(static_cast<uint8_t *>(p), Unmap{length});
}

void MemoryArray::Unmap::operator()(uint8_t *p) const { munmap(p, size); }

double MemoryArray::read(int64_t row, int64_t byte, isa::DType dtype) const {
  int64_t size = isa::dtypeBytes(dtype);
  int64_t at = row * rowStride + byte;
  for (int64_t i = 0; i < size; ++i) {
    if (!written[at + i]) {
      return NAN;
    }
  }
  return isa::decodeElement(dtype, bytes.get() + at);
}

void MemoryArray::write(int64_t row, int64_t byte, isa::DType dtype,
                        double value) {
  int64_t at = row * rowStride + byte;
  isa::encodeElement(dtype, value, bytes.get() + at);
  std::memset(written.get() + at, 1, isa::dtypeBytes(dtype));
}

void MemoryArray::store(int64_t byte, const char *data, int64_t size) {
  std::memcpy(bytes.get() + byte, data, size);
  std::memset(written.get() + byte, 1, size);
}

void MemoryArray::load(int64_t byte, char *data, int64_t size) const {
  // Unwritten output bytes read as NaN patterns, like any other read.
  for (int64_t i = 0; i < size; ++i) {
    data[i] = written[byte + i] ? static_cast<char>(bytes[byte + i])
                                : static_cast<char>(0xff);
  }
}

bool MemoryArray::isWritten(int64_t row, int64_t byte, int64_t size) const {
  // glibc's memchr scans with the widest vectors the host has.
  return std::memchr(written.get() + row * rowStride + byte, 0, size) ==
         nullptr;
}

void MemoryArray::markWritten(int64_t row, int64_t byte, int64_t size) {
  std::memset(written.get() + row * rowStride + byte, 1, size);
}

double Rounder::round(isa::DType dtype, double value) {
  switch (dtype) {
  case isa::DType::F32:
    return static_cast<float>(value);
  case isa::DType::BF16: {
    float f = static_cast<float>(value);
    if (!stochastic) {
      return bf16BitsToFloat(numerics::floatToBF16Bits(f));
    }
    // One draw per result whatever its value, so that the stream's position
    // depends on the program alone: data-parallel replicas, which round
    // different activations, stay in step for the update they share.
    state += 0x9E3779B97F4A7C15ull;
    if (!std::isfinite(f)) {
      return bf16BitsToFloat(numerics::floatToBF16Bits(f));
    }
    // Add 16 random bits below the bf16 mantissa, then truncate: rounds up
    // with probability equal to the discarded fraction.
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits += static_cast<uint32_t>(z & 0xffff);
    return bf16BitsToFloat(static_cast<uint16_t>(bits >> 16));
  }
  case isa::DType::F16:
    return halfBitsToFloat(floatToHalfBits(static_cast<float>(value)));
  case isa::DType::I32:
    return std::isnan(value) ? 0 : std::trunc(value);
  }
  return value;
}

} // namespace kiln::sim

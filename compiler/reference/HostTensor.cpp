//===- HostTensor.cpp - tensors of the reference interpreter -------------===//

#include "compiler/reference/HostTensor.h"

#include "compiler/graph/GraphFile.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <cstring>

namespace kiln::reference {

HostTensor::HostTensor(proto::DType dtype, Shape shape, double fill)
    : dtype(dtype), shape(std::move(shape)),
      data(kgraph::numElements(this->shape), fill) {}

std::string HostTensor::typeString() const {
  std::string s = graph::dtypeName(dtype).str() + "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + "]";
}

bool isFloat(proto::DType dtype) {
  return dtype == proto::F32 || dtype == proto::BF16 || dtype == proto::F16;
}

uint16_t floatToBF16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value)) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  }
  uint32_t roundingBias = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + roundingBias) >> 16);
}

float bf16BitsToFloat(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

static double roundToHalf(double value) {
  llvm::APFloat f(static_cast<float>(value));
  bool losesInfo = false;
  f.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return f.convertToDouble();
}

double roundTo(proto::DType dtype, double value) {
  switch (dtype) {
  case proto::F32:
    return static_cast<float>(value);
  case proto::BF16:
    return bf16BitsToFloat(floatToBF16Bits(static_cast<float>(value)));
  case proto::F16:
    return roundToHalf(value);
  case proto::I32:
  case proto::I64: {
    if (std::isnan(value)) {
      return 0;
    }
    double t = std::trunc(value);
    if (dtype == proto::I32) {
      return static_cast<double>(
          static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(t))));
    }
    return t;
  }
  case proto::I1:
    return value != 0.0 ? 1.0 : 0.0;
  default:
    return value;
  }
}

llvm::Expected<HostTensor> HostTensor::fromRaw(proto::DType dtype, Shape shape,
                                               llvm::StringRef bytes) {
  HostTensor t(dtype, std::move(shape));
  size_t size = graph::dtypeSize(dtype);
  if (bytes.size() != size * t.data.size()) {
    return llvm::createStringError(
        t.typeString() + " needs " + std::to_string(size * t.data.size()) +
        " bytes of data, got " + std::to_string(bytes.size()));
  }
  const char *p = bytes.data();
  for (double &v : t.data) {
    switch (dtype) {
    case proto::F32: {
      float f;
      std::memcpy(&f, p, 4);
      v = f;
      break;
    }
    case proto::BF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      v = bf16BitsToFloat(b);
      break;
    }
    case proto::F16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      v = llvm::APFloat(llvm::APFloat::IEEEhalf(), llvm::APInt(16, b))
              .convertToDouble();
      break;
    }
    case proto::I32: {
      int32_t i;
      std::memcpy(&i, p, 4);
      v = i;
      break;
    }
    case proto::I64: {
      int64_t i;
      std::memcpy(&i, p, 8);
      v = static_cast<double>(i);
      break;
    }
    case proto::I1:
      v = *p != 0 ? 1.0 : 0.0;
      break;
    default:
      break;
    }
    p += size;
  }
  return t;
}

std::string HostTensor::toRaw() const {
  size_t size = graph::dtypeSize(dtype);
  std::string bytes(size * data.size(), '\0');
  char *p = bytes.data();
  for (double v : data) {
    switch (dtype) {
    case proto::F32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case proto::BF16: {
      uint16_t b = floatToBF16Bits(static_cast<float>(v));
      std::memcpy(p, &b, 2);
      break;
    }
    case proto::F16: {
      llvm::APFloat f(static_cast<float>(v));
      bool losesInfo = false;
      f.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven,
                &losesInfo);
      uint16_t b = static_cast<uint16_t>(f.bitcastToAPInt().getZExtValue());
      std::memcpy(p, &b, 2);
      break;
    }
    case proto::I32: {
      int32_t i = static_cast<int32_t>(v);
      std::memcpy(p, &i, 4);
      break;
    }
    case proto::I64: {
      int64_t i = static_cast<int64_t>(v);
      std::memcpy(p, &i, 8);
      break;
    }
    case proto::I1:
      *p = v != 0.0 ? 1 : 0;
      break;
    default:
      break;
    }
    p += size;
  }
  return bytes;
}

} // namespace kiln::reference

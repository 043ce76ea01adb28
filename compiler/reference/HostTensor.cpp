//===- HostTensor.cpp - tensors of the reference interpreter -------------===//

#include "compiler/reference/HostTensor.h"

#include "compiler/graph/GraphFile.h"

#include "compiler/target/FloatFormats.h"

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

double roundTo(proto::DType dtype, double value) {
  switch (dtype) {
  case proto::F32:
    return static_cast<float>(value);
  case proto::BF16:
    return numerics::bf16BitsToFloat(
        numerics::floatToBF16Bits(static_cast<float>(value)));
  case proto::F16:
    return numerics::halfBitsToFloat(
        numerics::floatToHalfBits(static_cast<float>(value)));
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
      v = numerics::bf16BitsToFloat(b);
      break;
    }
    case proto::F16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      v = numerics::halfBitsToFloat(b);
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
      uint16_t b = numerics::floatToBF16Bits(static_cast<float>(v));
      std::memcpy(p, &b, 2);
      break;
    }
    case proto::F16: {
      uint16_t b = numerics::floatToHalfBits(static_cast<float>(v));
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

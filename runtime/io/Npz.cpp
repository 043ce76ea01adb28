//===- Npz.cpp - NumPy .npy and .npz files -------------------------------===//

#include "runtime/io/Npz.h"

#include "compiler/graph/GraphFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <zip.h>

#include <cstring>
#include <memory>
#include <unistd.h>

namespace kiln::io {

namespace {

constexpr llvm::StringLiteral kMagic("\x93NUMPY");

/// NumPy's type string for a dtype, and back.
llvm::StringRef descrOf(proto::DType dtype) {
  switch (dtype) {
  case proto::F32:
  case proto::BF16:
    return "<f4";
  case proto::F16:
    return "<f2";
  case proto::I32:
    return "<i4";
  case proto::I64:
    return "<i8";
  case proto::I1:
    return "|b1";
  default:
    return "";
  }
}

std::optional<proto::DType> dtypeOfDescr(llvm::StringRef descr) {
  // '=' means native order, which is little-endian on every host Kiln runs on.
  if (descr.size() == 3 &&
      (descr[0] == '=' || descr[0] == '<' || descr[0] == '|')) {
    descr = descr.drop_front();
  }
  return llvm::StringSwitch<std::optional<proto::DType>>(descr)
      .Case("f4", proto::F32)
      .Case("f2", proto::F16)
      .Case("i4", proto::I32)
      .Case("i8", proto::I64)
      .Case("b1", proto::I1)
      .Default(std::nullopt);
}

/// The value of `key` in the header dict: the text after "'key':" up to the
/// next top-level comma or closing brace.
std::optional<llvm::StringRef> headerField(llvm::StringRef header,
                                           llvm::StringRef key) {
  std::string quoted = ("'" + key + "'").str();
  size_t at = header.find(quoted);
  if (at == llvm::StringRef::npos) {
    return std::nullopt;
  }
  llvm::StringRef rest = header.drop_front(at + quoted.size()).ltrim();
  if (!rest.consume_front(":")) {
    return std::nullopt;
  }
  rest = rest.ltrim();
  size_t end =
      rest.front() == '(' ? rest.find(')') + 1 : rest.find_first_of(",}");
  if (end == llvm::StringRef::npos || end > rest.size()) {
    return std::nullopt;
  }
  return rest.take_front(end).trim();
}

} // namespace

llvm::Expected<NpyArray> parseNpy(llvm::StringRef bytes,
                                  llvm::StringRef origin) {
  auto bad = [&](const llvm::Twine &what) {
    return llvm::createStringError("'" + origin +
                                   "' is not a valid .npy array: " + what);
  };
  if (!bytes.starts_with(kMagic) || bytes.size() < 10) {
    return bad("missing NumPy magic");
  }
  uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen =
        static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) {
      return bad("truncated header");
    }
    headerLen = 0;
    for (int i = 3; i >= 0; --i) {
      headerLen = (headerLen << 8) | static_cast<uint8_t>(bytes[8 + i]);
    }
    headerStart = 12;
  } else {
    return bad("unsupported format version " + llvm::Twine(major));
  }
  if (headerStart + headerLen > bytes.size()) {
    return bad("truncated header");
  }
  llvm::StringRef header = bytes.substr(headerStart, headerLen);
  auto descr = headerField(header, "descr");
  auto order = headerField(header, "fortran_order");
  auto shape = headerField(header, "shape");
  if (!descr || !order || !shape) {
    return bad("header lacks descr, fortran_order or shape");
  }
  NpyArray array;
  array.name = llvm::sys::path::stem(origin).str();
  auto dtype = dtypeOfDescr(descr->trim("'\""));
  if (!dtype) {
    return bad("dtype " + *descr +
               " is not one Kiln reads (float32, float16, int32, int64, bool)");
  }
  array.dtype = *dtype;
  if (*order != "False") {
    return bad("Fortran-ordered arrays are not supported; save with "
               "numpy.ascontiguousarray");
  }
  llvm::SmallVector<llvm::StringRef> dims;
  shape->trim("()").split(dims, ',', -1, /*KeepEmpty=*/false);
  uint64_t count = 1;
  for (llvm::StringRef dim : dims) {
    int64_t d;
    if (dim.trim().getAsInteger(10, d) || d < 0) {
      return bad("bad shape " + *shape);
    }
    array.shape.push_back(d);
    count *= static_cast<uint64_t>(d);
  }
  uint64_t need = count * graph::dtypeSize(array.dtype);
  llvm::StringRef payload = bytes.drop_front(headerStart + headerLen);
  if (payload.size() != need) {
    return bad("data has " + llvm::Twine(payload.size()) + " bytes, shape " +
               *shape + " needs " + llvm::Twine(need));
  }
  array.data = payload.str();
  return array;
}

std::string serializeNpy(const NpyArray &array) {
  std::string shape = "(";
  for (int64_t d : array.shape) {
    shape += std::to_string(d) + ",";
    if (array.shape.size() > 1) {
      shape += " ";
    }
  }
  if (array.shape.size() > 1) {
    shape.resize(shape.size() - 2);
  }
  shape += ")";
  std::string header = "{'descr': '" + descrOf(array.dtype).str() +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that the data starts on a 64-byte boundary, ending in '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out += array.data;
  return out;
}

llvm::Expected<std::vector<NpyArray>> readArrays(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, false, false);
  if (!buffer) {
    return llvm::createStringError("cannot read '" + path +
                                   "': " + buffer.getError().message());
  }
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (bytes.starts_with(kMagic)) {
    auto array = parseNpy(bytes, path);
    if (!array) {
      return array.takeError();
    }
    return std::vector<NpyArray>{std::move(*array)};
  }
  zip_error_t zipError;
  zip_error_init(&zipError);
  zip_source_t *source =
      zip_source_buffer_create(bytes.data(), bytes.size(), 0, &zipError);
  std::unique_ptr<zip_t, decltype(&zip_discard)> archive(
      source ? zip_open_from_source(source, ZIP_RDONLY, &zipError) : nullptr,
      &zip_discard);
  if (!archive) {
    std::string why = zip_error_strerror(&zipError);
    if (source) {
      zip_source_free(source);
    }
    zip_error_fini(&zipError);
    return llvm::createStringError(
        "'" + path +
        "' is neither a .npy array nor a readable .npz archive: " + why);
  }
  zip_error_fini(&zipError);
  std::vector<NpyArray> arrays;
  zip_int64_t entries = zip_get_num_entries(archive.get(), 0);
  for (zip_int64_t i = 0; i < entries; ++i) {
    zip_stat_t stat;
    if (zip_stat_index(archive.get(), i, 0, &stat) != 0) {
      return llvm::createStringError("'" + path + "': cannot read entry " +
                                     llvm::Twine(i));
    }
    std::string entryName = stat.name;
    std::string data(stat.size, '\0');
    std::unique_ptr<zip_file_t, decltype(&zip_fclose)> file(
        zip_fopen_index(archive.get(), i, 0), &zip_fclose);
    if (!file || zip_fread(file.get(), data.data(), stat.size) !=
                     static_cast<zip_int64_t>(stat.size)) {
      return llvm::createStringError("'" + path + "': cannot read entry '" +
                                     entryName + "'");
    }
    std::string origin = (path + ":" + entryName).str();
    auto array = parseNpy(data, origin);
    if (!array) {
      return array.takeError();
    }
    llvm::StringRef name(entryName);
    name.consume_back(".npy");
    array->name = name.str();
    arrays.push_back(std::move(*array));
  }
  return arrays;
}

llvm::Error writeArrays(llvm::StringRef path,
                        const std::vector<NpyArray> &arrays) {
  std::string tmp = (path + ".tmp." + llvm::Twine(::getpid())).str();
  auto cleanup = [&](const llvm::Twine &why) {
    llvm::sys::fs::remove(tmp);
    return llvm::createStringError("cannot write '" + path + "': " + why);
  };
  if (path.ends_with(".npy")) {
    if (arrays.size() != 1) {
      return llvm::createStringError(
          "cannot write " + llvm::Twine(arrays.size()) +
          " arrays to the single-array file '" + path + "'; use .npz");
    }
    if (llvm::Error err =
            llvm::writeToOutput(path, [&](llvm::raw_ostream &out) {
              out << serializeNpy(arrays.front());
              return llvm::Error::success();
            })) {
      return llvm::createStringError("cannot write '" + path +
                                     "': " + llvm::toString(std::move(err)));
    }
    return llvm::Error::success();
  }
  {
    // libzip writes the archive itself: into a temporary, renamed below.
    int zipErr = 0;
    zip_t *archive = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &zipErr);
    if (!archive) {
      return cleanup("cannot create archive");
    }
    // libzip reads the buffers at zip_close, so they must outlive the loop.
    std::vector<std::string> payloads;
    payloads.reserve(arrays.size());
    for (const NpyArray &array : arrays) {
      payloads.push_back(serializeNpy(array));
      zip_source_t *src = zip_source_buffer(archive, payloads.back().data(),
                                            payloads.back().size(), 0);
      zip_int64_t index =
          src ? zip_file_add(archive, (array.name + ".npy").c_str(), src,
                             ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8)
              : -1;
      if (index < 0) {
        if (src) {
          zip_source_free(src);
        }
        std::string why = zip_strerror(archive);
        zip_discard(archive);
        return cleanup(why);
      }
      zip_set_file_compression(archive, index, ZIP_CM_STORE, 0);
      // A fixed timestamp (1980-01-01, the DOS epoch) makes the same arrays
      // give the same bytes, run after run.
      zip_file_set_dostime(archive, index, 0, (0 << 9) | (1 << 5) | 1, 0);
    }
    if (zip_close(archive) != 0) {
      std::string why = zip_strerror(archive);
      zip_discard(archive);
      return cleanup(why);
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    return cleanup(ec.message());
  }
  return llvm::Error::success();
}

} // namespace kiln::io
